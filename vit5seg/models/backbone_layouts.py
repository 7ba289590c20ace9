"""Backbone key layouts: every checkpoint layout the backbone reads, mapped to this
package's keys, and fitted to a model's geometry (conversion's middle layer, above
:mod:`.checkpoint_files`).

Layouts understood (detected from the keys):
- ``vit5``: the authors' ViT-5 release (``reg_token``, ``attn.q_norm``, RoPE ``freqs``);
- ``deit3-fb``: Facebook's DeiT-III release (``gamma_1`` / ``gamma_2``), also the keys of
  this package's own files;
- ``deit3-timm``: timm's ``deit3_*`` (``ls1.gamma`` / ``ls2.gamma``);
- ``vit5seg``: a file this package converted (``meta.vit5seg_layout``) or trained;
- DINOv2 / DINOv3 of Meta, timm and transformers (:mod:`.dinov_layouts`), also inside an
  EoMT release (``network.encoder.backbone.*``).
"""
import logging
import re
from typing import Optional, Tuple

import torch
from mmengine.logging import print_log
from timm.layers import resample_patch_embed

from ..utils.state_dicts import StateDict, keys_under
from .checkpoint_files import EOMT_BACKBONE_PREFIX, CheckpointError, Weights
from .dinov_layouts import CONVERTERS, convert_dinov, detect_dinov_layout
from .layers import dinov3_periods, resize_pos_embed, rope_frequencies


# Every layout convert_state_dict reads, for the error that lists them.
KNOWN_LAYOUTS = ('vit5 (the authors\' ViT-5)', 'deit3-fb', 'deit3-timm', 'vit5seg (converted or trained here)',
                 'dinov2-meta', 'dinov2-timm', 'dinov2-hf', 'dinov3-meta', 'dinov3-timm', 'dinov3-hf',
                 'eomt-release (network.encoder.backbone.*)')


def detect_layout(sd: StateDict) -> str:
    """The layout of a backbone's keys (one of :data:`KNOWN_LAYOUTS`)."""
    return detect_dinov_layout(sd) or _detect_vit5_layout(sd)


def _detect_vit5_layout(sd: StateDict) -> str:
    """ViT-5's and DeiT-III's layouts (a DINO layout ruled out)."""
    keys = set(sd)
    if 'blocks.0.ls1.gamma' in keys:
        return 'deit3-timm'
    if 'reg_token' in keys or any(k.endswith(('attn.rope.freqs', 'attn.q_norm.weight')) for k in keys):
        return 'vit5'
    if 'blocks.0.gamma_1' in keys:
        return 'deit3-fb'
    if 'cls_token' in keys and 'blocks.0.attn.qkv.weight' in keys:
        raise CheckpointError('a plain ViT checkpoint without LayerScale is none of the known layouts '
                              f'({", ".join(KNOWN_LAYOUTS)})')
    sample = sorted(keys)[:8]
    raise CheckpointError(f'not a backbone checkpoint of a known layout ({", ".join(KNOWN_LAYOUTS)}); '
                          f'first keys: {sample}')


_TIMM_RENAMES = [(re.compile(r'\.ls([12])\.gamma$'), r'.gamma_\1')]
_DROPPED = re.compile(r'^(head|fc_norm|head_drop)\.')


def _check_rope(key: str, value: torch.Tensor, theta: float) -> None:
    """Stored RoPE frequencies (ViT-5's ``freqs``) or periods (DINOv3's) are derived values:
    they must be those of ``theta``."""
    if key == 'rope_embed.periods':
        expected = dinov3_periods(value.numel() * 4, theta)
    else:
        expected = rope_frequencies(value.numel() * 4, theta)
    if value.shape != expected.shape or not torch.allclose(value.float(), expected, rtol=1e-5, atol=0):
        raise CheckpointError(f'{key} does not match RoPE theta={theta:g}: the checkpoint was '
                              f'trained with other rotary frequencies')


def convert_state_dict(sd: StateDict, layout: Optional[str] = None, rope_theta: Optional[float] = None,
                       register_rope_theta: float = 100., num_heads: Optional[int] = None) -> Tuple[StateDict, str]:
    """Map any supported layout to this package's keys.

    The classifier is dropped; the stored RoPE frequencies are derived values, so they
    are checked against ``rope_theta`` (default: the layout's, 10000 for ViT-5, 100 for
    DINOv3) / ``register_rope_theta`` and dropped. ``num_heads``: the model's (DINOv3's
    channel pairs are rearranged per head; default: 64 channels per head).
    """
    if layout is None and any(k.startswith(EOMT_BACKBONE_PREFIX) for k in sd):
        sd = keys_under(sd, EOMT_BACKBONE_PREFIX)  # an EoMT release: its backbone
    dinov = convert_dinov(_without_classifier(sd), num_heads, layout) if layout in (None, *CONVERTERS) else None
    layout = dinov[1] if dinov is not None else layout or _detect_vit5_layout(sd)
    if rope_theta is None:
        rope_theta = 100. if layout.startswith('dinov3') else 10000.
    if 'rope_embed.periods' in sd:
        _check_rope('rope_embed.periods', sd['rope_embed.periods'], rope_theta)
    if dinov is not None:
        return dinov
    out = {}
    for key, value in _without_classifier(sd).items():
        if key.endswith(('attn.rope.freqs', 'attn.rope_reg.freqs')):
            _check_rope(key, value, register_rope_theta if 'rope_reg' in key else rope_theta)
            continue
        if layout == 'deit3-timm':
            for pattern, repl in _TIMM_RENAMES:
                key = pattern.sub(repl, key)
        out[key] = value
    return out, layout


def _without_classifier(sd: StateDict) -> StateDict:
    return {k: v for k, v in sd.items() if not _DROPPED.match(k)}


def fit_to_model(sd: StateDict, grid: Tuple[int, int], patch_size: Optional[int] = None, offset: float = 0.,
                 antialias: bool = False) -> StateDict:
    """A square checkpoint pos_embed (1, n*n, C) resized to ``grid`` by the model's rule
    (:func:`vit5seg.models.layers.resize_pos_embed`), and a patch kernel of another size
    resampled to ``patch_size`` as timm does when it builds EoMT's DINOv2 at patch 16
    (FlexiViT's pseudo-inverse resize, bicubic with antialias)."""
    sd = dict(sd)
    kernel = sd.get('patch_embed.proj.weight')
    if patch_size is not None and kernel is not None and tuple(kernel.shape[-2:]) != (patch_size, patch_size):
        sd['patch_embed.proj.weight'] = resample_patch_embed(kernel, [patch_size, patch_size], interpolation='bicubic',
                                                             antialias=True, verbose=False)
        print_log(f'resampled the patch embedding from {kernel.shape[-1]} to {patch_size}', logger='current',
                  level=logging.INFO)
    pos = sd.get('pos_embed')
    if pos is None:
        return sd
    side = int(round(pos.shape[1] ** 0.5))
    if side * side != pos.shape[1]:
        raise CheckpointError(f'pos_embed of {pos.shape[1]} tokens is not a square grid')
    if (side, side) != tuple(grid):
        sd['pos_embed'] = resize_pos_embed(pos, (side, side), grid, offset=offset, antialias=antialias)
        print_log(f'resized pos_embed from {side}x{side} to {grid[0]}x{grid[1]}', logger='current',
                  level=logging.INFO)
    return sd


def _describe(sd: StateDict) -> str:
    backbone = keys_under(sd, 'backbone.')
    sd = backbone or sd  # a whole segmentor: describe its backbone
    depth = len({k.split('.')[1] for k in sd if k.startswith('blocks.')})
    width = sd['cls_token'].shape[-1] if 'cls_token' in sd else '?'
    return f'width {width}, depth {depth}'


def shape_mismatches(own: StateDict, sd: StateDict) -> list:
    """``key: checkpoint (shape) vs model (shape)`` for each tensor both hold in other shapes, sorted."""
    return sorted(f'{k}: checkpoint {tuple(sd[k].shape)} vs model {tuple(own[k].shape)}'
                  for k in set(own) & set(sd) if hasattr(sd[k], 'shape') and sd[k].shape != own[k].shape)


def first_of(items: list, most: int = 12) -> list:
    """``items``, past ``most`` cut to them and a '... and N more'."""
    return items[:most] + ([f'... and {len(items) - most} more'] if len(items) > most else [])


class CheckpointMismatch(CheckpointError):
    """A checkpoint read and converted that does not fit its model (its message names both)."""


def check_fits(model: torch.nn.Module, sd: StateDict, source: str = 'checkpoint') -> None:
    """Raise with every missing, unexpected and mis-shaped key; never a partial load."""
    own = model.state_dict()
    missing = sorted(set(own) - set(sd))
    unexpected = sorted(set(sd) - set(own))
    shapes = shape_mismatches(own, sd)
    if not (missing or unexpected or shapes):
        return
    arch = getattr(model, 'arch', None) or getattr(getattr(model, 'backbone', None), 'arch', '?')
    lines = [f'{source} ({_describe(sd)}) does not fit {type(model).__name__} '
             f'arch={arch!r} ({_describe(own)}):']
    for title, items in (('missing in checkpoint', missing), ('unexpected in checkpoint', unexpected),
                         ('shape mismatch', shapes)):
        if items:
            lines.append(f'  {title} ({len(items)}): ' + ', '.join(first_of(items)))
    raise CheckpointMismatch('\n'.join(lines))


def conversion_options(model) -> dict:
    """What converting a checkpoint for ``model`` (a :class:`ViT5`) needs to know of it."""
    options = dict(num_heads=model.num_heads)
    rope = model.rope
    if rope is not None:
        options['rope_theta'] = rope.theta if hasattr(rope, 'theta') else rope.rope.temperature
        if getattr(rope, 'register_grid', None) is not None:
            options['register_rope_theta'] = rope.rope_reg.temperature
    return options


def fit_options(model) -> dict:
    return dict(patch_size=model.patch_size, offset=model.interpolate_offset, antialias=model.interpolate_antialias)


def convert_weights(weights: Weights, source, grid: Optional[Tuple[int, int]] = None, fit: Optional[dict] = None,
                    model: Optional[torch.nn.Module] = None, img_size: Optional[int] = None,
                    **options) -> Tuple[StateDict, str]:
    """A backbone file's weights (read by :func:`.checkpoint_files.read_weights` from ``source``)
    -> (this package's keys, the source layout). ``model``: the backbone they are for: converted
    with its options, fitted to its geometry and checked to load (no partial load); without
    it, ``grid`` / ``fit`` (:func:`fit_to_model`'s arguments) or ``img_size`` (a square
    pretraining size at the checkpoint's own patch) and ``options`` (:func:`convert_state_dict`'s)."""
    if model is not None:
        grid, fit, options = model.patch_grid, fit_options(model), {**conversion_options(model), **options}
    try:
        if weights.own_layout:
            options['layout'] = 'vit5seg'
        sd, layout = convert_state_dict(weights.state_dict, **options)
    except CheckpointError as e:
        raise CheckpointError(f'{source}: {e}') from None
    if grid is not None:
        sd = fit_to_model(sd, grid, **(fit or {}))
    elif img_size is not None and 'patch_embed.proj.weight' in sd:
        patch = sd['patch_embed.proj.weight'].shape[-1]   # without a model: the checkpoint's own patch
        sd = fit_to_model(sd, (img_size // patch, img_size // patch))
    if model is not None:
        check_fits(model, sd, source=f'{source} [{layout}]')
    return sd, layout


# A trained backbone's LayerNorm weights are of order 1; a fine-tuning delta's near 0.
_DELTA_NORM_LEVEL = 0.25


def looks_like_delta(backbone: StateDict) -> bool:
    norms = [v.abs().mean() for k, v in backbone.items() if re.search(r'norm1?\.weight$', k) and v.dim() == 1]
    return bool(norms) and float(torch.stack(norms).median()) < _DELTA_NORM_LEVEL


def convert_release_backbone(release: StateDict, source, base: Optional[Weights] = None, base_source=None,
                             model: Optional[torch.nn.Module] = None,
                             num_heads: Optional[int] = None) -> Tuple[StateDict, str, str]:
    """An EoMT release's backbone (its ``network.encoder.backbone.*``, any layout) -> (this
    package's keys, its layout, the base's layout or ''). ``base``: the pretrained backbone file
    a delta release is added to (EoMT's DINOv3 releases: pretrained + delta, in float32 as the
    checkpoints), converted here as any backbone; ``model``: the backbone the result must load
    into at its geometry; ``num_heads``: the release's heads where no model gives them (DINOv3's RoPE
    pairs are per head)."""
    sd = keys_under(release, EOMT_BACKBONE_PREFIX)
    if not sd:
        raise CheckpointError(f'an EoMT release without {EOMT_BACKBONE_PREFIX}* keys')
    if base is not None and not looks_like_delta(sd):
        raise CheckpointError('--delta-to BASE is for EoMT\'s delta releases (its DINOv3 models), and this release '
                              'is whole: its backbone\'s LayerNorm weights are of order 1, as trained weights are; '
                              'convert it without --delta-to')
    if base is None and looks_like_delta(sd):
        raise CheckpointError('the backbone\'s LayerNorm weights are near 0: this is a delta release (EoMT\'s '
                              'DINOv3 models); give the pretrained DINOv3 weights it was trained from with '
                              '--delta-to BASE')
    options = conversion_options(model) if model is not None else (
        dict(num_heads=num_heads) if num_heads is not None else {})
    base_sd, base_layout = (convert_weights(base, base_source, **options) if base is not None else (None, ''))
    converted, layout = convert_state_dict(sd, num_heads=options.get('num_heads'))
    if base_sd is not None:
        if set(base_sd) != set(converted):
            raise CheckpointError(f'the delta and --delta-to BASE hold different backbone keys: only in the delta '
                                  f'{sorted(set(converted) - set(base_sd))[:6]}, only in BASE '
                                  f'{sorted(set(base_sd) - set(converted))[:6]}')
        shapes = [k for k in base_sd if base_sd[k].shape != converted[k].shape]
        if shapes:
            raise CheckpointError(f'--delta-to BASE is another model than the delta\'s: shapes differ at {shapes[:6]}')
        converted = {k: base_sd[k] + v for k, v in converted.items()}
    if model is not None:
        check_fits(model, fit_to_model(converted, model.patch_grid, **fit_options(model)),
                   source=f'{source} [{layout}]')
    return converted, layout, base_layout
