"""The self-check's figures: RMSNorm both ways, train and inference speed and memory of our
UperNets beside mmseg's own, EoMT S/B/L eager and compiled, and the run time and memory of
the entry configs on 1, 2, 4 and 8 GPUs."""
import copy
import os
import statistics
import time
from pathlib import Path
from typing import List, Optional

import torch
import torch._dynamo
from torch._dynamo.utils import counters

from ..benchmark.segmentor import SegmentorSteps, segmentor_peak_mb
from ..engine.accumulation import batch_plan
from ..models.builder import build_segmentor
from ..paths import config_path
from ..utils.amp import AMP_DTYPES
from ..utils.timing import sync_device, time_interleaved
from .checks import ENTRY_CONFIGS

GPU_COUNTS = (1, 2, 4, 8)
EOMT_CONFIGS = {f'vit5-{size}-eomt': config_path(f'eomt/vit5-{size}_eomt_ade20k.py')
                for size in ('small', 'base', 'large')}
# DINOv3-L EoMT beside ViT-5-L: EoMT's best published model; its zoo's anchor is 137 images/s
# compiled on one H100 (tue-mps/eomt model_zoo/dinov3.md). CPU: the S sizes.
EOMT_CONFIGS['dinov3-large-eomt'] = config_path('eomt/dinov3-large_eomt_ade20k.py')
CPU_EOMT_CONFIGS = {f'{family}-small-eomt': config_path(f'eomt/{family}-small_eomt_ade20k.py')
                    for family in ('vit5', 'dinov3')}
EOMT_ANCHOR = ('EoMT\'s zoo: DINOv3-L EoMT at 512, 137 images/s compiled (200 with max-autotune) on one H100; '
               'compare the dinov3-large-eomt compiled row at batch 1')


def rms_norm_figures(device: str, width: int, repeats: int = 20) -> dict:
    """fwd+bwd of the two RMSNorm implementations on a ViT token tensor, in ms."""
    from ..models.layers import RMSNorm
    x = torch.randn(2, 1029, width, device=device, requires_grad=True)
    norms = {impl: RMSNorm(width, impl=impl).to(device) for impl in ('exact', 'fused')}

    def step(norm):
        def run():
            for _ in range(repeats):
                norm(x).sum().backward()
        return run
    times = time_interleaved({k: step(n) for k, n in norms.items()}, device, warmup=1, repeats=5)
    out = {f'rms_norm_{k}_ms': round(1e3 * statistics.median(v) / repeats, 3) for k, v in times.items()}
    out['rms_norm_faster'] = min(('exact', 'fused'), key=lambda k: out[f'rms_norm_{k}_ms'])
    return out


def segmentor_figures(device: str, repeats: int) -> dict:
    """Train step and inference images/s (and peak GPU memory) of ViT-5, DeiT-III and
    mmseg's own DeiT UperNet, and of ViT-5 EoMT, interleaved in this process. GPU: B sizes, 512 crops, 2
    images per step, slide over 2048x512; CPU: S sizes at a quarter of the pixels."""
    import mmseg
    size = 'base' if device == 'cuda' else 'small'
    mmseg_cfgs = Path(mmseg.__file__).parent / '.mim' / 'configs' / 'vit'
    if size == 'base':  # the entry pair
        ours = list(ENTRY_CONFIGS.values())
    else:
        ours = [config_path(f'{family}/{family}-small_upernet_ade20k.py') for family in ('vit5', 'deit3')]
    configs = {f'vit5-{size}': ours[0], f'deit3-{size}': ours[1],
               f'mmseg-deit-{size[0]}16': mmseg_cfgs / f'vit_deit-{size[0]}16_mln_upernet_8xb2-160k_ade20k-512x512.py',
               f'vit5-{size}-eomt': config_path(f'eomt/vit5-{size}_eomt_ade20k.py')}
    crop = 512 if device == 'cuda' else 256
    slide_hw = (crop, 4 * crop)
    batch = 2
    figures = dict(size=size, crop=crop, batch=batch, slide=f'{slide_hw[1]}x{slide_hw[0]}', repeats=repeats)
    steps = {}
    for name, config in configs.items():
        timed = SegmentorSteps(build_segmentor(config, device), crop, batch, device, slide_hw, window=crop)
        steps.update({f'{name}/train': timed.train(), f'{name}/whole': timed.whole(), f'{name}/slide': timed.slide()})
    times = time_interleaved(steps, device, warmup=1, repeats=repeats)
    del steps, timed
    for key, values in times.items():
        name, what = key.split('/')
        per_call = statistics.median(values)
        images = 1 if what == 'slide' else batch
        figures[f'{name} {what} images/s'] = round(images / per_call, 3)
    reference = f'mmseg-deit-{size[0]}16'
    for name in configs:
        if name != reference:
            figures[f'{name} train speed vs {reference} (x)'] = round(
                figures[f'{name} train images/s'] / figures[f'{reference} train images/s'], 3)
    if device == 'cuda':  # weights, gradients, AdamW state and a step's activations
        for name, config in configs.items():
            figures[f'{name} train peak GiB'] = round(segmentor_peak_mb(_model_cfg(config), crop, batch, device) / 1024, 2)
    return figures


def _model_cfg(config):
    from mmengine.config import Config
    return Config.fromfile(str(config)).model


def device_memory_gib(device: str) -> float:
    if device == 'cuda':
        return torch.cuda.get_device_properties(0).total_memory / 2 ** 30
    return os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2 ** 30


def eomt_figures(device: str, repeats: int, configs=None, crop: Optional[int] = None,
                 modes=('eager', 'compiled'), precisions=('float32', 'bf16')) -> List[dict]:
    """EoMT of each config (default: ViT-5 S, B, L and DINOv3-L on CUDA; ViT-5-S and DINOv3-S on
    CPU), one row per
    (mode, precision): whole-image inference images/s at batch 1 and 8, train images/s at
    the config's images per GPU (every mask on, P = 1: the costliest step), float32 and bf16
    autocast, eager and compiled (the config's ``model.backbone.compile`` arguments, or
    ``True``); on CUDA the train step's peak
    memory. The compiled rows add the first train step's seconds (compiling included).
    Crops: 512 on CUDA, 128 on CPU. Eager and compiled are interleaved per config."""
    from mmengine.config import Config
    cuda = device == 'cuda'
    crop = crop or (512 if cuda else 128)
    configs = configs or (EOMT_CONFIGS if cuda else CPU_EOMT_CONFIGS)
    kind = torch.device(device).type
    rows = []
    for name, config in configs.items():
        # dynamo caches per code object, and every EoMT shares _run_block's: without a reset the
        # second and third config reach its recompile limit and their "compiled" rows run eager
        torch._dynamo.reset()
        counters.clear()
        cfg = Config.fromfile(str(config))
        per_gpu = cfg.train_dataloader.batch_size
        steps, first_step = {}, {}
        # compiled: with the config's torch.compile arguments where it has some
        compile_args = {'eager': False, 'compiled': cfg.model.backbone.get('compile') or True}
        model_cfgs = {mode: _with_compile(cfg.model, compile_args[mode]) for mode in modes}
        for mode in modes:
            model = build_segmentor(model_cfgs[mode], device)
            timed = {n: SegmentorSteps(model, crop, n, device, (crop, crop), window=crop) for n in {1, 8, per_gpu}}
            for precision in precisions:
                amp = AMP_DTYPES.get(precision)

                def autocast(amp=amp):
                    return torch.autocast(kind, dtype=amp, enabled=amp is not None)
                train = timed[per_gpu].train(amp)
                if mode == 'compiled':  # the first call compiles; timed apart from the steady steps
                    start = time.perf_counter()
                    train()
                    sync_device(device)
                    first_step[precision] = time.perf_counter() - start
                steps.update({(mode, precision, 'train'): train, (mode, precision, 'b1'): timed[1].whole(autocast),
                              (mode, precision, 'b8'): timed[8].whole(autocast)})
        with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):  # a fallback to eager is an error
            times = time_interleaved(steps, device, warmup=1, repeats=repeats)
        graphs = counters['stats']['unique_graphs']
        if 'compiled' in modes and not graphs:
            raise RuntimeError(f'{name}: the compiled EoMT compiled no graph, so its rows would time eager code')
        del steps, timed, model
        for mode in modes:
            for precision in precisions:
                med = {what: statistics.median(times[(mode, precision, what)]) for what in ('train', 'b1', 'b8')}
                row = dict(model=name, mode=mode, precision=precision, crop=crop,
                           infer_b1_images_s=round(1 / med['b1'], 2), infer_b8_images_s=round(8 / med['b8'], 2),
                           train_images_s=round(per_gpu / med['train'], 2))
                if mode == 'compiled':
                    row['first_train_step_s'] = round(first_step[precision], 1)
                    row['compiled_graphs'] = graphs
                if cuda:
                    peak = segmentor_peak_mb(model_cfgs[mode], crop, per_gpu, device,
                                             None if precision == 'float32' else precision)
                    row['train_peak_gib'] = round(peak / 1024, 2)
                rows.append(row)
    return rows


def _with_compile(model_cfg, compile_args):
    """A copy of ``model_cfg`` whose backbone compiles with ``compile_args`` (a ConfigDict's
    copy() is shallow: it would change the config's own backbone)."""
    model_cfg = copy.deepcopy(model_cfg)
    model_cfg.backbone.compile = compile_args
    return model_cfg


def eomt_table(rows: List[dict]) -> List[str]:
    tail = ('train_peak_gib', 'first_train_step_s', 'compiled_graphs')
    columns = [k for k in rows[0] if k not in tail]
    columns += [k for k in tail if any(k in r for r in rows)]
    lines = ['| ' + ' | '.join(columns) + ' |', '|' + '---|' * len(columns)]
    return lines + ['| ' + ' | '.join(str(r.get(c, '')) for c in columns) + ' |' for r in rows]


def schedule_estimates(configs, device: str, repeats: int, crop: Optional[int] = None) -> List[dict]:
    """For each config, at its images per GPU and iterations (and its crop, or ``crop`` to
    measure at a smaller size): the train step measured here in float32 and under bf16
    autocast (fp16 on a GPU without bf16), its peak memory against the device's, and the
    hours of train steps the schedule takes on 1, 2, 4 and 8 such GPUs keeping the config's
    images per iteration (``--accumulate auto``: each iteration is that many micro-batch
    steps). A DDP rank's step is this step plus the gradient all-reduce (not measured
    here); data loading and validation are not counted."""
    from mmengine.config import Config
    total_gib = device_memory_gib(device)
    amp = 'fp16' if device == 'cuda' and not torch.cuda.is_bf16_supported() else 'bf16'
    rows = []
    for config in configs:
        cfg = Config.fromfile(str(config))
        size = crop or cfg.crop_size[0]
        per_gpu, iters = cfg.train_dataloader.batch_size, cfg.train_cfg.max_iters
        plans = {gpus: batch_plan(cfg, gpus, 'auto') for gpus in GPU_COUNTS}
        timed = SegmentorSteps(build_segmentor(cfg.model, device), size, per_gpu, device, (size, size), window=size)
        times = time_interleaved({None: timed.train(), amp: timed.train(AMP_DTYPES[amp])}, device, warmup=2,
                                 repeats=repeats)
        del timed
        for precision, values in times.items():
            step = statistics.median(values)
            peak = segmentor_peak_mb(cfg.model, size, per_gpu, device, precision) / 1024
            rows.append(dict(config=Path(config).name, precision=precision or 'float32', crop=size,
                             images_per_gpu=per_gpu, iterations=iters, step_s=round(step, 4),
                             peak_gib=round(peak, 2), gpu_gib=round(total_gib, 1), fits=peak < 0.95 * total_gib,
                             images_per_iteration=plans[1].images_per_iteration,
                             micro_batches={g: p.micro_batches for g, p in plans.items()},
                             hours={g: round(iters * p.micro_batches * step / 3600, 2) for g, p in plans.items()},
                             unit='GPU' if device == 'cuda' else 'process'))
    return rows


def estimate_line(row: dict) -> str:
    fits = 'fits' if row['fits'] else 'does NOT fit'
    unit = row.get('unit', 'GPU')
    hours = ', '.join(f"{h:.1f} h on {g} {unit}{'s' if g > 1 else ''}" for g, h in row['hours'].items())
    return (f"{row['config']} ({row['precision']}, {row['crop']}px): {row['step_s']:.3f} s per step of "
            f"{row['images_per_gpu']} images; {row['iterations']} iterations of {row['images_per_iteration']} "
            f"images: {hours}; peak {row['peak_gib']:.1f} of {row['gpu_gib']:.0f} GiB: {fits}")
