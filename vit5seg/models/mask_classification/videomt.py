"""VidEoMT's decoder: EoMT run online over a video, frame by frame ("Your ViT is Secretly Also a
Video Segmentation Model", CVPR 2026; tue-mps/videomt ``videomt/modeling/backbone/videomt.py``).

Each frame is EoMT's pass (:mod:`.eomt`): the queries join the tokens before the backbone's last
``num_blocks`` blocks and are read through its final norm by the head. What a frame adds is where
its queries come from: the first frame of a clip takes the head's learned queries; every later
one takes those plus a linear map (``query_updater``) of the query tokens the last block put out
for the frame before (before the final norm), which this decoder hands on as ``MaskFeatures.state``.
So a query keeps following what it found, without a tracker. VidEoMT never masks the queries'
attention (its segmenter passes no mask), so no mask annealing runs; while training, every block's
input still gives a supervised prediction, as EoMT's, but read from the tokens as they are, not through
the final norm (``segmenter``'s ``self._predict(x_frame, ...)`` with ``NORM_QUERIES`` False, its default
and every release's); the last block's output goes through it, as at inference.
"""
from typing import Optional

import torch
import torch.nn as nn
from mmseg.registry import MODELS

from ..backbones.vit5 import ViT5
from .core import QueryHead
from .eomt import EoMTDecoder


@MODELS.register_module()
class VidEoMTDecoder(EoMTDecoder):
    """EoMT's decoder whose queries carry over from one frame to the next (module docstring).

    Args:
        embed_dims: the backbone's width (``query_updater`` is C -> C).
    """

    carries_state = True
    supervise_through_norm = False

    def __init__(self, embed_dims: int):
        super().__init__()
        self.embed_dims = embed_dims
        self.query_updater = nn.Linear(embed_dims, embed_dims)

    def check_parts(self, backbone: ViT5, head: QueryHead) -> None:
        if self.embed_dims != backbone.embed_dims:
            raise ValueError(f'decoder.embed_dims={self.embed_dims} differs from the backbone width '
                             f'{backbone.embed_dims}')
        super().check_parts(backbone, head)
        self.mask_probs = [0.0] * head.num_blocks   # VidEoMT's queries see every patch, always

    def queries(self, head: QueryHead, batch: int, state: Optional[torch.Tensor]) -> torch.Tensor:
        """The first frame's: the learned queries; a later frame's: those plus ``query_updater`` of the
        query tokens the frame before put out (``state``, (B, Q, C))."""
        learned = head.queries.weight[None].expand(batch, -1, -1)
        if state is None:
            return learned
        if not isinstance(state, torch.Tensor) or state.shape != learned.shape:
            raise ValueError(f'VidEoMTDecoder carries the previous frame\'s query tokens, (B, Q, C) = '
                             f'{tuple(learned.shape)}; it was handed '
                             f'{tuple(state.shape) if isinstance(state, torch.Tensor) else type(state).__name__}')
        return self.query_updater(state) + learned

    def hand_on(self, output_queries: torch.Tensor) -> torch.Tensor:
        return output_queries


__all__ = ['VidEoMTDecoder']
