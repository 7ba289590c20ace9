"""State dicts as every conversion layer handles them (a helper they all need, below them)."""
from typing import Dict

import torch

StateDict = Dict[str, torch.Tensor]


def keys_under(sd: StateDict, prefix: str) -> StateDict:
    """The entries of ``sd`` whose keys start with ``prefix``, with the prefix taken off."""
    return {k[len(prefix):]: v for k, v in sd.items() if k.startswith(prefix)}


__all__ = ['StateDict', 'keys_under']
