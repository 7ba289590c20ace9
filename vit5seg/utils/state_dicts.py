"""State dicts as every conversion layer handles them (a helper they all need, below them)."""
import re
from typing import Dict, List, Sequence, Tuple

import torch

StateDict = Dict[str, torch.Tensor]


def keys_under(sd: StateDict, prefix: str) -> StateDict:
    """The entries of ``sd`` whose keys start with ``prefix``, with the prefix taken off."""
    return {k[len(prefix):]: v for k, v in sd.items() if k.startswith(prefix)}


def renamed(sd: StateDict, renames: Sequence[Tuple[str, str]]) -> Tuple[StateDict, List[str]]:
    """(``sd`` with each key renamed by the first of ``renames`` (pattern, replacement) that matches it,
    the keys none matches, which are left out)."""
    out, unknown = {}, []
    for key, value in sd.items():
        for pattern, repl in renames:
            if re.match(pattern, key):
                out[re.sub(pattern, repl, key)] = value
                break
        else:
            unknown.append(key)
    return out, unknown


__all__ = ['StateDict', 'keys_under', 'renamed']
