"""DINOv2 and DINOv3 checkpoints, in the layouts users have, to this package's keys
(facebookresearch/dinov2 dinov2/hub/backbones.py,
facebookresearch/dinov3 dinov3/hub/backbones.py, timm vision_transformer.py and eva.py).

- ``dinov2-meta`` / ``dinov2-timm``: Meta's hub ``.pth`` (``mask_token``, ``register_tokens``,
  ``mlp.w12`` / ``w3`` for ViT-g) and timm's ``vit_*_dinov2`` (``reg_token``, a packed
  SwiGLU ``mlp.fc1``); the position embedding may carry a cls row.
- ``dinov3-meta`` / ``dinov3-timm``: Meta's ``.pth`` (``storage_tokens``, ``rope_embed.periods``,
  ``qkv.bias_mask``, ``mlp.w1/w2/w3``) and timm's ``vit_*_dinov3`` (Eva: ``gamma_1``,
  ``q_bias`` / ``v_bias`` or no qkv bias at all).
- ``dinov2-hf`` / ``dinov3-hf``: transformers' ``Dinov2Model`` (also with registers; 4.x's
  ``attention.attention.query`` or 5.x's ``attention.q_proj``) and ``DINOv3ViTModel``: layers
  at ``layer.N`` (4.x), ``model.layer.N`` (5.x) or, renamed by EoMT's
  ``transformers_to_timm``, ``blocks.N`` with ``patch_embed`` for ``embeddings``.

The results follow this package's conventions: a cls position (DINOv2) is added to
``cls_token`` once (attention sees the same sum), the key bias of DINOv3 is zero, and
DINOv3's rotate-half channel pairs (i, i + D/2) are interleaved in the q and k rows of each
head, so the adjacent-pair rotation of :func:`vit5seg.models.layers.apply_rope` computes
DINOv3's rotation and q.k is unchanged.
"""
import re
from typing import Callable, Dict, Optional, Tuple

import torch

from ..utils.state_dicts import StateDict


# Every DINOv3 ViT up to ViT-H+ has 64 channels per head; a model given to the loader says its own.
DINOV3_HEAD_DIM = 64


def _split(sd: StateDict, key: str, *names: str, out: StateDict) -> None:
    """Split ``key`` (weight or bias) into equal row blocks named ``names``."""
    for name, part in zip(names, sd[key].chunk(len(names), dim=0)):
        out[name] = part


def fold_cls_position(sd: StateDict) -> StateDict:
    """A (1, 1 + n*n, C) pos_embed: its cls row added to ``cls_token``, patch rows kept."""
    pos = sd['pos_embed']
    side = int(round((pos.shape[1] - 1) ** 0.5))
    if side * side == pos.shape[1] - 1:
        sd = dict(sd)
        sd['cls_token'] = sd['cls_token'] + pos[:, :1]
        sd['pos_embed'] = pos[:, 1:]
    return sd


def rope_pair_rows(channels: int, heads: int) -> torch.Tensor:
    """For ``channels`` q (or k) rows of ``heads`` heads: the source row of each row once every head's rows
    (i, i + D/2), DINOv3's rotate-half pairs, are made adjacent (``out = rows_in[order]``)."""
    D = channels // heads
    order = torch.stack([torch.arange(D // 2), torch.arange(D // 2) + D // 2], dim=1).flatten()
    return torch.cat([(h * D + order) for h in range(heads)])


def interleave_rope_halves(sd: StateDict, num_heads: Optional[int]) -> StateDict:
    """Per head of each ``attn.qkv``, q and k rows (i, i + D/2) made adjacent."""
    sd = dict(sd)
    for key in [k for k in sd if k.endswith(('attn.qkv.weight', 'attn.qkv.bias'))]:
        value = sd[key]
        C = value.shape[0] // 3
        rows = rope_pair_rows(C, num_heads or C // DINOV3_HEAD_DIM)
        value = value.clone()
        for start in (0, C):  # q, then k; v keeps its order
            value[start:start + C] = value[start:start + C][rows]
        sd[key] = value
    return sd


def _meta_or_timm_dinov2(sd: StateDict) -> StateDict:
    out = {}
    for key, value in sd.items():
        if key == 'mask_token':
            continue
        key = key.replace('register_tokens', 'reg_token')
        key = re.sub(r'\.ls([12])\.gamma$', r'.gamma_\1', key)
        m = re.match(r'(blocks\.\d+\.mlp\.)(w12|fc1|w3)\.(weight|bias)$', key)
        if m and m.group(2) in ('w12', 'fc1') and _is_packed_swiglu(sd, m.group(1), m.group(2)):
            _split(sd, key, f'{m.group(1)}fc1_g.{m.group(3)}', f'{m.group(1)}fc1_x.{m.group(3)}', out=out)
            continue
        if m and m.group(2) == 'w3':
            key = f'{m.group(1)}fc2.{m.group(3)}'
        out[key] = value
    return fold_cls_position(out) if 'pos_embed' in out else out


def _is_packed_swiglu(sd: StateDict, prefix: str, name: str) -> bool:
    """Meta's ``w12`` always; timm's packed ``fc1`` when it is twice fc2's input."""
    if name == 'w12':
        return True
    return sd[f'{prefix}fc1.weight'].shape[0] == 2 * sd[f'{prefix}fc2.weight'].shape[1]


def _dinov3_meta(sd: StateDict) -> StateDict:
    out = {}
    for key, value in sd.items():
        if key in ('mask_token', 'rope_embed.periods') or key.endswith('.bias_mask') or \
                key.startswith(('cls_norm.', 'local_cls_norm.')):
            continue  # pretraining-only, derived, or the cls token's own norms (the taps are patches)
        key = key.replace('storage_tokens', 'reg_token')
        key = re.sub(r'\.ls([12])\.gamma$', r'.gamma_\1', key)
        key = re.sub(r'\.mlp\.w1\.', '.mlp.fc1_g.', key)
        key = re.sub(r'\.mlp\.w2\.', '.mlp.fc1_x.', key)
        key = re.sub(r'\.mlp\.w3\.', '.mlp.fc2.', key)
        out[key] = value
    return out


def _dinov3_timm(sd: StateDict) -> StateDict:
    out = {}
    for key, value in sd.items():
        if re.match(r'blocks\.\d+\.attn\.[qkv]_bias$', key):
            continue  # joined into qkv.bias below
        out[key] = value
        if key.endswith('attn.qkv.weight'):
            prefix = key[:-len('qkv.weight')]
            C = value.shape[1]
            zeros = value.new_zeros(C)
            out[f'{prefix}qkv.bias'] = torch.cat([sd.get(f'{prefix}q_bias', zeros), zeros,
                                                  sd.get(f'{prefix}v_bias', zeros)])
    return out


def _hf_common(sd: StateDict) -> StateDict:
    """transformers' names with the wrapper's prefix gone: ``embeddings.*`` and ``layer.N.*``."""
    out = {}
    for key, value in sd.items():
        key = re.sub(r'^model\.', '', key)
        key = re.sub(r'^patch_embed\.', 'embeddings.', key)     # EoMT's transformers_to_timm
        key = re.sub(r'^(blocks|encoder\.layer)\.', 'layer.', key)
        out[key] = value
    return out


def _hf_block(sd: StateDict, i: int, names: Dict[str, str], out: StateDict) -> None:
    p, o = f'layer.{i}.', f'blocks.{i}.'
    q, k, v = (sd[p + names[n] + '.weight'] for n in ('q', 'k', 'v'))
    out[o + 'attn.qkv.weight'] = torch.cat([q, k, v])
    if p + names['q'] + '.bias' in sd:
        zeros = q.new_zeros(q.shape[0])
        out[o + 'attn.qkv.bias'] = torch.cat([sd.get(p + names[n] + '.bias', zeros) for n in ('q', 'k', 'v')])
    for ours, theirs in (('attn.proj', names['o']), ('norm1', 'norm1'), ('norm2', 'norm2')):
        for suffix in ('weight', 'bias'):
            if p + theirs + '.' + suffix in sd:
                out[f'{o}{ours}.{suffix}'] = sd[f'{p}{theirs}.{suffix}']
    out[o + 'gamma_1'] = sd[p + 'layer_scale1.lambda1']
    out[o + 'gamma_2'] = sd[p + 'layer_scale2.lambda1']
    mlp = {k[len(p + 'mlp.'):]: v for k, v in sd.items() if k.startswith(p + 'mlp.')}
    gated = any(k.startswith('gate_proj.') for k in mlp)
    packed = any(k.startswith('weights_in.') for k in mlp)
    for name, value in mlp.items():
        layer, suffix = name.split('.')
        if packed and layer == 'weights_in':  # Dinov2SwiGLUFFN: silu(first half) * second half
            _split(mlp, name, f'{o}mlp.fc1_g.{suffix}', f'{o}mlp.fc1_x.{suffix}', out=out)
            continue
        ours = {'weights_out': 'fc2', 'fc1': 'fc1', 'fc2': 'fc2', 'down_proj': 'fc2',
                'gate_proj': 'fc1_g', 'up_proj': 'fc1_x' if gated else 'fc1'}[layer]
        out[f'{o}mlp.{ours}.{suffix}'] = value


def _hf(sd: StateDict, names: Dict[str, str], tokens: Dict[str, str]) -> StateDict:
    sd = _hf_common(sd)
    out = {ours: sd['embeddings.' + theirs] for theirs, ours in tokens.items() if 'embeddings.' + theirs in sd}
    depth = len({k.split('.')[1] for k in sd if k.startswith('layer.')})
    for i in range(depth):
        _hf_block(sd, i, names, out)
    final = 'layernorm' if 'layernorm.weight' in sd else 'norm'
    out['norm.weight'], out['norm.bias'] = sd[f'{final}.weight'], sd[f'{final}.bias']
    return out


_HF_PROJ = dict(q='attention.q_proj', k='attention.k_proj', v='attention.v_proj', o='attention.o_proj')
# transformers 4.x's Dinov2 (5.x names it as DINOv3, _HF_PROJ)
_HF4_DINOV2 = dict(q='attention.attention.query', k='attention.attention.key', v='attention.attention.value',
                   o='attention.output.dense')


def _dinov2_hf(sd: StateDict) -> StateDict:
    v4 = any(k.endswith('attention.attention.query.weight') for k in sd)
    out = _hf(sd, _HF4_DINOV2 if v4 else _HF_PROJ,
              {'cls_token': 'cls_token', 'register_tokens': 'reg_token', 'position_embeddings': 'pos_embed',
               'patch_embeddings.projection.weight': 'patch_embed.proj.weight',
               'patch_embeddings.projection.bias': 'patch_embed.proj.bias'})
    return fold_cls_position(out)


def _dinov3_hf(sd: StateDict) -> StateDict:
    return _hf(sd, _HF_PROJ, {'cls_token': 'cls_token', 'register_tokens': 'reg_token',
                'patch_embeddings.weight': 'patch_embed.proj.weight', 'patch_embeddings.bias': 'patch_embed.proj.bias'})


# layout -> its converter (the DINOv3 ones are followed by the RoPE interleave, convert_dinov)
CONVERTERS: Dict[str, Callable[[StateDict], StateDict]] = {
    'dinov2-meta': _meta_or_timm_dinov2,
    'dinov2-timm': _meta_or_timm_dinov2,
    'dinov2-hf': _dinov2_hf,
    'dinov3-meta': _dinov3_meta,
    'dinov3-timm': _dinov3_timm,
    'dinov3-hf': _dinov3_hf,
}


def detect_dinov_layout(sd: StateDict) -> Optional[str]:
    """The DINOv2 / DINOv3 layout of ``sd``, or None."""
    keys = set(sd)
    hf = _hf_common({k: None for k in keys})
    if 'embeddings.cls_token' in hf:
        return 'dinov2-hf' if 'embeddings.position_embeddings' in hf else 'dinov3-hf'
    if 'storage_tokens' in keys:
        return 'dinov3-meta'
    if 'blocks.0.ls1.gamma' in keys:
        meta = 'mask_token' in keys or 'register_tokens' in keys or 'blocks.0.mlp.w12.weight' in keys
        if meta:
            return 'dinov2-meta'
        pos = sd.get('pos_embed')
        kernel = sd.get('patch_embed.proj.weight')
        with_cls_row = pos is not None and round((pos.shape[1] - 1) ** 0.5) ** 2 == pos.shape[1] - 1
        if 'reg_token' in keys or with_cls_row or (kernel is not None and kernel.shape[-1] == 14):
            return 'dinov2-timm'
        return None  # timm's DeiT-III
    if 'blocks.0.gamma_1' in keys and 'reg_token' in keys and 'pos_embed' not in keys and \
            'blocks.0.attn.qkv.bias' not in keys and 'blocks.0.attn.q_norm.weight' not in keys:
        return 'dinov3-timm'  # Eva: its qkv bias, if any, in q_bias / v_bias
    return None


def _dinov3_rules(out: StateDict, num_heads: Optional[int]) -> StateDict:
    out = interleave_rope_halves(out, num_heads)
    for key in [k for k in out if k.endswith('attn.qkv.bias')]:
        C = out[key].shape[0] // 3
        out[key] = out[key].clone()
        out[key][C:2 * C] = 0  # masked in DINOv3: never used, kept at zero
    return out


def convert_dinov(sd: StateDict, num_heads: Optional[int] = None,
                  layout: Optional[str] = None) -> Optional[Tuple[StateDict, str]]:
    """A DINOv2 / DINOv3 backbone of ``layout`` (detected where None) -> (this package's keys, the
    layout); None where ``sd`` is none of those layouts."""
    layout = layout or detect_dinov_layout(sd)
    if layout is None:
        return None
    out = CONVERTERS[layout](sd)
    return (_dinov3_rules(out, num_heads) if layout.startswith('dinov3') else out), layout


def convert_dinov3_layers(sd: StateDict, num_heads: int) -> StateDict:
    """transformers' ``DINOv3ViTLayer`` tensors at ``N.*`` (q/k/v/o projections, ``layer_scale1.lambda1``,
    ``mlp.up_proj``/``down_proj``) -> this package's ``Block`` tensors at ``N.*``, with DINOv3's
    rules (rotate-half pairs interleaved, no key bias): the blocks of PMT's decoder
    (tue-mps/pmt image/models/layers.py), which are these layers."""
    layers = {f'layer.{k}': v for k, v in sd.items()}
    out = {}
    for i in sorted({int(k.split('.')[0]) for k in sd}):
        _hf_block(layers, i, _HF_PROJ, out)
    return {k[len('blocks.'):]: v for k, v in _dinov3_rules(out, num_heads).items()}
