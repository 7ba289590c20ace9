"""ViT-5 (arXiv 2602.08071), its DeiT-III baseline, DINOv2 and DINOv3 as one mmseg backbone.

The constructor switches are the paper's ablation axes; the named presets below pick
the published settings (DINOv2 and DINOv3 are values of the same switches). See
the paper (arXiv 2602.08071) for the exact architecture, facebookresearch/dinov2 and dinov3
(``models/vision_transformer.py``) for DINO's.
"""
import contextlib
from typing import Dict, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn
from mmengine.model import BaseModule
from mmengine.model.weight_init import trunc_normal_
from mmseg.registry import MODELS
from timm.layers import PatchEmbed

from ...utils.config_values import defaults_of, plain
from ..layers import Block, RMSNorm, build_norm, build_rope, check_rms_norm_impl, resize_pos_embed

# The ablation axes of the paper, with ViT-5's published choice for each.
VIT5_SWITCHES = dict(norm_type='rmsnorm', use_rope=True, num_registers=4, register_rope=True,
                     qk_norm=True, layer_scale_init=1e-4, mlp_type='mlp', qkv_bias=False,
                     sandwich_norm=False, linear_bias=True)
# DeiT-III is the same skeleton with LayerNorm, qkv bias and none of the ViT-5 extras.
DEIT3_SWITCHES = dict(norm_type='layernorm', use_rope=False, num_registers=0, register_rope=False,
                      qk_norm=False, layer_scale_init=1e-4, mlp_type='mlp', qkv_bias=True,
                      sandwich_norm=False, linear_bias=True)
# What a preset may leave out: the ViT-5 / DeiT-III geometry and embeddings.
GEOMETRY_DEFAULTS = dict(patch_size=16, img_size=224, mlp_ratio=4., norm_eps=1e-6, rope_theta=10000.,
                         abs_pos_embed=True, interpolate_offset=0., interpolate_antialias=False,
                         rope_train_rescale=None)
# DINOv2 (Meta's hub models, facebookresearch/dinov2 dinov2/hub/backbones.py): patch 14 at 518, a learned pos_embed
# resized as Meta resizes it, LayerScale (hub init 1.0), LayerNorm 1e-6, qkv bias.
DINOV2_SWITCHES = dict(DEIT3_SWITCHES, layer_scale_init=1.0, patch_size=14, img_size=518,
                       interpolate_offset=0.1, interpolate_antialias=False)
# The _reg models resize to the output size, with antialias; 4 registers without positions.
DINOV2_REG4_SWITCHES = dict(DINOV2_SWITCHES, num_registers=4, interpolate_offset=0., interpolate_antialias=True)
# DINOv3 (dinov3/hub/backbones.py): no learned positions, its own RoPE (base 100) on the
# patches, 4 storage tokens, LayerScale 1e-5, LayerNorm 1e-5, the key bias masked.
DINOV3_SWITCHES = dict(DEIT3_SWITCHES, use_rope='dinov3', rope_theta=100., num_registers=4, layer_scale_init=1e-5,
                       qkv_bias='qv', norm_eps=1e-5, abs_pos_embed=False, rope_train_rescale=2.)


def _sizes(width, depth, heads, **more):
    return dict(embed_dims=width, num_layers=depth, num_heads=heads, **more)


ARCH_PRESETS: Dict[str, dict] = {
    'vit5-small': dict(_sizes(384, 12, 6), **VIT5_SWITCHES),
    'vit5-base': dict(_sizes(768, 12, 12), **VIT5_SWITCHES),
    'vit5-large': dict(_sizes(1024, 24, 16), **VIT5_SWITCHES),
    'vit5-xlarge': dict(_sizes(1152, 28, 16), **VIT5_SWITCHES),
    'deit3-small': dict(_sizes(384, 12, 6), **DEIT3_SWITCHES),
    'deit3-base': dict(_sizes(768, 12, 12), **DEIT3_SWITCHES),
    'deit3-large': dict(_sizes(1024, 24, 16), **DEIT3_SWITCHES),
}
for _name, _size in (('small', _sizes(384, 12, 6)), ('base', _sizes(768, 12, 12)), ('large', _sizes(1024, 24, 16)),
                     ('giant', _sizes(1536, 40, 24, mlp_type='swiglu'))):  # ViT-g: Meta's fused SwiGLU
    ARCH_PRESETS[f'dinov2-{_name}'] = {**DINOV2_SWITCHES, **_size}
    ARCH_PRESETS[f'dinov2-{_name}-reg4'] = {**DINOV2_REG4_SWITCHES, **_size}
for _name, _size in (('small', _sizes(384, 12, 6)), ('small-plus', _sizes(384, 12, 6, mlp_type='swiglu', mlp_ratio=6.)),
                     ('base', _sizes(768, 12, 12)), ('large', _sizes(1024, 24, 16)),
                     ('huge-plus', _sizes(1280, 32, 20, mlp_type='swiglu', mlp_ratio=6.))):
    ARCH_PRESETS[f'dinov3-{_name}'] = {**DINOV3_SWITCHES, **_size}
_SIZE_KEYS = ('embed_dims', 'num_layers', 'num_heads')


def resolve_arch(arch: Union[str, dict], **overrides) -> dict:
    """Preset (by name, or a dict of sizes on top of ViT-5's switches) + explicit overrides;
    every key of GEOMETRY_DEFAULTS filled in."""
    if isinstance(arch, str):
        if arch not in ARCH_PRESETS:
            raise ValueError(f'unknown arch {arch!r}; choose one of {sorted(ARCH_PRESETS)} '
                             f'or pass a dict with {list(_SIZE_KEYS)}')
        settings = {**GEOMETRY_DEFAULTS, **ARCH_PRESETS[arch]}
    elif isinstance(arch, dict):
        missing = [k for k in _SIZE_KEYS if k not in arch]
        if missing:
            raise ValueError(f'arch dict {arch} lacks {missing}')
        settings = {**GEOMETRY_DEFAULTS, **VIT5_SWITCHES, **arch}
    else:
        raise TypeError(f'arch must be a preset name or a dict, got {type(arch).__name__}')
    settings.update({k: v for k, v in overrides.items() if v is not None})
    return settings


def _pair(x) -> Tuple[int, int]:
    return (x, x) if isinstance(x, int) else tuple(x)


@MODELS.register_module()
class ViT5(BaseModule):
    """ViT-5 / DeiT-III / DINOv2 / DINOv3 plain vision transformer with multi-level taps for mmseg heads.

    Args:
        arch: preset name (``vit5-small|base|large|xlarge``, ``deit3-small|base|large``,
            ``dinov2-small|base|large|giant`` each also ``-reg4``, ``dinov3-small|small-plus|
            base|large|huge-plus``) or a dict with ``embed_dims``, ``num_layers``,
            ``num_heads`` (and any switch). Every argument left as ``None`` takes the
            preset's value (``ARCH_PRESETS``, then ``GEOMETRY_DEFAULTS``).
        img_size: pretraining size; the pos_embed and the RoPE reference grid come from it.
            Inputs at run time may have any size.
        patch_size: patch side; a checkpoint with another patch is resampled to it when
            loaded (FlexiViT's rule, timm's ``resample_patch_embed``), as EoMT runs DINOv2 at 16.
        in_channels: image channels.
        out_indices: blocks whose outputs are returned (negative counts from the end).
        embed_dims, num_layers, num_heads, mlp_ratio: override the preset's size.
        norm_type: ``'rmsnorm'`` (ViT-5) or ``'layernorm'`` (DeiT-III); also used by QK-norm.
        rms_norm_impl: how RMSNorm is computed: ``'exact'`` (the authors' dtype order, hand
            written), ``'fused'`` (``torch.nn.functional.rms_norm``) or ``'auto'`` (exact on
            CPU, fused on GPUs); equal in float32. See :class:`vit5seg.models.layers.RMSNorm`.
        use_rope: 2D RoPE on the patch tokens (theta ``rope_theta``): ``True`` ViT-5's
            (:class:`~vit5seg.models.layers.SequenceRope`), ``'dinov3'`` DINOv3's
            (:class:`~vit5seg.models.layers.Dinov3Rope`), ``False`` none.
        rope_train_rescale: ``'dinov3'`` only: while training, scale the RoPE coordinates by
            one log-uniform factor in [1/r, r] per step (DINOv3's and transformers'
            ``rescale_coords``, EoMT's DINOv3 runs); ``0`` turns it off.
        rope_ref_grid: grid the patch positions are squeezed into per axis; ``None``:
            ``img_size // patch_size`` (the authors' rule); ``'integer'``: integer
            positions at the run-time grid (extrapolation); an int or (h, w): that grid.
        num_registers: register tokens appended after the patches.
        register_rope: registers get their own 2D RoPE on a square grid (theta
            ``register_rope_theta``); otherwise they are not rotated.
        qk_norm: normalise q and k per head before the rotation.
        layer_scale_init: LayerScale init value; ``0`` removes LayerScale.
        mlp_type: ``'mlp'`` (GELU), ``'swiglu'`` or ``'geglu'`` (gated, 2/3 hidden width).
        qkv_bias: bias of the qkv projection: ``True``, ``False`` or ``'qv'`` (the key bias
            held at 0, DINOv3's ``mask_k_bias``).
        sandwich_norm: also normalise each branch's output before the residual add
            (Gemma 2/3's post-norms); only for the language-model transplants.
        linear_bias: biases of the attention output projection and the MLP layers
            (``False`` as in LLaMA / Gemma).
        drop_path_rate: stochastic depth rate; ``drop_path_schedule`` ``'constant'``
            (same rate in every block, as the authors) or ``'linear'`` (0 to the rate).
        final_norm: apply the final norm to the last block's output (and so its tap).
        output_cls_token: each tap is ``[patch_map, cls_token]`` as for mmseg's ViT.
        abs_pos_embed: a learned position embedding of the patches (DINOv3 has none).
        interpolate_mode: how pos_embed is resized to a new grid.
        interpolate_offset, interpolate_antialias: DINOv2's resize (Meta's names): offset 0
            resizes to the output size, offset 0.1 by the scale factors (grid + 0.1) / old
            grid (Meta's models without registers); antialias as in ``F.interpolate``.
        with_cp: activation checkpointing of every block during training.
        compile: ``torch.compile`` the block stack (``True``, or a dict of
            ``torch.compile`` arguments such as ``dict(mode='max-autotune')``); the
            embedding and its RoPE table cache stay eager (in EoMT: each block with its
            queries and mask, and each prediction; ``EoMTEncoderDecoder``). Off by
            default: see docs/performance.md for what it measured.
        frozen_stages: freeze the embeddings and the first ``frozen_stages`` blocks
            (``-1``: nothing frozen).
        frozen: the whole encoder is a fixed feature extractor, as in Meta's linear probe
            (facebookresearch/dinov3 eval/segmentation) and PMT (tue-mps/pmt models/pmt.py): no
            parameter trains (none reaches an optimizer group), it stays in eval mode
            (dropout, drop path and RoPE's training jitter off) and runs under
            ``torch.no_grad()``, so a training step keeps none of its activations.
            Checkpoints keep its tensors, so a checkpoint stands alone.
        pretrained: a checkpoint path or URL, as mmseg's ``model.pretrained`` passes it;
            the same as ``init_cfg=dict(type='Pretrained', checkpoint=pretrained)``.
        init_cfg: ``dict(type='Pretrained', checkpoint=PATH_OR_URL)`` loads an authors'
            ViT-5, a DeiT-III (Facebook or timm layout), a DINOv2 or DINOv3 (Meta, timm or
            transformers layout, or an EoMT release's backbone) or a converted file through
            :func:`vit5seg.models.checkpoint.load_pretrained` (a URL is downloaded once
            into torch's hub cache); optional keys ``use_ema``, ``allow_unsafe``,
            ``prefix``, ``sha256`` (checked before loading).

    Switches left as ``None`` take the preset's value.
    """

    @classmethod
    def card_rows(cls, given: dict, prefix: str, cfg=None):
        """The recipe card's rows of a ViT5 config (``given``, at ``prefix``): what its arch's preset
        fills in with the config's sizes, then the class's defaults, as (section, key, value, where from)."""
        explicit = {k: v for k, v in given.items() if k != 'type'}
        arch = {**defaults_of(cls, {}), **explicit}['arch']
        preset = resolve_arch(arch, **{k: explicit.get(k) for k in ('embed_dims', 'num_layers', 'num_heads')})
        for name, value in preset.items():
            if name not in explicit:
                yield 'model', f'{prefix}.{name}', plain(value), f'preset {arch}'
        for name, value in defaults_of(cls, {**explicit, **preset}).items():
            yield 'model', f'{prefix}.{name}', value, 'default'

    def __init__(self,
                 arch: Union[str, dict] = 'vit5-base',
                 img_size: Union[None, int, Sequence[int]] = None,
                 patch_size: Optional[int] = None,
                 in_channels: int = 3,
                 out_indices: Union[int, Sequence[int]] = -1,
                 embed_dims: Optional[int] = None,
                 num_layers: Optional[int] = None,
                 num_heads: Optional[int] = None,
                 mlp_ratio: Optional[float] = None,
                 norm_type: Optional[str] = None,
                 norm_eps: Optional[float] = None,
                 rms_norm_impl: str = 'auto',
                 use_rope: Union[None, bool, str] = None,
                 rope_theta: Optional[float] = None,
                 rope_train_rescale: Optional[float] = None,
                 rope_ref_grid: Union[None, str, int, Sequence[int]] = None,
                 num_registers: Optional[int] = None,
                 register_rope: Optional[bool] = None,
                 register_rope_theta: float = 100.,
                 qk_norm: Optional[bool] = None,
                 layer_scale_init: Optional[float] = None,
                 mlp_type: Optional[str] = None,
                 qkv_bias: Union[None, bool, str] = None,
                 sandwich_norm: Optional[bool] = None,
                 linear_bias: Optional[bool] = None,
                 drop_rate: float = 0.,
                 attn_drop_rate: float = 0.,
                 drop_path_rate: float = 0.,
                 drop_path_schedule: str = 'constant',
                 final_norm: bool = True,
                 output_cls_token: bool = False,
                 abs_pos_embed: Optional[bool] = None,
                 interpolate_mode: str = 'bicubic',
                 interpolate_offset: Optional[float] = None,
                 interpolate_antialias: Optional[bool] = None,
                 with_cp: bool = False,
                 compile: Union[bool, dict] = False,
                 frozen_stages: int = -1,
                 frozen: bool = False,
                 pretrained: Optional[str] = None,
                 init_cfg: Optional[dict] = None):
        if pretrained is not None:
            # mmseg's EncoderDecoder(pretrained=...) hands the path down this way.
            if init_cfg is not None:
                raise ValueError('give the checkpoint either as pretrained or in init_cfg, not both')
            init_cfg = dict(type='Pretrained', checkpoint=pretrained)
        super().__init__(init_cfg=init_cfg)
        s = resolve_arch(arch, embed_dims=embed_dims, num_layers=num_layers, num_heads=num_heads,
                         norm_type=norm_type, use_rope=use_rope, num_registers=num_registers,
                         register_rope=register_rope, qk_norm=qk_norm,
                         layer_scale_init=layer_scale_init, mlp_type=mlp_type, qkv_bias=qkv_bias,
                         sandwich_norm=sandwich_norm, linear_bias=linear_bias, img_size=img_size,
                         patch_size=patch_size, mlp_ratio=mlp_ratio, norm_eps=norm_eps, rope_theta=rope_theta,
                         rope_train_rescale=rope_train_rescale, abs_pos_embed=abs_pos_embed,
                         interpolate_offset=interpolate_offset, interpolate_antialias=interpolate_antialias)
        patch_size, norm_eps = s['patch_size'], s['norm_eps']
        self.arch = arch if isinstance(arch, str) else 'custom'
        self.settings = s
        self.embed_dims = C = s['embed_dims']
        self.num_layers = depth = s['num_layers']
        self.num_heads = s['num_heads']
        if C % self.num_heads:
            raise ValueError(f'embed_dims={C} is not divisible by num_heads={self.num_heads}')
        self.num_registers = s['num_registers']
        self.patch_size = patch_size
        self.img_size = _pair(s['img_size'])
        self.patch_grid = (self.img_size[0] // patch_size, self.img_size[1] // patch_size)
        self.final_norm = final_norm
        self.output_cls_token = output_cls_token
        self.interpolate_mode = interpolate_mode
        self.interpolate_offset = s['interpolate_offset']
        self.interpolate_antialias = s['interpolate_antialias']
        self.with_cp = with_cp
        if not isinstance(compile, (bool, dict)):
            raise ValueError(f'compile must be a bool or a dict of torch.compile arguments, got {compile!r}')
        self.compile_cfg = ({} if compile is True else dict(compile)) if compile else None
        self._compiled_blocks = None  # made on first use: compiling is slow and may never be needed
        self.out_indices = self._check_out_indices(out_indices, depth)
        if drop_path_schedule not in ('constant', 'linear'):
            raise ValueError(f"drop_path_schedule must be 'constant' or 'linear', got {drop_path_schedule!r}")
        if frozen_stages > depth:
            raise ValueError(f'frozen_stages={frozen_stages} exceeds num_layers={depth}')
        self.frozen_stages = frozen_stages
        self.frozen = bool(frozen)

        # Pads the input to a multiple of the patch at the bottom/right, as mmseg's ViT.
        self.patch_embed = PatchEmbed(img_size=self.img_size, patch_size=patch_size, in_chans=in_channels,
                                      embed_dim=C, output_fmt='NHWC', strict_img_size=False,
                                      dynamic_img_pad=True)
        # Absolute positions for the patches only; cls and registers get none (a checkpoint's
        # cls position, as DINOv2's, is added to cls_token once when it is converted).
        self.pos_embed = (nn.Parameter(torch.zeros(1, self.patch_grid[0] * self.patch_grid[1], C))
                          if s['abs_pos_embed'] else None)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, C))
        self.reg_token = nn.Parameter(torch.zeros(1, self.num_registers, C)) if self.num_registers else None
        self.pos_drop = nn.Dropout(drop_rate)

        if rope_ref_grid is None:
            ref_grid = self.patch_grid
        elif rope_ref_grid == 'integer':
            ref_grid = None
        else:
            ref_grid = _pair(rope_ref_grid)
        self.rope = build_rope(s['use_rope'], C // self.num_heads, theta=s['rope_theta'], ref_grid=ref_grid,
                               num_registers=self.num_registers, register_rope=s['register_rope'],
                               register_theta=register_rope_theta, train_rescale=s['rope_train_rescale'])

        if drop_path_schedule == 'constant':
            dpr = [drop_path_rate] * depth
        else:
            dpr = [x.item() for x in torch.linspace(0, drop_path_rate, depth)]
        self.blocks = nn.ModuleList([
            Block(C, self.num_heads, mlp_ratio=s['mlp_ratio'], mlp_type=s['mlp_type'], qkv_bias=s['qkv_bias'],
                  qk_norm=s['qk_norm'], norm_type=s['norm_type'], norm_eps=norm_eps,
                  layer_scale_init=s['layer_scale_init'], sandwich_norm=s['sandwich_norm'],
                  linear_bias=s['linear_bias'], drop=drop_rate, attn_drop=attn_drop_rate,
                  drop_path=dpr[i])
            for i in range(depth)])
        self.norm = build_norm(s['norm_type'], C, norm_eps)
        self.rms_norm_impl = check_rms_norm_impl(rms_norm_impl)
        for m in self.modules():
            if isinstance(m, RMSNorm):
                m.impl = rms_norm_impl
        if not final_norm:
            # Kept so checkpoints load strictly, but unused by the taps: frozen, or DDP
            # would wait for its gradient forever.
            self.norm.requires_grad_(False)
        self._init_default_weights()
        self._freeze_stages()

    @staticmethod
    def _check_out_indices(out_indices, depth) -> Tuple[int, ...]:
        if isinstance(out_indices, int):
            out_indices = [out_indices]
        result = []
        for i in out_indices:
            if not -depth <= i < depth:
                raise ValueError(f'out_indices contains {i}, but the model has {depth} blocks '
                                 f'(valid: 0..{depth - 1} or -{depth}..-1)')
            result.append(i % depth)
        return tuple(result)

    def _init_default_weights(self):
        if self.cls_token.is_meta:  # shapes only (the card): nothing to draw, and meta trunc_normal_ is slow
            return
        if self.pos_embed is not None:
            trunc_normal_(self.pos_embed, std=.02)
        trunc_normal_(self.cls_token, std=.02)
        if self.reg_token is not None:
            trunc_normal_(self.reg_token, std=.02)
        for m in self.blocks.modules():
            if isinstance(m, nn.Linear):
                trunc_normal_(m.weight, std=.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def init_weights(self):
        cfg = self.init_cfg
        if isinstance(cfg, dict) and cfg.get('type') == 'Pretrained':
            from ..checkpoint import load_pretrained
            load_pretrained(self, cfg['checkpoint'], use_ema=cfg.get('use_ema', False),
                            allow_unsafe=cfg.get('allow_unsafe', False), prefix=cfg.get('prefix'),
                            sha256=cfg.get('sha256'))
            self._is_init = True
        else:
            super().init_weights()

    def _freeze_stages(self):
        if self.frozen:
            self.requires_grad_(False)
            return
        if self.frozen_stages < 0:
            return
        frozen = [self.patch_embed, *self.blocks[:self.frozen_stages]]
        if self.frozen_stages == self.num_layers and self.final_norm:
            frozen.append(self.norm)
        for m in frozen:
            m.eval()
            for p in m.parameters():
                p.requires_grad = False
        for p in (self.pos_embed, self.cls_token, self.reg_token):
            if p is not None:
                p.requires_grad = False

    def train(self, mode: bool = True):
        super().train(mode and not self.frozen)
        self._freeze_stages()
        return self

    def grad_context(self):
        """Where the encoder runs: ``torch.no_grad()`` when it is frozen, the caller's mode otherwise."""
        return torch.no_grad() if self.frozen else contextlib.nullcontext()

    def resized_pos_embed(self, grid: Tuple[int, int]) -> torch.Tensor:
        """pos_embed (1, h*w, C) at another patch grid, unchanged at the pretraining grid."""
        return resize_pos_embed(self.pos_embed, self.patch_grid, grid, mode=self.interpolate_mode,
                                offset=self.interpolate_offset, antialias=self.interpolate_antialias)

    def embed(self, x: torch.Tensor, real_rope: bool = False):
        """Image (B, 3, H, W) -> tokens (B, 1 + h*w + R, C), patch grid (h, w), RoPE table
        (complex, or real [cos, sin] pairs with ``real_rope`` or while a graph is traced)."""
        B = x.shape[0]
        if min(x.shape[-2:]) < self.patch_size:
            # padding would make a "grid" of one mostly-empty patch: surely a config slip
            raise ValueError(f'input {x.shape[-2]}x{x.shape[-1]} is smaller than one {self.patch_size}x'
                             f'{self.patch_size} patch: crop_size, data_preprocessor size and the test '
                             f'scale must be at least {self.patch_size}')
        x = self.patch_embed(x)                        # (B, h, w, C), padded to multiples of the patch
        h, w = x.shape[1:3]
        x = x.flatten(1, 2)                            # (B, h*w, C)
        if self.pos_embed is not None:
            x = x + self.resized_pos_embed((h, w))
        tokens = [self.cls_token.expand(B, -1, -1), x]
        if self.reg_token is not None:
            tokens.append(self.reg_token.expand(B, -1, -1))
        x = self.pos_drop(torch.cat(tokens, dim=1))
        # SequenceRope itself gives the real table while a graph is traced
        rope = None if self.rope is None else self.rope((h, w), x.device, x.dtype, real=real_rope)
        return x, (h, w), rope

    def forward(self, x: torch.Tensor):
        with self.grad_context():
            x, grid, rope = self.embed(x, real_rope=self.compile_cfg is not None)
            run = self._run_blocks
            if self.compile_cfg is not None:
                if self._compiled_blocks is None:
                    self._compiled_blocks = torch.compile(self._run_blocks, **self.compile_cfg)
                run = self._compiled_blocks
            return run(x, grid, rope)

    def normed_tokens(self, x: torch.Tensor, indices: Sequence[int]):
        """Image (B, 3, H, W) -> every token after the final norm at each block of ``indices``
        (a list of (B, 1 + h*w + R, C), in the order given), the patch grid (h, w) and the RoPE
        table of the tokens: the interaction features of PMT (tue-mps/pmt models/pmt.py,
        ``backbone.norm(x)`` at ``interaction_indices``). Runs only the blocks up to the last index."""
        wanted = self._check_out_indices(list(indices), self.num_layers)
        with self.grad_context():
            x, grid, rope = self.embed(x)
            taps = {}
            for i, blk in enumerate(self.blocks[:max(wanted) + 1]):
                x = blk(x, rope)
                if i in wanted:
                    taps[i] = self.norm(x)
            return [taps[i] for i in wanted], grid, rope

    def _run_blocks(self, x: torch.Tensor, grid: Tuple[int, int], rope: Optional[torch.Tensor]):
        """Tokens (B, 1 + h*w + R, C) through every block -> the taps, each (B, C, h, w)."""
        B, (h, w) = x.shape[0], grid
        outs = []
        use_cp = self.with_cp and self.training and torch.is_grad_enabled()
        for i, blk in enumerate(self.blocks):
            x = blk.forward_cp(x, rope) if use_cp else blk(x, rope)
            if i == self.num_layers - 1 and self.final_norm:
                x = self.norm(x)
            if i in self.out_indices:
                # patch tokens only: cls at 0 and the registers at the end are dropped
                feat = x[:, 1:1 + h * w].reshape(B, h, w, self.embed_dims).permute(0, 3, 1, 2).contiguous()
                outs.append([feat, x[:, 0]] if self.output_cls_token else feat)
        return tuple(outs)

    def __getstate__(self):
        # the compiled function's caches belong to this instance: a copy (EMA, pickling) compiles its own
        state = self.__dict__.copy()
        state['_compiled_blocks'] = None
        return state

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """All tokens after the final norm, (B, 1 + N + R, C): what the authors'
        ``forward_features`` returns before pooling."""
        with self.grad_context():
            x, _, rope = self.embed(x)
            for blk in self.blocks:
                x = blk(x, rope)
            return self.norm(x)
