"""Deprecated alias of :mod:`vit5seg.datasets.checks` (every dataset check is there)."""
from ..utils.moved import alias_of

__getattr__ = alias_of(__name__, 'vit5seg.datasets.checks')
