"""Show that a machine is ready: environment, checks (pass / fail / skip), figures.

    python tools/selfcheck.py [--device cpu|cuda] [--gpus N] [--quick] --out DIR

Writes ``DIR/selfcheck.json`` ({"environment", "tested_set", "checks", "figures", "eomt",
"panoptic", "estimates"}) and a readable ``DIR/selfcheck.md``; exits 1 if any check fails.
``environment`` says what the machine is and which code ran (version, commit, how it is
installed), ``tested_set`` the lock's versions beside it, ``checks`` holds the checks,
``figures`` the measurements, ``eomt`` EoMT's speed eager and compiled, ``panoptic`` (CUDA) EoMT's
panoptic inference beside DINOv3's and Mask2Former's (vit5seg.benchmark.panoptic), ``estimates`` the
run time of the entry configs and EoMT on 1, 2, 4 and 8 GPUs.
"""
import argparse
import json
import time
from pathlib import Path
from typing import List, Optional

import torch

from ..benchmark.panoptic import panoptic_table, panoptic_timings
from .checks import CHECKS, ENTRY_CONFIGS, QUICK, Context, Skip
from .figures import (EOMT_ANCHOR, EOMT_CONFIGS, eomt_figures, eomt_table, estimate_line, rms_norm_figures,
                      schedule_estimates, segmentor_figures)
from .machine import default_device, environment, no_cuda_reason, nvidia_gpus, tested_set

__all__ = ['CHECKS', 'QUICK', 'main', 'selfcheck']


def run_checks(ctx: Context, names, quick: bool) -> List[dict]:
    results = []
    for name in names:
        start = time.perf_counter()
        if quick and name not in QUICK:
            status, detail = 'skip', 'not in --quick'
        else:
            try:
                status, detail = 'pass', CHECKS[name](ctx)
            except Skip as reason:
                status, detail = 'skip', str(reason)
            except Exception as error:  # a failed check is reported, the others still run
                status, detail = 'fail', f'{type(error).__name__}: {error}'.splitlines()[0][:400]
        result = dict(name=name, status=status, seconds=round(time.perf_counter() - start, 1), detail=detail)
        print(f"[{status}] {name} ({result['seconds']} s): {detail}", flush=True)
        results.append(result)
    return results


def report_markdown(report: dict) -> str:
    env, tested = report['environment'], report.get('tested_set', {})
    lines = ['# vit5seg self-check', '', f"device: {report['device']}" + (' (--quick)' if report['quick'] else ''),
             f"code: vit5seg {env.get('vit5seg')}, commit {env.get('vit5seg_commit')}, {env.get('vit5seg_install')} "
             'install', '', '## Environment', '',
             '| | this machine | tested set (requirements/lock.txt) |', '|---|---|---|']
    for key, value in env.items():
        if key == 'gpus':
            value = '; '.join(f"{g['name']} ({g['memory_gib']} GiB, sm {g['capability']})" for g in value) or 'none'
        lines.append(f"| {key} | {value} | {tested.get(key, '')} |")
    lines += ['', '## Checks', '', '| check | status | seconds | detail |', '|---|---|---|---|']
    lines += [f"| {c['name']} | {c['status']} | {c['seconds']} | {c['detail']} |" for c in report['checks']]
    lines += ['', '## Figures', '']
    if report['figures']:
        lines += ['| figure | value |', '|---|---|']
        lines += [f'| {k} | {v} |' for k, v in report['figures'].items()]
    else:
        lines.append('(none: --quick or --no-figures)')
    if report.get('eomt'):
        lines += ['', '## EoMT, eager and compiled', '',
                  'Inference images/s of whole images at batch 1 and 8, train images/s at 2 images per step with '
                  'every mask on; `first_train_step_s`: the compiled first step, compiling included. '
                  f'{EOMT_ANCHOR}.', '']
        lines += eomt_table(report['eomt'])
    if report.get('panoptic'):
        lines += ['', '## Panoptic inference (COCO, 640)', '', 'Random weights; `tools/benchmark.py --panoptic` '
                  'measures the same on any device.', '', '```', panoptic_table(report['panoptic']), '```']
    if report.get('estimates'):
        lines += ['', '## Run time and memory on 1, 2, 4 and 8 GPUs', '',
                  'Train steps only, at the step measured here, each GPU count keeping the config\'s images per '
                  'iteration by gradient accumulation (a DDP rank adds the gradient all-reduce; data loading and '
                  'validation are not counted). On CPU at 128 px, to stay within minutes.', '']
        lines += [f'- {estimate_line(row)}' for row in report['estimates']]
    return '\n'.join(lines) + '\n'


def selfcheck(device: Optional[str] = None, gpus: Optional[int] = None, quick: bool = False, out='selfcheck',
              checks=None, repeats: Optional[int] = None, figures: bool = True) -> dict:
    device = device or default_device()
    if device == 'cuda' and not torch.cuda.is_available():
        raise SystemExit(f'error: {no_cuda_reason(nvidia_gpus())}')
    visible = torch.cuda.device_count() if device == 'cuda' else 0
    gpus = visible if gpus is None else gpus
    if device == 'cuda' and not 1 <= gpus <= visible:
        raise SystemExit(f'error: --gpus {gpus}, but {visible} GPUs are visible')
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    ctx = Context(device, gpus, out.resolve(), threads=torch.get_num_threads())
    report = dict(device=device, quick=quick, environment=environment(), tested_set=tested_set())
    report['checks'] = run_checks(ctx, checks or list(CHECKS), quick)
    report['figures'] = {}
    if figures and not quick:
        width = 768 if device == 'cuda' else 384
        report['figures'].update(rms_norm_figures(device, width))
        rounds = repeats or (5 if device == 'cuda' else 2)
        report['figures'].update(segmentor_figures(device, rounds))
        report['eomt'] = eomt_figures(device, rounds)
        print('\n'.join(eomt_table(report['eomt'])), flush=True)
        if device == 'cuda':  # on CPU minutes a model: tools/benchmark.py --panoptic there
            report['panoptic'] = panoptic_timings('vit5-small', 640, device, repeats=rounds)
            print(panoptic_table(report['panoptic']), flush=True)
        report['estimates'] = schedule_estimates([*ENTRY_CONFIGS.values(), *EOMT_CONFIGS.values()], device, rounds,
                                                 crop=None if device == 'cuda' else 128)
        for row in report['estimates']:
            print(estimate_line(row), flush=True)
    (out / 'selfcheck.json').write_text(json.dumps(report, indent=2))
    (out / 'selfcheck.md').write_text(report_markdown(report))
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--device', choices=['cpu', 'cuda'],
                        help='default: cuda where torch sees a GPU or the machine has NVIDIA GPUs, else cpu')
    parser.add_argument('--gpus', type=int, help='GPUs for the DDP check (default: all visible)')
    parser.add_argument('--quick', action='store_true', help='only ' + ', '.join(QUICK) + '; no figures')
    parser.add_argument('--checks', nargs='+', choices=list(CHECKS), help='run only these checks')
    parser.add_argument('--repeats', type=int, help='timed rounds for the figures (default: 5 on CUDA, 2 on CPU)')
    parser.add_argument('--no-figures', action='store_true', help='checks only')
    parser.add_argument('--out', default='selfcheck', help='folder for selfcheck.json and selfcheck.md')
    args = parser.parse_args(argv)
    report = selfcheck(args.device, args.gpus, args.quick, args.out, args.checks, args.repeats, not args.no_figures)
    failed = [c['name'] for c in report['checks'] if c['status'] == 'fail']
    print(f"{len(report['checks']) - len(failed)} of {len(report['checks'])} checks passed or skipped; "
          f"report: {Path(args.out) / 'selfcheck.md'}")
    return 1 if failed else 0
