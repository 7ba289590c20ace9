"""A frozen encoder's training cost against fine-tuning it (issue #53): the train step of two segmentors with
the encoder frozen and fine-tuned, interleaved in one process, then each one's peak memory (weights, gradients,
AdamW state and a step's activations; CPU: a fresh process's peak RSS growth):

- ``linear``: Meta's linear probe (configs/linear/: the last block's tap, BatchNorm, a 1x1 conv), whose
  cross-entropy over 150 classes at the full crop costs the same frozen or not;
- ``pmt``: PMT's ADE20K model (configs/pmt/, its decoder at the encoder's width and 4 taps), whose losses
  are on sampled points.
"""
import statistics
from typing import Sequence

from ..models.backbones.vit5 import resolve_arch
from ..models.builder import build_segmentor
from ..paths import config_path
from ..utils.timing import measure_cells, quartiles, time_interleaved
from .segmentor import SegmentorSteps, segmentor_peak_mb

# the expectations: a frozen step at most 0.4 of the fine-tuned one's time, 0.3 of its memory
FROZEN_TARGETS = {'frozen_time_ratio': ('<=', 0.4), 'frozen_memory_ratio': ('<=', 0.3)}


def linear_model_cfg(arch: str, frozen: bool):
    """The linear probe's model dict (configs/linear/) with this encoder, frozen or fine-tuned."""
    from mmengine.config import Config
    cfg = Config.fromfile(str(config_path('linear/vit5-base_linear_ade20k.py')))
    cfg.model.backbone.update(arch=arch, frozen=frozen, init_cfg=None)
    cfg.model.decode_head.in_channels = resolve_arch(arch)['embed_dims']
    return cfg.model


def pmt_model_cfg(arch: str, frozen: bool):
    """PMT's ADE20K model dict with this encoder (PMT's taps for 12 or 24 blocks, its MLP at the width)."""
    from mmengine.config import Config
    cfg = Config.fromfile(str(config_path('pmt/dinov3-large_pmt_ade20k-512.py')))
    size = resolve_arch(arch)
    width, depth = size['embed_dims'], size['num_layers']
    cfg.model.backbone.update(arch=arch, frozen=frozen, init_cfg=None)
    cfg.model.decode_head.in_channels = width
    cfg.model.decoder.update(embed_dims=width, num_heads=size['num_heads'], hidden_dims=width,
                             interaction_indices=tuple(depth // 4 * (i + 1) - 1 for i in range(4)))
    return cfg.model


HEADS = {'linear': linear_model_cfg, 'pmt': pmt_model_cfg}


def _name(arch) -> str:
    """A preset's name, or a dict's sizes (the figures' keys)."""
    if isinstance(arch, str):
        return arch
    size = resolve_arch(arch)
    return 'custom-{}x{}'.format(size['embed_dims'], size['num_layers'])


def frozen_timings(archs: Sequence[str] = ('vit5-small', 'dinov3-small'), crop: int = 512, batch: int = 2,
                   device: str = 'cpu', warmup: int = 1, repeats: int = 5, memory: bool = True,
                   heads: Sequence[str] = ('linear', 'pmt')) -> dict:
    """Per encoder and head: the train step frozen and fine-tuned (seconds, interleaved), their ratio with
    its per-round quartiles, and (``memory``) the two peaks and their ratio. Keys ``{arch}+{head}.{measure}``."""
    steps, cfgs = {}, {}
    archs = {_name(arch): arch for arch in archs}
    for name, arch in archs.items():
        for head in heads:
            for frozen in (True, False):
                cfgs[name, head, frozen] = HEADS[head](arch, frozen)
                model = build_segmentor(cfgs[name, head, frozen], device)
                steps[f'{name}+{head}.{"frozen" if frozen else "finetune"}'] = SegmentorSteps(
                    model, crop, batch, device, slide_shape=(crop, crop), window=crop).train()
    times = time_interleaved(steps, device, warmup, repeats)
    result = {}
    for arch in archs:
        for head in heads:
            key = f'{arch}+{head}'
            frozen, tuned = times[f'{key}.frozen'], times[f'{key}.finetune']
            result.update({f'{key}.frozen_train_step_s': statistics.median(frozen),
                           f'{key}.finetune_train_step_s': statistics.median(tuned),
                           f'{key}.frozen_time_ratio': statistics.median(frozen) / statistics.median(tuned),
                           f'{key}.frozen_time_ratio_quartiles': quartiles([a / b for a, b in zip(frozen, tuned)])})
    if memory:
        del steps
        for arch in archs:
            for head in heads:
                key = f'{arch}+{head}'
                peaks = {frozen: segmentor_peak_mb(cfgs[arch, head, frozen], crop, batch, device)
                         for frozen in (True, False)}
                result.update({f'{key}.frozen_peak_mb': peaks[True], f'{key}.finetune_peak_mb': peaks[False],
                               f'{key}.frozen_memory_ratio': peaks[True] / peaks[False]})
    return result


def frozen_table(result: dict) -> str:
    rows = ['| encoder + head | measure | value | per-round quartiles | target |', '|---|---|---|---|---|']
    for key in result:
        if key.endswith('_quartiles'):
            continue
        arch, measure = key.split('.', 1)
        rows.append(f'| {arch} | {measure} ' + measure_cells(result, key, FROZEN_TARGETS.get(measure)))
    return '\n'.join(rows)


__all__ = ['FROZEN_TARGETS', 'HEADS', 'frozen_table', 'frozen_timings', 'linear_model_cfg', 'pmt_model_cfg']
