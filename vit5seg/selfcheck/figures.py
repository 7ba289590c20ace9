"""The self-check's figures: RMSNorm both ways, train and inference speed and memory of our
UperNets beside mmseg's own, and the run time and memory of the entry configs."""
import os
import statistics
from pathlib import Path
from typing import List

import torch

from ..benchmark import AMP_DTYPES, SegmentorSteps, segmentor_peak_mb
from ..models.segmentor import build_segmentor
from ..paths import config_path
from ..utils.timing import time_interleaved
from .checks import ENTRY_CONFIGS

# the protocol's images per iteration (8 GPUs x 2), shared/segmentation-protocol.md
PROTOCOL_BATCH = 16


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


def schedule_estimates(configs, device: str, gpus: int, repeats: int) -> List[dict]:
    """For each config, as configured (crop, images per GPU, iterations): the train step
    measured here in float32 and under bf16 autocast (fp16 on a GPU without bf16), its peak
    memory against the device's, and the hours the schedule takes at that step. A DDP
    rank's step is this step plus the gradient all-reduce (not measured here); data
    loading and validation are not counted."""
    from mmengine.config import Config
    total_gib = device_memory_gib(device)
    amp = 'fp16' if device == 'cuda' and not torch.cuda.is_bf16_supported() else 'bf16'
    rows = []
    for config in configs:
        cfg = Config.fromfile(str(config))
        crop, per_gpu, iters = cfg.crop_size[0], cfg.train_dataloader.batch_size, cfg.train_cfg.max_iters
        timed = SegmentorSteps(build_segmentor(cfg.model, device), crop, per_gpu, device, (crop, crop), window=crop)
        times = time_interleaved({None: timed.train(), amp: timed.train(AMP_DTYPES[amp])}, device, warmup=2,
                                 repeats=repeats)
        del timed
        for precision, values in times.items():
            step = statistics.median(values)
            peak = segmentor_peak_mb(cfg.model, crop, per_gpu, device, precision) / 1024
            rows.append(dict(config=Path(config).name, precision=precision or 'float32', crop=crop,
                             images_per_gpu=per_gpu, iterations=iters, step_s=round(step, 4),
                             peak_gib=round(peak, 2), gpu_gib=round(total_gib, 1), fits=peak < 0.95 * total_gib,
                             gpus=gpus, images_per_iteration=gpus * per_gpu,
                             hours=round(iters * step / 3600, 2)))
    return rows


def estimate_line(row: dict) -> str:
    fits = 'fits' if row['fits'] else 'does NOT fit'
    protocol = '' if row['images_per_iteration'] == PROTOCOL_BATCH else (
        f"; the protocol's {PROTOCOL_BATCH} images/iteration need {PROTOCOL_BATCH // row['images_per_gpu']} GPUs")
    return (f"{row['config']} ({row['precision']}): {row['iterations']} iterations x {row['step_s']:.3f} s = "
            f"{row['hours']:.1f} h of train steps on {row['gpus']} GPU(s) x {row['images_per_gpu']} images"
            f"{protocol}; peak {row['peak_gib']:.1f} of {row['gpu_gib']:.0f} GiB: {fits}")
