"""A config's values as the recipe card shows them, and the defaults a class fills in for what a config
leaves out: what the card (vit5seg.engine.recipe) and each component that gives its own card rows
(``card_rows``: the backbone, the query head and decoders, the annealing hook) share."""
import inspect
from typing import Dict, Iterator, Sequence

# arguments that say where bytes come from or which metadata travel, not what is computed
PLUMBING = ('file_client_args', 'backend_args', 'meta_keys')


def plain(value):
    """Config values as comparable Python: lists as tuples, long runs of one number as text."""
    if isinstance(value, (list, tuple)):
        items = tuple(plain(v) for v in value)
        if len(items) > 8 and all(isinstance(v, (int, float)) for v in items):
            runs = []  # run-length: [1.0] * 150 + [0.1] -> '1.0 x 150, 0.1'
            for v in items:
                if runs and runs[-1][0] == v:
                    runs[-1][1] += 1
                else:
                    runs.append([v, 1])
            return ', '.join(f'{v!r} x {n}' if n > 1 else repr(v) for v, n in runs)
        return items
    return value


def defaults_of(cls, given: dict, skip: Sequence[str] = ()) -> Dict[str, object]:
    """The arguments of ``cls`` the config (``given``) leaves to their default."""
    out = {}
    for name, param in inspect.signature(cls.__init__).parameters.items():
        if name in ('self', *skip) or name in given or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.default is not inspect.Parameter.empty and name not in PLUMBING:
            out[name] = plain(param.default)
    return out


def is_flat(value) -> bool:
    return not isinstance(value, dict) and not (isinstance(value, (list, tuple)) and any(
        isinstance(v, (dict, list, tuple)) for v in value))


def flatten(prefix: str, value) -> Iterator[tuple]:
    """(dotted path, plain value) for every leaf of ``value`` under ``prefix``, as ``--cfg-options`` names it."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key != '_scope_':  # where mmengine found a type (an mmseg:: base): no value of the run
                yield from flatten(f'{prefix}.{key}', item)
    elif not is_flat(value) and not all(isinstance(v, (list, tuple)) and is_flat(v) for v in value):
        for i, item in enumerate(value):
            yield from flatten(f'{prefix}.{i}', item)
    else:
        yield prefix, plain(value)


__all__ = ['PLUMBING', 'defaults_of', 'flatten', 'is_flat', 'plain']
