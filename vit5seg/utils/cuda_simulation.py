"""Run library code down the branch it takes for CUDA tensors, on a CPU.

mmcv and mmseg choose a compiled kernel only when ``tensor.is_cuda`` (and
``torch.cuda.is_available()``): those branches pass every CPU run and fail on the first
GPU. Inside :func:`simulated_cuda`, with :class:`CudaLikeTensor` inputs, they run for real
on the CPU up to the first kernel launch. Used by the registry audit, the CPU self-check
and the tests.
"""
import contextlib
import sys

import torch


class CudaLikeTensor(torch.Tensor):
    """A CPU tensor that answers ``is_cuda = True``; ops on it return the same subclass,
    so every ``x.is_cuda`` test inside a model sees a "GPU" activation."""

    @property
    def is_cuda(self):
        return True


def _cuda_available() -> bool:
    return True


@contextlib.contextmanager
def simulated_cuda():
    """``torch.cuda.is_available()`` and mmcv's import-time ``IS_CUDA_AVAILABLE`` copies say
    True (as on a GPU machine) for the duration; use with :class:`CudaLikeTensor` inputs."""
    patched = [(torch.cuda, 'is_available', torch.cuda.is_available)]
    patched += [(module, 'IS_CUDA_AVAILABLE', False) for name, module in list(sys.modules.items())
                if name.startswith(('mmcv', 'mmseg', 'mmdet')) and getattr(module, 'IS_CUDA_AVAILABLE', None) is False]
    torch.cuda.is_available = _cuda_available
    for module, attr, _ in patched[1:]:
        setattr(module, attr, True)
    try:
        yield
    finally:
        for module, attr, original in patched:
            setattr(module, attr, original)
