"""PMT's Plain Mask Decoder on a frozen encoder ("PMT: Plain Mask Transformer", EoMT's authors,
arXiv 2603.25398; tue-mps/pmt image/models/pmt.py and pmd.py).

EoMT runs its queries through the encoder's own last blocks, so it must fine-tune the encoder.
PMT keeps the encoder frozen and mimics those blocks in a decoder of its own:

1. the encoder's normed tokens (its final norm) at a few ``interaction_indices``, each through
   its own BatchNorm over channels (``lateral_bn``), then ``x + MLP(x)`` (``lateral_projection``
   'mlp': C -> C/2 -> C with GELU; ``residual_projection``) times a learned per-channel scaler;
   the levels are summed;
2. the head's queries are prepended, and ``num_blocks`` DINOv3-style blocks (LayerNorm, no key
   bias, LayerScale from 1, a GELU MLP of ``hidden_dims``) run with EoMT's masked attention and
   its annealing (the decoder's ``mask_probs``); every prediction is read through the decoder's LayerNorm
   by the head (EoMT's class head, mask MLP and upscaling);
3. RoPE: the encoder's own tables where it is DINOv3, PMT's DINOv3-style tables otherwise
   (``DINOv3ViTRopePositionEmbedding`` in models/layers.py: theta 100, and while training one
   log-uniform coordinate scale in [1/2, 2] per step).

Token order in the blocks is ``[queries (Q), cls, patches (h*w), registers (R)]`` as in
:mod:`.eomt` (upstream keeps the encoder's prefix tokens first; attention does not depend on
the order, and only the patches are rotated). Training supervises the prediction before every
block and after the last; at inference the masks are open and one prediction is made, as EoMT.
"""
from typing import Optional, Sequence, Tuple

import torch
import torch.nn as nn
from mmcv.cnn import build_norm_layer
from mmseg.registry import MODELS

from ..backbones.vit5 import ViT5
from ..layers import Block, Dinov3Rope, prepend_identity_rows
from .core import EncoderPass, MaskDecoder, MaskFeatures, QueryHead
from .eomt import EoMTDecoder, _predict

LATERAL_PROJECTIONS = ('mlp', 'linear', None)


@MODELS.register_module()
class PMTDecoder(MaskDecoder):
    """The Plain Mask Decoder (see the module docstring).

    Args:
        embed_dims: the encoder's width (the decoder keeps it).
        num_heads: attention heads of the decoder's blocks (PMT: the encoder's).
        interaction_indices: encoder blocks whose normed tokens are read (PMT-L: 5, 11, 17, 23).
        num_blocks: the decoder's blocks; the head's ``num_blocks`` (its annealed masks) must agree.
        hidden_dims: the MLP width of the decoder's blocks (``hidden_dim``; PMT's recipes: the width).
        lateral_projection: ``'mlp'``, ``'linear'`` or ``None`` (identity).
        residual_projection: add each level to its projection.
        norm_cfg: the lateral norms (PMT: ``SyncBatchNorm``; ``None``: none, ``lateral_bn=False``).
        rope: ``'auto'`` (the encoder's tables where it is DINOv3, the decoder's own otherwise),
            ``'encoder'``, ``'own'`` or ``None``.
        rope_train_rescale: the own tables' training scale (PMT: 2.0).
    """

    def __init__(self, embed_dims: int, num_heads: int, interaction_indices: Sequence[int], num_blocks: int = 6,
                 hidden_dims: Optional[int] = None, lateral_projection: Optional[str] = 'mlp',
                 residual_projection: bool = True, norm_cfg: Optional[dict] = dict(type='SyncBN', requires_grad=True),
                 rope: Optional[str] = 'auto', rope_train_rescale: Optional[float] = 2.0):
        super().__init__()
        if lateral_projection not in LATERAL_PROJECTIONS:
            raise ValueError(f'PMTDecoder: lateral_projection must be one of {LATERAL_PROJECTIONS}, '
                             f'got {lateral_projection!r}')
        if rope not in ('auto', 'encoder', 'own', None):
            raise ValueError(f"PMTDecoder: rope must be 'auto', 'encoder', 'own' or None, got {rope!r}")
        if embed_dims % num_heads:
            raise ValueError(f'PMTDecoder: embed_dims={embed_dims} is not divisible by num_heads={num_heads}')
        C = self.embed_dims = embed_dims
        self.num_heads = num_heads
        self.interaction_indices = tuple(interaction_indices)
        if not self.interaction_indices:
            raise ValueError('PMTDecoder: interaction_indices must name at least one encoder block')
        self.residual_projection = residual_projection
        self.rope_rule, self.rope_train_rescale = rope, rope_train_rescale
        levels = len(self.interaction_indices)
        # a (B, C, N, 1) map: BatchNorm over channels of every token, as upstream's BN on (B, C, N)
        self.lateral_norms = nn.ModuleList(
            [build_norm_layer(norm_cfg, C)[1] if norm_cfg else nn.Identity() for _ in range(levels)])
        if lateral_projection == 'mlp':
            self.lateral = nn.ModuleList(
                [nn.Sequential(nn.Linear(C, C // 2), nn.GELU(), nn.Linear(C // 2, C)) for _ in range(levels)])
        elif lateral_projection == 'linear':
            self.lateral = nn.ModuleList([nn.Linear(C, C) for _ in range(levels)])
        else:
            self.lateral = nn.ModuleList([nn.Identity() for _ in range(levels)])
        self.scalers = nn.ParameterList([nn.Parameter(torch.ones(C)) for _ in range(levels)])
        hidden = hidden_dims or 4 * C
        # DINOv3ViTLayer (upstream models/layers.py): LayerNorm eps 1e-5, q and v biases, LayerScale 1.0
        self.blocks = nn.ModuleList([
            Block(C, num_heads, mlp_ratio=hidden / C, mlp_type='mlp', qkv_bias='qv', qk_norm=False,
                  norm_type='layernorm', norm_eps=1e-5, layer_scale_init=1.0) for _ in range(num_blocks)])
        self.norm = nn.LayerNorm(C)
        self.rope = None  # the own tables, made by check_parts once the encoder's registers are known
        self.uses_encoder_rope = False

    def check_parts(self, backbone: ViT5, head: QueryHead) -> None:
        super().check_parts(backbone, head)
        if backbone.embed_dims != self.embed_dims:
            raise ValueError(f'model.decoder.embed_dims={self.embed_dims} differs from the backbone width '
                             f'{backbone.embed_dims}')
        if head.num_blocks != len(self.blocks):
            raise ValueError(f'decode_head.num_blocks={head.num_blocks} must equal the decoder\'s blocks '
                             f'({len(self.blocks)}): the head anneals one mask per block')
        bad = [i for i in self.interaction_indices if not 0 <= i < backbone.num_layers]
        if bad:
            raise ValueError(f'model.decoder.interaction_indices {bad} are not blocks of the backbone '
                             f'(0..{backbone.num_layers - 1})')
        self.mask_probs = [1.0] * len(self.blocks)
        encoder_rope = backbone.settings['use_rope'] == 'dinov3'
        if self.rope_rule == 'encoder' and not encoder_rope:
            raise ValueError("model.decoder.rope='encoder' needs a DINOv3 backbone (use_rope='dinov3')")
        own = self.rope_rule == 'own' or (self.rope_rule == 'auto' and not encoder_rope)
        self.uses_encoder_rope = self.rope_rule is not None and not own
        self.rope = (Dinov3Rope(self.embed_dims // self.num_heads, theta=100., num_registers=backbone.num_registers,
                                train_rescale=self.rope_train_rescale) if own else None)

    attention_mask = staticmethod(EoMTDecoder.attention_mask)

    def tables(self, grid: Tuple[int, int], encoder_rope: Optional[torch.Tensor], device,
               dtype) -> Optional[torch.Tensor]:
        """The RoPE table of the decoder's tokens (before the queries): the encoder's, or the decoder's own."""
        if self.rope is not None:
            return self.rope(grid, device, dtype)
        return encoder_rope if self.uses_encoder_rope else None

    @property
    def tap_indices(self) -> Tuple[int, ...]:
        return self.interaction_indices

    def decode(self, backbone: ViT5, head: QueryHead, encoded: EncoderPass, supervise: bool,
               state: Optional[object] = None) -> MaskFeatures:
        """The encoder's normed tokens at the interaction indices (each (B, 1 + h*w + R, C)) -> the
        head's predictions."""
        self.refuse_state(state)
        levels, grid = encoded.taps, encoded.grid
        if len(levels) != len(self.interaction_indices):
            raise ValueError(f'PMTDecoder: {len(levels)} taps given for {len(self.interaction_indices)} interaction '
                             f'indices')
        rope = self.tables(grid, encoded.rope, levels[0].device, levels[0].dtype)
        x = 0
        for norm, lateral, scaler, level in zip(self.lateral_norms, self.lateral, self.scalers, levels):
            level = norm(level.transpose(1, 2).unsqueeze(-1)).squeeze(-1).transpose(1, 2)   # (B, N, C)
            x = x + (level + lateral(level) if self.residual_projection else lateral(level)) * scaler
        B, Q = x.shape[0], head.num_queries
        x = torch.cat([head.queries.weight[None].expand(B, -1, -1).to(x.dtype), x], dim=1)
        rope = None if rope is None else prepend_identity_rows(rope, Q)
        class_logits, mask_logits = [], []
        for i, blk in enumerate(self.blocks):
            attn_mask = None
            if supervise:
                cls, masks = _predict(self.norm, head, x, grid)
                class_logits.append(cls)
                mask_logits.append(masks)
                if self.mask_probs[i] > 0:
                    attn_mask = self.attention_mask(head, masks, grid, self.mask_probs[i], x.shape[1])
            x = blk(x, rope, attn_mask)
        cls, masks = _predict(self.norm, head, x, grid)
        class_logits.append(cls)
        mask_logits.append(masks)
        h, w = grid
        p = backbone.patch_size
        return MaskFeatures(class_logits, mask_logits, encoded.input_size, (h * p, w * p))


__all__ = ['PMTDecoder']
