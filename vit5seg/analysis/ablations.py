"""Ablations over seeds: every variant's runs against the reference's, named by the backbone
switches that differ, with the paper's ImageNet delta for the same change."""
from pathlib import Path
from typing import Dict, List, Optional

from .groups import fmt_cell, interval_cells, merge_group
from .runs import SWITCH_KEYS, RunResult
from .stats import summarize, welch_interval

# The paper's ImageNet-1k top-1 of a variant minus ViT-5's (its ablation table, averaged over
# sizes; register RoPE: Base, 83.90 vs 84.16), keyed by the switches that differ.
PAPER_IMAGENET_DELTA = {
    (('mlp_type', 'swiglu'),): -0.42,
    (('layer_scale_init', 0.0),): -0.29,
    (('use_rope', False),): -0.24,
    (('norm_type', 'layernorm'),): -0.15,
    (('register_rope', False),): -0.26,
}


def variant_name(switches: Dict[str, object], reference: Dict[str, object]) -> str:
    """The switches that differ from the reference, e.g. ``mlp_type=swiglu, layer_scale_init=0``."""
    diff = [f'{k}={switches[k]:g}' if isinstance(switches[k], float) else f'{k}={switches[k]}'
            for k in SWITCH_KEYS if switches.get(k) != reference.get(k)]
    return ', '.join(diff) or 'same switches as the reference'


def _paper_imagenet_delta(switches: Dict[str, object], reference: Dict[str, object]) -> Optional[float]:
    diff = tuple((k, float(switches[k]) if isinstance(switches[k], (int, float)) and not isinstance(switches[k], bool)
                  else switches[k]) for k in SWITCH_KEYS if switches.get(k) != reference.get(k))
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
        low, high = interval_cells(interval)
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
            r['variant'], str(r['n']), fmt_cell(r['mIoU']), fmt_cell(r['std']),
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


