"""Building blocks of the ViT-5 / DeiT-III backbone (arXiv 2602.08071).

Shapes: B batch, N tokens, C channels, h heads, D = C / h head channels.
"""
import math
from collections import OrderedDict
from functools import partial
from typing import Optional, Tuple, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
from timm.layers import DropPath, Mlp, SwiGLU, resample_abs_pos_embed
from timm.layers.pos_embed_sincos import RotaryEmbeddingCat, freq_bands
from torch.utils.checkpoint import checkpoint


class _RMSNormFunction(torch.autograd.Function):
    """RMSNorm with a hand-written backward.

    Autograd through the elementwise forward records five ops and replays each in
    backward; this keeps x and the (.., 1) inverse RMS and computes the input gradient
    in one pass. ``tools/selfcheck.py`` times it against the fused kernel on the device
    (``rms_norm_exact_ms`` / ``rms_norm_fused_ms``; docs/gpus.md has the figures).
    """

    @staticmethod
    def forward(ctx, x, weight, eps):
        x32 = x.float()
        rstd = torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
        y = (x32 * rstd).to(x.dtype)
        ctx.save_for_backward(x, rstd, weight)
        return y * weight

    @staticmethod
    def backward(ctx, grad):
        x, rstd, weight = ctx.saved_tensors
        y32 = x.float() * rstd
        grad_weight = None
        if ctx.needs_input_grad[1]:
            grad_weight = (grad * y32.to(x.dtype)).flatten(0, -2).sum(0).to(weight.dtype)
        grad_x = None
        if ctx.needs_input_grad[0]:
            g = (grad * weight).float()
            # d/dx of x * rstd(x): rstd * (g - y * mean(g * y)) over the normalised axis
            grad_x = (rstd * (g - y32 * (g * y32).mean(-1, keepdim=True))).to(x.dtype)
        return grad_x, grad_weight, None


RMS_NORM_IMPLS = ('auto', 'exact', 'fused')


class RMSNorm(nn.Module):
    """RMSNorm, computed one of two ways (``impl``) with one dtype policy, the authors':
    normalise in float32, round to the input's dtype, then multiply by the (float32)
    weight. So a float32 input gives float32, and under autocast a bf16/fp16 input gives
    float32 too (the weight is never rounded), whichever way it is computed.

    - ``'exact'``: written by hand (torch's and timm's RMSNorm multiply by the weight
      before casting back, a different rounding); its one-pass backward is the faster of
      the two on CPU (see _RMSNormFunction).
    - ``'fused'``: ``torch.nn.functional.rms_norm`` without a weight (one fused kernel
      each way on CUDA, float32 inside), then the multiply.
    - ``'auto'`` (default): ``'exact'`` on CPU, ``'fused'`` on other devices.

    The two agree to float rounding in every dtype (tests/test_models_backbone.py).
    """

    def __init__(self, dim: int, eps: float = 1e-6, impl: str = 'auto'):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.impl = check_rms_norm_impl(impl)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        impl = self.impl if self.impl != 'auto' else ('exact' if x.device.type == 'cpu' else 'fused')
        if impl == 'fused':
            # autocast must not upcast the input first (that would skip the rounding)
            with torch.autocast(x.device.type, enabled=False):
                return F.rms_norm(x, self.weight.shape, None, self.eps) * self.weight
        return _RMSNormFunction.apply(x, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f'{self.weight.shape[0]}, eps={self.eps}, impl={self.impl}'


def check_rms_norm_impl(impl: str) -> str:
    if impl not in RMS_NORM_IMPLS:
        raise ValueError(f'rms_norm_impl must be one of {RMS_NORM_IMPLS}, got {impl!r}')
    return impl


def check_qkv_bias(qkv_bias) -> None:
    if not (isinstance(qkv_bias, bool) or qkv_bias == 'qv'):
        raise ValueError(f"qkv_bias must be False, True or 'qv' (query and value only, as DINOv3), "
                         f"got {qkv_bias!r}")


def build_norm(norm_type: str, dim: int, eps: float = 1e-6) -> nn.Module:
    if norm_type == 'rmsnorm':
        return RMSNorm(dim, eps=eps)
    if norm_type == 'layernorm':
        return nn.LayerNorm(dim, eps=eps)
    raise ValueError(f"norm_type must be 'rmsnorm' or 'layernorm', got {norm_type!r}")


class Attention(nn.Module):
    """Multi-head self-attention with optional QK-norm and rotary embedding.

    ``rope`` is one (N, D/2) complex table (cos + i sin per channel pair) for the whole
    token sequence, built once per grid by the backbone and shared by all blocks; tokens
    that are not rotated (cls) carry 1 + 0i.
    """

    def __init__(self, dim: int, num_heads: int, qkv_bias: Union[bool, str] = False, proj_bias: bool = True,
                 qk_norm: bool = True, norm_type: str = 'rmsnorm', norm_eps: float = 1e-6,
                 attn_drop: float = 0., proj_drop: float = 0.):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        check_qkv_bias(qkv_bias)
        self.qkv = nn.Linear(dim, dim * 3, bias=bool(qkv_bias))
        if qkv_bias == 'qv':
            # DINOv3's LinearKMaskedBias: the key third of the bias is multiplied by 0. With
            # RoPE a key bias is no constant shift of the scores, so it is kept out.
            self.register_buffer('qkv_bias_mask', torch.ones(dim * 3).index_fill_(0, torch.arange(dim, 2 * dim), 0.),
                                 persistent=False)
        else:
            self.qkv_bias_mask = None
        self.q_norm = build_norm(norm_type, self.head_dim, norm_eps) if qk_norm else nn.Identity()
        self.k_norm = build_norm(norm_type, self.head_dim, norm_eps) if qk_norm else nn.Identity()
        self.attn_drop = attn_drop
        self.proj = nn.Linear(dim, dim, bias=proj_bias)
        self.proj_drop = nn.Dropout(proj_drop)

    def _qkv(self, x: torch.Tensor, rope: Optional[torch.Tensor]):
        B, N, C = x.shape
        qkv = self.qkv(x) if self.qkv_bias_mask is None else F.linear(
            x, self.qkv.weight, self.qkv.bias * self.qkv_bias_mask.to(self.qkv.bias.dtype))
        # (B, N, 3C) -> 3 x (B, h, N, D)
        q, k, v = qkv.reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        q, k = self.q_norm(q), self.k_norm(k)  # the spec normalises before rotating
        if rope is not None:
            q, k = apply_rope(q, rope), apply_rope(k, rope)
        return q, k, v

    def attention_rows(self, x: torch.Tensor, queries, rope: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Softmax attention of the tokens at index ``queries`` over all tokens,
        (B, h, len(queries), N), in float32: what the fused kernel computes but never
        returns, for a few rows only (no N x N matrix)."""
        q, k, _ = self._qkv(x, rope)
        scores = q[:, :, list(queries)].float() @ k.float().transpose(-2, -1) * self.head_dim ** -0.5
        return scores.softmax(dim=-1)

    def forward(self, x: torch.Tensor, rope: Optional[torch.Tensor] = None,
                attn_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``attn_mask``: boolean (B, 1, N, N), True where a token may attend; ``None`` (every
        path but EoMT's masked training blocks) keeps the fused kernels."""
        B, N, C = x.shape
        q, k, v = self._qkv(x, rope)
        x = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, dropout_p=self.attn_drop if self.training else 0.)
        x = x.transpose(1, 2).reshape(B, N, C)
        return self.proj_drop(self.proj(x))


class Block(nn.Module):
    """Pre-norm transformer block: x + drop_path(gamma * f(norm(x))), twice.

    ``sandwich_norm`` adds a norm on each branch's output before the residual add
    (Gemma 2/3's post-attention / post-feed-forward norms); ``linear_bias=False``
    removes the biases of the attention projection and the MLP (as LLaMA and Gemma).
    """

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float = 4., mlp_type: str = 'mlp',
                 qkv_bias: Union[bool, str] = False, qk_norm: bool = True, norm_type: str = 'rmsnorm',
                 norm_eps: float = 1e-6, layer_scale_init: Optional[float] = 1e-4,
                 sandwich_norm: bool = False, linear_bias: bool = True,
                 drop: float = 0., attn_drop: float = 0., drop_path: float = 0.):
        super().__init__()
        self.norm1 = build_norm(norm_type, dim, norm_eps)
        self.attn = Attention(dim, num_heads, qkv_bias=qkv_bias, proj_bias=linear_bias, qk_norm=qk_norm,
                              norm_type=norm_type, norm_eps=norm_eps,
                              attn_drop=attn_drop, proj_drop=drop)
        self.norm2 = build_norm(norm_type, dim, norm_eps)
        if sandwich_norm:
            self.post_attn_norm = build_norm(norm_type, dim, norm_eps)
            self.post_mlp_norm = build_norm(norm_type, dim, norm_eps)
        else:
            self.post_attn_norm = self.post_mlp_norm = nn.Identity()
        hidden = int(dim * mlp_ratio)
        if mlp_type == 'mlp':
            self.mlp = Mlp(dim, hidden, act_layer=nn.GELU, bias=linear_bias, drop=drop)
        elif mlp_type in ('swiglu', 'geglu'):
            # 2/3 of the hidden width keeps the parameter count of the plain MLP (as LLaMA).
            # GeGLU is Gemma's gate: tanh-approximated GELU in place of SiLU.
            act = nn.SiLU if mlp_type == 'swiglu' else partial(nn.GELU, approximate='tanh')
            self.mlp = SwiGLU(dim, int(hidden * 2 / 3), act_layer=act, bias=linear_bias, drop=drop)
        else:
            raise ValueError(f"mlp_type must be 'mlp', 'swiglu' or 'geglu', got {mlp_type!r}")
        if layer_scale_init:
            # The authors' names, so their checkpoints load without renaming.
            self.gamma_1 = nn.Parameter(torch.full((dim,), float(layer_scale_init)))
            self.gamma_2 = nn.Parameter(torch.full((dim,), float(layer_scale_init)))
        else:
            self.gamma_1 = self.gamma_2 = None
        self.drop_path = DropPath(drop_path) if drop_path > 0. else nn.Identity()

    def _scale(self, x: torch.Tensor, gamma: Optional[torch.Tensor]) -> torch.Tensor:
        return x if gamma is None else x * gamma

    def forward(self, x: torch.Tensor, rope: Optional[torch.Tensor] = None,
                attn_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        x = x + self.drop_path(self._scale(self.post_attn_norm(self.attn(self.norm1(x), rope, attn_mask)),
                                           self.gamma_1))
        x = x + self.drop_path(self._scale(self.post_mlp_norm(self.mlp(self.norm2(x))), self.gamma_2))
        return x

    def forward_cp(self, x: torch.Tensor, rope: Optional[torch.Tensor] = None,
                   attn_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Activation checkpointing: recompute this block in backward to save memory."""
        return checkpoint(self.forward, x, rope, attn_mask, use_reentrant=False)


def resize_pos_embed(pos: torch.Tensor, old_grid: Tuple[int, int], new_grid: Tuple[int, int],
                     mode: str = 'bicubic', offset: float = 0., antialias: bool = False) -> torch.Tensor:
    """A (1, h*w, C) position embedding resized as a (C, h, w) image in float32, unchanged at
    its own grid. ``offset`` 0: to the output size (timm's ``resample_abs_pos_embed``, as the
    ViT-5 and DeiT-III fine-tuning and DINOv2's _reg models); ``offset`` > 0: by the scale
    factors (new + offset) / old, as Meta's DINOv2 resizes its models without registers
    (``interpolate_offset=0.1``), which timm does not reproduce."""
    old_grid, new_grid = tuple(old_grid), tuple(new_grid)
    if old_grid == new_grid:
        return pos
    if not offset:
        return resample_abs_pos_embed(pos, new_size=list(new_grid), old_size=list(old_grid), num_prefix_tokens=0,
                                      interpolation=mode, antialias=antialias)
    C = pos.shape[-1]
    image = pos.float().reshape(1, *old_grid, C).permute(0, 3, 1, 2)                     # (1, C, h0, w0)
    scale = ((new_grid[0] + offset) / old_grid[0], (new_grid[1] + offset) / old_grid[1])
    image = F.interpolate(image, scale_factor=scale, mode=mode, antialias=antialias)
    if tuple(image.shape[-2:]) != new_grid:
        raise ValueError(f'resizing pos_embed from {old_grid} by {scale} gave {tuple(image.shape[-2:])}, '
                         f'not {new_grid}')
    return image.permute(0, 2, 3, 1).reshape(1, -1, C).to(pos.dtype)


def apply_rope(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Rotate the adjacent channel pairs of x (..., N, D) by a (N, D/2) table: complex
    (cos + i sin), or real (N, D/2, 2) holding [cos, sin].

    The same rotation as timm's ``apply_rot_embed_cat`` (the benchmark's reference path
    uses that one and the tests compare). The complex table is one multiply, faster than
    timm's rotate-half and than the real form in eager fwd+bwd on CPU (docs/performance.md),
    so eager runs use it; inductor has no code generation for complex ops and ONNX has no
    complex type, so compiled and exported graphs get the real table (see
    :func:`tracing_for_graph`).
    """
    if table.is_complex():
        pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(pairs * table).flatten(-2).to(x.dtype)
    a, b = x.float().unflatten(-1, (-1, 2)).unbind(-1)       # (..., N, D/2) each
    cos, sin = table.unbind(-1)                              # (N, D/2) each
    return torch.stack((a * cos - b * sin, b * cos + a * sin), dim=-1).flatten(-2).to(x.dtype)


def prepend_identity_rows(table: torch.Tensor, n: int) -> torch.Tensor:
    """A RoPE table (complex (N, D/2), or real (N, D/2, 2)) with ``n`` rows in front that
    rotate by angle 0: cos 1, sin 0, so those tokens come out exactly as they went in."""
    if table.is_complex():
        return torch.cat([torch.ones(n, table.shape[1], dtype=table.dtype, device=table.device), table])
    identity = torch.zeros(n, *table.shape[1:], dtype=table.dtype, device=table.device)
    identity[..., 0] = 1
    return torch.cat([identity, table])


def tracing_for_graph() -> bool:
    """True while torch.compile, torch.export or the ONNX exporter traces the model."""
    return bool(torch.compiler.is_compiling() or torch.compiler.is_exporting() or torch.onnx.is_in_onnx_export())


def sincos_to_pairs(table: torch.Tensor) -> torch.Tensor:
    """timm's (N, 2D) [sin, cos] table (each angle repeated for its pair) -> (N, D/2, 2) [cos, sin]."""
    sin, cos = table.chunk(2, dim=-1)
    return torch.stack((cos[:, 0::2], sin[:, 0::2]), dim=-1).float()


def rope_frequencies(head_dim: int, theta: float) -> torch.Tensor:
    """f_k = theta ** -(2k / (D/2)), k < D/4: the values stored as ``attn.rope.freqs``."""
    return freq_bands(head_dim // 4, temperature=float(theta), step=1)


def dinov3_periods(head_dim: int, theta: float) -> torch.Tensor:
    """p_k = theta ** (2k / (D/2)), k < D/4: the values DINOv3 stores as ``rope_embed.periods``."""
    return theta ** (2 * torch.arange(head_dim // 4, dtype=torch.float32) / (head_dim // 2))


class CachedRopeTables(nn.Module):
    """Keeps one rotary table per (grid, device, dtype): blocks and later calls at the same
    input size reuse it instead of recomputing sines. Subclasses give ``_build``: timm's
    (N, 2D) [sin, cos] layout for the sequence ``[cls] + patches + registers``."""

    max_cached = 8

    def __init__(self, head_dim: int, num_registers: int = 0):
        super().__init__()
        if head_dim % 4:
            raise ValueError(f'2D RoPE needs a head dim divisible by 4, got {head_dim}')
        self.head_dim = head_dim
        self.num_registers = num_registers
        self._tables: 'OrderedDict[tuple, torch.Tensor]' = OrderedDict()
        self.num_builds = 0  # read by tests and the benchmark

    def _identity_rows(self, n: int, device) -> torch.Tensor:
        return torch.cat([torch.zeros(n, self.head_dim, device=device),
                          torch.ones(n, self.head_dim, device=device)], dim=1)

    def table(self, grid: Tuple[int, int], device, real: bool = False) -> torch.Tensor:
        """float32 whatever the activations' dtype (rotations are done in float32); the real
        table is made without complex ops, so it can be made inside a traced graph."""
        table = sincos_to_pairs(self._build(tuple(grid), device))
        return table if real else torch.view_as_complex(table)

    def forward(self, grid: Tuple[int, int], device: torch.device, dtype: torch.dtype,
                real: bool = False) -> torch.Tensor:
        """The table for ``grid``: complex (N, D/2), or with ``real`` (N, D/2, 2) [cos, sin]
        for graphs that cannot hold complex tensors (compile, ONNX export)."""
        if tracing_for_graph():
            # part of the graph (the grid may be symbolic), not of the cache
            return self.table(grid, device, real=True)
        key = (tuple(grid), device, dtype, real)
        table = self._tables.get(key)
        if table is None:
            # Built outside inference mode so a table first made by a test pass can
            # still be saved for backward by a later training step.
            with torch.inference_mode(False), torch.no_grad():
                table = self.table(grid, device, real)
            self.num_builds += 1
            self._tables[key] = table
            if len(self._tables) > self.max_cached:
                self._tables.popitem(last=False)
        else:
            self._tables.move_to_end(key)
        return table


class SequenceRope(CachedRopeTables):
    """ViT-5's rotary tables (``use_rope=True``).

    The 2D rotations themselves are timm's ``RotaryEmbeddingCat``, which equals the
    authors' RoPE exactly (tests/test_models_backbone.py holds it to the paper's reference); the
    patch positions are squeezed into ``ref_grid`` per axis (``ref_grid=None``: integer positions
    instead).
    """

    def __init__(self, head_dim: int, theta: float = 10000., ref_grid: Optional[Tuple[int, int]] = (14, 14),
                 num_registers: int = 0, register_rope: bool = True, register_theta: float = 100.):
        super().__init__(head_dim, num_registers)
        self.ref_grid = None if ref_grid is None else tuple(ref_grid)
        self.rope = RotaryEmbeddingCat(head_dim, in_pixels=False, temperature=theta,
                                       ref_feat_shape=self.ref_grid)
        self.register_grid = None
        if num_registers and register_rope:
            side = math.isqrt(num_registers)
            if side * side != num_registers:
                raise ValueError(f'register RoPE places registers on a square grid; '
                                 f'num_registers={num_registers} is not a square')
            self.register_grid = (side, side)
            self.rope_reg = RotaryEmbeddingCat(head_dim, in_pixels=False, temperature=register_theta,
                                               ref_feat_shape=self.register_grid)

    def _build(self, grid: Tuple[int, int], device) -> torch.Tensor:
        parts = [self._identity_rows(1, device), self.rope.get_embed(shape=list(grid)).to(device)]
        if self.register_grid is not None:
            parts.append(self.rope_reg.get_embed(shape=list(self.register_grid)).to(device))
        elif self.num_registers:
            parts.append(self._identity_rows(self.num_registers, device))
        return torch.cat(parts, dim=0)


class Dinov3Rope(CachedRopeTables):
    """DINOv3's rotary tables (``use_rope='dinov3'``; Meta's ``RopePositionEmbedding`` with
    ``normalize_coords='separate'``): patch centres mapped to [-1, 1] per axis, angle
    2 pi coord / period, periods ``theta ** (2k / (D/2))``; cls and registers not rotated.

    DINOv3 pairs channel i with i + D/2 (rotate-half); this package rotates adjacent pairs,
    so the checkpoint converters interleave the q and k rows of each head once
    (:func:`vit5seg.models.dinov_layouts.interleave_rope_halves`), which leaves q.k unchanged.
    ``train_rescale``: while training, all coordinates are multiplied by one log-uniform
    factor in [1/r, r] per forward (Meta's and transformers' ``rescale_coords``, which
    EoMT's DINOv3 runs train with); never at evaluation.
    """

    def __init__(self, head_dim: int, theta: float = 100., num_registers: int = 0,
                 train_rescale: Optional[float] = None):
        super().__init__(head_dim, num_registers)
        self.theta = float(theta)
        self.train_rescale = train_rescale
        self.register_buffer('periods', dinov3_periods(head_dim, self.theta), persistent=False)

    def _angles(self, grid: Tuple[int, int], device, scale: Optional[torch.Tensor] = None) -> torch.Tensor:
        """(h*w, D/2): the h angles of each period, then the w angles."""
        h, w = grid
        coords_h = torch.arange(0.5, h, device=device, dtype=torch.float32) / h
        coords_w = torch.arange(0.5, w, device=device, dtype=torch.float32) / w
        coords = torch.stack(torch.meshgrid(coords_h, coords_w, indexing='ij'), dim=-1).flatten(0, 1)
        coords = 2.0 * coords - 1.0                                          # (h*w, 2) in [-1, 1]
        if scale is not None:
            coords = coords * scale
        periods = self.periods.to(device)
        return (2 * math.pi * coords[:, :, None] / periods[None, None, :]).flatten(1, 2)

    def _build(self, grid: Tuple[int, int], device, scale: Optional[torch.Tensor] = None) -> torch.Tensor:
        angles = self._angles(grid, device, scale).repeat_interleave(2, dim=-1)   # (h*w, D), per pair
        parts = [self._identity_rows(1, device), torch.cat([angles.sin(), angles.cos()], dim=1)]
        if self.num_registers:
            parts.append(self._identity_rows(self.num_registers, device))
        return torch.cat(parts, dim=0)

    def forward(self, grid: Tuple[int, int], device: torch.device, dtype: torch.dtype,
                real: bool = False) -> torch.Tensor:
        if not (self.training and self.train_rescale):
            return super().forward(grid, device, dtype, real)
        # a new random scale each step: never cached
        log_r = math.log(self.train_rescale)
        scale = torch.empty(1, device=device).uniform_(-log_r, log_r).exp()
        table = sincos_to_pairs(self._build(tuple(grid), device, scale))
        return table if real or tracing_for_graph() else torch.view_as_complex(table)


def build_rope(rule: Union[bool, str], head_dim: int, theta: float, ref_grid, num_registers: int,
               register_rope: bool, register_theta: float, train_rescale: Optional[float]):
    """The rotary tables of a ``use_rope`` value: ``False`` none, ``True`` ViT-5's, ``'dinov3'``."""
    if rule is False:
        return None
    if rule is True:
        return SequenceRope(head_dim, theta=theta, ref_grid=ref_grid, num_registers=num_registers,
                            register_rope=register_rope, register_theta=register_theta)
    if rule == 'dinov3':
        if register_rope:
            raise ValueError("use_rope='dinov3' does not rotate registers: set register_rope=False")
        return Dinov3Rope(head_dim, theta=theta, num_registers=num_registers, train_rescale=train_rescale)
    raise ValueError(f"use_rope must be False, True (ViT-5's RoPE) or 'dinov3', got {rule!r}")
