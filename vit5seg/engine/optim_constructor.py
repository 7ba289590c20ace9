"""Optimizer parameter groups for ViT5 segmentors: layer-wise lr decay and no weight decay
on norms, biases, LayerScale, tokens and position embeddings.

mmseg's LearningRateDecayOptimizerConstructor only recognises BEiT/ConvNeXt parameter
names (``layers.N``, ``stages.N``); ViT5's ``blocks.N``, ``reg_token`` and RMSNorm
weights would all fall into one group there, so the groups are built here.
"""
from typing import List

import torch.nn as nn
from mmengine.logging import print_log
from mmengine.optim import DefaultOptimWrapperConstructor
from mmengine.registry import OPTIM_WRAPPER_CONSTRUCTORS  # the root registries: mmseg and mmdet configs both find them

NO_DECAY_NAMES = ('pos_embed', 'cls_token', 'reg_token')
# Learned query/level embeddings of query-based heads (Mask2Former), as mmseg's configs
# exclude them from weight decay.
NO_DECAY_HEAD_EMBEDDINGS = ('query_embed.weight', 'query_feat.weight', 'level_embed.weight')


def vit5_layer_id(name: str, num_layers: int) -> int:
    """0 for the embeddings, i + 1 for block i, num_layers + 1 for the rest (final norm,
    neck, heads), for a parameter name of the segmentor (``backbone.blocks.3.…``)."""
    if name.startswith('backbone.'):
        local = name[len('backbone.'):]
        if local.startswith(('patch_embed.',) + NO_DECAY_NAMES):
            return 0
        if local.startswith('blocks.'):
            return int(local.split('.')[1]) + 1
    return num_layers + 1


def no_weight_decay(name: str, param: nn.Parameter) -> bool:
    # 1-d tensors are norm weights, biases and LayerScale gammas.
    return (param.ndim <= 1 or name.endswith(('.bias',) + NO_DECAY_HEAD_EMBEDDINGS)
            or name.split('.')[-1] in NO_DECAY_NAMES)


LAYER_NUMBERINGS = ('beit', 'eomt')


def decay_exponent(layer_id: int, num_layers: int, numbering: str, full_rate_last: int = 0) -> int:
    """How many times the decay rate multiplies the lr of ``layer_id`` (of vit5_layer_id).

    ``'beit'`` (mmseg's BEiT/ConvNeXt constructors): ``num_layers + 1 - layer_id``, so the
    last block gets one factor and the embeddings ``num_layers + 1``. ``'eomt'`` (the EoMT
    recipe): block i gets ``num_layers - 1 - i``, so the last block has the full rate, the
    embeddings are decayed like block 0; everything after the blocks has the full rate.
    ``full_rate_last``: the last that many blocks get the full rate whatever the numbering
    (EoMT's ``llrd_l2_enabled: False``: the blocks that see the queries; the others keep
    their exponent).
    """
    if num_layers - full_rate_last < layer_id <= num_layers:
        return 0
    if numbering == 'beit':
        return num_layers + 1 - layer_id
    return 0 if layer_id > num_layers else num_layers - max(layer_id, 1)


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class ViT5OptimWrapperConstructor(DefaultOptimWrapperConstructor):
    """``paramwise_cfg=dict(layer_decay_rate=r, layer_numbering='beit')``: the lr of layer
    id ``i`` is ``base_lr * r ** decay_exponent(i)`` (see :func:`decay_exponent`); ``r=1``
    keeps one lr for all; ``full_rate_last_blocks=True``: the backbone blocks that see the queries
    (``decoder.encoder_blocks_with_queries``: EoMT's ``decode_head.num_blocks``) at the full rate.
    Parameters of :func:`no_weight_decay` get weight decay 0, the others the optimizer's (``decay_all=True``: every parameter gets it, as EoMT). Each
    group records ``layer_id`` and ``backbone`` (whether its parameters are the backbone's;
    EoMT's two-stage warm-up reads it)."""

    def __init__(self, optim_wrapper_cfg: dict, paramwise_cfg=None):
        # An empty paramwise_cfg would make the parent skip add_params altogether.
        super().__init__(optim_wrapper_cfg, paramwise_cfg or dict(layer_decay_rate=1.0))

    def add_params(self, params: List[dict], module: nn.Module, **kwargs) -> None:
        rate = float(self.paramwise_cfg.get('layer_decay_rate', 1.0))
        numbering = self.paramwise_cfg.get('layer_numbering', 'beit')
        if numbering not in LAYER_NUMBERINGS:
            raise ValueError(f'paramwise_cfg.layer_numbering must be one of {LAYER_NUMBERINGS}, got {numbering!r}')
        decay_all = bool(self.paramwise_cfg.get('decay_all', False))
        unknown = set(self.paramwise_cfg) - {'layer_decay_rate', 'layer_numbering', 'decay_all',
                                             'full_rate_last_blocks'}
        if unknown:
            raise ValueError(f'ViT5OptimWrapperConstructor: unknown paramwise_cfg keys {sorted(unknown)}')
        backbone = getattr(module, 'backbone', None)
        num_layers = getattr(backbone, 'num_layers', None)
        if num_layers is None:
            raise TypeError('ViT5OptimWrapperConstructor needs a segmentor whose backbone has num_layers '
                            f'(got backbone {type(backbone).__name__})')
        full_rate_last = 0
        if self.paramwise_cfg.get('full_rate_last_blocks'):
            # a query decoder's (EoMT's: decode_head.num_blocks; 0 for one outside the backbone, as PMT's)
            full_rate_last = getattr(getattr(module, 'decoder', None), 'encoder_blocks_with_queries', None)
            if full_rate_last is None:
                raise TypeError('paramwise_cfg.full_rate_last_blocks needs a mask-classification model (its '
                                'decoder says which backbone blocks see the queries)')
        groups = {}
        for name, param in module.named_parameters():
            if not param.requires_grad:
                continue
            layer_id = vit5_layer_id(name, num_layers)
            decay = decay_all or not no_weight_decay(name, param)
            in_backbone = name.startswith('backbone.')
            key = (layer_id, decay, in_backbone)
            group = groups.get(key)
            if group is None:
                exponent = decay_exponent(layer_id, num_layers, numbering, full_rate_last)
                group = groups[key] = dict(
                    params=[], lr=self.base_lr * rate ** exponent,
                    weight_decay=self.base_wd if decay else 0., layer_id=layer_id, backbone=in_backbone)
            group['params'].append(param)
        params.extend(groups[k] for k in sorted(groups))
        print_log(f'ViT5OptimWrapperConstructor: {len(groups)} groups, layer_decay_rate={rate} '
                  f'({numbering} numbering), {num_layers + 2} layer ids', logger='current')
