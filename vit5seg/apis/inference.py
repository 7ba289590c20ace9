import copy
from typing import Optional

import torch
from mmengine.model.utils import revert_sync_batchnorm
from mmseg.apis import inference_model as _mmseg_inference_model
from mmseg.apis import init_model as _mmseg_init_model

import vit5seg  # noqa: F401  (registers ViT5 before any config is built)
from vit5seg.engine.amp import amp_dtype, enable_amp
from vit5seg.hub import resolve

__all__ = ['init_model', 'inference_model']


def init_model(config, checkpoint: Optional[str] = None, device: Optional[str] = None,
               cfg_options: Optional[dict] = None, sha256: Optional[str] = None, amp: Optional[str] = None):
    """mmseg's ``init_model`` plus what our configs need for inference: SyncBN becomes BN
    (one process needs no sync, and SyncBN has no CPU kernel) and the device defaults to
    the first GPU if there is one, else the CPU. ``checkpoint`` may be an http(s) URL
    (downloaded once into torch's hub cache); ``sha256`` is checked before loading.
    ``amp='bf16'`` or ``'fp16'``: the forward runs under autocast in that dtype
    (:mod:`vit5seg.engine.amp`; an unsupported dtype for the device is an error)."""
    device = device or ('cuda:0' if torch.cuda.is_available() else 'cpu')
    if amp is not None:
        amp_dtype(device, amp)  # before loading anything
    if checkpoint is not None:
        checkpoint = resolve(checkpoint, sha256)
    model = _mmseg_init_model(config, checkpoint, device='cpu', cfg_options=cfg_options)
    cfg = model.cfg
    model = revert_sync_batchnorm(model)
    model.cfg = cfg
    return enable_amp(model.to(device).eval(), amp, device)


def inference_model(model, imgs):
    """mmseg's ``inference_model`` (an image path or BGR array, or a list of them).

    mmseg's version rewrites ``model.cfg.test_pipeline`` in place (an array input turns
    its loader into ``LoadImageFromNDArray`` for good, so a later path input fails);
    here it works on a copy each call.
    """
    cfg = model.cfg
    model.cfg = copy.deepcopy(cfg)
    try:
        return _mmseg_inference_model(model, imgs)
    finally:
        model.cfg = cfg
