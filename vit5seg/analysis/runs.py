"""Reading the work dirs of trainings and tests into runs (the comparison's input).

A work dir is what ``tools/train.py`` or ``tools/test.py`` wrote: each launch leaves
``<timestamp>/vis_data/config.py`` (the full config), ``scalars.json`` and the log; a test
launch also ``<timestamp>/<timestamp>.json`` (its metrics). A *run* is one training: the
work dir it trained in, plus the test dirs whose checkpoint (``load_from``) came from it.
Its seed is the training's ``randomness.seed``, or the seed mmengine drew and logged.
Test metrics win over the last validation; a test through ``--tta`` is multi-scale.
"""
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Optional

from mmengine.config import Config

from ..models.backbones.vit5 import ARCH_PRESETS, VIT5_SWITCHES, resolve_arch
from ..utils.config_kinds import task_of
from .logs import read_scalars

FAMILIES = {'vit5': 'ViT-5', 'deit3': 'DeiT-III', 'dinov2': 'DINOv2', 'dinov3': 'DINOv3'}
METRICS = ('mIoU', 'mAcc', 'aAcc', 'PQ', 'SQ', 'RQ')
# mmdet's panoptic metric logs under its prefix
_METRIC_NAMES = {'coco_panoptic/PQ': 'PQ', 'coco_panoptic/SQ': 'SQ', 'coco_panoptic/RQ': 'RQ'}


def _metrics(record: dict) -> Dict[str, float]:
    """The comparison's metrics in a logged record or a test's metrics file: mmseg's mIoU, mAcc,
    aAcc; mmdet's panoptic PQ, SQ, RQ."""
    named = {_METRIC_NAMES.get(k, k): v for k, v in record.items()}
    return {k: float(named[k]) for k in METRICS if k in named}


SWITCH_KEYS = tuple(VIT5_SWITCHES) + ('embed_dims', 'num_layers', 'num_heads')


@dataclass
class RunResult:
    work_dir: str
    family: Optional[str] = None
    size: Optional[str] = None
    single: Dict[str, float] = field(default_factory=dict)  # single-scale metrics
    multi: Dict[str, float] = field(default_factory=dict)   # multi-scale (TTA)
    status: str = 'ok'
    seed: Optional[int] = None
    training: Optional[str] = None  # which training the numbers belong to (its work dir, or a checkpoint)
    single_from_test: bool = True   # False: the single-scale numbers are a training's last validation
    switches: Dict[str, object] = field(default_factory=dict)  # resolved backbone switches and sizes


def _size_key(backbone: dict) -> Optional[str]:
    arch = backbone.get('arch', 'vit5-base')
    if not isinstance(arch, str) or '-' not in arch or arch not in ARCH_PRESETS:
        return None
    size = arch.split('-', 1)[1].replace('-reg4', '')  # DINOv2's registers: the same size as the others'
    preset = ARCH_PRESETS[arch]
    changed = {k: backbone[k] for k in ('embed_dims', 'num_layers', 'num_heads')
               if backbone.get(k) is not None and backbone[k] != preset[k]}
    if changed:  # a shrunk model (the tiny configs) pairs only with the same shrink
        size += ' (' + ', '.join(f'{k}={v}' for k, v in changed.items()) + ')'
    return size


def _segmentor(cfg) -> dict:
    model = cfg.model
    return model.module if model.get('type') == 'SegTTAModel' else model


def recipe_tag(cfg) -> str:
    """What a run pairs by besides its family and size, as a suffix of its size key: nothing for the paper's
    fine-tuned decode heads; the query decoder's name for mask classification (' EoMT', ' PMT' on a frozen
    encoder: a decoder's registered name without 'Decoder'), with ' panoptic' / ' instance' for those tasks
    (:func:`vit5seg.utils.config_kinds.task_of`); ' linear' (Meta's linear probe). Runs pair only with runs of
    the same recipe."""
    segmentor = _segmentor(cfg)
    frozen = ' frozen' if (segmentor.get('backbone') or {}).get('frozen') else ''
    if segmentor.get('type') in ('EoMTEncoderDecoder', 'EoMT'):
        decoder = (segmentor.get('decoder') or {}).get('type') or 'EoMTDecoder'
        task = task_of(cfg)
        return ' ' + decoder.removesuffix('Decoder') + ('' if task == 'semantic' else f' {task}')
    if (segmentor.get('decode_head') or {}).get('type') == 'LinearProbeHead':
        return ' linear' if frozen else ' linear (fine-tuned)'
    return frozen


def _backbone(cfg) -> dict:
    return _segmentor(cfg).backbone


def backbone_switches(backbone: dict) -> Dict[str, object]:
    """The ablation switches and sizes a backbone config resolves to (its preset's where unset)."""
    settings = resolve_arch(backbone.get('arch', 'vit5-base'), **{k: backbone.get(k) for k in SWITCH_KEYS})
    return {k: settings[k] for k in SWITCH_KEYS}


_SEED_LINE = re.compile(r'^\s*seed: (\d+)\s*$', re.M)


def _launch_seed(launch_dir: Path, cfg) -> Optional[int]:
    seed = (cfg.get('randomness') or {}).get('seed')
    if seed is not None:
        return int(seed)
    log = launch_dir / f'{launch_dir.name}.log'  # mmengine logs the seed it drew
    match = _SEED_LINE.search(log.read_text(errors='replace')) if log.is_file() else None
    return int(match.group(1)) if match else None


def _launches(work_dir: Path):
    """[(launch dir, config, scalar records, test metrics or None)] in time order."""
    out = []
    for config_path in sorted(work_dir.glob('*/vis_data/config.py')):
        stamp = config_path.parent.parent
        scalars = config_path.parent / 'scalars.json'
        records = read_scalars(scalars) if scalars.is_file() else []
        test_json = stamp / f'{stamp.name}.json'
        metrics = json.loads(test_json.read_text()) if test_json.is_file() else None
        out.append((stamp, Config.fromfile(str(config_path)), records, metrics))
    return out


def _training_seed(launches) -> Optional[int]:
    """The seed of the first launch that trained (a resumed run keeps its first seed)."""
    for stamp, cfg, records, metrics in launches:
        if metrics is None and any('loss' in r for r in records):
            return _launch_seed(stamp, cfg)
    return None


def read_result(work_dir) -> RunResult:
    """What one work dir holds: the run's model, seed, metrics and status."""
    work_dir = Path(work_dir)
    result = RunResult(str(work_dir))
    launches = _launches(work_dir) if work_dir.is_dir() else []
    if not launches:
        result.status = 'missing (no mmengine run in this folder)'
        return result
    cfg = launches[-1][1]
    backbone = _backbone(cfg)
    arch = backbone.get('arch', '')
    family = next((name for prefix, name in FAMILIES.items() if str(arch).startswith(prefix)), None)
    if family is None:
        result.status = f'not a ViT-5, DeiT-III, DINOv2 or DINOv3 run (arch {arch!r})'
        return result
    result.family, result.size = family, _size_key(backbone)
    if result.size:
        result.size += recipe_tag(cfg)
    result.switches = backbone_switches(backbone)
    result.seed = _training_seed(launches)
    if result.seed is not None:
        result.training = str(work_dir.resolve())
    last_val, last_iter, max_iters = {}, 0, cfg.get('train_cfg', {}).get('max_iters')
    for stamp, launch_cfg, records, metrics in launches:
        if metrics is not None:
            target = result.multi if launch_cfg.model.get('type') == 'SegTTAModel' else result.single
            target.update(_metrics(metrics))
            if result.training is None and launch_cfg.get('load_from'):
                _attach_to_training(result, launch_cfg.load_from)
            continue
        for record in records:
            scores = _metrics(record)
            if scores:
                last_val = scores
                last_iter = max(last_iter, int(record.get('step', 0)))
            if 'iter' in record:
                last_iter = max(last_iter, int(record['iter']))
    # the log has only every logger-interval-th iteration: checkpoints tell the rest
    saved = [int(p.stem.split('_')[1]) for p in work_dir.glob('iter_*.pth') if p.stem.split('_')[1].isdigit()]
    last_iter = max([last_iter, *saved])
    if not result.single and last_val:
        result.single, result.single_from_test = last_val, False
        result.status = 'ok (last validation; no test run here)'
    if max_iters and last_iter and last_iter < max_iters and not (result.single or result.multi):
        result.status = f'unfinished (iteration {last_iter} of {max_iters}, no metrics yet)'
    elif max_iters and last_iter and last_iter < max_iters:
        result.status = f'unfinished (iteration {last_iter} of {max_iters}): metrics so far'
    elif not (result.single or result.multi):
        result.status = 'no metrics (not evaluated or tested yet)'
    return result


def _attach_to_training(result: RunResult, checkpoint: str) -> None:
    """A test dir belongs to the training that wrote its checkpoint: take that training's seed."""
    training_dir = Path(checkpoint).parent
    seed = _training_seed(_launches(training_dir)) if training_dir.is_dir() else None
    if seed is not None:
        result.seed, result.training = seed, str(training_dir.resolve())
    else:  # the training dir is elsewhere: tests of the same checkpoint are still one run
        result.training = f'checkpoint {checkpoint}'


