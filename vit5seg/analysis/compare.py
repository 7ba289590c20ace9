"""Compare ADE20K runs over seeds: ViT-5 vs DeiT-III by size, or ablations vs a reference.

A work dir is what ``tools/train.py`` or ``tools/test.py`` wrote: each launch leaves
``<timestamp>/vis_data/config.py`` (the full config), ``scalars.json`` and the log; a test
launch also ``<timestamp>/<timestamp>.json`` (its metrics). A *run* is one training: the
work dir it trained in, plus the test dirs whose checkpoint (``load_from``) came from it.
Its seed is the training's ``randomness.seed``, or the seed mmengine drew and logged.
Test metrics win over the last validation; a test through ``--tta`` is multi-scale.
Runs are grouped by (family, size), or in ablation mode by the backbone switches that
differ from the reference; a group of several seeds is reported as mean, standard
deviation and n, and each delta gets a 95% Welch interval.
"""
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from mmengine.config import Config

from ..models.backbones.vit5 import ARCH_PRESETS, VIT5_SWITCHES, resolve_arch
from .resolution import write_csv
from .stats import Interval, summarize, welch_interval

FAMILIES = {'vit5': 'ViT-5', 'deit3': 'DeiT-III'}
# The paper's ViT-5 minus DeiT-III mIoU (ADE20K val, UperNet, single scale); only Base is reported.
PAPER_DELTA = {'base': 2.7}
# The paper's ImageNet-1k top-1 of a variant minus ViT-5's (its ablation table, averaged over
# sizes; register RoPE: Base, 83.90 vs 84.16), keyed by the switches that differ.
PAPER_IMAGENET_DELTA = {
    (('mlp_type', 'swiglu'),): -0.42,
    (('layer_scale_init', 0.0),): -0.29,
    (('use_rope', False),): -0.24,
    (('norm_type', 'layernorm'),): -0.15,
    (('register_rope', False),): -0.26,
}
METRICS = ('mIoU', 'mAcc', 'aAcc')
SCALES = (('ss', 'single'), ('ms', 'multi'))
_SWITCH_KEYS = tuple(VIT5_SWITCHES) + ('embed_dims', 'num_layers', 'num_heads')


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


def backbone_switches(backbone: dict) -> Dict[str, object]:
    """The ablation switches and sizes a backbone config resolves to (its preset's where unset)."""
    settings = resolve_arch(backbone.get('arch', 'vit5-base'), **{k: backbone.get(k) for k in _SWITCH_KEYS})
    return {k: settings[k] for k in _SWITCH_KEYS}


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
        records = []
        scalars = config_path.parent / 'scalars.json'
        if scalars.is_file():
            for line in scalars.read_text().splitlines():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # a cut last line
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


def read_run(work_dir) -> RunResult:
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
        result.status = f'not a ViT-5 or DeiT-III run (arch {arch!r})'
        return result
    result.family, result.size = family, _size_key(backbone)
    result.switches = backbone_switches(backbone)
    result.seed = _training_seed(launches)
    if result.seed is not None:
        result.training = str(work_dir.resolve())
    last_val, last_iter, max_iters = {}, 0, cfg.get('train_cfg', {}).get('max_iters')
    for stamp, launch_cfg, records, metrics in launches:
        if metrics is not None:
            target = result.multi if launch_cfg.model.get('type') == 'SegTTAModel' else result.single
            target.update({k: float(metrics[k]) for k in METRICS if k in metrics})
            if result.training is None and launch_cfg.get('load_from'):
                _attach_to_training(result, launch_cfg.load_from)
            continue
        for record in records:
            if 'mIoU' in record:
                last_val = {k: float(record[k]) for k in METRICS if k in record}
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


# ---- one group of runs (one family and size, or one ablation variant) ----

@dataclass
class Group:
    """The runs of one group after merging each training's dirs: a value per run."""
    values: Dict[Tuple[str, str], List[float]]  # (metric, scale) -> one value per training
    seeds: List[Optional[int]]
    notes: List[str]
    used: List[RunResult]                       # the dirs the values come from


def merge_group(runs: Sequence[RunResult]) -> Group:
    """One value per training and metric: a test's over a validation's, the last dir given
    that has it. Several dirs of the same seed for the same scale, or two trainings with
    one seed, are noted, never silently dropped."""
    by_training: Dict[object, List[RunResult]] = {}
    for r in runs:
        if r.single or r.multi:
            by_training.setdefault(r.training, []).append(r)
    values: Dict[Tuple[str, str], List[float]] = {}
    seeds, notes, used = [], [], []
    for training, members in by_training.items():
        seed = next((m.seed for m in members if m.seed is not None), None)
        seeds.append(seed)
        for scale, attr in SCALES:
            having = [m for m in members if getattr(m, attr)]
            tested = [m for m in having if attr == 'multi' or m.single_from_test]
            source = (tested or having)[-1] if having else None
            if len(tested) > 1:
                notes.append(f"seed {seed}: {len(tested)} {'multi' if attr == 'multi' else 'single'}-scale tests of "
                             f"one training ({', '.join(m.work_dir for m in tested)}); the last one given is used")
            if source is None:
                continue
            used.append(source)
            for metric in METRICS:
                if metric in getattr(source, attr):
                    values.setdefault((metric, scale), []).append(getattr(source, attr)[metric])
    for seed in sorted({s for s in seeds if s is not None}):
        if seeds.count(seed) > 1:
            notes.append(f'seed {seed} appears in {seeds.count(seed)} different trainings: each is counted; '
                         f'check that they are not the same run twice')
    used = [r for i, r in enumerate(used) if all(r is not u for u in used[:i])]
    return Group(values, seeds, notes, used)


def _interval_cells(interval: Optional[Interval]) -> Tuple[Optional[float], Optional[float]]:
    if interval is None or interval.low is None:
        return None, None
    return round(interval.low, 2), round(interval.high, 2)


def _interval_text(interval: Optional[Interval]) -> str:
    if interval is None:
        return '—'
    if interval.low is None:
        return interval.note
    return f'[{interval.low:+.2f}, {interval.high:+.2f}]'


def compare(runs: List[RunResult], tolerance: float) -> List[dict]:
    """One row per size (in the order the runs were given): each family's mean, std and n
    per metric, the delta with its 95% interval, the paper's delta and whether it lies inside."""
    sizes = list(dict.fromkeys(r.size for r in runs if r.size))
    rows = []
    for size in sizes:
        row = {'size': size}
        groups = {}
        for family in FAMILIES.values():
            found = [r for r in runs if r.size == size and r.family == family]
            group = groups[family] = merge_group(found)
            statuses = group.used or found[-1:]
            row[f'{family} status'] = ('; '.join(dict.fromkeys(r.status for r in statuses)) if statuses
                                       else 'missing (no work dir given)')
            row[f'{family} work_dir'] = ', '.join(r.work_dir for r in statuses)
            row[f'{family} n'] = len(group.values.get(('mIoU', 'ss'), []) or group.values.get(('mIoU', 'ms'), []))
            row[f'{family} seeds'] = ' '.join('?' if s is None else str(s) for s in group.seeds)
            for scale, _ in SCALES:
                for m in METRICS:
                    summary = summarize(group.values.get((m, scale), []))
                    row[f'{family} {m} ({scale})'] = None if summary.mean is None else round(summary.mean, 4)
                    row[f'{family} {m} std ({scale})'] = None if summary.std is None else round(summary.std, 4)
        for scale, _ in SCALES:
            interval = welch_interval(groups['ViT-5'].values.get(('mIoU', scale), []),
                                      groups['DeiT-III'].values.get(('mIoU', scale), []))
            row[f'delta mIoU ({scale})'] = None if interval is None else round(interval.delta, 2)
            row[f'delta ci95 low ({scale})'], row[f'delta ci95 high ({scale})'] = _interval_cells(interval)
            row[f'_interval ({scale})'] = interval
        paper = PAPER_DELTA.get(size)
        row['paper delta mIoU (ss)'] = paper
        delta, interval = row['delta mIoU (ss)'], row['_interval (ss)']
        if paper is None:
            row['within tolerance'] = row['paper delta in ci95'] = 'no paper figure'
        elif delta is None:
            row['within tolerance'] = row['paper delta in ci95'] = 'incomplete'
        else:
            row['within tolerance'] = 'yes' if abs(delta - paper) <= tolerance else 'no'
            inside = interval.contains(paper)
            row['paper delta in ci95'] = interval.note if inside is None else ('yes' if inside else 'no')
        row['notes'] = '; '.join(groups['ViT-5'].notes + groups['DeiT-III'].notes)
        rows.append(row)
    return rows


def _fmt(value) -> str:
    if value is None:
        return '—'
    return f'{value:.2f}' if isinstance(value, float) else str(value)


def _mean_std(row: dict, prefix: str, metric: str, scale: str) -> str:
    mean, std = row[f'{prefix} {metric} ({scale})'], row[f'{prefix} {metric} std ({scale})']
    return _fmt(mean) + ('' if std is None else f' ± {std:.2f}')


def to_markdown(rows: List[dict], runs: List[RunResult], tolerance: float) -> str:
    lines = ['# ViT-5 vs DeiT-III (UperNet, ADE20K)', '',
             'mIoU as mean ± standard deviation over the n seeds of each model; delta = ViT-5 - DeiT-III with '
             f"its 95% Welch interval; within tolerance: |delta - paper delta| <= {tolerance} mIoU.", '',
             '| size | ViT-5 mIoU | n | DeiT-III mIoU | n | delta | 95% interval | paper delta | paper delta in '
             'interval | within tolerance | ViT-5 mIoU (ms) | DeiT-III mIoU (ms) | delta (ms) | ViT-5 mAcc / aAcc | '
             'DeiT-III mAcc / aAcc |',
             '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|']
    for row in rows:
        delta, paper = row['delta mIoU (ss)'], row['paper delta mIoU (ss)']
        lines.append('| ' + ' | '.join([
            row['size'], _mean_std(row, 'ViT-5', 'mIoU', 'ss'), str(row['ViT-5 n']),
            _mean_std(row, 'DeiT-III', 'mIoU', 'ss'), str(row['DeiT-III n']),
            '—' if delta is None else f'{delta:+.2f}', _interval_text(row['_interval (ss)']),
            '—' if paper is None else f'{paper:+.1f}', row['paper delta in ci95'], row['within tolerance'],
            _mean_std(row, 'ViT-5', 'mIoU', 'ms'), _mean_std(row, 'DeiT-III', 'mIoU', 'ms'),
            '—' if row['delta mIoU (ms)'] is None else f"{row['delta mIoU (ms)']:+.2f}",
            f"{_fmt(row['ViT-5 mAcc (ss)'])} / {_fmt(row['ViT-5 aAcc (ss)'])}",
            f"{_fmt(row['DeiT-III mAcc (ss)'])} / {_fmt(row['DeiT-III aAcc (ss)'])}"]) + ' |')
    lines += ['', '## Runs', '']
    for row in rows:
        for family in FAMILIES.values():
            seeds = f", seeds {row[f'{family} seeds']}" if row[f'{family} seeds'] else ''
            lines.append(f"- {row['size']}, {family}: {row[f'{family} status']}{seeds}"
                         + (f" (`{row[f'{family} work_dir']}`)" if row[f'{family} work_dir'] else ''))
        if row['notes']:
            lines.append(f"- {row['size']}: {row['notes']}")
    for r in runs:
        if not r.size:
            lines.append(f'- `{r.work_dir}`: {r.status}')
    return '\n'.join(lines) + '\n'


def csv_rows(rows: List[dict]) -> List[dict]:
    return [{k: ('' if v is None else v) for k, v in row.items() if not k.startswith('_')} for row in rows]


# ---- ablations: every group against the reference group ----

def variant_name(switches: Dict[str, object], reference: Dict[str, object]) -> str:
    """The switches that differ from the reference, e.g. ``mlp_type=swiglu, layer_scale_init=0``."""
    diff = [f'{k}={switches[k]:g}' if isinstance(switches[k], float) else f'{k}={switches[k]}'
            for k in _SWITCH_KEYS if switches.get(k) != reference.get(k)]
    return ', '.join(diff) or 'same switches as the reference'


def _paper_imagenet_delta(switches: Dict[str, object], reference: Dict[str, object]) -> Optional[float]:
    diff = tuple((k, float(switches[k]) if isinstance(switches[k], (int, float)) and not isinstance(switches[k], bool)
                  else switches[k]) for k in _SWITCH_KEYS if switches.get(k) != reference.get(k))
    return PAPER_IMAGENET_DELTA.get(diff)


ABLATION_FIELDS = ['variant', 'n', 'mIoU', 'std', 'delta', 'ci95 low', 'ci95 high', 'paper ImageNet delta',
                   'seeds', 'work_dirs', 'notes']


def ablations(runs: List[RunResult], reference: List[RunResult]) -> List[dict]:
    """The reference group first, then each variant (named by its differing switches) in
    the order given: single-scale mIoU mean, std, n, and its delta to the reference with
    a 95% Welch interval."""
    usable_ref = [r for r in reference if r.switches]
    if not usable_ref:
        raise ValueError('--reference: no readable ViT-5 / DeiT-III run among ' +
                         ', '.join(f'{r.work_dir} ({r.status})' for r in reference))
    ref_switches = usable_ref[0].switches
    differing = [r.work_dir for r in usable_ref if r.switches != ref_switches]
    if differing:
        raise ValueError(f'--reference runs differ in their backbone switches: {", ".join(differing)} vs '
                         f'{usable_ref[0].work_dir}')
    groups: Dict[str, List[RunResult]] = {'reference': usable_ref}
    reference_dirs = {Path(r.work_dir).resolve() for r in reference}
    for r in runs:
        if r.switches and Path(r.work_dir).resolve() not in reference_dirs:  # a glob that caught them too
            groups.setdefault(variant_name(r.switches, ref_switches), []).append(r)
    ref_group = merge_group(usable_ref)
    ref_values = ref_group.values.get(('mIoU', 'ss'), [])
    rows = []
    for name, members in groups.items():
        group = ref_group if name == 'reference' else merge_group(members)
        values = group.values.get(('mIoU', 'ss'), [])
        summary = summarize(values)
        interval = None if name == 'reference' else welch_interval(values, ref_values)
        low, high = _interval_cells(interval)
        notes = list(group.notes)
        if interval is not None and interval.low is None:
            notes.append(interval.note)
        rows.append({
            'variant': name, 'n': summary.n,
            'mIoU': None if summary.mean is None else round(summary.mean, 2),
            'std': None if summary.std is None else round(summary.std, 2),
            'delta': None if interval is None or name == 'reference' else round(interval.delta, 2),
            'ci95 low': low, 'ci95 high': high,
            'paper ImageNet delta': None if name == 'reference' else _paper_imagenet_delta(members[0].switches,
                                                                                             ref_switches),
            'seeds': ' '.join('?' if s is None else str(s) for s in group.seeds),
            'work_dirs': ', '.join(r.work_dir for r in group.used or members),
            'notes': '; '.join(notes),
        })
    return rows


def ablations_markdown(rows: List[dict]) -> str:
    lines = ['# Ablations vs the reference (UperNet, ADE20K, single-scale mIoU)', '',
             'delta = variant - reference, with its 95% Welch interval over seeds; the paper\'s figure is '
             'its ImageNet-1k top-1 delta for the same change (no segmentation numbers were published).', '',
             '| variant | n | mIoU | std | delta | 95% interval | paper ImageNet delta | seeds | notes |',
             '|---|---|---|---|---|---|---|---|---|']
    for r in rows:
        interval = ('—' if r['delta'] is None else
                    f"[{r['ci95 low']:+.2f}, {r['ci95 high']:+.2f}]" if r['ci95 low'] is not None else 'no interval')
        lines.append('| ' + ' | '.join([
            r['variant'], str(r['n']), _fmt(r['mIoU']), _fmt(r['std']),
            '—' if r['delta'] is None else f"{r['delta']:+.2f}", interval,
            '—' if r['paper ImageNet delta'] is None else f"{r['paper ImageNet delta']:+.2f}",
            r['seeds'] or '—', r['notes'] or '']) + ' |')
    return '\n'.join(lines) + '\n'


def plot_ablations(rows: List[dict], path) -> None:
    """Forest plot: each variant's delta with its interval; the paper's ImageNet delta marked."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    variants = [r for r in rows if r['variant'] != 'reference' and r['delta'] is not None]
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.5 * max(1, len(variants))))
    for y, r in enumerate(reversed(variants)):
        if r['ci95 low'] is not None:
            ax.errorbar(r['delta'], y, xerr=[[r['delta'] - r['ci95 low']], [r['ci95 high'] - r['delta']]],
                        fmt='o', color='tab:blue', capsize=4, label='delta mIoU, 95% interval')
        else:
            ax.plot(r['delta'], y, 'o', mfc='none', color='tab:blue', label='delta mIoU (one run: no interval)')
        if r['paper ImageNet delta'] is not None:
            ax.plot(r['paper ImageNet delta'], y, 'x', color='tab:red', markersize=9,
                    label='paper: ImageNet top-1 delta')
    ax.axvline(0, color='grey', linewidth=1)
    ax.set_yticks(range(len(variants)), [f"{r['variant']} (n={r['n']})" for r in reversed(variants)], fontsize=8)
    ax.set_xlabel('variant - reference (mIoU points; paper marks: top-1 points)')
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    ax.legend(unique.values(), unique.keys(), fontsize=7, loc='best')
    ax.grid(axis='x', alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    import argparse
    parser = argparse.ArgumentParser(
        description='The ViT-5 vs DeiT-III table over seeds (pairs runs by size; the paper\'s +2.7 mIoU), or with '
                    '--reference an ablation table. Each WORK_DIR is a training or tools/test.py work dir; several '
                    'runs of one model (seeds) are reported as mean, std and n, deltas with 95%% Welch intervals. '
                    'Writes DIR/comparison.md and .csv, or DIR/ablations.md, .csv and .png.')
    parser.add_argument('work_dirs', nargs='+', help='work dirs of the runs, any order')
    parser.add_argument('--out', required=True, help='output folder')
    parser.add_argument('--tolerance', type=float, default=1.0,
                        help='largest |delta - paper delta| in mIoU that counts as reproduced (default 1.0)')
    parser.add_argument('--reference', nargs='+', metavar='W_REF',
                        help='ablation mode: the reference runs (the full ViT-5); every other run is compared with '
                             'them, named by the backbone switches that differ')
    args = parser.parse_args(argv)
    runs = [read_run(w) for w in args.work_dirs]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.reference:
        try:
            rows = ablations(runs, [read_run(w) for w in args.reference])
        except ValueError as e:
            parser.exit(1, f'error: {e}\n')
        markdown = ablations_markdown(rows)
        (out / 'ablations.md').write_text(markdown)
        write_csv(out / 'ablations.csv', ABLATION_FIELDS, csv_rows(rows))
        plot_ablations(rows, out / 'ablations.png')
        for r in runs:
            if not r.switches:
                markdown += f'- `{r.work_dir}`: {r.status}\n'
    else:
        rows = compare(runs, args.tolerance)
        markdown = to_markdown(rows, runs, args.tolerance)
        (out / 'comparison.md').write_text(markdown)
        table = csv_rows(rows)
        write_csv(out / 'comparison.csv', list(table[0]) if table else ['size'], table)
    print(markdown)
    return 0
