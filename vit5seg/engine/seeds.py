"""One training per seed (``tools/run_seeds.py``): the commands, printed or run in turn.

Each seed trains into ``WORK_ROOT/<name>_seed<S>`` with ``randomness.seed=S`` (saved in the
run's config, where ``tools/compare.py`` reads it) and ``--resume``, so running the same
command again continues every unfinished seed and leaves finished ones as they are.
Every launcher gets ``--accumulate auto``: each run keeps the config's images per iteration
on any GPU count (``vit5seg.engine.accumulation``).
"""
import argparse
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from ..paths import tool_command, tool_path
from .accumulation import BatchPlan, batch_plan


@dataclass
class SeedRun:
    seed: int
    work_dir: Path
    argv: List[str]
    env: Dict[str, str]

    def shell(self) -> str:
        prefix = ' '.join(f'{k}={shlex.quote(v)}' for k, v in self.env.items())
        return (prefix + ' ' if prefix else '') + shlex.join(self.argv)


def seed_runs(config: str, seeds: Sequence[int], launcher: str = 'none', gpus: int = 1, work_root='work_dirs',
              name: Optional[str] = None, cfg_options: Sequence[str] = (), train_args: Sequence[str] = (),
              partition: Optional[str] = None) -> List[SeedRun]:
    if len(set(seeds)) != len(seeds):
        raise ValueError(f'--seeds repeats a seed: {list(seeds)}')
    if launcher == 'slurm' and not partition:
        raise ValueError('--launcher slurm needs --partition')
    if launcher == 'none' and gpus != 1:
        raise ValueError(f'--gpus {gpus} needs --launcher pytorch or slurm')
    name = name or Path(config).stem
    runs = []
    for seed in seeds:
        work_dir = Path(work_root) / f'{name}_seed{seed}'
        args = ['--work-dir', str(work_dir), '--resume', '--accumulate', 'auto', '--cfg-options', *cfg_options,
                f'randomness.seed={seed}', *train_args]
        env = {}
        if launcher == 'pytorch':
            argv = ['bash', str(tool_path('dist_train.sh')), config, str(gpus), *args]
        elif launcher == 'slurm':
            argv = ['bash', str(tool_path('slurm_train.sh')), partition, f'{name}_seed{seed}', config, *args]
            env = {'GPUS': str(gpus)}
        else:
            argv = [sys.executable, str(tool_path('train.py')), config, *args]
        runs.append(SeedRun(seed, work_dir, argv, env))
    return runs


def planned_batch(config: str, gpus: int, cfg_options: Sequence[str] = (),
                  train_args: Sequence[str] = ()) -> BatchPlan:
    """The images per iteration each seed's training will have (as tools/train.py decides)."""
    from mmengine.config import Config, DictAction
    parser = argparse.ArgumentParser()
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, default={})
    parser.add_argument('--accumulate', default='auto')
    known, _ = parser.parse_known_args(['--cfg-options', *cfg_options, *train_args] if cfg_options else train_args)
    cfg = Config.fromfile(config)
    cfg.merge_from_dict(known.cfg_options)
    return batch_plan(cfg, gpus, known.accumulate)


def run_all(runs: Sequence[SeedRun]) -> None:
    """Run each seed's training in turn; the first failure stops with its seed and work dir named."""
    for run in runs:
        print(f'seed {run.seed}: {run.shell()}', flush=True)
        code = subprocess.run(run.argv, env={**os.environ, **run.env}).returncode
        if code:
            raise RuntimeError(f'seed {run.seed} failed (exit status {code}); its log is in {run.work_dir}; '
                               f'run the same command again to resume it')


def main(argv=None):
    parser = argparse.ArgumentParser(
        description='Train CONFIG once per seed into WORK_ROOT/<name>_seed<S> (resumable); then compare the runs '
                    'with tools/compare.py. Arguments not listed here go on to tools/train.py.')
    parser.add_argument('config')
    parser.add_argument('--seeds', type=int, nargs='+', required=True, help='e.g. 0 1 2')
    parser.add_argument('--gpus', type=int, default=1,
                        help='GPUs per training (default 1); any count keeps the config\'s images per iteration')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm'],
                        help='none: tools/train.py; pytorch: tools/dist_train.sh; slurm: tools/slurm_train.sh '
                             '(default: pytorch for --gpus above 1, else none)')
    parser.add_argument('--partition', help='slurm partition (with --launcher slurm)')
    parser.add_argument('--work-root', default='work_dirs', help='parent of the work dirs (default: work_dirs)')
    parser.add_argument('--name', help='work dir name before _seed<S> (default: the config file name); give '
                                       'ablations made with --cfg-options a name of their own')
    parser.add_argument('--cfg-options', nargs='+', default=[], help='config overrides key=value for every seed')
    parser.add_argument('--print', action='store_true', help='print the commands instead of running them')
    args, train_args = parser.parse_known_args(argv)
    if not Path(args.config).is_file():
        parser.exit(1, f'error: config file {args.config} does not exist\n')
    launcher = args.launcher or ('pytorch' if args.gpus > 1 else 'none')
    try:
        plan = planned_batch(args.config, args.gpus, args.cfg_options, train_args)
        print(f'# each seed: {plan.describe()}')
        runs = seed_runs(args.config, args.seeds, launcher, args.gpus, args.work_root, args.name,
                         args.cfg_options, train_args, args.partition)
        if args.print:
            for run in runs:
                print(run.shell())
        else:
            run_all(runs)
            dirs = ' '.join(str(r.work_dir) for r in runs)
            print(f'done: {dirs}\ncompare: {tool_command("compare.py")} {dirs} [OTHER_RUNS ...] --out DIR')
    except (ValueError, RuntimeError) as e:
        parser.exit(1, f'error: {e}\n')
    return runs
