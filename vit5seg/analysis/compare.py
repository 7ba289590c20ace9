"""Compare ADE20K runs over seeds: ViT-5 vs DeiT-III by size (``tools/compare.py``), with
DINOv2 and DINOv3 runs beside them in a four-family table, or with ``--reference``
ablations against a reference (:mod:`.ablations`).

Runs (:mod:`.runs`) are grouped by (family, size); each training counts once, a group of
several seeds is reported as mean, standard deviation and n, and each delta gets a 95%
Welch interval.
"""
import argparse
from pathlib import Path
from typing import List

from ..utils.tables import write_csv
from .ablations import ABLATION_FIELDS, ablations, ablations_markdown, plot_ablations
from .groups import SCALES, csv_rows, fmt_cell, interval_cells, interval_text, merge_group
from .runs import FAMILIES, METRICS, RunResult, read_result
from .stats import summarize, welch_interval

# The paper's ViT-5 minus DeiT-III mIoU (ADE20K val, UperNet, single scale); only Base is reported.
PAPER_DELTA = {'base': 2.7}
# The backbones users weigh ViT-5 against besides its paper's baseline: a table of their own.
OTHER_FAMILIES = ('DINOv2', 'DINOv3')


def headline(groups: dict) -> str:
    """The metric a row compares: PQ for panoptic runs, mIoU for semantic ones."""
    return 'PQ' if any(key[0] == 'PQ' for group in groups.values() for key in group.values) else 'mIoU'


def compare(runs: List[RunResult], tolerance: float) -> List[dict]:
    """One row per size (in the order the runs were given): each family's mean, std and n
    per metric, the delta of the headline metric (mIoU; PQ for panoptic runs) with its 95%
    interval, the paper's delta and whether it lies inside."""
    sizes = list(dict.fromkeys(r.size for r in runs if r.size))
    rows = []
    for size in sizes:
        row = {'size': size}
        found = {family: [r for r in runs if r.size == size and r.family == family] for family in FAMILIES.values()}
        groups = {family: merge_group(family_runs) for family, family_runs in found.items()}
        metric = row['metric'] = headline(groups)
        for family in FAMILIES.values():
            group = groups[family]
            statuses = group.used or found[family][-1:]
            row[f'{family} status'] = ('; '.join(dict.fromkeys(r.status for r in statuses)) if statuses
                                       else 'missing (no work dir given)')
            row[f'{family} work_dir'] = ', '.join(r.work_dir for r in statuses)
            row[f'{family} n'] = len(group.values.get((metric, 'ss'), []) or group.values.get((metric, 'ms'), []))
            row[f'{family} seeds'] = ' '.join('?' if s is None else str(s) for s in group.seeds)
            for scale, _ in SCALES:
                for m in METRICS:
                    summary = summarize(group.values.get((m, scale), []))
                    row[f'{family} {m} ({scale})'] = None if summary.mean is None else round(summary.mean, 4)
                    row[f'{family} {m} std ({scale})'] = None if summary.std is None else round(summary.std, 4)
        for scale, _ in SCALES:
            interval = welch_interval(groups['ViT-5'].values.get((metric, scale), []),
                                      groups['DeiT-III'].values.get((metric, scale), []))
            row[f'delta {metric} ({scale})'] = None if interval is None else round(interval.delta, 2)
            row[f'delta ci95 low ({scale})'], row[f'delta ci95 high ({scale})'] = interval_cells(interval)
            row[f'_interval ({scale})'] = interval
        for family in OTHER_FAMILIES:
            interval = welch_interval(groups['ViT-5'].values.get((metric, 'ss'), []),
                                      groups[family].values.get((metric, 'ss'), []))
            row[f'ViT-5 - {family} {metric} (ss)'] = None if interval is None else round(interval.delta, 2)
            row[f'_interval vs {family} (ss)'] = interval
        paper = PAPER_DELTA.get(size) if metric == 'mIoU' else None   # the paper reports no PQ
        row[f'paper delta {metric} (ss)'] = paper
        delta, interval = row[f'delta {metric} (ss)'], row['_interval (ss)']
        if paper is None:
            row['within tolerance'] = row['paper delta in ci95'] = 'no paper figure'
        elif delta is None:
            row['within tolerance'] = row['paper delta in ci95'] = 'incomplete'
        else:
            row['within tolerance'] = 'yes' if abs(delta - paper) <= tolerance else 'no'
            inside = interval.contains(paper)
            row['paper delta in ci95'] = interval.note if inside is None else ('yes' if inside else 'no')
        row['notes'] = '; '.join(note for group in groups.values() for note in group.notes)
        rows.append(row)
    return rows


def _mean_std(row: dict, prefix: str, metric: str, scale: str) -> str:
    mean, std = row[f'{prefix} {metric} ({scale})'], row[f'{prefix} {metric} std ({scale})']
    return fmt_cell(mean) + ('' if std is None else f' ± {std:.2f}')


def _markdown_table(rows: List[dict], metric: str, tolerance: float) -> List[str]:
    """The ViT-5 vs DeiT-III table of the rows of one headline metric (mIoU: with mAcc / aAcc;
    PQ: with SQ / RQ)."""
    extra = ('mAcc', 'aAcc') if metric == 'mIoU' else ('SQ', 'RQ')
    lines = [f'{metric} as mean ± standard deviation over the n seeds of each model; delta = ViT-5 - DeiT-III '
             f'with its 95% Welch interval; within tolerance: |delta - paper delta| <= {tolerance} {metric}.', '',
             f'| size | ViT-5 {metric} | n | DeiT-III {metric} | n | delta | 95% interval | paper delta | paper delta '
             f'in interval | within tolerance | ViT-5 {metric} (ms) | DeiT-III {metric} (ms) | delta (ms) | ViT-5 '
             f'{extra[0]} / {extra[1]} | DeiT-III {extra[0]} / {extra[1]} |',
             '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|']
    for row in rows:
        delta, paper = row[f'delta {metric} (ss)'], row[f'paper delta {metric} (ss)']
        lines.append('| ' + ' | '.join([
            row['size'], _mean_std(row, 'ViT-5', metric, 'ss'), str(row['ViT-5 n']),
            _mean_std(row, 'DeiT-III', metric, 'ss'), str(row['DeiT-III n']),
            '—' if delta is None else f'{delta:+.2f}', interval_text(row['_interval (ss)']),
            '—' if paper is None else f'{paper:+.1f}', row['paper delta in ci95'], row['within tolerance'],
            _mean_std(row, 'ViT-5', metric, 'ms'), _mean_std(row, 'DeiT-III', metric, 'ms'),
            '—' if row[f'delta {metric} (ms)'] is None else f"{row[f'delta {metric} (ms)']:+.2f}",
            f"{fmt_cell(row[f'ViT-5 {extra[0]} (ss)'])} / {fmt_cell(row[f'ViT-5 {extra[1]} (ss)'])}",
            f"{fmt_cell(row[f'DeiT-III {extra[0]} (ss)'])} / {fmt_cell(row[f'DeiT-III {extra[1]} (ss)'])}"])
            + ' |')
    return lines


def to_markdown(rows: List[dict], runs: List[RunResult], tolerance: float) -> str:
    lines = ['# ViT-5 vs DeiT-III (UperNet, ADE20K; EoMT; COCO panoptic in PQ)', '']
    semantic, panoptic = [r for r in rows if r['metric'] == 'mIoU'], [r for r in rows if r['metric'] == 'PQ']
    if semantic or not panoptic:
        lines += _markdown_table(semantic, 'mIoU', tolerance)
    if panoptic:
        lines += (['', '## Panoptic (COCO, PQ)', ''] if semantic else []) + _markdown_table(panoptic, 'PQ', tolerance)
    others = [f for f in OTHER_FAMILIES if any(r.family == f for r in runs)]
    if others:
        lines += ['', '## The four families', '',
                  'mIoU (PQ for panoptic rows; single scale) as mean ± standard deviation (n seeds); delta: ViT-5 - '
                  'that family, its 95% Welch interval.', '',
                  '| size | ' + ' | '.join(FAMILIES.values()) + ' | ' + ' | '.join(f'ViT-5 - {f}' for f in others)
                  + ' |', '|---|' + '---|' * (len(FAMILIES) + len(others))]
        for row in rows:
            cells = [f"{_mean_std(row, f, row['metric'], 'ss')} ({row[f'{f} n']})" for f in FAMILIES.values()]
            for family in others:
                interval = row[f'_interval vs {family} (ss)']
                cells.append('—' if interval is None else f'{interval.delta:+.2f} {interval_text(interval)}')
            lines.append(f"| {row['size']} | " + ' | '.join(cells) + ' |')
    lines += ['', '## Runs', '']
    for row in rows:
        for family in [f for f in FAMILIES.values() if f not in OTHER_FAMILIES or f in others]:
            seeds = f", seeds {row[f'{family} seeds']}" if row[f'{family} seeds'] else ''
            lines.append(f"- {row['size']}, {family}: {row[f'{family} status']}{seeds}"
                         + (f" (`{row[f'{family} work_dir']}`)" if row[f'{family} work_dir'] else ''))
        if row['notes']:
            lines.append(f"- {row['size']}: {row['notes']}")
    for r in runs:
        if not r.size:
            lines.append(f'- `{r.work_dir}`: {r.status}')
    return '\n'.join(lines) + '\n'


def main(argv=None):
    parser = argparse.ArgumentParser(
        description='The ViT-5 vs DeiT-III table over seeds (pairs runs by size; the paper\'s +2.7 mIoU; PQ for '
                    'panoptic runs), DINOv2 '
                    'and DINOv3 runs beside them in a four-family table, or with '
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
    runs = [read_result(w) for w in args.work_dirs]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.reference:
        try:
            rows = ablations(runs, [read_result(w) for w in args.reference])
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
        fields = list(dict.fromkeys(k for row in table for k in row)) or ['size']   # mIoU and PQ rows differ
        write_csv(out / 'comparison.csv', fields, [{k: row.get(k, '') for k in fields} for row in table])
    print(markdown)
    return 0
