"""Deprecated alias of :mod:`vit5seg.models.mask_classification` (EoMT's head and core, its
decoder, its mmseg segmentor)."""
from ..utils.moved import alias_of

__getattr__ = alias_of(__name__, 'vit5seg.models.mask_classification.core', names=dict(
    EoMTEncoderDecoder='vit5seg.models.mask_classification.segmentor',
    EoMTDecoder='vit5seg.models.mask_classification.eomt'))
