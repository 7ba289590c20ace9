"""Old module paths kept for one release. An old module is a thin alias: importing it warns
once (``DeprecationWarning``) with where its names went, and every name it had, public or
private, is read from its new home (PEP 562's module ``__getattr__``), so ``from OLD import
NAME`` and monkeypatching ``OLD.NAME``'s readers keep working."""
import importlib
import warnings
from typing import Callable, Dict, Optional


def warn_moved(old: str, new: str, stacklevel: int = 3) -> None:
    """The ``DeprecationWarning`` for the old module ``old`` (its ``__name__``)."""
    warnings.warn(f'{old} is deprecated and will be removed in the next release: import from {new}',
                  DeprecationWarning, stacklevel=stacklevel)


def alias_of(old: str, new: str, names: Optional[Dict[str, str]] = None) -> Callable[[str], object]:
    """The module ``__getattr__`` of the alias ``old`` of ``new`` (a module path); it warns now.
    ``names``: where a name went where not to ``new`` (name -> module path)."""
    warn_moved(old, new + (' and ' + ', '.join(sorted(set(names.values()) - {new})) if names else ''), stacklevel=4)

    def __getattr__(name: str):
        module = importlib.import_module((names or {}).get(name, new))
        try:
            return getattr(module, name)
        except AttributeError:
            raise AttributeError(f'module {old!r} (moved to {new}) has no attribute {name!r}') from None
    return __getattr__


def names_moved(old: str, new: str, names) -> Callable[[str], object]:
    """The module ``__getattr__`` of a module ``old`` that stays but whose ``names`` moved to the
    module ``new``: reading one warns and gives ``new``'s."""
    def __getattr__(name: str):
        if name not in names:
            raise AttributeError(f'module {old!r} has no attribute {name!r}')
        warn_moved(f'{old}.{name}', new, stacklevel=3)
        return getattr(importlib.import_module(new), name)
    return __getattr__


__all__ = ['alias_of', 'names_moved', 'warn_moved']
