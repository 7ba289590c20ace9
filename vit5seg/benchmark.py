"""Speed and memory of the ViT5 backbone against its peers, measured in one process.

Timings are interleaved (A, B, C, A, B, C, ...) after warm-up, so drift of the machine
hits every model alike; min and median of the repeats are kept and the ratios use the
medians. Peers at the same width, depth and heads: mmseg's ``VisionTransformer``, timm's
DeiT-III and RoPE ViT (``forward_intermediates``), and the straightforward ViT-5 path of
:func:`reference_forward`.
"""
import argparse
import contextlib
import functools
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import torch
from timm.layers.pos_embed_sincos import apply_rot_embed_cat

from .models.backbones.vit5 import ViT5, resolve_arch
from .models.convert import parse_arch
from .models.segmentor import build_segmentor
from .paths import code_fields, config_path, describe_code
from .utils.memory import peak_rss_mb, probe_peak_mb
from .utils.timing import quartiles, sync_device, time_interleaved

# issue #7's targets, for vit5-small at 512x512, batch 2, CPU
TARGETS = {'ratio_vs_timm_rope_vit': ('<=', 1.05), 'deit3_ratio_vs_timm_deit3': ('<=', 1.03),
           'ratio_vs_mmseg_vit': ('<=', 0.65), 'speedup_vs_reference': ('>=', 1.7),
           'with_cp_memory_ratio': ('<=', 0.60), 'with_cp_time_ratio': ('<=', 1.4)}
# issue #17's, with --segmentor (ViT-5-S + UperNet, 512x512, CPU)
# and #26's: a bf16 train step on a CPU with bf16 instructions (AMX or AVX512-BF16)
# and #27's: EoMT against UperNet with the same backbone
SEGMENTOR_TARGETS = {'bf16_whole_speedup': ('>=', 2.0), 'onnxruntime_vs_pytorch': ('>=', 1.0),
                     'amp_train_speedup': ('>=', 1.2), 'eomt_whole_speedup': ('>=', 3.0),
                     'eomt_train_speedup': ('>=', 2.0)}

AMP_DTYPES = {'bf16': torch.bfloat16, 'fp16': torch.float16}

# ratio -> (numerator, denominator) among the timed steps
RATIO_TERMS = {'ratio_vs_mmseg_vit': ('ours', 'mmseg_vit'), 'ratio_vs_timm_rope_vit': ('ours', 'timm_rope_vit'),
               'deit3_ratio_vs_timm_deit3': ('deit3', 'timm_deit3'), 'speedup_vs_reference': ('reference', 'ours'),
               'with_cp_time_ratio': ('ours_with_cp', 'ours')}


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


def _taps(num_layers: int):
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
    taps = _taps(L)
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
        model = ViT5(arch=arch, out_indices=_taps(resolve_arch(arch)['num_layers']), with_cp=with_cp).to(device)
        x = torch.randn(batch, 3, crop, crop, device=device)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fwd_bwd_step(model, model, x)()
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - base) / 2 ** 20
    code = ('import sys, json; from vit5seg.benchmark import _cpu_memory_probe; '
            f'print(json.dumps(_cpu_memory_probe({arch!r}, {crop}, {batch}, {with_cp})))')
    return probe_peak_mb(code)


def _cpu_memory_probe(arch, crop, batch, with_cp) -> float:
    model = ViT5(arch=arch, out_indices=_taps(resolve_arch(arch)['num_layers']), with_cp=with_cp).train()
    x = torch.randn(batch, 3, crop, crop)
    with torch.no_grad():
        model(x[:1, :, :16, :16])  # allocator and kernels warmed outside the measurement
    before = peak_rss_mb()
    fwd_bwd_step(model, model, x)()
    return peak_rss_mb() - before


def run_benchmark(arch='vit5-small', crop=512, batch=2, device='cpu', warmup=1, repeats=5, amp=None,
                  segmentor=False, compile=False, memory=True) -> dict:
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
    if segmentor:
        result.update(segmentor_timings(arch, crop, batch, device, warmup, repeats, amp=amp, memory=memory))
    return result


def scene_labels(crop: int, device, classes: int = 150, per_image: int = 16) -> torch.Tensor:
    """(1, crop, crop) labels of a scene: an 8 x 8 grid of regions taking ``per_image`` of
    the ``classes``. Mask-classification losses (EoMT, Mask2Former) build one target mask
    per class present, so per-pixel noise over all 150 classes would time a case no
    dataset has; per-pixel losses cost the same either way."""
    present = torch.randperm(classes)[:per_image]
    cells = present[torch.randint(0, per_image, (1, 8, 8))]
    side = -(-crop // 8)
    return cells.repeat_interleave(side, 1).repeat_interleave(side, 2)[:, :crop, :crop].contiguous().to(device)


class SegmentorSteps:
    """Timed steps of an mmseg segmentor on random data: ``train(amp)`` (one AdamW step on
    ``batch`` random crop x crop images with :func:`scene_labels`; under autocast with ``amp``,
    fp16 with a grad scaler), ``whole(autocast)`` (predict that batch) and
    ``slide(autocast)`` (sliding-window prediction of one ``slide_shape`` image,
    ``window`` squares at a 2/3 stride). Shared by the benchmark and the self-check."""

    def __init__(self, model, crop: int, batch: int, device, slide_shape=(512, 2048), window: int = 512):
        from mmengine.structures import PixelData
        from mmseg.structures import SegDataSample
        self.model, self.window = model, window
        self.optim = torch.optim.AdamW(model.parameters(), lr=1e-5)
        self.inputs = torch.randn(batch, 3, crop, crop, device=device)
        self.samples = []
        for _ in range(batch):
            s = SegDataSample(metainfo=dict(img_shape=(crop, crop), ori_shape=(crop, crop), pad_shape=(crop, crop)))
            s.gt_sem_seg = PixelData(data=scene_labels(crop, device))
            self.samples.append(s)
        self.big = torch.randn(1, 3, *slide_shape, device=device)
        self.big_meta = [SegDataSample(metainfo=dict(img_shape=tuple(slide_shape), ori_shape=tuple(slide_shape),
                                                     pad_shape=tuple(slide_shape)))]
        self.scalers = {}

    def train(self, amp: Optional[torch.dtype] = None) -> Callable[[], None]:
        kind = self.inputs.device.type
        if amp == torch.float16 and kind != 'cuda':
            raise ValueError('fp16 autocast train steps need a CUDA GPU (use bf16 on CPU)')
        # fp16 gradients underflow without loss scaling; one scaler per dtype so its scale carries over
        scaler = self.scalers.setdefault(amp, torch.amp.GradScaler(kind, enabled=amp == torch.float16))

        def step():
            self.model.train()
            with torch.autocast(kind, dtype=amp or torch.float32, enabled=amp is not None):
                losses = self.model(self.inputs, self.samples, mode='loss')
            self.optim.zero_grad()
            scaler.scale(sum(v for k, v in losses.items() if 'loss' in k)).backward()
            scaler.step(self.optim)
            scaler.update()
        return step

    def _predict(self, test_cfg: dict, inputs, metas, autocast):
        from mmengine.config import ConfigDict

        def run():
            self.model.eval()
            self.model.test_cfg = ConfigDict(test_cfg)
            with torch.no_grad(), autocast():
                self.model.predict(inputs, metas)
        return run

    def whole(self, autocast=contextlib.nullcontext):
        return self._predict(dict(mode='whole'), self.inputs, self.samples, autocast)

    def slide(self, autocast=contextlib.nullcontext):
        w = self.window
        return self._predict(dict(mode='slide', crop_size=(w, w), stride=(w * 2 // 3, w * 2 // 3)),
                             self.big, self.big_meta, autocast)


def upernet_model_cfg(arch):
    """The entry config's UperNet model dict with this backbone (taps, widths adapted)."""
    from mmengine.config import Config
    cfg = Config.fromfile(str(config_path('vit5_upernet_ade20k.py')))
    width, depth = resolve_arch(arch)['embed_dims'], resolve_arch(arch)['num_layers']
    cfg.model.backbone.update(arch=arch, out_indices=_taps(depth))
    cfg.model.neck.embed_dim = cfg.model.auxiliary_head.in_channels = width
    cfg.model.decode_head.in_channels = [width] * 4
    return cfg.model


# EoMT's best published backbone, timed beside a ViT-5 of its size (issue #39); the anchor of its
# zoo: DINOv3-L EoMT at 512, 137 images/s compiled on one H100 (tue-mps/eomt model_zoo/dinov3.md).
DINOV3_PEERS = {'vit5-small': 'dinov3-small', 'vit5-base': 'dinov3-base', 'vit5-large': 'dinov3-large'}
EOMT_DINOV3_L_H100_IMAGES_S = 137


def eomt_model_cfg(arch):
    """The EoMT config's model dict with this backbone (width and masked blocks adapted:
    3 for 12 blocks as EoMT's S/B recipes, 4 for deeper backbones as its ViT-L)."""
    from mmengine.config import Config
    cfg = Config.fromfile(str(config_path('eomt/vit5-base_eomt_ade20k.py')))
    width, depth = resolve_arch(arch)['embed_dims'], resolve_arch(arch)['num_layers']
    cfg.model.backbone.arch = arch
    cfg.model.decode_head.update(in_channels=width, num_blocks=3 if depth <= 12 else 4)
    return cfg.model


def segmentor_peak_mb(model_cfg, crop: int, batch: int, device, amp: Optional[str] = None) -> float:
    """Peak memory of a whole segmentor's training, in MB: its weights, gradients, AdamW
    state and the activations of a step (two steps, so the optimizer state exists). CUDA:
    max allocated above what was allocated before the model was built; CPU: the growth of
    peak RSS in a fresh subprocess."""
    if torch.device(device).type == 'cuda':
        sync_device(device)
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        steps = SegmentorSteps(build_segmentor(model_cfg, device), crop, batch, device, slide_shape=(crop, crop),
                               window=crop)
        step = steps.train(AMP_DTYPES.get(amp))
        step()
        step()
        sync_device(device)
        peak = torch.cuda.max_memory_allocated() - base
        del steps, step
        torch.cuda.empty_cache()
        return peak / 2 ** 20
    import pickle
    code = ('import sys, pickle, json; import vit5seg; from vit5seg.benchmark import _cpu_segmentor_memory_probe; '
            'print(json.dumps(_cpu_segmentor_memory_probe(*pickle.loads(sys.stdin.buffer.read()))))')
    return probe_peak_mb(code, stdin=pickle.dumps((dict(model_cfg), crop, batch, amp)))


def _cpu_segmentor_memory_probe(model_cfg, crop, batch, amp) -> float:
    from mmseg.models import EncoderDecoder  # noqa: F401  (imports outside the measurement)
    before = peak_rss_mb()
    steps = SegmentorSteps(build_segmentor(model_cfg, 'cpu'), crop, batch, 'cpu', slide_shape=(crop, crop),
                           window=crop)
    step = steps.train(AMP_DTYPES.get(amp))
    step()
    step()
    return peak_rss_mb() - before


def segmentor_timings(arch, crop, batch, device, warmup, repeats, slide_shape=(512, 2048), amp=None,
                      memory=True, dinov3_peer=None) -> dict:
    """The entry config's UperNet with this backbone: one train step in float32 (and under
    ``amp`` autocast); sliding-window inference of one 2048x512 image and whole-image
    inference of one crop, in float32 and under bf16 autocast; whole-image inference with
    ONNX Runtime (CPU, with the deploy extra); EoMT's train step and whole-image inference
    with the same backbone beside them, and EoMT on ``dinov3_peer`` (default: the DINOv3 of
    a ViT-5 preset's size, ``DINOV3_PEERS``). All interleaved in one process; then the peak
    memory of the train steps (``memory``)."""
    from mmengine.config import ConfigDict
    model_cfg = upernet_model_cfg(arch)
    model = build_segmentor(model_cfg, device)
    # the protocol's window, whatever the training crop of the benchmark
    timed = SegmentorSteps(model, crop, batch, device, slide_shape, window=min(512, *slide_shape))
    kind = torch.device(device).type
    bf16 = torch.autocast(kind, dtype=torch.bfloat16)

    eomt_cfg = eomt_model_cfg(arch)
    eomt = build_segmentor(eomt_cfg, device)
    eomt_timed = SegmentorSteps(eomt, crop, batch, device, slide_shape=(crop, crop), window=crop)
    dinov3_peer = dinov3_peer or (DINOV3_PEERS.get(arch) if isinstance(arch, str) else None)
    dinov3_eomt = None if dinov3_peer is None else build_segmentor(eomt_model_cfg(dinov3_peer), device)

    # whole-image inference of one raw (BGR, 0-255) image, as the ONNX graph computes it
    from .deploy.export import OnnxSegmentor
    image = torch.rand(1, 3, crop, crop, device=device) * 255

    def whole(autocast=contextlib.nullcontext, segmentor=model):
        whole_model = OnnxSegmentor(segmentor).eval()

        def run():
            segmentor.eval()
            segmentor.test_cfg = ConfigDict(mode='whole')
            with torch.no_grad(), autocast():
                return whole_model(image)
        return run

    def eomt_train(prob: float):
        # EoMT's train step costs most while every mask is on (P = 1, the first sixth of the
        # schedule) and least once all are annealed away (P = 0, the last sixth)
        step = eomt_timed.train()

        def run():
            eomt.decode_head.mask_probs = [prob] * eomt.decode_head.num_blocks
            step()
        return run

    steps = {'train': timed.train(), 'slide': timed.slide(), 'slide_bf16': timed.slide(lambda: bf16),
             'whole': whole(), 'whole_bf16': whole(lambda: bf16),
             'eomt_train': eomt_train(1.0), 'eomt_train_p0': eomt_train(0.0), 'eomt_whole': whole(segmentor=eomt)}
    if dinov3_eomt is not None:  # inference, as EoMT's zoo reports it
        steps['eomt_dinov3_whole'] = whole(segmentor=dinov3_eomt)
    if amp:
        steps['train_amp'] = timed.train(AMP_DTYPES[amp])
    session = _onnx_session(model, crop) if kind == 'cpu' else None
    if session is not None:
        array = image.cpu().numpy()
        steps['whole_onnxruntime'] = lambda: session.run(array)
    times = time_interleaved(steps, device, warmup, repeats)
    med = {k: statistics.median(v) for k, v in times.items()}
    labels_fp32, labels_bf16 = whole()()[1], whole(lambda: bf16)()[1]
    result = dict(segmentor_train_step_s=med['train'], slide_inference_2048x512_s=med['slide'],
                  slide_bf16_s=med['slide_bf16'], bf16_slide_speedup=med['slide'] / med['slide_bf16'],
                  whole_images_s=1 / med['whole'], whole_bf16_images_s=1 / med['whole_bf16'],
                  bf16_whole_speedup=med['whole'] / med['whole_bf16'],
                  bf16_label_agreement=(labels_fp32 == labels_bf16).float().mean().item(),
                  eomt_train_step_s=med['eomt_train'], eomt_train_step_p0_s=med['eomt_train_p0'],
                  eomt_whole_images_s=1 / med['eomt_whole'],
                  eomt_train_speedup=med['train'] / med['eomt_train'],
                  eomt_train_p0_speedup=med['train'] / med['eomt_train_p0'],
                  eomt_whole_speedup=med['whole'] / med['eomt_whole'])
    for key, (num, den) in {'eomt_train_speedup': ('train', 'eomt_train'),
                            'eomt_train_p0_speedup': ('train', 'eomt_train_p0'),
                            'eomt_whole_speedup': ('whole', 'eomt_whole')}.items():
        result[f'{key}_quartiles'] = quartiles([a / b for a, b in zip(times[num], times[den])])
    if dinov3_eomt is not None:
        result.update(eomt_dinov3_whole_images_s=1 / med['eomt_dinov3_whole'],
                      eomt_vs_dinov3_whole=med['eomt_dinov3_whole'] / med['eomt_whole'],
                      eomt_dinov3_arch=dinov3_peer)
        result['eomt_vs_dinov3_whole_quartiles'] = quartiles([a / b for a, b in zip(times['eomt_dinov3_whole'],
                                                                                    times['eomt_whole'])])
    if amp:
        result.update(segmentor_train_step_amp_s=med['train_amp'], amp_train_speedup=med['train'] / med['train_amp'],
                      amp_train_speedup_quartiles=quartiles([a / b for a, b in zip(times['train'],
                                                                                   times['train_amp'])]))
    if session is not None:
        result.update(whole_onnxruntime_images_s=1 / med['whole_onnxruntime'],
                      onnxruntime_vs_pytorch=med['whole'] / med['whole_onnxruntime'])
    if memory:
        del timed, steps, model, eomt, eomt_timed, dinov3_eomt
        result['segmentor_peak_mb'] = segmentor_peak_mb(model_cfg, crop, batch, device)
        result['eomt_peak_mb'] = segmentor_peak_mb(eomt_cfg, crop, batch, device)
        if amp:
            result['segmentor_peak_amp_mb'] = segmentor_peak_mb(model_cfg, crop, batch, device, amp)
    return result


def _onnx_session(model, crop: int):
    """The segmentor exported at crop x crop and opened with ONNX Runtime on the CPU (as
    many threads as torch), or None without the deploy extra."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return None
    import tempfile

    from .deploy import OnnxSession
    from .deploy.export import export_onnx
    path = Path(tempfile.mkdtemp()) / 'segmentor.onnx'
    export_onnx(model, path, shape=(crop, crop))
    return OnnxSession(path, threads=torch.get_num_threads())


def results_table(result: dict) -> str:
    rows = ['| measure | value | per-round quartiles | target |', '|---|---|---|---|']
    for key in ('fwd_bwd_s', 'mmseg_vit_fwd_bwd_s', 'timm_rope_vit_fwd_bwd_s', 'timm_deit3_fwd_bwd_s',
                'deit3_fwd_bwd_s', 'reference_fwd_bwd_s', 'with_cp_fwd_bwd_s', 'ratio_vs_mmseg_vit',
                'ratio_vs_timm_rope_vit', 'deit3_ratio_vs_timm_deit3', 'speedup_vs_reference',
                'with_cp_time_ratio', 'peak_mb', 'with_cp_peak_mb', 'with_cp_memory_ratio', 'compiled_fwd_bwd_s',
                'compiled_ratio', 'compile_first_step_s',
                'segmentor_train_step_s', 'segmentor_train_step_amp_s', 'amp_train_speedup', 'segmentor_peak_mb',
                'segmentor_peak_amp_mb', 'slide_inference_2048x512_s', 'slide_bf16_s', 'bf16_slide_speedup',
                'whole_images_s', 'whole_bf16_images_s', 'bf16_whole_speedup', 'bf16_label_agreement',
                'whole_onnxruntime_images_s', 'onnxruntime_vs_pytorch', 'eomt_train_step_s', 'eomt_train_speedup',
                'eomt_train_step_p0_s', 'eomt_train_p0_speedup', 'eomt_whole_images_s', 'eomt_whole_speedup',
                'eomt_peak_mb', 'eomt_dinov3_whole_images_s', 'eomt_vs_dinov3_whole'):
        if result.get(key) is not None:
            op, bound = {**TARGETS, **SEGMENTOR_TARGETS}.get(key, (None, None))
            verdict = ''
            if op:
                ok = result[key] <= bound if op == '<=' else result[key] >= bound
                verdict = f'{op} {bound} {"met" if ok else "NOT met"}'
            spread = result.get(f'{key}_quartiles')
            spread = f'{spread[0]:.3f} - {spread[1]:.3f}' if spread else ''
            rows.append(f'| {key} | {result[key]:.3f} | {spread} | {verdict} |')
    return '\n'.join(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--arch', type=parse_arch, default='vit5-small', help='preset or dict literal')
    parser.add_argument('--crop', type=int, default=512)
    parser.add_argument('--batch', type=int, default=2)
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--warmup', type=int, default=1)
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--amp', choices=['bf16', 'fp16'], default=None,
                        help='autocast dtype of the backbone steps and of a second segmentor train step (fp16: GPU)')
    parser.add_argument('--segmentor', action='store_true',
                        help='also time the UperNet train step, whole and slide inference, and its peak memory, '
                             'and EoMT\'s train step and whole-image inference beside them')
    parser.add_argument('--compile', action='store_true', help='also time torch.compile of our backbone')
    parser.add_argument('--panoptic', action='store_true',
                        help='time panoptic inference instead (mmdet predict at --crop, batch 1): EoMT with this '
                             'backbone, with DINOv3 of its size, and mmdet\'s Mask2Former on the same backbone '
                             '(vit5seg/benchmark_panoptic.py)')
    parser.add_argument('--sides', type=int, nargs='+', metavar='SIDE',
                        help='with --panoptic: time EoMT at each input side instead (and its DINOv3 peer), then the '
                             'peak memory of a training step of --batch images at the largest side')
    parser.add_argument('--no-memory', action='store_true', help='skip the peak-memory measurements')
    parser.add_argument('--json', help='write all figures to this file')
    args = parser.parse_args(argv)
    if args.panoptic:
        from .benchmark_panoptic import (panoptic_table, panoptic_timings, panoptic_train_peak_mb, resolution_table,
                                         resolution_timings)
        if args.sides:
            result = resolution_timings(args.arch, args.sides, args.device, args.warmup, args.repeats)
            if not args.no_memory:
                side = max(args.sides)
                peak = functools.partial(panoptic_train_peak_mb, args.arch, side, args.batch, args.device)
                result.update(train_side=side, train_batch=args.batch, train_peak_mb=peak(1.0),
                              train_peak_unmasked_mb=peak(0.0))
            table = resolution_table(result)
        else:
            result = panoptic_timings(args.arch, args.crop, args.device, args.warmup, args.repeats)
            table = panoptic_table(result)
        result.update(code_fields())
        print(f'code: {describe_code()}')
        print(table)
        if args.json:
            with open(args.json, 'w') as f:
                json.dump(result, f, indent=2)
        return result
    result = run_benchmark(args.arch, args.crop, args.batch, args.device, args.warmup, args.repeats, args.amp,
                           args.segmentor, args.compile, not args.no_memory)
    result.update(code_fields())
    print(f'code: {describe_code()}')
    print(f'arch={result["arch"]} crop={args.crop} batch={args.batch} device={result["device"]} '
          f'torch={result["torch_version"]} threads={result["threads"]} repeats={args.repeats}')
    print(results_table(result))
    if result.get('eomt_dinov3_arch'):
        print(f'eomt_dinov3: EoMT on {result["eomt_dinov3_arch"]}; eomt_vs_dinov3_whole: its time per image over '
              f'ViT-5 EoMT\'s. Anchor: EoMT\'s DINOv3-L at 512, {EOMT_DINOV3_L_H100_IMAGES_S} images/s compiled '
              'on one H100 (its model zoo)')
    for name, why in result['missing_peers'].items():
        print(f'not measured: {name} ({why})')
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == '__main__':
    main()
