"""Speed and memory of the ViT5 backbone against its peers, measured in one process.

Timings are interleaved (A, B, C, A, B, C, ...) after warm-up, so drift of the machine
hits every model alike; min and median of the repeats are kept and the ratios use the
medians. Peers at the same width, depth and heads: mmseg's ``VisionTransformer``, timm's
DeiT-III and RoPE ViT (``forward_intermediates``), and the straightforward ViT-5 path of
:func:`reference_forward`.
"""
import functools
import platform
import statistics
import time
from typing import Callable, Dict, List

import torch
from timm.layers.pos_embed_sincos import apply_rot_embed_cat

from ..models.backbones.vit5 import ViT5, resolve_arch
from ..utils.amp import AMP_DTYPES
from ..utils.memory import peak_rss_mb, probe_peak_mb
from ..utils.timing import quartiles, time_interleaved

# issue #7's targets, for vit5-small at 512x512, batch 2, CPU
TARGETS = {'ratio_vs_timm_rope_vit': ('<=', 1.05), 'deit3_ratio_vs_timm_deit3': ('<=', 1.03),
           'ratio_vs_mmseg_vit': ('<=', 0.65), 'speedup_vs_reference': ('>=', 1.7),
           'with_cp_memory_ratio': ('<=', 0.60), 'with_cp_time_ratio': ('<=', 1.4)}
# ratio -> (numerator, denominator) among the timed steps
RATIO_TERMS = {'ratio_vs_mmseg_vit': ('ours', 'mmseg_vit'), 'ratio_vs_timm_rope_vit': ('ours', 'timm_rope_vit'),
               'deit3_ratio_vs_timm_deit3': ('deit3', 'timm_deit3'), 'speedup_vs_reference': ('reference', 'ours'),
               'with_cp_time_ratio': ('ours_with_cp', 'ours')}

# the DINOv3 of each ViT-5's size, timed beside it in EoMT (segmentor.py, panoptic.py)
DINOV3_PEERS = {'vit5-small': 'dinov3-small', 'vit5-base': 'dinov3-base', 'vit5-large': 'dinov3-large'}


def reference_forward(model: ViT5, x: torch.Tensor):
    """ViT-5 written the straightforward way: RoPE sines rebuilt and concatenated for the
    token sequence in every block, explicit softmax attention. Same weights and outputs
    as ``model(x)``; kept as the naive peer of the benchmark."""
    B = x.shape[0]
    x = model.patch_embed(x)
    h, w = x.shape[1:3]
    x = x.flatten(1, 2) + model.resized_pos_embed((h, w))
    parts = [model.cls_token.expand(B, -1, -1), x] + ([model.reg_token.expand(B, -1, -1)]
                                                      if model.reg_token is not None else [])
    x = torch.cat(parts, dim=1)
    outs = []
    for i, blk in enumerate(model.blocks):
        rope = model.rope._build((h, w), x.device).to(x.dtype) if model.rope is not None else None
        attn = blk.attn
        N, C = x.shape[1:]
        q, k, v = attn.qkv(blk.norm1(x)).reshape(B, N, 3, attn.num_heads, attn.head_dim).permute(2, 0, 3, 1, 4)
        q, k = attn.q_norm(q), attn.k_norm(k)
        if rope is not None:
            q, k = apply_rot_embed_cat(q, rope), apply_rot_embed_cat(k, rope)
        weights = ((q @ k.transpose(-2, -1)) * attn.head_dim ** -0.5).softmax(-1)
        y = attn.proj((weights @ v).transpose(1, 2).reshape(B, N, C))
        x = x + blk._scale(y, blk.gamma_1)
        x = x + blk._scale(blk.mlp(blk.norm2(x)), blk.gamma_2)
        if i == model.num_layers - 1 and model.final_norm:
            x = model.norm(x)
        if i in model.out_indices:
            outs.append(x[:, 1:1 + h * w].reshape(B, h, w, C).permute(0, 3, 1, 2))
    return tuple(outs)


def backbone_taps(num_layers: int):
    return tuple(sorted({num_layers // 4 - 1, num_layers // 2 - 1, 3 * num_layers // 4 - 1, num_layers - 1}))


# timm's models of the same shape, where the installed timm has them (its RoPE ViT: 1.0.17+;
# vit5seg itself needs timm 0.9.16)
TIMM_PEERS = {'timm_deit3': 'deit3_small_patch16_224', 'timm_rope_vit': 'vit_small_patch16_rope_224'}


def missing_peers() -> Dict[str, str]:
    """What the benchmark cannot compare with here, and why."""
    import timm
    from timm.models import VisionTransformer
    if not hasattr(VisionTransformer, 'forward_intermediates'):  # the taps' API: timm 1.0+
        return {name: f'timm {timm.__version__} has no forward_intermediates' for name in TIMM_PEERS}
    return {name: f'timm {timm.__version__} has no {model}' for name, model in TIMM_PEERS.items()
            if model not in timm.list_models(model)}


def timm_peers() -> List[str]:
    return [name for name in TIMM_PEERS if name not in missing_peers()]


def build_peers(arch, crop: int, device) -> Dict[str, Callable]:
    """name -> a function that runs one forward of that model on an image batch."""
    import timm
    from mmseg.models.backbones import VisionTransformer

    s = resolve_arch(arch)
    C, L, H = s['embed_dims'], s['num_layers'], s['num_heads']
    taps = backbone_taps(L)
    ours = ViT5(arch=arch, out_indices=taps).to(device)
    ours_cp = ViT5(arch=arch, out_indices=taps, with_cp=True).to(device)
    ours_cp.load_state_dict(ours.state_dict())
    deit3 = ViT5(arch=dict(resolve_arch('deit3-small'), embed_dims=C, num_layers=L, num_heads=H),
                 out_indices=taps).to(device)
    mmseg_vit = VisionTransformer(img_size=(crop, crop), embed_dims=C, num_layers=L, num_heads=H, out_indices=taps,
                                  qkv_bias=True, final_norm=True, with_cls_token=True).to(device)
    size = dict(embed_dim=C, depth=L, num_heads=H, img_size=crop, dynamic_img_size=True)
    modules = dict(ours=ours, ours_with_cp=ours_cp, reference=ours, deit3=deit3, mmseg_vit=mmseg_vit)
    fns = dict(ours=ours, ours_with_cp=ours_cp, reference=lambda x: reference_forward(ours, x), deit3=deit3,
               mmseg_vit=mmseg_vit)
    for name in timm_peers():
        peer = timm.create_model(TIMM_PEERS[name], pretrained=False, **size).to(device)
        modules[name] = peer
        fns[name] = functools.partial(peer.forward_intermediates, indices=list(taps), intermediates_only=True)
    for m in modules.values():
        m.train()
    return {name: (fns[name], modules[name]) for name in fns}


def fwd_bwd_step(fn, module, x, amp_dtype=None):
    def step():
        module.zero_grad(set_to_none=True)
        with torch.autocast(x.device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            outs = fn(x)
            loss = sum(o.float().pow(2).mean() for o in outs)
        loss.backward()
    return step


def peak_memory_mb(arch, crop: int, batch: int, with_cp: bool, device: str) -> float:
    """Extra peak memory of one backbone training step: CUDA max allocated, or on CPU the
    growth of peak RSS in a fresh subprocess."""
    if torch.device(device).type == 'cuda':
        model = ViT5(arch=arch, out_indices=backbone_taps(resolve_arch(arch)['num_layers']), with_cp=with_cp).to(device)
        x = torch.randn(batch, 3, crop, crop, device=device)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fwd_bwd_step(model, model, x)()
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - base) / 2 ** 20
    code = ('import sys, json; from vit5seg.benchmark.backbone import _cpu_memory_probe; '
            f'print(json.dumps(_cpu_memory_probe({arch!r}, {crop}, {batch}, {with_cp})))')
    return probe_peak_mb(code)


def _cpu_memory_probe(arch, crop, batch, with_cp) -> float:
    model = ViT5(arch=arch, out_indices=backbone_taps(resolve_arch(arch)['num_layers']), with_cp=with_cp).train()
    x = torch.randn(batch, 3, crop, crop)
    with torch.no_grad():
        model(x[:1, :, :16, :16])  # allocator and kernels warmed outside the measurement
    before = peak_rss_mb()
    fwd_bwd_step(model, model, x)()
    return peak_rss_mb() - before


def backbone_timings(arch='vit5-small', crop=512, batch=2, device='cpu', warmup=1, repeats=5, amp=None,
                     compile=False, memory=True) -> dict:
    torch.manual_seed(0)
    peers = build_peers(arch, crop, device)
    x = torch.randn(batch, 3, crop, crop, device=device)
    amp_dtype = AMP_DTYPES.get(amp)
    steps = {name: fwd_bwd_step(fn, module, x, amp_dtype) for name, (fn, module) in peers.items()}
    if compile:
        # the backbone's own switch (compile=True: the block stack compiled), same weights
        compiled = ViT5(arch=arch, out_indices=peers['ours'][1].out_indices, compile=True).to(device).train()
        compiled.load_state_dict(peers['ours'][1].state_dict())
        start = time.perf_counter()
        fwd_bwd_step(compiled, compiled, x, amp_dtype)()
        compile_s = time.perf_counter() - start
        steps['ours_compiled'] = fwd_bwd_step(compiled, compiled, x, amp_dtype)
    times = time_interleaved(steps, device, warmup, repeats)
    med = {k: statistics.median(v) for k, v in times.items()}
    with torch.no_grad():
        fwd_times = time_interleaved({'ours': lambda: peers['ours'][0](x)}, device, warmup, repeats)['ours']
    result = dict(
        arch=str(arch), crop=crop, batch=batch, device=str(device), torch_version=torch.__version__,
        cpu=platform.processor() or platform.machine(), threads=torch.get_num_threads(), amp=amp,
        repeats=repeats, fwd_s=statistics.median(fwd_times),
        fwd_bwd_s=med['ours'], fwd_bwd_min_s=min(times['ours']),
        mmseg_vit_fwd_bwd_s=med['mmseg_vit'], timm_rope_vit_fwd_bwd_s=med.get('timm_rope_vit'),
        timm_deit3_fwd_bwd_s=med.get('timm_deit3'), deit3_fwd_bwd_s=med['deit3'],
        reference_fwd_bwd_s=med['reference'], with_cp_fwd_bwd_s=med['ours_with_cp'],
        ratio_vs_mmseg_vit=med['ours'] / med['mmseg_vit'],
        ratio_vs_timm_rope_vit=med['ours'] / med['timm_rope_vit'] if 'timm_rope_vit' in med else None,
        deit3_ratio_vs_timm_deit3=med['deit3'] / med['timm_deit3'] if 'timm_deit3' in med else None,
        missing_peers=missing_peers(),
        speedup_vs_reference=med['reference'] / med['ours'],
        with_cp_time_ratio=med['ours_with_cp'] / med['ours'],
        rope_table_builds=peers['ours'][1].rope.num_builds if peers['ours'][1].rope is not None else 0,
        all_times=times)
    # How far a ratio can be trusted: the same ratio taken within each round (adjacent in
    # time), first and third quartile. On a shared VM one step varies by 20%.
    for key, (num, den) in RATIO_TERMS.items():
        if num in times and den in times:
            result[f'{key}_quartiles'] = quartiles([a / b for a, b in zip(times[num], times[den])])
    if compile:
        result.update(compiled_fwd_bwd_s=med['ours_compiled'], compiled_ratio=med['ours_compiled'] / med['ours'],
                      compile_first_step_s=compile_s)
    if memory:
        plain, cp = (peak_memory_mb(arch, crop, batch, flag, device) for flag in (False, True))
        # tiny models can stay inside pages the process already had: no growth to compare
        result.update(peak_mb=plain, with_cp_peak_mb=cp, with_cp_memory_ratio=cp / plain if plain > 0 else None)
    return result


