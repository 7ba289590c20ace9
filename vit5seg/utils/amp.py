"""Mixed-precision inference: ``--amp`` on test / infer / the resolution sweep and
``init_model(..., amp=...)``. The forward runs under ``torch.autocast``; RMSNorm and the
RoPE rotations compute in float32 whatever the autocast dtype (as in training)."""
import argparse
import functools
from typing import Optional

import torch

from ..errors import ToolError

AMP_DTYPES = {'bf16': torch.bfloat16, 'fp16': torch.float16}


class AmpError(ValueError, ToolError):
    """The device cannot run the requested autocast dtype."""


def amp_dtype(device, amp: str) -> torch.dtype:
    """The autocast dtype for ``amp`` ('bf16' or 'fp16') on ``device``, or one clear error."""
    if amp not in AMP_DTYPES:
        raise AmpError(f"amp must be one of {sorted(AMP_DTYPES)}, got {amp!r}")
    dtype, kind = AMP_DTYPES[amp], torch.device(device).type
    if kind == 'cuda':
        if not torch.cuda.is_available():
            raise AmpError(f'--amp {amp} on {device}: torch sees no CUDA GPU')
        if dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
            name = torch.cuda.get_device_name(torch.device(device))
            raise AmpError(f'--amp bf16: {name} has no bfloat16; use --amp-dtype fp16')
    elif not torch.amp.autocast_mode.is_autocast_available(kind):
        raise AmpError(f'--amp {amp}: torch has no autocast for {kind} devices')
    return dtype


def _under_autocast(method, device_type: str, dtype: torch.dtype):
    @functools.wraps(method)
    def run(*args, **kwargs):
        with torch.autocast(device_type, dtype=dtype):
            return method(*args, **kwargs)
    run.amp_dtype = dtype
    return run


def enable_amp(model: torch.nn.Module, amp: Optional[str], device=None) -> torch.nn.Module:
    """Run ``model``'s forward, ``test_step`` and ``val_step`` under autocast (in place).
    ``amp=None`` leaves the model as it is. ``device``: the model's, by default."""
    if amp is None:
        return model
    device = device or next(model.parameters()).device
    dtype = amp_dtype(device, amp)
    kind = torch.device(device).type
    for name in ('forward', 'test_step', 'val_step'):
        method = getattr(model, name, None)
        if method is not None and not hasattr(method, 'amp_dtype'):
            setattr(model, name, _under_autocast(method, kind, dtype))
    return model


def add_amp_arguments(parser: argparse.ArgumentParser) -> None:
    """``--amp`` / ``--amp-dtype`` of the inference tools."""
    parser.add_argument('--amp', action='store_true',
                        help='mixed-precision inference (autocast; RMSNorm and RoPE stay float32)')
    parser.add_argument('--amp-dtype', choices=sorted(AMP_DTYPES), default='bf16',
                        help='autocast dtype with --amp (default bf16; fp16 for GPUs without bf16)')
