"""transformers' EoMT as a checkpoint format: ``EomtForUniversalSegmentation`` (DINOv2),
``EomtDinov3ForUniversalSegmentation`` (DINOv3) and VidEoMT's ``VideomtForUniversalSegmentation``
(DINOv2; EoMT's tensors and a ``query_updater``, which becomes the ``decoder.*`` of
:class:`.videomt.VidEoMTDecoder`), as ``save_pretrained`` writes them and the Hub serves them
(``config.json`` + ``model.safetensors``; transformers 5.x ``models/eomt/modular_eomt.py``,
``models/eomt_dinov3/modular_eomt_dinov3.py``, ``models/videomt/modular_videomt.py``).

Their tensors are EoMT's own under other names, so a file is renamed into EoMT's release layout
(the Lightning module's ``network.*``, :mod:`.releases`) and converted as a release is. The
backbone keeps transformers' DINOv2/DINOv3 names, which the backbone layouts read. The file is
whole, never a delta (transformers loads it as it is). Its ``config.json`` gives the input side
(DINOv3 has no position grid to show it), the heads, and ``id2label``, which becomes the
checkpoint's class names.
"""
from typing import List, Optional, Tuple

import torch
from mmengine.config import Config

from ... import paths
from ...utils.state_dicts import StateDict, renamed
from ..backbones.vit5 import resolve_arch
from ..checkpoint_files import EOMT_BACKBONE_PREFIX, CheckpointError
from .releases import convert_release

# transformers' model_type -> the backbone family its EoMT class is built on, and the release table it is read by
MODEL_TYPES = {'eomt': 'dinov2', 'eomt_dinov3': 'dinov3', 'videomt': 'dinov2'}
DECODER_OF = {'eomt': 'eomt', 'eomt_dinov3': 'eomt', 'videomt': 'videomt'}

_B = EOMT_BACKBONE_PREFIX
# transformers' names -> EoMT's release names (the backbone's in transformers' DINOv2/DINOv3 layout)
_RENAMES = [
    (r'^embeddings\.', _B + 'embeddings.'),
    (r'^layers\.(\d+)\.attention\.out_proj\.', _B + r'layer.\1.attention.o_proj.'),   # SiglipAttention's name
    (r'^layers\.', _B + 'layer.'),
    (r'^layernorm\.', _B + 'layernorm.'),
    (r'^query\.weight$', 'network.q.weight'),
    (r'^class_predictor\.', 'network.class_head.'),
    (r'^mask_head\.fc1\.', 'network.mask_head.0.'),   # EoMT's nn.Sequential(fc, act, fc, act, fc)
    (r'^mask_head\.fc2\.', 'network.mask_head.2.'),
    (r'^mask_head\.fc3\.', 'network.mask_head.4.'),
    (r'^upscale_block\.block\.(\d+)\.conv([12])\.', r'network.upscale.\1.conv\2.'),
    (r'^upscale_block\.block\.(\d+)\.layernorm2d\.', r'network.upscale.\1.norm.'),
    (r'^query_updater\.', 'network.query_updater.'),   # VidEoMT's
    (r'^attn_mask_probs$', 'network.attn_mask_probs'),
    (r'^criterion\.', 'criterion.'),
]
_POSITION = _B + 'embeddings.position_embeddings.weight'


def to_release(sd: StateDict) -> StateDict:
    """transformers' EoMT state dict -> the same tensors under EoMT's release names; the learned
    position table (an ``nn.Embedding`` of the patches) as transformers' DINOv2 keeps it, (1, N, C)."""
    out, unknown = renamed(sd, _RENAMES)
    if unknown:
        raise CheckpointError(f'transformers EoMT keys this converter does not know: {unknown[:8]}')
    if _POSITION in out:
        out[_POSITION.removesuffix('.weight')] = out.pop(_POSITION)[None]
    return out


def model_type_of(config: Optional[dict], source) -> str:
    """The ``model_type`` of transformers' ``config.json``; one error where it is missing or not EoMT's."""
    if config is None:
        raise CheckpointError(f'{source} holds transformers\' EoMT tensors, but no config.json is beside it: give '
                              f'the folder save_pretrained wrote (or the Hub snapshot), which holds both')
    found = config.get('model_type')
    if found not in MODEL_TYPES:
        raise CheckpointError(f'{source}: its config.json is transformers\' {found!r} model; the EoMT types this '
                              f'converter reads are {", ".join(MODEL_TYPES)}')
    return found


# each model_type's config class and its layer_norm_eps default (transformers 5.x)
TYPE_DEFAULT_EPS = {'eomt': ('EomtConfig', 1e-6), 'eomt_dinov3': ('EomtDinov3Config', 1e-6),
                    'videomt': ('VideomtConfig', 1e-6)}


def _side(config: dict) -> Optional[int]:
    size = config.get('image_size')
    size = size[0] if isinstance(size, (list, tuple)) and len(set(size)) == 1 else size
    return int(size) if isinstance(size, int) else None


def label_names(config: dict, num_classes: int) -> Optional[List[str]]:
    """``id2label``'s names in class order; None where it has none of its own (transformers'
    ``LABEL_i`` defaults) or not one per class."""
    id2label = config.get('id2label') or {}
    try:
        names = [str(id2label[k]) for k in sorted(id2label, key=int)]
    except (TypeError, ValueError):
        return None
    if len(names) != num_classes or all(n == f'LABEL_{i}' for i, n in enumerate(names)):
        return None
    return names


def _class_meta(meta: dict) -> str:
    """``id2label`` (in the converted order) as the checkpoint's ``dataset_meta`` classes; words on how
    they compare with the chosen config's."""
    names = meta['release'].get('class_names')
    if names is None:
        return 'its config.json names no classes (id2label): the classes are the config\'s'
    config_meta = meta.get('dataset_meta')
    theirs = list(config_meta['classes']) if config_meta else None
    meta['dataset_meta'] = dict(config_meta or {}, classes=tuple(names))
    if theirs is None:
        return 'its classes are its id2label\'s'
    differ = [i for i, (a, b) in enumerate(zip(names, theirs)) if a != b]
    if not differ:
        return 'its id2label names the config\'s classes'
    i = differ[0]
    return (f'its id2label differs from {meta["release"]["config"]}\'s classes at {len(differ)} of {len(names)} '
            f'(first at {i}: {names[i]!r} against {theirs[i]!r}); the checkpoint names id2label\'s')


def _weight_sizes(sd: StateDict) -> dict:
    """config.json's sizes as the weights hold them: (value, the tensor it is read from)."""
    query, patch = sd['query.weight'], next((v for k, v in sd.items() if k.startswith('embeddings.patch_embeddings')
                                              and k.endswith('weight')), None)
    sizes = {'hidden_size': (query.shape[1], 'query.weight'), 'num_queries': (query.shape[0], 'query.weight'),
             'num_hidden_layers': (len({k.split('.')[1] for k in sd if k.startswith('layers.')}), 'layers.N'),
             'num_labels': (sd['class_predictor.weight'].shape[0] - 1, 'class_predictor.weight, less no-object')}
    if patch is not None:
        sizes['patch_size'] = (patch.shape[-1], 'the patch embedding')
    if 'embeddings.register_tokens' in sd:
        sizes['num_register_tokens'] = (sd['embeddings.register_tokens'].shape[1], 'embeddings.register_tokens')
    return sizes


def check_config_fits(sd: StateDict, config: dict, source) -> None:
    """One error where ``config.json`` describes another model than its weights (``num_labels`` is
    ``id2label``'s length, as transformers reads it)."""
    given = dict(config)
    if 'num_labels' not in given and given.get('id2label'):
        given['num_labels'] = len(given['id2label'])
    for key, (found, where) in _weight_sizes(sd).items():
        if given.get(key) is not None and given[key] != found:
            said = (f'id2label names {given[key]} classes' if key == 'num_labels' and 'num_labels' not in config
                    else f'{key} is {given[key]}')
            raise CheckpointError(f'{source}: its config.json\'s {said}, its weights\' {found} ({where}): they are '
                                  f'not one model; give the config.json saved with these weights')


def _blocks_note(config: Optional[str], blocks: Optional[int]) -> List[str]:
    """Where the chosen config runs the queries through another number of blocks than the file's."""
    if config is None or blocks is None or not paths.config_path(config.removeprefix('configs/')).is_file():
        return []
    theirs = Config.fromfile(str(paths.config_path(config.removeprefix('configs/')))).model.decode_head.num_blocks
    if theirs == blocks:
        return []
    return [f'its config.json\'s num_blocks is {blocks}, {config}\'s {theirs}: the queries join {blocks} blocks '
            f'before the end; give that config model.decode_head.num_blocks={blocks}']


def convert_transformers_eomt(sd: StateDict, config: Optional[dict], source, delta_to=None,
                              model: Optional[torch.nn.Module] = None) -> Tuple[StateDict, str, dict]:
    """transformers' EoMT (``sd`` and its ``config.json``) -> (segmentor state dict, its layout in words,
    the checkpoint meta: ``release``, ``dataset_meta`` with id2label's names, ``transformers``, and
    ``notes``: sentences on where the file and the config it fits differ)."""
    model_type = model_type_of(config, source)
    if delta_to is not None:
        raise CheckpointError(f'{source} is transformers\' EoMT, which holds whole weights (transformers loads it as '
                              f'it is): convert it without --delta-to')
    check_config_fits(sd, config, source)
    if config.get('hidden_act', 'gelu') != 'gelu':   # transformers' mask head and upscale run it, EoMT's GELU
        raise CheckpointError(f'{source}: its config.json\'s hidden_act is {config["hidden_act"]!r}, which '
                              f'transformers runs in the mask head and upscale too, where EoMT\'s are GELU: this '
                              f'converter reads EoMT models (hidden_act \'gelu\')')
    classes = sd['class_predictor.weight'].shape[0] - 1   # the format row's keys include it
    out, words, meta = convert_release(to_release(sd), source, DECODER_OF[model_type], model=model, side=_side(config),
                                       num_heads=config.get('num_attention_heads'),
                                       class_names=label_names(config, classes))
    release = meta['release']
    if release['family'] != MODEL_TYPES[model_type]:
        raise CheckpointError(f'{source}: its config.json says {model_type!r} (a {MODEL_TYPES[model_type]} backbone), '
                              f'its tensors are a {release["family"]} backbone\'s')
    blocks, probs = config.get('num_blocks'), sd.get('attn_mask_probs')
    if blocks is not None and probs is not None and probs.numel() != blocks:
        raise CheckpointError(f'{source}: config.json\'s num_blocks {blocks} is not the {probs.numel()} annealing '
                              f'probabilities the file holds')
    notes = [_class_meta(meta)] + _blocks_note(release.get('config'), blocks)
    eps, family_eps = config.get('layer_norm_eps'), resolve_arch(f'{release["family"]}-large')['norm_eps']
    if eps is not None and eps != family_eps:
        default = TYPE_DEFAULT_EPS[model_type]
        notes.append(f'its config.json\'s layer_norm_eps is {eps:g}, where {release["family"].upper()} and EoMT\'s '
                     f'models use {family_eps:g}' + (f' (transformers\' {default[0]} default)' if eps == default[1]
                                                     else '') + ': to predict as transformers does, set '
                     f'model.backbone.norm_eps={eps:g} (docs/transformers.md)')
    if probs is not None and bool((probs > 0).any()) and model_type != 'videomt':   # VidEoMT never masks
        notes.append(f'its attn_mask_probs are {[round(float(p), 4) for p in probs]}: transformers masks the '
                     f'queries\' attention at inference where one is above 0 (an unfinished annealing); EoMT, and '
                     f'this model, predict without the mask, as after training')
    meta['transformers'] = dict(model_type=model_type, num_blocks=blocks, image_size=_side(config),
                                layer_norm_eps=eps, architectures=config.get('architectures'))
    meta['notes'] = notes   # what the converter prints after its line
    return out, words.replace('eomt-release', f'transformers-eomt ({model_type})', 1), meta


__all__ = ['MODEL_TYPES', 'check_config_fits', 'convert_transformers_eomt', 'label_names', 'model_type_of',
           'to_release']
