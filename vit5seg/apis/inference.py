import copy
from typing import Optional

import torch
from mmengine.config import Config
from mmengine.model.utils import revert_sync_batchnorm
from mmseg.apis import inference_model as _mmseg_inference_model
from mmseg.apis import init_model as _mmseg_init_model

import vit5seg  # noqa: F401  (registers ViT5 before any config is built)
from vit5seg.hf_hub import is_hub_id
from vit5seg.hub import resolve
from vit5seg.utils.amp import amp_dtype, enable_amp
from vit5seg.utils.config_kinds import is_detection_config, photo_pipeline, task_of
from vit5seg.utils.dataset_meta import config_dataset_meta

__all__ = ['init_model', 'inference_model', 'is_detection_config']


def _with_config_classes(model, cfg: Config):
    """``model`` with the config's dataset's class names where its checkpoint gave none of its count (a
    training's, or converted before they were written): mmdet's init_detector then assumes COCO's 80, its
    init_track_model None; the config's dataset knows them."""
    if len((getattr(model, 'dataset_meta', None) or {}).get('classes') or ()) != model.num_classes:
        model.dataset_meta = config_dataset_meta(cfg)
    return model


def _init_detector(cfg: Config, checkpoint: Optional[str], cfg_options: Optional[dict]):
    """mmdet's ``init_detector``, its test pipeline without annotation loading (DetInferencer's rule)."""
    from mmdet.apis import init_detector
    cfg = copy.deepcopy(cfg)
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    pipeline = cfg.test_dataloader.dataset.pipeline
    pipeline[:] = photo_pipeline(pipeline)
    return _with_config_classes(init_detector(cfg, checkpoint, device='cpu'), cfg)


def _init_track_model(cfg: Config, checkpoint: Optional[str], cfg_options: Optional[dict]):
    """mmdet's ``init_track_model`` (in mmdet's scope: it builds in whichever is current) for a video config."""
    from mmdet.apis import init_track_model
    from mmengine.registry import DefaultScope
    with DefaultScope.overwrite_default_scope('mmdet'):
        return _with_config_classes(init_track_model(cfg, checkpoint, device='cpu', cfg_options=cfg_options), cfg)


def init_model(config, checkpoint: Optional[str] = None, device: Optional[str] = None,
               cfg_options: Optional[dict] = None, sha256: Optional[str] = None, amp: Optional[str] = None):
    """mmseg's ``init_model`` plus what our configs need for inference: SyncBN becomes BN
    (one process needs no sync, and SyncBN has no CPU kernel) and the device defaults to
    the first GPU if there is one, else the CPU. ``checkpoint`` may be an http(s) URL
    (downloaded once into torch's hub cache); ``sha256`` is checked before loading.
    ``amp='bf16'`` or ``'fp16'``: the forward runs under autocast in that dtype
    (:mod:`vit5seg.utils.amp`; an unsupported dtype for the device is an error).
    A panoptic or instance config (:func:`is_detection_config`) gives mmdet's model, through
    mmdet's ``init_detector``; a video config mmdet's ``init_track_model``."""
    device = device or ('cuda:0' if torch.cuda.is_available() else 'cpu')
    if amp is not None:
        amp_dtype(device, amp)  # before loading anything
    if checkpoint is not None and not is_hub_id(checkpoint):   # a Hub id: mmengine's loader, hf:// (converted)
        checkpoint = resolve(checkpoint, sha256)
    config = Config.fromfile(str(config)) if not isinstance(config, Config) else config
    if task_of(config) == 'video-instance':
        model = _init_track_model(config, checkpoint, cfg_options)
    elif is_detection_config(config):
        model = _init_detector(config, checkpoint, cfg_options)
    else:
        model = _mmseg_init_model(config, checkpoint, device='cpu', cfg_options=cfg_options)
    cfg = model.cfg
    model = revert_sync_batchnorm(model)
    model.cfg = cfg
    return enable_amp(model.to(device).eval(), amp, device)


def inference_model(model, imgs):
    """mmseg's ``inference_model`` (an image path or BGR array, or a list of them); for a
    panoptic or instance model mmdet's ``inference_detector``, whose ``DetDataSample`` holds
    ``pred_panoptic_seg`` or ``pred_instances``.

    mmseg's version rewrites ``model.cfg.test_pipeline`` in place (an array input turns
    its loader into ``LoadImageFromNDArray`` for good, so a later path input fails);
    here it works on a copy each call.
    """
    cfg = model.cfg
    if is_detection_config(cfg):
        from mmdet.apis import inference_detector
        return inference_detector(model, imgs)  # works on a copy of the config
    model.cfg = copy.deepcopy(cfg)
    try:
        return _mmseg_inference_model(model, imgs)
    finally:
        model.cfg = cfg
