"""A config's segmentor built for measuring and checking: no pretrained weights (nothing
is downloaded), SyncBN turned into BN (it needs a process group), on one device."""
import copy
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
