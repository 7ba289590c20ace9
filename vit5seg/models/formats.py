"""Checkpoint formats as rows: how each is recognised (the keys it must hold and those it must not),
what it holds, the configs it fits and its conversion. Conversion's table layer, under
:func:`.convert.convert_file` (which hands every file to :func:`convert` once) and over the
backbone layouts (:mod:`.backbone_layouts`) and the release tables (:mod:`.mask_classification.releases`).

A file that no row claims, or that two rows claim, is one error naming the keys it holds and the
nearest row, and nothing is written. A new format is a row: :func:`register_format` (docs/layout.md).
"""
import re
from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple

import torch

from ..utils.state_dicts import StateDict
from .backbone_layouts import KNOWN_LAYOUTS, convert_weights
from .checkpoint_files import CheckpointError, Weights
from .mask_classification.releases import convert_release
from .mask_classification.transformers_eomt import MODEL_TYPES as EOMT_MODEL_TYPES
from .mask_classification.transformers_eomt import convert_transformers_eomt


class Request(NamedTuple):
    """What the caller of :func:`.convert.convert_file` asked for, as a row's conversion reads it."""
    source: str
    model: Optional[torch.nn.Module]     # the backbone the result must load into (--arch), or None
    img_size: Optional[int]
    delta_to: Optional[str]
    allow_unsafe: bool
    drop_head: bool
    arch: object = None                  # --arch as given, for messages


# (state dict, the source layout in words, what the checkpoint's meta adds)
Converted = Tuple[StateDict, str, dict]


class UnknownFormat(CheckpointError):
    """A file that no format row, or more than one, claims."""


class CheckpointFormat(NamedTuple):
    """One checkpoint format. ``must``: patterns each matched by at least one key; ``must_not``:
    patterns no key matches; ``own``: True where only files written here qualify (``meta.vit5seg_layout``
    or a trained model's ``backbone.*``), False where they never do, None either way."""
    name: str
    holds: str                         # 'a backbone', 'a whole model', 'a decoder (its encoder: --delta-to)'
    must: Tuple[str, ...]
    must_not: Tuple[str, ...]
    fits: str                          # the configs it fits, in words
    convert: Callable[[Weights, Request], Converted]
    own: Optional[bool] = None
    model_types: Tuple[str, ...] = ()  # transformers' config.json model_type of its folders, where it has one

    def unmet(self, weights: Weights) -> Tuple[List[str], List[str]]:
        """(the ``must`` patterns no key matches, the ``must_not`` patterns some key matches)."""
        keys = list(weights.state_dict)
        missing = [p for p in self.must if not any(re.search(p, k) for k in keys)]
        forbidden = [p for p in self.must_not if any(re.search(p, k) for k in keys)]
        if self.own is not None and self.own != weights.own_layout:
            (missing if self.own else forbidden).append('(written by vit5seg)')
        return missing, forbidden

    def claims(self, weights: Weights) -> bool:
        return not any(self.unmet(weights))


def _no_decode_head(source) -> CheckpointError:
    return CheckpointError(f'--drop-head is for a segmentor\'s checkpoint (a training\'s iter_N.pth, a converted '
                           f'release, or EoMT\'s release file itself); {source} holds no decode_head.* tensors')


def segmentor_state_dict(obj, request: Request) -> dict:
    """A segmentor's (or detector's) state dict as mmengine saves it: ``state_dict`` or flat."""
    sd = obj.get('state_dict', obj) if isinstance(obj, dict) else None
    if not isinstance(sd, dict) or not any(str(k).startswith('decode_head.') for k in sd):
        raise _no_decode_head(request.source)
    return sd


def _backbone(weights: Weights, request: Request) -> Converted:
    if request.drop_head:
        if request.delta_to is not None or request.model is not None:
            raise CheckpointError('--drop-head keeps a segmentor checkpoint\'s own layout: --delta-to and --arch '
                                  'are for releases and backbones')
        return segmentor_state_dict(weights.obj, request), 'vit5seg segmentor', {}
    if request.delta_to is not None:
        raise CheckpointError(f'--delta-to is for EoMT\'s delta releases and PMT\'s decoder-only ones; '
                              f'{request.source} is no release')
    sd, layout = convert_weights(weights, request.source, model=request.model, img_size=request.img_size)
    return sd, layout, {}


def _release(decoder: str) -> Callable[[Weights, Request], Converted]:
    def convert_one(weights: Weights, request: Request) -> Converted:
        try:
            return convert_release(weights.state_dict, request.source, decoder, delta_to=request.delta_to,
                                   allow_unsafe=request.allow_unsafe, model=request.model)
        except CheckpointError:
            raise
        except (RuntimeError, ValueError) as e:  # --arch's heads cannot split the release's channels
            raise CheckpointError(f'{request.source} does not fit --arch {request.arch!r}: {e}') from None
    return convert_one


def _transformers_eomt(weights: Weights, request: Request) -> Converted:
    if request.drop_head:
        raise CheckpointError('--drop-head takes a segmentor checkpoint: convert transformers\' EoMT first, then '
                              'drop the head of the converted file')
    return convert_transformers_eomt(weights.state_dict, weights.model_config, request.source, request.delta_to,
                                     request.model)


# the keys of a whole model's head (transformers' EoMT, an EoMT release, a segmentor) that no backbone holds
_MODEL_HEADS = (r'^network\.', r'^(query\.weight|class_predictor\.|mask_head\.|upscale_block\.)', r'^decode_head\.')
_BACKBONE_LAYOUTS = ', '.join(k for k in KNOWN_LAYOUTS if not k.startswith(('vit5seg', 'eomt-release')))

FORMATS: List[CheckpointFormat] = [
    CheckpointFormat('vit5seg', 'a backbone converted here, or a segmentor or detector trained here',
                     (r'.',), (r'^network\.',), 'the config it was converted for or trained with', _backbone,
                     own=True),
    CheckpointFormat('backbone', f'a backbone ({_BACKBONE_LAYOUTS})',
                     (r'^(model\.)?(embeddings\.)?cls_token$', r'^(model\.)?(blocks|layer|encoder\.layer)\.0\.'),
                     _MODEL_HEADS, 'any config of its architecture (--arch checks it)', _backbone, own=False,
                     model_types=('dinov2', 'dinov2_with_registers', 'dinov3_vit')),
    CheckpointFormat('eomt-release', 'a whole model: EoMT\'s Lightning release (tue-mps/eomt)',
                     (r'^network\.encoder\.backbone\.', r'^network\.(q\.weight|class_head\.)'), (),
                     'configs/eomt/ (the release tables)', _release('eomt'), own=False),
    CheckpointFormat('pmt-release', 'a decoder whose frozen encoder is Meta\'s DINOv3 (--delta-to): PMT\'s release '
                     '(tue-mps/pmt)', (r'^network\.decoder\.',), (r'^network\.encoder\.backbone\.',),
                     'configs/pmt/ (the release tables)', _release('pmt'), own=False),
    CheckpointFormat('transformers-eomt', 'a whole model: transformers\' EoMT (EomtForUniversalSegmentation, '
                     'EomtDinov3ForUniversalSegmentation, VideomtForUniversalSegmentation; its folder, config.json '
                     'beside the weights)',
                     (r'^query\.weight$', r'^class_predictor\.', r'^layers\.0\.', r'^embeddings\.cls_token$'),
                     (r'^network\.',), 'configs/eomt/ (the release tables, from its config.json)', _transformers_eomt,
                     own=False, model_types=tuple(EOMT_MODEL_TYPES)),
]


def register_format(row: CheckpointFormat) -> CheckpointFormat:
    """Add a format (a row of the same name is replaced)."""
    FORMATS[:] = [f for f in FORMATS if f.name != row.name] + [row]
    return row


def _key_groups(keys: Sequence[str], most: int = 16) -> str:
    """The key names grouped (block numbers as N, what is under a group as ``*``), the first ``most``."""
    groups = set()
    for key in keys:
        parts = re.sub(r'\.\d+(?=\.|$)', '.N', key).split('.')
        depth = 3 if parts[1:2] == ['N'] else 2
        groups.add('.'.join(parts[:depth - 1]) + '.*' if len(parts) > depth else '.'.join(parts))
    names = sorted(groups)
    return ', '.join(names[:most]) + (f', ... ({len(names)} groups)' if len(names) > most else '')


def recognise(weights: Weights, source) -> CheckpointFormat:
    """The one row that claims ``weights``; else one error naming the keys and the nearest row."""
    claimed = [row for row in FORMATS if row.claims(weights)]
    if len(claimed) == 1:
        return claimed[0]
    keys = list(weights.state_dict)
    model_type = (weights.model_config or {}).get('model_type')
    read_types = [t for row in FORMATS for t in row.model_types]
    if not claimed and model_type is not None and model_type not in read_types:
        raise UnknownFormat(f'{source}: its config.json is transformers\' {model_type!r} model; the transformers '
                            f'types this converter reads are {", ".join(read_types)}')
    if claimed:
        raise UnknownFormat(f'{source} is claimed by {len(claimed)} checkpoint formats ('
                            f'{", ".join(row.name for row in claimed)}): their rows must tell it apart; it holds '
                            f'{len(keys)} tensors: {_key_groups(keys)}')

    def distance(row):   # who wrote it; then patterns unmet less those met; then the most met
        missing, forbidden = row.unmet(weights)
        met = len(row.must) - len([p for p in missing if p in row.must])
        return row.own is not None and row.own != weights.own_layout, len(missing) + len(forbidden) - met, -met
    nearest = min(FORMATS, key=distance)
    missing, forbidden = nearest.unmet(weights)
    why = '; '.join(([f'no key matches {", ".join(missing)}'] if missing else []) +
                    ([f'it must hold no key matching {", ".join(forbidden)}'] if forbidden else []))
    raise UnknownFormat(f'{source} is none of the checkpoint formats this converter reads ('
                        + '; '.join(f'{row.name}: {row.holds}' for row in FORMATS) + f'): it holds {len(keys)} '
                        f'tensors ({_key_groups(keys)}); the nearest is {nearest.name}, but {why}')


def convert(weights: Weights, request: Request) -> Tuple[CheckpointFormat, Converted]:
    """The file's format (:func:`recognise`) and its conversion by that row. Where no row claims a file
    given with ``--drop-head``, the error says what --drop-head takes."""
    try:
        row = recognise(weights, request.source)
    except UnknownFormat:
        if request.drop_head:
            segmentor_state_dict(weights.obj, request)
        raise
    return row, row.convert(weights, request)


__all__ = ['FORMATS', 'CheckpointFormat', 'Converted', 'Request', 'UnknownFormat', 'convert', 'recognise',
           'register_format', 'segmentor_state_dict']
