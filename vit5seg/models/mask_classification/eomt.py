"""EoMT's decoder: the backbone's last blocks ("Your ViT is Secretly an Image Segmentation
Model", Kerssies et al., CVPR 2025; tue-mps/eomt models/eomt.py).

Learned queries join the token sequence before the last ``num_blocks`` blocks; every
prediction (class logits over K + 1 with no-object, mask logits) is read from the tokens
through the backbone's final norm by the head. While training, each of those blocks also
gets a prediction from its input, which (a) is supervised and (b) restricts each query to
the patches inside its predicted mask, a restriction each query drops with probability
1 - P_i; ``EoMTMaskAnnealingHook`` (vit5seg.engine) takes P_i from 1 to 0. At inference
there is no mask and one head pass.

Token order inside the last blocks: ``[queries (Q), cls, patches (h*w), registers (R)]``;
the queries get identity RoPE rows, so they are not rotated. The decoder has no weights of
its own: the queries and predictors are the head's, the blocks the backbone's.
"""
from typing import Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmseg.registry import MODELS

from ..backbones.vit5 import ViT5
from ..layers import prepend_identity_rows
from .core import EncoderPass, MaskDecoder, MaskFeatures, QueryHead


def _run_block(blk: nn.Module, x: torch.Tensor, rope: Optional[torch.Tensor], attn_mask: Optional[torch.Tensor],
               use_cp: bool) -> torch.Tensor:
    return blk.forward_cp(x, rope, attn_mask) if use_cp else blk(x, rope, attn_mask)


def _predict(norm: nn.Module, head: QueryHead, x: torch.Tensor,
             grid: Tuple[int, int]) -> Tuple[torch.Tensor, torch.Tensor]:
    """Tokens (B, Q + 1 + h*w + R, C) through the final norm -> the head's class and mask logits."""
    x = norm(x)
    B, (h, w), Q = x.shape[0], grid, head.num_queries
    patches = x[:, Q + 1:Q + 1 + h * w]                                   # (B, h*w, C)
    return head.predict_masks(x[:, :Q], patches.transpose(1, 2).reshape(B, -1, h, w))


@torch.compiler.disable  # random and set per step: outside any graph, as upstream
def _drop_rows(rows: torch.Tensor, prob: float) -> torch.Tensor:
    """Each query's mask row (B, Q, h*w), fully opened with probability 1 - prob."""
    if prob >= 1:
        return rows
    return rows | (torch.rand(*rows.shape[:2], 1, device=rows.device) >= prob)


@MODELS.register_module()
class EoMTDecoder(MaskDecoder):
    """The queries through the backbone's last ``head.num_blocks`` blocks, with masked
    attention annealed by its ``mask_probs`` (see the module docstring)."""

    _compiled = None  # (block, prediction) made on first use with model.backbone.compile
    #: whether a block's input is read through the final norm for its supervised prediction (EoMT's is)
    supervise_through_norm = True

    def check_parts(self, backbone: ViT5, head: QueryHead) -> None:
        if backbone.frozen:
            raise ValueError('EoMT trains its queries through the backbone\'s own blocks, so its backbone cannot be '
                             'frozen: set model.backbone.frozen=False, or use a decoder of its own '
                             "(model.decoder=dict(type='PMTDecoder', ...))")
        if not backbone.final_norm:
            raise ValueError('EoMT reads every prediction through the backbone\'s final norm: set '
                             'model.backbone.final_norm=True')
        super().check_parts(backbone, head)
        if not 1 <= head.num_blocks <= backbone.num_layers:
            raise ValueError(f'decode_head.num_blocks={head.num_blocks} must be within 1..{backbone.num_layers} '
                             f'(the backbone\'s blocks)')
        self._compiled = None
        self.first_block = backbone.num_layers - head.num_blocks   # where the queries join
        self.encoder_blocks_with_queries = head.num_blocks
        self.mask_probs = [1.0] * head.num_blocks

    def __getstate__(self):
        # compiled functions' caches belong to this instance: a copy (EMA, pickling) compiles its own
        state = self.__dict__.copy()
        state['_compiled'] = None
        return state

    def _block_and_prediction(self, backbone: ViT5):
        """The two functions the forward runs per block: eager, or compiled with
        ``model.backbone.compile``'s arguments. Upstream compiles the whole model; here each
        block with its queries and mask, and each prediction, is one graph, shared by every
        block of the same kind (graphs: the blocks without queries, those with a mask,
        those with queries and no mask, each for training and inference), so no step
        recompiles: the per-step mask probabilities and the random drop stay outside."""
        if backbone.compile_cfg is None:
            return _run_block, _predict
        if self._compiled is None:
            self._compiled = (torch.compile(_run_block, **backbone.compile_cfg),
                              torch.compile(_predict, **backbone.compile_cfg))
        return self._compiled

    @staticmethod
    def attention_mask(head: QueryHead, mask_logits: torch.Tensor, grid: Tuple[int, int], prob: float,
                       num_tokens: int) -> torch.Tensor:
        """(B, 1, N, N) boolean, True where attention is allowed: a query sees a patch only
        inside its predicted mask (logits > 0 at the patch grid); with probability 1 - prob
        a query's row is fully open again; every other pair is open."""
        Q = head.num_queries
        B, (h, w) = mask_logits.shape[0], grid
        inside = F.interpolate(mask_logits.detach(), size=(h, w), mode='bilinear', align_corners=False) > 0
        mask = torch.ones(B, num_tokens, num_tokens, dtype=torch.bool, device=mask_logits.device)
        mask[:, :Q, Q + 1:Q + 1 + h * w] = _drop_rows(inside.flatten(2), prob)   # (B, Q, h*w)
        return mask[:, None]

    def encode(self, backbone: ViT5, inputs: torch.Tensor) -> EncoderPass:
        """The blocks before the queries join: their output tokens (B, 1 + h*w + R, C) as the one tap,
        which only this decoder's :meth:`decode` reads (the rest of the pass is the decoder's)."""
        bb = backbone
        x, grid, rope = bb.embed(inputs, real_rope=bb.compile_cfg is not None)  # inductor: real RoPE
        run_block, _ = self._block_and_prediction(bb)
        use_cp = bb.with_cp and bb.training and torch.is_grad_enabled()
        for blk in bb.blocks[:self.first_block]:
            x = run_block(blk, x, rope, None, use_cp)
        return EncoderPass([x], grid, rope, tuple(inputs.shape[-2:]))

    def decode(self, backbone: ViT5, head: QueryHead, encoded: EncoderPass, supervise: bool,
               state: Optional[object] = None) -> MaskFeatures:
        """The queries join the tokens before the last ``head.num_blocks`` blocks, which run with the
        masked attention (training) and read a prediction at each through the final norm."""
        bb = backbone
        (x,), grid, rope = encoded.taps, encoded.grid, encoded.rope
        run_block, predict = self._block_and_prediction(bb)
        use_cp = bb.with_cp and supervise and torch.is_grad_enabled()
        x = torch.cat([self.queries(head, x.shape[0], state).to(x.dtype), x], dim=1)
        rope = None if rope is None else prepend_identity_rows(rope, head.num_queries)
        class_logits, mask_logits = [], []
        supervised_norm = bb.norm if self.supervise_through_norm else nn.Identity()
        for i, blk in enumerate(bb.blocks[self.first_block:]):
            attn_mask = None
            if supervise:
                cls, masks = predict(supervised_norm, head, x, grid)
                class_logits.append(cls)
                mask_logits.append(masks)
                prob = self.mask_probs[i]
                if prob > 0:
                    attn_mask = self.attention_mask(head, masks, grid, prob, x.shape[1])
            x = run_block(blk, x, rope, attn_mask, use_cp)
        cls, masks = predict(bb.norm, head, x, grid)
        class_logits.append(cls)
        mask_logits.append(masks)
        h, w = grid
        return MaskFeatures(class_logits, mask_logits, encoded.input_size, (h * bb.patch_size, w * bb.patch_size),
                            self.hand_on(x[:, :head.num_queries]))

    def queries(self, head: QueryHead, batch: int, state: Optional[object]) -> torch.Tensor:
        """The query tokens (B, Q, C) that join the tokens: the head's learned queries."""
        self.refuse_state(state)
        return head.queries.weight[None].expand(batch, -1, -1)

    def hand_on(self, output_queries: torch.Tensor) -> Optional[object]:
        """What the next call receives as ``state``, from the query tokens the last block put out: nothing."""
        return None


__all__ = ['EoMTDecoder']
