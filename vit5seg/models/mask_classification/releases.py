"""The release tables: EoMT's published models (tue-mps/eomt, model_zoo/*.md; docs/eomt_zoo.md)
as this package's checkpoints, which the configs of ``configs/eomt/`` load: the semantic ones
with mmseg's ``init_model``, the panoptic and instance ones with mmdet's ``init_detector``.
Conversion's top table layer: above the backbone layouts (:mod:`..backbone_layouts`), below
:func:`vit5seg.models.convert.convert_file`, which calls :func:`convert_release` once.

A release is the Lightning module's state dict: ``network.encoder.backbone.*`` (timm's
DINOv2, or transformers' DINOv3 renamed by EoMT's ``transformers_to_timm``), the head
(``network.q``, ``class_head``, ``mask_head``, ``upscale``), and buffers this package keeps
elsewhere or recomputes (pixel mean/std in the data preprocessor, the annealing
probabilities, the criterion's class weights). The DINOv3 release is a delta: EoMT's
``delta_weights`` mode adds it to the user's pretrained weights for the encoder keys and
to zero elsewhere, so the head's values are in the file and only the backbone needs a base.
EoMT's ADE20K panoptic models predict ADE's 150 classes in ADE's order; mmdet's dataset and
fusion head need the 100 things first, so their class head's rows are permuted by name.

PMT's releases (tue-mps/pmt model_zoo/image/dinov3.md, written by its scripts/convert_ckpt.py)
hold the decoder only: ``network.decoder.*`` (queries, blocks, lateral projections, scalers,
norm and the head's predictors) and ``network.bn.*`` (the lateral norms); the frozen encoder is
Meta's DINOv3, every tensor of it from the base file (``--delta-to``), in any layout the DINOv3
preset reads. They load into ``configs/pmt/`` with ``model.decoder`` a :class:`.pmt.PMTDecoder`.
"""
import re
from typing import List, NamedTuple, Optional, Tuple

import torch
from mmengine.config import Config

from ... import paths
from ...hf_hub import snapshot_revision
from ...utils.class_orders import ade_to_panoptic
from ...utils.dataset_meta import config_dataset_meta
from ...utils.state_dicts import StateDict, renamed
from ..backbone_layouts import CheckpointMismatch, convert_release_backbone, convert_weights
from ..checkpoint_files import EOMT_BACKBONE_PREFIX, CheckpointError, Weights, read_weights
from ..dinov_layouts import DINOV3_HEAD_DIM, convert_dinov3_layers

# the head's predictors, under the network of an EoMT release (PMT's keep the same names under its decoder)
_PREDICTOR_RENAMES = [
    (r'q\.weight$', 'decode_head.queries.weight'),
    (r'class_head\.', 'decode_head.class_head.'),
    (r'mask_head\.', 'decode_head.mask_mlp.'),
    (r'upscale\.(\d+)\.conv1\.', r'decode_head.upscale.\1.up.'),
    (r'upscale\.(\d+)\.conv2\.', r'decode_head.upscale.\1.dw.'),
    (r'upscale\.(\d+)\.norm\.', r'decode_head.upscale.\1.norm.'),
]
# VidEoMT's one part beyond EoMT's, its decoder's own (transformers' VideomtForUniversalSegmentation)
_HEAD_RENAMES = [(r'^network\.' + pattern, repl) for pattern, repl in _PREDICTOR_RENAMES] + [
    (r'^network\.query_updater\.', 'decoder.query_updater.')]
# ImageNet mean/std on [0, 1] (the data preprocessor's, x 255), the annealing state, the loss weights
_DROPPED = re.compile(r'^(network\.encoder\.pixel_(mean|std)|network\.attn_mask_probs|criterion\.)')


class ReleaseKind(NamedTuple):
    """One kind of EoMT release: what its weights show (classes without no-object, queries),
    what it is for, and the shipped config it loads into, a pattern over the backbone
    family (``dinov2``, ``dinov3``), its width (``small`` ... ``giant``) and input side; the
    config's dataset gives the class names and palette (:func:`release_dataset_meta`)."""
    task: str
    dataset: str
    classes: int
    queries: int
    config: str      # under configs/eomt/; '' where none is shipped yet
    reorder: bool = False   # EoMT's class order is ADE's; mmdet's ADE20KPanopticDataset puts things first


# EoMT's releases by what their weights show: tue-mps/eomt model_zoo/dinov2.md and dinov3.md, EoMT's yamls.
# A new release is a row.
RELEASE_KINDS = (
    ReleaseKind('semantic', 'ADE20K', 150, 100, '{family}-{width}_eomt_ade20k.py'),
    ReleaseKind('semantic', 'Cityscapes', 19, 100, '{family}-{width}_eomt_cityscapes-{side}.py'),
    ReleaseKind('panoptic', 'COCO', 133, 200, '{family}-{width}_eomt_coco-panoptic-{side}.py'),
    ReleaseKind('panoptic', 'ADE20K', 150, 200, '{family}-{width}_eomt_ade20k-panoptic-{side}.py', reorder=True),
    ReleaseKind('instance', 'COCO', 80, 200, '{family}-{width}_eomt_coco-instance-{side}.py'),
)
# PMT's releases (tue-mps/pmt model_zoo/image/dinov3.md and its yamls), every one on a frozen DINOv3: configs/pmt/
PMT_RELEASE_KINDS = (
    ReleaseKind('semantic', 'ADE20K', 150, 100, '{family}-{width}_pmt_ade20k-{side}.py'),
    ReleaseKind('panoptic', 'COCO', 133, 200, '{family}-{width}_pmt_coco-panoptic-{side}.py'),
    ReleaseKind('instance', 'COCO', 80, 200, '{family}-{width}_pmt_coco-instance-{side}.py'),
)
# VidEoMT's releases (tue-mps/videomt model_zoo/dinov2.md, dinov3.md; NUM_CLASSES and NUM_OBJECT_QUERIES of its
# configs/*/videomt yamls): YouTube-VIS 2019, 2021 and 2022 share 40 classes, VIPSeg and VSPW 124
VIDEOMT_RELEASE_KINDS = (
    ReleaseKind('video instance', 'YouTube-VIS', 40, 200, ''),
    ReleaseKind('video instance', 'OVIS', 25, 200, ''),
    ReleaseKind('video panoptic or semantic', 'VIPSeg or VSPW', 124, 200, ''),
)
DECODERS = {'eomt': ('EoMT', RELEASE_KINDS), 'pmt': ('PMT', PMT_RELEASE_KINDS),
            'videomt': ('VidEoMT', VIDEOMT_RELEASE_KINDS)}
WIDTHS = {384: 'small', 768: 'base', 1024: 'large', 1536: 'giant'}
# the input side of releases whose weights do not show it (DINOv3: RoPE, no position grid): EoMT's names
# carry it (coco_panoptic_eomt_large_1280_dinov3, its Hugging Face repository and the file users save it as);
# a name without one is the task's default side
DEFAULT_SIDE = {'semantic': 512, 'panoptic': 640, 'instance': 640}
_NAMED_SIDE = re.compile(r'(?:eomt|pmt)_(?:small|base|large|giant)_(\d{3,4})(?!\d)')


def named_side(source: str) -> Optional[int]:
    """The input side EoMT's release name in ``source`` (a path or URL) gives, if any."""
    found = _NAMED_SIDE.findall(str(source))
    return int(found[-1]) if found else None


def release_kind(converted: StateDict, decoder: str = 'eomt') -> Optional[ReleaseKind]:
    """The row of ``decoder``'s table (a key of :data:`DECODERS`) the converted release's classes and
    queries show, or None."""
    classes = converted['decode_head.class_head.weight'].shape[0] - 1
    queries = converted['decode_head.queries.weight'].shape[0]
    kinds = DECODERS[decoder][1]
    return next((k for k in kinds if (k.classes, k.queries) == (classes, queries)), None)


def panoptic_rows() -> List[int]:
    """For each class of mmdet's ``ADE20KPanopticDataset`` order, its index in ADE's order (EoMT's)."""
    order = ade_to_panoptic()                            # ADE index -> mmdet index
    rows = [0] * len(order)
    for ade, mmdet in enumerate(order):
        rows[mmdet] = ade
    return rows


def to_panoptic_order(converted: StateDict) -> StateDict:
    """The class head's rows from ADE's order (EoMT's ADE20K panoptic models) to mmdet's
    ``ADE20KPanopticDataset`` order (things, then stuff), matched by class name; the
    no-object row stays last."""
    rows = panoptic_rows()
    rows = torch.tensor(rows + [len(rows)])              # the no-object row stays last
    out = dict(converted)
    for key in ('decode_head.class_head.weight', 'decode_head.class_head.bias'):
        out[key] = converted[key][rows]
    return out


def release_meta(converted: StateDict, decoder: str, layout: str = '', source: str = '',
                 side: Optional[int] = None) -> dict:
    """What a converted release of ``decoder`` (``'eomt'``, ``'pmt'``) is, for the checkpoint's
    ``meta['release']``: its task
    and dataset where the kind is known, classes, queries, patch and position grid, the
    backbone family and width, the class order, and the shipped config it fits (None if none).
    A release without a position grid fits the config of the input ``side`` given (transformers'
    ``config.json``), else of the side its name (``source``) gives."""
    classes = converted['decode_head.class_head.weight'].shape[0] - 1
    queries = converted['decode_head.queries.weight'].shape[0]
    kind = release_kind(converted, decoder)
    pos = converted.get('backbone.pos_embed')
    grid = int(round(pos.shape[1] ** 0.5)) if pos is not None else None
    grid = grid if grid and grid * grid == pos.shape[1] else None  # EoMT's inputs are square
    patch = converted['backbone.patch_embed.proj.weight'].shape[-1]
    width = converted['backbone.patch_embed.proj.weight'].shape[0]
    family = layout.split('-')[0] or None
    named = named_side(source)
    given = side if grid is None else None
    config = None
    side_from = ('the position grid' if grid else 'config.json' if given else 'the name' if named else 'a default')
    if kind is not None and kind.config and family in ('dinov2', 'dinov3') and width in WIDTHS:
        px = grid * patch if grid else given or named or DEFAULT_SIDE[kind.task]
        config = f'configs/{decoder}/' + kind.config.format(family=family, width=WIDTHS[width], side=px)
    return dict(decoder=DECODERS[decoder][0], task=kind.task if kind else None,
                dataset=kind.dataset if kind else None, num_classes=classes,
                num_queries=queries, patch_size=patch, grid=(grid, grid) if grid else None, family=family,
                width=width, config=config, side_from=side_from,
                class_order=('mmdet ADE20KPanopticDataset (things first), from ADE\'s order' if kind and kind.reorder
                             else 'the release\'s'))


def describe_release(meta: dict) -> Optional[str]:
    """One sentence on the EoMT or PMT release a checkpoint's ``meta`` records and the config it fits;
    None for any other checkpoint."""
    info = meta.get('release')
    if not isinstance(info, dict):
        return None
    grid = info.get('grid')
    shape = (f'{info["num_classes"]} classes, {info["num_queries"]} queries'
             + (f', a {grid[0]}x{grid[1]} position grid ({grid[0] * info["patch_size"]} px)' if grid else ''))
    name = info.get('decoder', 'EoMT')
    folder = {v[0]: k for k, v in DECODERS.items()}.get(name, 'eomt')
    kind = next((k for k in DECODERS[folder][1] if (k.task, k.dataset) == (info.get('task'), info.get('dataset'))),
                None)
    if kind is None:
        article = 'an' if name[0] in 'AEIOU' else 'a'
        return (f'It is {article} {name} release of no known kind ({shape}): give it a config of that many classes '
                f'and queries')
    config = info.get('config')
    if config and paths.config_path(config.removeprefix('configs/')).is_file():
        fits = f'it fits {config}'
        if not grid:   # no position grid (DINOv3): the side is the release name's, which a renamed file loses
            side = config.rsplit('-', 1)[-1]
            others = sorted(p.name for p in paths.config_path(config.removeprefix('configs/')).parent.glob(
                config.rsplit('/', 1)[-1].replace(side, '*')) if not p.name.endswith(side))
            said = {'the name': 'as its name says', 'config.json': 'as its config.json says'}.get(
                info.get('side_from'), 'assumed: its file name gives none, as EoMT\'s names do (..._1280_dinov3)')
            if others:
                fits += (f' (the input side {side.removesuffix(".py")} {said}; a release {name} trained at another '
                         f'side fits ' + ', '.join(f'configs/{folder}/{o}' for o in others) + ')')
    elif config:
        fits = f'it needs {config}, which this project does not ship yet'
    elif kind.config:
        fits = (f'it needs a {kind.dataset} {kind.task} config of its backbone and size: '
                f'configs/{folder}/{kind.config.format(family="*", width="*", side="*")}')
    else:
        fits = f'it needs a {kind.dataset} {kind.task} config, which this project does not ship yet'
    return f'It is {name}\'s {kind.dataset} {kind.task} release ({shape}): {fits}'


def _renamed(sd: StateDict, renames, converted_prefix: str, dropped: re.Pattern, name: str) -> StateDict:
    """The release's keys outside ``converted_prefix`` (converted elsewhere) and ``dropped``, renamed by the
    first matching pattern; one error listing the keys no pattern knows."""
    out, unknown = renamed({k: v for k, v in sd.items() if not (k.startswith(converted_prefix) or dropped.match(k))},
                           renames)
    if unknown:
        raise CheckpointError(f'{name} release keys this converter does not know: {unknown[:8]}')
    return out


def convert_eomt_release(sd: StateDict, base: Optional[Weights] = None, model: Optional[torch.nn.Module] = None,
                         source: str = 'release', base_source: str = 'BASE',
                         num_heads: Optional[int] = None) -> Tuple[StateDict, str, str]:
    """A release state dict -> (segmentor state dict with ``backbone.`` and ``decode_head.``
    keys, the backbone's source layout, the base's or ''). ``base``: the pretrained backbone
    file the delta release is added to (``--delta-to``); ``model``: a backbone the result must
    load into at its geometry; ``num_heads``: the backbone's heads where no model gives them."""
    converted, layout, base_layout = convert_release_backbone(sd, source, base=base, base_source=base_source,
                                                              model=model, num_heads=num_heads)
    out = {f'backbone.{k}': v for k, v in converted.items()}
    out.update(_renamed(sd, _HEAD_RENAMES, EOMT_BACKBONE_PREFIX, _DROPPED, 'EoMT'))
    kind = release_kind(out, 'eomt')
    return (to_panoptic_order(out) if kind is not None and kind.reorder else out), layout, base_layout


# PMT's decoder-only release: the head's predictors and the decoder's own parts; the blocks are transformers'
# DINOv3 layers (convert_dinov3_layers)
_PMT_RENAMES = [(r'^network\.decoder\.' + pattern, repl) for pattern, repl in _PREDICTOR_RENAMES] + [
    (r'^network\.bn\.(\d+)\.', r'decoder.lateral_norms.\1.'),
    (r'^network\.decoder\.lateral_projections\.', 'decoder.lateral.'),
    (r'^network\.decoder\.scalers\.', 'decoder.scalers.'),
    (r'^network\.decoder\.decoder_norm\.', 'decoder.norm.'),
]
PMT_BLOCKS_PREFIX = 'network.decoder.blocks.'
# the annealing state, PMT's own RoPE tables (recomputed), the pixel statistics, the loss weights
_PMT_DROPPED = re.compile(r'^(network\.decoder\.attn_mask_probs$|network\.rope\.|network\.encoder\.pixel_(mean|std)$'
                          r'|network\._attn_mask_probs_fallback$|criterion\.)')


def convert_pmt_release(sd: StateDict, base: Optional[Weights], model: Optional[torch.nn.Module] = None,
                        base_source: str = 'BASE') -> Tuple[StateDict, str]:
    """PMT's release -> (segmentor state dict with ``backbone.``, ``decoder.`` and ``decode_head.``
    keys, the base's layout). ``base``: the frozen DINOv3 the decoder was trained on; ``model``: a
    backbone the encoder must load into at its geometry."""
    if base is None:
        raise CheckpointError('a PMT release holds its decoder only: give the frozen DINOv3 weights it was trained '
                              'on (Meta\'s file, or its timm or transformers layout) with --delta-to BASE')
    backbone, base_layout = convert_weights(base, base_source, model=model)
    width = backbone['patch_embed.proj.weight'].shape[0]
    num_heads = model.num_heads if model is not None else width // DINOV3_HEAD_DIM
    blocks = {k[len(PMT_BLOCKS_PREFIX):]: v for k, v in sd.items() if k.startswith(PMT_BLOCKS_PREFIX)}
    out = {f'backbone.{k}': v for k, v in backbone.items()}
    out.update({f'decoder.blocks.{k}': v for k, v in convert_dinov3_layers(blocks, num_heads).items()})
    out.update(_renamed(sd, _PMT_RENAMES, PMT_BLOCKS_PREFIX, _PMT_DROPPED, 'PMT'))
    return out, base_layout


def release_dataset_meta(release: dict) -> Optional[dict]:
    """The class names and palette of the shipped config a release fits, in the converted
    model's class order; None where no config fits it."""
    if not release.get('config'):
        return None
    path = paths.config_path(release['config'].removeprefix('configs/'))
    if not path.is_file():
        return None
    meta = config_dataset_meta(Config.fromfile(str(path)))
    if meta is not None and len(meta['classes']) != release['num_classes']:
        raise CheckpointError(f'{release["config"]} names {len(meta["classes"])} classes, the release predicts '
                              f'{release["num_classes"]}')
    return meta


def convert_release(sd: StateDict, source, decoder: str, delta_to=None, allow_unsafe: bool = False,
                    model: Optional[torch.nn.Module] = None, side: Optional[int] = None,
                    num_heads: Optional[int] = None, class_names: Optional[list] = None) -> Tuple[StateDict, str, dict]:
    """The release ``sd`` of ``decoder`` (``'eomt'``: a whole model; ``'pmt'``: its decoder only; what the
    checkpoint format's row says it is) read from ``source``, converted: (segmentor state dict, its layout
    in words, the checkpoint meta that names it: ``release`` and, where a shipped config fits it,
    ``dataset_meta``). ``delta_to``: the pretrained backbone file a delta release is added to, or PMT's
    frozen encoder; ``model``: a backbone the result must load into at its geometry; ``side`` and
    ``num_heads``: the input side and heads where the file's own config gives them (transformers');
    ``class_names``: the names the file gives its classes, kept in ``meta['release']['class_names']`` in
    the converted model's order."""
    base = read_weights(delta_to, allow_unsafe) if delta_to is not None else None
    try:
        if decoder == 'pmt':
            out, layout = convert_pmt_release(sd, base=base, model=model, base_source=str(delta_to))
            words = f'pmt-release (decoder only), encoder {delta_to} [{layout}]'
        else:
            out, layout, base_layout = convert_eomt_release(sd, base=base, model=model, source=str(source),
                                                            base_source=str(delta_to), num_heads=num_heads)
            words = f'eomt-release, backbone {layout}' + (f' + {delta_to} [{base_layout}]' if base is not None else '')
    except CheckpointMismatch:
        raise  # it names the file and the model
    except CheckpointError as e:
        raise CheckpointError(f'{source}: {e}') from None
    meta = dict(release=release_meta(out, decoder, layout, str(source), side=side))
    if base is not None:   # the weights it was added to, at the commit a Hub id resolved to
        meta['delta_to'] = dict(source=str(delta_to), revision=snapshot_revision(base.local) if base.local else None)
    if class_names is not None:
        reorder = meta['release']['class_order'].startswith('mmdet')
        meta['release']['class_names'] = tuple(class_names[r] for r in panoptic_rows()) if reorder else \
            tuple(class_names)
    dataset_meta = release_dataset_meta(meta['release'])
    if dataset_meta is not None:  # mmdet's init_detector and mmseg's init_model name the classes from it
        meta['dataset_meta'] = dataset_meta
    return out, words, meta


__all__ = ['DEFAULT_SIDE', 'PMT_RELEASE_KINDS', 'RELEASE_KINDS', 'VIDEOMT_RELEASE_KINDS', 'WIDTHS', 'ReleaseKind',
           'convert_eomt_release', 'convert_pmt_release', 'convert_release', 'describe_release', 'named_side',
           'release_dataset_meta', 'release_kind', 'release_meta', 'to_panoptic_order']
