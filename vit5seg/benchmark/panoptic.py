"""Panoptic inference speed (``tools/benchmark.py --panoptic``): EoMT as an mmdet model at its
input side (640), ViT-5 against DINOv3 of the same size, and EoMT against mmdet's own
Mask2Former on the same ViT-5 backbone (its taps and Feature2Pyramid neck, the backbone of
mmseg's registry in an mmdet config). Each model runs mmdet's whole ``predict``: the network,
the mask upsampling and MaskFormerFusionHead's panoptic map. Timed interleaved in one process.

``--sides 640 1280``: the same predict at each input side, ViT-5 and its DINOv3 peer, and the
peak memory of one EoMT training step at the largest side (every mask on, as in the first
part of the schedule: each masked block holds a dense (B, Q + tokens)^2 attention mask).
"""
import statistics
from typing import Dict, Sequence

import torch

from ..models.backbones.vit5 import resolve_arch
from ..paths import config_path
from ..utils.memory import peak_rss_mb, probe_peak_mb
from ..utils.timing import quartiles, sync_device, time_interleaved
from .backbone import DINOV3_PEERS

def _taps(depth: int):
    return (3, 5, 7, 11) if depth == 12 else (7, 11, 15, 23)


def eomt_detector(arch: str, side: int):
    """The COCO panoptic EoMT config's model with this backbone, random weights."""
    from mmengine.config import Config
    from mmengine.registry import DefaultScope
    from mmdet.registry import MODELS
    cfg = Config.fromfile(str(config_path('eomt/vit5-base_eomt_coco-panoptic-640.py')))
    width, depth = resolve_arch(arch)['embed_dims'], resolve_arch(arch)['num_layers']
    cfg.model.backbone.update(arch=arch, init_cfg=None)
    cfg.model.decode_head.update(in_channels=width, num_blocks=3 if depth <= 12 else 4)
    cfg.model.data_preprocessor.pad_size = (side, side)
    with DefaultScope.overwrite_default_scope('mmdet'):
        return MODELS.build(cfg.model)


def mask2former_detector(arch: str):
    """mmdet's Mask2Former COCO panoptic model (mask2former_r50_8xb2-lsj-50e_coco-panoptic.py) with
    its ResNet replaced by this ViT-5 and the entry config's Feature2Pyramid."""
    from mmengine.hub import get_config
    from mmengine.registry import DefaultScope
    from mmdet.registry import MODELS
    cfg = get_config('mmdet::mask2former/mask2former_r50_8xb2-lsj-50e_coco-panoptic.py')
    width, depth = resolve_arch(arch)['embed_dims'], resolve_arch(arch)['num_layers']
    cfg.model.backbone = dict(type='mmseg.ViT5', arch=arch, img_size=224, out_indices=_taps(depth))
    cfg.model.neck = dict(type='mmseg.Feature2Pyramid', embed_dim=width, rescales=[4, 2, 1, 0.5],
                          norm_cfg=dict(type='BN', requires_grad=True))
    cfg.model.panoptic_head.in_channels = [width] * 4
    cfg.model.test_cfg.instance_on = False   # the panoptic map only, as EoMT's
    with DefaultScope.overwrite_default_scope('mmdet'):
        return MODELS.build(cfg.model)


def _predict_step(model, side: int, device):
    from mmdet.structures import DetDataSample
    model = model.to(device).eval()
    x = torch.randn(1, 3, side, side, device=device)
    meta = dict(img_shape=(side, side), ori_shape=(side, side), batch_input_shape=(side, side), pad_shape=(side, side),
                scale_factor=(1.0, 1.0))

    def step():
        with torch.no_grad():
            model.predict(x, [DetDataSample(metainfo=meta)])
    return step


def panoptic_timings(arch: str = 'vit5-small', side: int = 640, device: str = 'cpu', warmup: int = 1,
                     repeats: int = 5, mask2former: bool = True) -> Dict[str, object]:
    """Seconds per image (median, quartiles) and the ratios: ``vit5_vs_dinov3`` (ViT-5 EoMT's time
    over DINOv3 EoMT's) and ``mask2former_vs_eomt`` (Mask2Former's over EoMT's: EoMT's speed-up)."""
    steps = {'eomt': _predict_step(eomt_detector(arch, side), side, device)}
    peer = DINOV3_PEERS.get(arch if isinstance(arch, str) else '')
    if peer:
        steps['eomt_dinov3'] = _predict_step(eomt_detector(peer, side), side, device)
    if mask2former:
        steps['mask2former'] = _predict_step(mask2former_detector(arch), side, device)
    times = time_interleaved(steps, device, warmup, repeats)
    out = {'arch': arch, 'dinov3_peer': peer, 'side': side, 'device': str(device), 'repeats': repeats,
           'threads': torch.get_num_threads(), 'torch_version': torch.__version__}
    for name, values in times.items():
        out[f'{name}_s'] = statistics.median(values)
        out[f'{name}_s_quartiles'] = quartiles(values)
    if peer:
        ratios = [a / b for a, b in zip(times['eomt'], times['eomt_dinov3'])]
        out['vit5_vs_dinov3'] = statistics.median(ratios)
    if mask2former:
        ratios = [a / b for a, b in zip(times['mask2former'], times['eomt'])]
        out['mask2former_vs_eomt'] = statistics.median(ratios)
        out['mask2former_vs_eomt_quartiles'] = quartiles(ratios)
    return out


def panoptic_table(result: dict) -> str:
    lines = [f'panoptic inference at {result["side"]}x{result["side"]}, batch 1, mmdet predict (network, mask '
             f'upsampling, fusion), {result["device"]}, {result["threads"]} threads, median of {result["repeats"]}']
    for name, label in (('eomt', f'EoMT {result["arch"]}'), ('eomt_dinov3', f'EoMT {result["dinov3_peer"]}'),
                        ('mask2former', f'Mask2Former {result["arch"]} (Feature2Pyramid)')):
        if f'{name}_s' in result:
            lines.append(f'  {label}: {result[f"{name}_s"] * 1000:.1f} ms')
    if 'vit5_vs_dinov3' in result:
        lines.append(f'  vit5_vs_dinov3: {result["vit5_vs_dinov3"]:.3f} (ViT-5 EoMT time / DINOv3 EoMT time)')
    if 'mask2former_vs_eomt' in result:
        q1, q3 = result['mask2former_vs_eomt_quartiles']
        lines.append(f'  mask2former_vs_eomt: {result["mask2former_vs_eomt"]:.2f} (Mask2Former time / EoMT time; '
                     f'quartiles {q1:.2f}-{q3:.2f})')
    return '\n'.join(lines)


def resolution_timings(arch: str = 'vit5-small', sides: Sequence[int] = (640, 1280), device: str = 'cpu',
                       warmup: int = 1, repeats: int = 3) -> Dict[str, object]:
    """EoMT's panoptic predict at each side, for ``arch`` and its DINOv3 peer, interleaved:
    seconds per image (median) and each side's time over the first side's."""
    peer = DINOV3_PEERS.get(arch if isinstance(arch, str) else '')
    archs = [arch] + ([peer] if peer else [])
    steps = {f'{a}@{side}': _predict_step(eomt_detector(a, side), side, device) for a in archs for side in sides}
    times = time_interleaved(steps, device, warmup, repeats)
    out = {'archs': archs, 'sides': list(sides), 'device': str(device), 'repeats': repeats,
           'threads': torch.get_num_threads(), 'torch_version': torch.__version__, 'seconds': {}, 'ratios': {}}
    for a in archs:
        first = times[f'{a}@{sides[0]}']
        for side in sides:
            values = times[f'{a}@{side}']
            out['seconds'][f'{a}@{side}'] = statistics.median(values)
            out['ratios'][f'{a}@{side}'] = statistics.median(v / f for v, f in zip(values, first))
    return out


def _train_step(model, side: int, batch: int, device, mask_prob: float = 1.0):
    """One EoMT training step (AdamW) on ``batch`` images of ``side`` with 8 things and 2 stuff
    regions each; every attention mask on (``mask_prob`` 1: the start of the schedule) or off (0:
    its end)."""
    from mmdet.structures import DetDataSample
    from mmdet.structures.mask import BitmapMasks
    from mmengine.structures import InstanceData, PixelData
    model = model.to(device).train()
    model.decoder.mask_probs = [mask_prob] * len(model.decoder.mask_probs)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(batch, 3, side, side, generator=g).to(device)
    samples = []
    for _ in range(batch):
        masks = torch.zeros(8, side, side, dtype=torch.uint8)
        for k in range(8):
            y0, x0 = (int(v) for v in torch.randint(0, side * 3 // 4, (2,), generator=g))
            masks[k, y0:y0 + side // 4, x0:x0 + side // 4] = 1
        sem = torch.full((1, side, side), 255, dtype=torch.long)
        sem[:, :side // 2], sem[:, side // 2:] = model.num_things_classes, model.num_things_classes + 1
        sample = DetDataSample(metainfo=dict(img_shape=(side, side), pad_shape=(side, side),
                                             batch_input_shape=(side, side)))
        sample.gt_instances = InstanceData(labels=torch.arange(8) % model.num_things_classes,
                                           masks=BitmapMasks(masks.numpy(), side, side))
        sample.gt_sem_seg = PixelData(sem_seg=sem)
        samples.append(sample)
    optim = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        losses = model.loss(x, samples)
        optim.zero_grad()
        sum(v for k, v in losses.items() if 'loss' in k).backward()
        optim.step()
    return step


def panoptic_train_peak_mb(arch: str, side: int, batch: int, device: str = 'cpu', mask_prob: float = 1.0) -> float:
    """Peak memory of EoMT's panoptic training at ``side`` (weights, gradients, AdamW state, a
    step's activations and masks; two steps): CUDA max allocated, or on CPU the growth of peak
    RSS in a fresh subprocess (as vit5seg.benchmark measures the segmentors)."""
    if torch.device(device).type == 'cuda':
        sync_device(device)
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        step = _train_step(eomt_detector(arch, side), side, batch, device, mask_prob)
        step()
        step()
        sync_device(device)
        return (torch.cuda.max_memory_allocated() - base) / 2 ** 20
    return probe_peak_mb('import json, vit5seg; from vit5seg.benchmark.panoptic import _cpu_train_probe; '
                         f'print(json.dumps(_cpu_train_probe({arch!r}, {side}, {batch}, {mask_prob})))')


def _cpu_train_probe(arch: str, side: int, batch: int, mask_prob: float) -> float:
    before = peak_rss_mb()
    step = _train_step(eomt_detector(arch, side), side, batch, 'cpu', mask_prob)
    step()
    step()
    return peak_rss_mb() - before


def resolution_table(result: dict) -> str:
    lines = [f'EoMT panoptic inference by input side, batch 1, mmdet predict, {result["device"]}, '
             f'{result["threads"]} threads, median of {result["repeats"]}']
    for a in result['archs']:
        for side in result['sides']:
            key = f'{a}@{side}'
            lines.append(f'  {a} at {side}: {result["seconds"][key]:.3f} s ({result["ratios"][key]:.2f}x '
                         f'{result["sides"][0]})')
    if 'train_peak_mb' in result:
        lines.append(f'  training step at {result["train_side"]}, {result["train_batch"]} images, '
                     f'{result["archs"][0]}: peak {result["train_peak_mb"]:.0f} MB with every attention mask on, '
                     f'{result["train_peak_unmasked_mb"]:.0f} MB with none')
    return '\n'.join(lines)
