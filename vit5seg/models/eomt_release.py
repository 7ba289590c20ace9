"""Deprecated alias of :mod:`vit5seg.models.mask_classification.releases`."""
from ..utils.moved import alias_of

__getattr__ = alias_of(__name__, 'vit5seg.models.mask_classification.releases',
                       names=dict(is_eomt_release='vit5seg.models.checkpoint_files',
                                  looks_like_delta='vit5seg.models.backbone_layouts'))
