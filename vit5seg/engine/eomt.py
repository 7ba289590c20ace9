"""Deprecated alias of :mod:`vit5seg.engine.mask_annealing` (the hook) and :mod:`vit5seg.engine.schedules`."""
from ..utils.moved import alias_of

__getattr__ = alias_of(__name__, 'vit5seg.engine.mask_annealing',
                       names=dict(TwoStageWarmupPolyLR='vit5seg.engine.schedules'))
