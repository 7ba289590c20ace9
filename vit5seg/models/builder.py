"""A config's segmentor built for measuring and checking: no pretrained weights (nothing
is downloaded), SyncBN turned into BN (it needs a process group), on one device; and its
tiny version (a 4-block, 96-wide backbone) for checks that run every head."""
import copy
import logging
import os
from typing import Optional, Union

import torch.nn as nn


def build_segmentor(config: Union[str, os.PathLike, dict], device='cpu', cfg_options: Optional[dict] = None
                    ) -> nn.Module:
    """``config``: a config file, an mmengine ``Config``, or a model dict."""
    from mmengine.config import Config
    from mmengine.model.utils import revert_sync_batchnorm
    from mmseg.registry import MODELS
    from mmseg.utils import register_all_modules
    register_all_modules(init_default_scope=True)
    if isinstance(config, (str, os.PathLike)):
        config = Config.fromfile(str(config))
    if isinstance(config, Config):
        if cfg_options:
            config.merge_from_dict(cfg_options)
        model_cfg = config.model
    else:
        model_cfg = config
    model_cfg = copy.deepcopy(model_cfg)
    model_cfg['pretrained'] = None
    model_cfg['backbone'].pop('init_cfg', None)
    return revert_sync_batchnorm(MODELS.build(model_cfg)).to(device)


# the tiny versions: every channel count of the ViT-B width becomes 96, 4 blocks, 64 px crops
WIDTH, TINY_WIDTH, TINY_DEPTH, TINY_SIZE = 768, 96, 4, 64


def shrink_widths(obj):
    """Every channel count equal to the backbone width becomes the tiny width."""
    if isinstance(obj, dict):
        return {k: shrink_widths(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(shrink_widths(v) for v in obj)
    return TINY_WIDTH if obj == WIDTH and not isinstance(obj, bool) else obj


def tiny_backbone(backbone: dict, num_taps: int) -> dict:
    return {**backbone, 'type': 'ViT5', 'arch': backbone.get('arch', 'vit5-base'), 'embed_dims': TINY_WIDTH,
            'num_layers': TINY_DEPTH, 'num_heads': 2, 'init_cfg': None,
            'out_indices': tuple(range(TINY_DEPTH - num_taps, TINY_DEPTH))}


def build_tiny(model_cfg: dict) -> nn.Module:
    """``build_segmentor`` of a shrunk model dict at 64 px crops, its weights initialised."""
    from mmengine.config import ConfigDict
    from mmengine.logging import MMLogger
    model_cfg['data_preprocessor']['size'] = (TINY_SIZE, TINY_SIZE)
    model = build_segmentor(ConfigDict(model_cfg))
    logger = MMLogger.get_current_instance()
    level = logger.level
    logger.setLevel(logging.WARNING)  # init_weights lists every parameter at INFO
    try:
        model.init_weights()
    finally:
        logger.setLevel(level)
    return model


def tiny_segmentor(config) -> nn.Module:
    """The segmentor of one of our configs with a 4-block, 96-wide backbone, no weights."""
    from mmengine.config import Config
    model_cfg = Config.fromfile(str(config)).model.to_dict()
    model_cfg['pretrained'] = None
    backbone = model_cfg.pop('backbone')
    model_cfg = shrink_widths(model_cfg)
    # EoMT reads tokens, not taps: its configs name none (one, the last, is harmless)
    model_cfg['backbone'] = tiny_backbone(backbone, len(backbone.get('out_indices', (-1,))))
    return build_tiny(model_cfg)
