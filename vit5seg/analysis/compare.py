"""Pair ViT-5 and DeiT-III runs by model size and compare their ADE20K metrics.

A work dir is what ``tools/train.py`` or ``tools/test.py`` wrote: each launch leaves
``<timestamp>/vis_data/config.py`` (the full config) and ``scalars.json``; a test launch
also ``<timestamp>/<timestamp>.json`` (its metrics). Test metrics win over the last
validation of a training run; a test through ``--tta`` (``SegTTAModel``) is multi-scale.
"""
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from mmengine.config import Config

from ..models.backbones.vit5 import ARCH_PRESETS

FAMILIES = {'vit5': 'ViT-5', 'deit3': 'DeiT-III'}
# The paper's ViT-5 minus DeiT-III mIoU (ADE20K val, UperNet, single scale); only Base is reported.
PAPER_DELTA = {'base': 2.7}
METRICS = ('mIoU', 'mAcc', 'aAcc')


@dataclass
class RunResult:
    work_dir: str
    family: Optional[str] = None
    size: Optional[str] = None
    single: Dict[str, float] = field(default_factory=dict)  # single-scale metrics
    multi: Dict[str, float] = field(default_factory=dict)   # multi-scale (TTA)
    status: str = 'ok'


def _size_key(backbone: dict) -> Optional[str]:
    arch = backbone.get('arch', 'vit5-base')
    if not isinstance(arch, str) or '-' not in arch or arch not in ARCH_PRESETS:
        return None
    size = arch.split('-', 1)[1]
    preset = ARCH_PRESETS[arch]
    changed = {k: backbone[k] for k in ('embed_dims', 'num_layers', 'num_heads')
               if backbone.get(k) is not None and backbone[k] != preset[k]}
    if changed:  # a shrunk model (the tiny configs) pairs only with the same shrink
        size += ' (' + ', '.join(f'{k}={v}' for k, v in changed.items()) + ')'
    return size


def _backbone(cfg) -> dict:
    model = cfg.model
    if model.get('type') == 'SegTTAModel':
        model = model.module
    return model.backbone


def read_run(work_dir) -> RunResult:
    work_dir = Path(work_dir)
    result = RunResult(str(work_dir))
    launches = sorted(work_dir.glob('*/vis_data/config.py'))
    if not work_dir.is_dir() or not launches:
        result.status = 'missing (no mmengine run in this folder)'
        return result
    configs = [Config.fromfile(str(launch)) for launch in launches]
    cfg = configs[-1]
    backbone = _backbone(cfg)
    arch = backbone.get('arch', '')
    family = next((name for prefix, name in FAMILIES.items() if str(arch).startswith(prefix)), None)
    if family is None:
        result.status = f'not a ViT-5 or DeiT-III run (arch {arch!r})'
        return result
    result.family, result.size = family, _size_key(backbone)
    last_val, last_iter, max_iters = {}, 0, cfg.get('train_cfg', {}).get('max_iters')
    for launch, launch_cfg in zip(launches, configs):
        stamp = launch.parent.parent
        test_json = stamp / f'{stamp.name}.json'
        if test_json.is_file():
            metrics = json.loads(test_json.read_text())
            target = result.multi if launch_cfg.model.get('type') == 'SegTTAModel' else result.single
            target.update({k: float(metrics[k]) for k in METRICS if k in metrics})
            continue
        scalars = launch.parent / 'scalars.json'
        if scalars.is_file():
            for line in scalars.read_text().splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a cut last line
                if 'mIoU' in record:
                    last_val = {k: float(record[k]) for k in METRICS if k in record}
                    last_iter = max(last_iter, int(record.get('step', 0)))
                if 'iter' in record:
                    last_iter = max(last_iter, int(record['iter']))
    # the log has only every logger-interval-th iteration: checkpoints tell the rest
    saved = [int(p.stem.split('_')[1]) for p in work_dir.glob('iter_*.pth') if p.stem.split('_')[1].isdigit()]
    last_iter = max([last_iter, *saved])
    if not result.single and last_val:
        result.single = last_val
        result.status = 'ok (last validation; no test run here)'
    if max_iters and last_iter and last_iter < max_iters and not (result.single or result.multi):
        result.status = f'unfinished (iteration {last_iter} of {max_iters}, no metrics yet)'
    elif max_iters and last_iter and last_iter < max_iters:
        result.status = f'unfinished (iteration {last_iter} of {max_iters}): metrics so far'
    elif not (result.single or result.multi):
        result.status = 'no metrics (not evaluated or tested yet)'
    return result


def compare(runs: List[RunResult], tolerance: float) -> List[dict]:
    """One row per size (in the order the runs were given): both families' metrics, delta, the paper's delta."""
    sizes = []
    for r in runs:
        if r.size and r.size not in sizes:
            sizes.append(r.size)
    rows = []
    for size in sizes:
        row = {'size': size}
        for family in FAMILIES.values():
            found = [r for r in runs if r.size == size and r.family == family]
            # single- and multi-scale tests usually sit in separate work dirs: each scale
            # comes from the last dir given that has it
            sources = {attr: next((r for r in reversed(found) if getattr(r, attr)), None)
                       for attr in ('single', 'multi')}
            used = [r for r in found if r in sources.values()] or found[-1:]
            row[f'{family} status'] = '; '.join(r.status for r in used) if used else 'missing (no work dir given)'
            row[f'{family} work_dir'] = ', '.join(r.work_dir for r in used)
            for scale, attr in (('ss', 'single'), ('ms', 'multi')):
                for m in METRICS:
                    run = sources[attr]
                    row[f'{family} {m} ({scale})'] = getattr(run, attr).get(m) if run else None
        for scale in ('ss', 'ms'):
            a, b = row[f'ViT-5 mIoU ({scale})'], row[f'DeiT-III mIoU ({scale})']
            row[f'delta mIoU ({scale})'] = None if a is None or b is None else round(a - b, 2)
        paper = PAPER_DELTA.get(size)
        row['paper delta mIoU (ss)'] = paper
        delta = row['delta mIoU (ss)']
        if paper is None:
            row['within tolerance'] = 'no paper figure'
        elif delta is None:
            row['within tolerance'] = 'incomplete'
        else:
            row['within tolerance'] = 'yes' if abs(delta - paper) <= tolerance else 'no'
        rows.append(row)
    return rows


def _fmt(value) -> str:
    if value is None:
        return '—'
    return f'{value:.2f}' if isinstance(value, float) else str(value)


def to_markdown(rows: List[dict], runs: List[RunResult], tolerance: float) -> str:
    lines = ['# ViT-5 vs DeiT-III (UperNet, ADE20K)', '',
             f'delta = ViT-5 - DeiT-III mIoU; within tolerance: |delta - paper delta| <= {tolerance} mIoU.', '',
             '| size | ViT-5 mIoU | DeiT-III mIoU | delta | paper delta | within tolerance | '
             'ViT-5 mIoU (ms) | DeiT-III mIoU (ms) | delta (ms) | ViT-5 mAcc / aAcc | DeiT-III mAcc / aAcc |',
             '|---|---|---|---|---|---|---|---|---|---|---|']
    for row in rows:
        delta, paper = row['delta mIoU (ss)'], row['paper delta mIoU (ss)']
        lines.append('| ' + ' | '.join([
            row['size'], _fmt(row['ViT-5 mIoU (ss)']), _fmt(row['DeiT-III mIoU (ss)']),
            '—' if delta is None else f'{delta:+.2f}', '—' if paper is None else f'{paper:+.1f}',
            row['within tolerance'], _fmt(row['ViT-5 mIoU (ms)']), _fmt(row['DeiT-III mIoU (ms)']),
            '—' if row['delta mIoU (ms)'] is None else f"{row['delta mIoU (ms)']:+.2f}",
            f"{_fmt(row['ViT-5 mAcc (ss)'])} / {_fmt(row['ViT-5 aAcc (ss)'])}",
            f"{_fmt(row['DeiT-III mAcc (ss)'])} / {_fmt(row['DeiT-III aAcc (ss)'])}"]) + ' |')
    lines += ['', '## Runs', '']
    for row in rows:
        for family in FAMILIES.values():
            lines.append(f"- {row['size']}, {family}: {row[f'{family} status']}"
                         + (f" (`{row[f'{family} work_dir']}`)" if row[f'{family} work_dir'] else ''))
    for r in runs:
        if not r.size:
            lines.append(f'- `{r.work_dir}`: {r.status}')
    return '\n'.join(lines) + '\n'
