"""Deprecated alias of :mod:`vit5seg.utils.amp`."""
from ..utils.moved import alias_of

__getattr__ = alias_of(__name__, 'vit5seg.utils.amp')
