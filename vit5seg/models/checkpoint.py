"""Read, convert and load ViT-5 / DeiT-III backbone checkpoints.

Layouts understood (detected from the keys):
- ``vit5``: the authors' ViT-5 release (``reg_token``, ``attn.q_norm``, RoPE ``freqs``);
- ``deit3-fb``: Facebook's DeiT-III release (``gamma_1`` / ``gamma_2``), which is also
  the layout of this package's converted files;
- ``deit3-timm``: timm's ``deit3_*`` (``ls1.gamma`` / ``ls2.gamma``).
Weights may sit under ``model`` / ``model_ema`` (authors), ``state_dict`` (mmengine,
converted files; a segmentor's ``backbone.`` prefix is stripped) or at the top level.
"""
import argparse
import logging
import pickle
import re
import warnings
from pathlib import Path
from typing import Dict, Optional, Tuple

import torch
from mmengine.logging import print_log

from ..errors import ToolError
from ..hub import OFFICIAL_WEIGHTS, is_url, official_name, resolve
from ..paths import tool_command
from .layers import rope_frequencies

StateDict = Dict[str, torch.Tensor]


class CheckpointError(ValueError, ToolError):
    """A checkpoint that cannot be read or does not fit the model."""


# A file that cannot be read is also the builtin error mmengine's own loader (plain
# torch.load) raises for it, because vit5seg reads every checkpoint the Runner loads:
# callers of mmengine that catch those (mmseg's own tests catch OSError for a missing
# file) see no difference.
class CheckpointNotFound(CheckpointError, FileNotFoundError):
    """No file at that path."""


class UnsafeCheckpoint(CheckpointError, pickle.UnpicklingError):
    """A pickle that only full unpickling can read (torch.load's weights_only error type)."""


class UnreadableCheckpoint(CheckpointError, RuntimeError):
    """A truncated file, or one that is no PyTorch checkpoint (torch.load's RuntimeError)."""


# Plain containers the authors' training scripts pickle next to the weights
# (``args``); allowed for ``weights_only`` loading, nothing that can run code.
_SAFE_GLOBALS = [argparse.Namespace]


def read_checkpoint(path, allow_unsafe: bool = False, map_location='cpu', sha256: Optional[str] = None,
                    folder=None, progress: bool = True):
    """Load a ``.pth``/``.bin``/``.safetensors`` file without executing pickled code.

    ``path`` may be an http(s) URL: downloaded once into torch's hub cache
    (:mod:`vit5seg.hub`), then read like a local file. ``sha256`` (full or a prefix of
    8+ hex digits) is checked first. ``allow_unsafe=True`` falls back to full
    unpickling, with a warning: only for files from a source you trust.
    ``map_location`` is torch.load's; ``folder`` replaces the hub cache for URLs.
    """
    local = Path(resolve(path, sha256, progress, folder))
    try:
        return _read_local(local, allow_unsafe, map_location)
    except CheckpointError as e:
        if is_url(path) and not isinstance(e, UnsafeCheckpoint):
            raise type(e)(f'{e}; it is the cached download of {path}: delete it to download again') from None
        raise


def _read_local(path: Path, allow_unsafe: bool, map_location):
    if not path.is_file():
        raise CheckpointNotFound(f'checkpoint {path} does not exist{_where_to_get(path)}')
    if path.suffix == '.safetensors':
        from safetensors.torch import load_file
        device = str(map_location) if isinstance(map_location, (str, torch.device)) else 'cpu'
        try:
            return load_file(str(path), device=device)
        except Exception as e:  # safetensors raises its own error types
            raise UnreadableCheckpoint(f'cannot read {path}: {e}') from e
    try:
        with torch.serialization.safe_globals(_SAFE_GLOBALS):
            return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        if not allow_unsafe:
            reason = str(e).strip().splitlines()[0]
            raise UnsafeCheckpoint(
                f'refusing to load {path}: it needs unsafe unpickling, which can run code '
                f'({reason}). If you trust the file, pass allow_unsafe=True '
                f'(--allow-unsafe on the command line).') from None
        warnings.warn(f'loading {path} with full unpickling (allow_unsafe=True): '
                      'this runs any code the file contains', stacklevel=2)
        return torch.load(path, map_location=map_location, weights_only=False)
    except (RuntimeError, EOFError, OSError) as e:
        raise UnreadableCheckpoint(f'cannot read {path}: truncated or not a PyTorch checkpoint ({e})') from None


def _where_to_get(path: Path) -> str:
    arch = official_name(path)
    if arch is None:
        return ''
    return (f'; it is the published {arch} file: give its URL {OFFICIAL_WEIGHTS[arch]} instead (downloaded '
            f'once and cached), or fetch it with `{tool_command("download_weights.py")} {arch} --dest {path.parent}`')


def extract_state_dict(obj, use_ema: bool = False, prefix: Optional[str] = None) -> StateDict:
    """The tensor dict inside a loaded checkpoint object."""
    if not isinstance(obj, dict):
        raise CheckpointError(f'expected a dict of weights, got {type(obj).__name__}')
    if use_ema:
        if 'model_ema' not in obj:
            raise CheckpointError(f'use_ema=True but the checkpoint has no model_ema '
                                  f'(top-level keys: {sorted(obj)[:10]})')
        sd = obj['model_ema']
    else:
        sd = next((obj[k] for k in ('model', 'state_dict', 'module') if isinstance(obj.get(k), dict)), obj)
    sd = {k: v for k, v in sd.items() if isinstance(v, torch.Tensor)}
    if prefix is None and 'cls_token' not in sd and any(k.startswith('backbone.') for k in sd):
        prefix = 'backbone.'  # a trained mmseg segmentor: take its backbone
    if prefix:
        sd = {k[len(prefix):]: v for k, v in sd.items() if k.startswith(prefix)}
    if sd and all(k.startswith('module.') for k in sd):
        sd = {k[len('module.'):]: v for k, v in sd.items()}
    if not sd:
        raise CheckpointError('the checkpoint holds no tensors' + (f' under prefix {prefix!r}' if prefix else ''))
    return sd


def detect_layout(sd: StateDict) -> str:
    keys = set(sd)
    if any('.ls1.gamma' in k for k in keys):
        return 'deit3-timm'
    if 'reg_token' in keys or any(k.endswith(('attn.rope.freqs', 'attn.q_norm.weight')) for k in keys):
        return 'vit5'
    if 'blocks.0.gamma_1' in keys:
        return 'deit3-fb'
    if 'cls_token' in keys and 'blocks.0.attn.qkv.weight' in keys:
        raise CheckpointError('a plain ViT checkpoint without LayerScale is neither ViT-5 nor DeiT-III')
    sample = sorted(keys)[:8]
    raise CheckpointError(f'not a ViT-5 or DeiT-III backbone checkpoint (first keys: {sample})')


_TIMM_RENAMES = [(re.compile(r'\.ls([12])\.gamma$'), r'.gamma_\1')]
_DROPPED = re.compile(r'^(head|fc_norm|head_drop)\.')


def convert_state_dict(sd: StateDict, layout: Optional[str] = None, rope_theta: float = 10000.,
                       register_rope_theta: float = 100.) -> Tuple[StateDict, str]:
    """Map any supported layout to this package's keys.

    The classifier is dropped; the stored RoPE frequencies are derived values, so they
    are checked against ``rope_theta`` / ``register_rope_theta`` and dropped.
    """
    layout = layout or detect_layout(sd)
    out = {}
    for key, value in sd.items():
        if _DROPPED.match(key):
            continue
        if key.endswith(('attn.rope.freqs', 'attn.rope_reg.freqs')):
            theta = register_rope_theta if 'rope_reg' in key else rope_theta
            expected = rope_frequencies(value.numel() * 4, theta)
            if value.shape != expected.shape or not torch.allclose(value.float(), expected, rtol=1e-5, atol=0):
                raise CheckpointError(f'{key} does not match RoPE theta={theta:g}: the checkpoint was '
                                      f'trained with other rotary frequencies')
            continue
        if layout == 'deit3-timm':
            for pattern, repl in _TIMM_RENAMES:
                key = pattern.sub(repl, key)
        out[key] = value
    return out, layout


def resize_pos_embed(sd: StateDict, grid: Tuple[int, int], mode: str = 'bicubic') -> StateDict:
    """Resize a square checkpoint pos_embed (1, n*n, C) to ``grid`` (bicubic,
    align_corners=False, as the authors' fine-tuning)."""
    from timm.layers import resample_abs_pos_embed
    pos = sd['pos_embed']
    side = int(round(pos.shape[1] ** 0.5))
    if side * side != pos.shape[1]:
        raise CheckpointError(f'pos_embed of {pos.shape[1]} tokens is not a square grid')
    if (side, side) != tuple(grid):
        sd = dict(sd)
        sd['pos_embed'] = resample_abs_pos_embed(pos, new_size=list(grid), old_size=[side, side],
                                                 num_prefix_tokens=0, interpolation=mode, antialias=False)
        print_log(f'resized pos_embed from {side}x{side} to {grid[0]}x{grid[1]}', logger='current',
                  level=logging.INFO)
    return sd


def convert_checkpoint(path, use_ema: bool = False, allow_unsafe: bool = False, prefix: Optional[str] = None,
                       grid: Optional[Tuple[int, int]] = None, sha256: Optional[str] = None,
                       **theta) -> Tuple[StateDict, str]:
    """File or URL -> (backbone state dict in this package's layout, detected source layout)."""
    sd = extract_state_dict(read_checkpoint(path, allow_unsafe, sha256=sha256), use_ema=use_ema, prefix=prefix)
    try:
        sd, layout = convert_state_dict(sd, **theta)
    except CheckpointError as e:
        raise CheckpointError(f'{path}: {e}') from None
    if grid is not None and 'pos_embed' in sd:
        sd = resize_pos_embed(sd, grid)
    return sd, layout


def _describe(sd: StateDict) -> str:
    backbone = {k[len('backbone.'):]: v for k, v in sd.items() if k.startswith('backbone.')}
    sd = backbone or sd  # a whole segmentor: describe its backbone
    depth = len({k.split('.')[1] for k in sd if k.startswith('blocks.')})
    width = sd['cls_token'].shape[-1] if 'cls_token' in sd else '?'
    return f'width {width}, depth {depth}'


def check_fits(model: torch.nn.Module, sd: StateDict, source: str = 'checkpoint') -> None:
    """Raise with every missing, unexpected and mis-shaped key; never a partial load."""
    own = model.state_dict()
    missing = sorted(set(own) - set(sd))
    unexpected = sorted(set(sd) - set(own))
    shapes = sorted(f'{k}: checkpoint {tuple(sd[k].shape)} vs model {tuple(own[k].shape)}'
                    for k in set(own) & set(sd) if sd[k].shape != own[k].shape)
    if not (missing or unexpected or shapes):
        return
    arch = getattr(model, 'arch', None) or getattr(getattr(model, 'backbone', None), 'arch', '?')
    lines = [f'{source} ({_describe(sd)}) does not fit {type(model).__name__} '
             f'arch={arch!r} ({_describe(own)}):']
    for title, items in (('missing in checkpoint', missing), ('unexpected in checkpoint', unexpected),
                         ('shape mismatch', shapes)):
        if items:
            shown = items[:12] + ([f'... and {len(items) - 12} more'] if len(items) > 12 else [])
            lines.append(f'  {title} ({len(items)}): ' + ', '.join(shown))
    raise CheckpointError('\n'.join(lines))


def load_pretrained(model, path, use_ema: bool = False, allow_unsafe: bool = False,
                    prefix: Optional[str] = None, sha256: Optional[str] = None) -> str:
    """Load any supported checkpoint (a path or an http(s) URL) into a :class:`ViT5`;
    returns the detected layout."""
    theta = {}
    if model.rope is not None:
        theta['rope_theta'] = model.rope.rope.temperature
        if model.rope.register_grid is not None:
            theta['register_rope_theta'] = model.rope.rope_reg.temperature
    sd, layout = convert_checkpoint(path, use_ema=use_ema, allow_unsafe=allow_unsafe, prefix=prefix,
                                    grid=model.patch_grid, sha256=sha256, **theta)
    check_fits(model, sd, source=f'{path} [{layout}]')
    model.load_state_dict(sd, strict=True)
    print_log(f'loaded {layout} checkpoint {path}' + (' (EMA)' if use_ema else ''), logger='current')
    return layout
