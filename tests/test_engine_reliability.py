"""Training that is killed, diverges or meets bad data loses nothing, through the real
tools on synthetic data: SIGKILL + --resume equals an uninterrupted run bitwise,
non-finite losses stop (or skip) before they reach the weights, deterministic runs
repeat, corrupt samples are skipped and counted, bad input is one line on stderr."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from conftest import REPO, logged_scalars, run_script
from vit5seg.analysis.logs import read_scalars, scalar_files
from vit5seg.datasets import make_synthetic_ade20k

pytestmark = pytest.mark.slow
TRAIN, TEST = REPO / 'tools' / 'train.py', REPO / 'tools' / 'test.py'

# Hooks only the tests need: record each iteration's batch, pause at an iteration (so
# the kill lands mid-interval, not by timing luck), make the backbone output NaN.
TEST_HOOKS = """
import os, time
import torch
from mmengine.hooks import Hook
from mmseg.registry import HOOKS


@HOOKS.register_module()
class RecordBatchHook(Hook):
    priority = 'LOWEST'

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        it = runner.iter + 1
        names = [os.path.basename(s.img_path) for s in data_batch['data_samples']]
        with open(os.path.join(runner.work_dir, 'batches.txt'), 'a') as f:
            f.write(f"{it} {' '.join(names)}\\n")
        if it == int(os.environ.get('PAUSE_AT_ITER', 0)):
            open(os.path.join(runner.work_dir, 'paused'), 'w').close()
            time.sleep(600)


@HOOKS.register_module()
class NanBackboneHook(Hook):
    def __init__(self, at, until):
        self.at, self.until, self.on = at, until, False

    def before_train(self, runner):
        model = getattr(runner.model, 'module', runner.model)
        model.backbone.register_forward_hook(
            lambda m, i, out: tuple(o * float('nan') for o in out) if self.on else out)

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        self.on = self.at <= runner.iter + 1 <= self.until
"""


def _config(tmp, name, body):
    path = tmp / f'{name}.py'
    path.write_text(textwrap.dedent(f"""
        _base_ = ['{REPO / 'configs' / 'tiny' / 'vit5_upernet_synthetic.py'}']
        custom_imports = dict(imports=['vit5seg', 'test_hooks'], allow_failed_imports=False)
        train_cfg = dict(max_iters=12, val_interval=1000)
        default_hooks = dict(checkpoint=dict(interval=4, max_keep_ckpts=5), logger=dict(interval=1))
        randomness = dict(seed=0, deterministic=True)
        model = dict(backbone=dict(drop_path_rate=0.1))  # uses the RNG: resume must restore it
        train_dataloader = dict(batch_size=4, num_workers=2)
    """) + textwrap.dedent(body))
    return path


@pytest.fixture(scope='module')
def user(tmp_path_factory):
    cwd = tmp_path_factory.mktemp('user')
    make_synthetic_ade20k(cwd / 'data' / 'synthetic_ade20k', num_train=12, num_val=2, size=96, seed=4)
    (cwd / 'test_hooks.py').write_text(TEST_HOOKS)
    env = {**os.environ, 'OMP_NUM_THREADS': '2', 'PYTHONUNBUFFERED': '1', 'PYTHONPATH': str(cwd)}
    return cwd, env


def _run(args, cwd, env, ok=True, timeout=600):
    """A tool in a process of its own, where the point needs one: the runs the kill test compares
    bitwise (the same threads and kernels), the lines dataloader workers write."""
    out = subprocess.run([sys.executable, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=timeout)
    if ok:
        assert out.returncode == 0, (out.stdout[-2000:], out.stderr[-4000:])
    return out


def _run_here(args, cwd, ok=True):
    """A tool run in this process (conftest.run_script), ``cwd`` importable as the configs'
    ``custom_imports`` need it; the deterministic mode the configs switch on is switched off after."""
    sys.path.insert(0, str(cwd))
    try:
        out = run_script(*args, cwd=cwd)
    finally:
        sys.path.remove(str(cwd))
        torch.use_deterministic_algorithms(False)
    if ok:
        assert out.returncode == 0, (out.stdout[-2000:], out.stderr[-4000:])
    return out


def _batches(work_dir):
    return [line.split(' ', 1) for line in (work_dir / 'batches.txt').read_text().splitlines()]


def _losses(work_dir):
    return {r['iter']: r['loss'] for r in logged_scalars(work_dir) if 'loss' in r}


RECORD = """
custom_hooks = [dict(type='NonFiniteLossHook'), dict(type='RandomStateHook'), dict(type='SkippedSampleHook'),
                dict(type='RecordBatchHook')]
"""


@pytest.fixture(scope='module')
def uninterrupted(user):
    cwd, env = user
    config = _config(cwd, 'record', RECORD)
    _run([TRAIN, config, '--work-dir', 'ref'], cwd, env)
    return config


def test_sigkill_then_resume_equals_the_uninterrupted_run(user, uninterrupted):
    cwd, env = user
    killed = cwd / 'killed'
    proc = subprocess.Popen([sys.executable, str(TRAIN), str(uninterrupted), '--work-dir', 'killed'], cwd=cwd,
                            env={**env, 'PAUSE_AT_ITER': '6'}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not (killed / 'paused').exists():
        assert proc.poll() is None and time.time() < deadline, 'training ended before iteration 6'
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)  # mid-interval: iter_4 saved, iteration 6 running
    proc.wait()
    assert sorted(p.name for p in killed.glob('*.pth')) == ['iter_4.pth'] and not list(killed.glob('*.tmp'))

    log = _run([TRAIN, uninterrupted, '--work-dir', 'killed', '--resume'], cwd, env).stdout
    assert 'resumed epoch: 0, iter: 4' in log
    ref, resumed = cwd / 'ref', killed
    # data order: iterations 5.. see the same images as without the kill
    after = {it: names for it, names in _batches(resumed)[6:]}  # lines 1-6 are the killed run's
    assert sorted(map(int, after)) == list(range(5, 13))
    assert after == {it: names for it, names in _batches(ref) if int(it) >= 5}
    a = torch.load(ref / 'iter_12.pth', map_location='cpu', weights_only=True)
    b = torch.load(resumed / 'iter_12.pth', map_location='cpu', weights_only=True)
    assert a['meta']['iter'] == b['meta']['iter'] == 12
    for key in a['state_dict']:  # bitwise: same CPU kernels, same RNG, same batches
        assert torch.equal(a['state_dict'][key], b['state_dict'][key]), key
    for (i, sa), (_, sb) in zip(a['optimizer']['state'].items(), b['optimizer']['state'].items()):
        for name in sa:
            assert torch.equal(torch.as_tensor(sa[name]), torch.as_tensor(sb[name])), (i, name)
    assert [g['lr'] for g in a['optimizer']['param_groups']] == [g['lr'] for g in b['optimizer']['param_groups']]
    assert a['param_schedulers'] == b['param_schedulers']
    ref_losses, resumed_losses = _losses(ref), _losses(resumed)
    assert len(ref_losses) == 12 and all(resumed_losses[it] == ref_losses[it] for it in range(5, 13))
    # and the killed run, a second run from scratch, had repeated the first's losses (deterministic
    # runs repeat) up to its last logged iteration
    killed_run = [r for r in read_scalars(scalar_files(killed)[0]) if 'loss' in r]
    assert [r['iter'] for r in killed_run] == [1, 2, 3, 4, 5]
    assert all(r['loss'] == ref_losses[r['iter']] for r in killed_run)


def test_nan_loss_stops_with_iteration_and_last_good_checkpoint(user):
    cwd, _ = user
    config = _config(cwd, 'nan_stop', """
        custom_hooks = [dict(type='NonFiniteLossHook'), dict(type='NanBackboneHook', at=6, until=6)]
    """)
    out = _run_here([TRAIN, config, '--work-dir', 'nan_stop'], cwd, ok=False)
    assert out.returncode == 1
    work = cwd / 'nan_stop'
    assert out.stderr.strip().splitlines()[-1] == (
        f'error: non-finite loss (nan) at iteration 6; last good checkpoint: {work}/iter_4.pth. '
        f'The update of iteration 6 was not applied and no checkpoint was written from it. Resume with --resume '
        f"{work}/iter_4.pth after lowering the lr or checking the data, or set NonFiniteLossHook action='skip'.")
    assert sorted(p.name for p in work.glob('*.pth')) == ['iter_4.pth']
    assert (work / 'last_checkpoint').read_text().strip().endswith('iter_4.pth')


def test_nan_loss_skip_drops_the_update_and_goes_on(user):
    cwd, _ = user
    config = _config(cwd, 'nan_skip', """
        train_cfg = dict(max_iters=8)
        custom_hooks = [dict(type='NonFiniteLossHook', action='skip', max_skips=3),
                        dict(type='NanBackboneHook', at=3, until=4)]
    """)
    out = _run_here([TRAIN, config, '--work-dir', 'nan_skip'], cwd)
    assert 'iteration 3: non-finite loss (nan), update skipped (1 in a row, 1 in all' in out.stdout
    assert 'iteration 4: non-finite loss (nan), update skipped (2 in a row, 2 in all' in out.stdout
    final = torch.load(cwd / 'nan_skip' / 'iter_8.pth', map_location='cpu', weights_only=True)
    assert all(torch.isfinite(v).all() for v in final['state_dict'].values() if v.is_floating_point())
    # iterations 5-8 trained on (the logged loss is a 10-iteration mean, NaN for a while)
    at_4 = torch.load(cwd / 'nan_skip' / 'iter_4.pth', map_location='cpu', weights_only=True)['state_dict']
    assert not torch.equal(at_4['backbone.blocks.0.attn.qkv.weight'], final['state_dict']['backbone.blocks.0.attn.qkv.weight'])
    assert all(torch.isfinite(v).all() for v in at_4.values() if v.is_floating_point())
    # and too many in a row still stop
    config = _config(cwd, 'nan_forever', """
        custom_hooks = [dict(type='NonFiniteLossHook', action='skip', max_skips=2),
                        dict(type='NanBackboneHook', at=2, until=100)]
    """)
    out = _run_here([TRAIN, config, '--work-dir', 'nan_forever'], cwd, ok=False)
    assert ('error: non-finite loss (nan) at iteration 4, after 2 skipped in a row (max_skips=2); '
            'no checkpoint was saved yet') in out.stderr


def test_skip_corrupt_counts_logs_and_finishes(user, tmp_path):
    _, env = user
    make_synthetic_ade20k(tmp_path / 'data' / 'synthetic_ade20k', num_train=8, num_val=2, size=96, seed=5)
    images = tmp_path / 'data' / 'synthetic_ade20k' / 'ADEChallengeData2016' / 'images' / 'training'
    (images / 'ADE_train_00000003.jpg').write_bytes(b'not an image')
    config = _config(tmp_path, 'skip', """
        train_cfg = dict(max_iters=4)
    """)
    (tmp_path / 'test_hooks.py').write_text(TEST_HOOKS)
    # a process of its own: the dataloader workers write the skip lines to its file descriptors
    out = _run([TRAIN, config, '--work-dir', 'run', '--cfg-options', 'train_dataloader.dataset.pipeline.0.skip_corrupt=True'],
               tmp_path, {**env, 'PYTHONPATH': str(tmp_path)})
    log = out.stdout + out.stderr
    assert 'skipping corrupt training sample: cannot decode ' in log and 'ADE_train_00000003.jpg' in log
    assert 'corrupt training sample(s) skipped so far' in log
    assert max(r.get('skipped_samples', 0) for r in logged_scalars(tmp_path / 'run')) >= 1
    assert (tmp_path / 'run' / 'iter_4.pth').is_file()
    # without the option the same data stops the run with one line naming the file
    plain = _config(tmp_path, 'plain', 'train_cfg = dict(max_iters=4)\n')
    out = _run_here([TRAIN, plain, '--work-dir', 'plain'], tmp_path, ok=False)
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith('error: cannot decode ') and 'ADE_train_00000003.jpg' in last
    assert 'AssertionError: failed to load image' in last


def test_tools_print_one_line_for_bad_data_and_checkpoints(user, uninterrupted):
    cwd, _ = user
    out = _run_here([TRAIN, uninterrupted, '--work-dir', 'x', '--cfg-options',
                     'train_dataloader.dataset.data_root=data/typo'], cwd, ok=False)
    assert out.returncode == 1 and 'Traceback' not in out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith(
        "error: train_dataloader.dataset.data_root: 'data/typo' does not exist")
    cut = cwd / 'cut.pth'
    cut.write_bytes((cwd / 'ref' / 'iter_4.pth').read_bytes()[:1000])
    out = _run_here([TEST, uninterrupted, cut, '--work-dir', 'y'], cwd, ok=False)
    assert out.stderr.strip().splitlines()[-1].startswith(
        f'error: cannot read {cut}: truncated or not a PyTorch checkpoint')


def test_analyze_logs_reads_real_runs(user, uninterrupted):
    import csv
    cwd, _ = user
    out = _run_here([REPO / 'tools' / 'analyze_logs.py', 'ref', '--out', 'logs', '--spike-window', '3'], cwd).stdout
    assert 'ref: 12 logged iterations (1..12)' in out and 'mIoU: best ' in out and 'at iteration 12' in out
    rows = [r for r in csv.DictReader((cwd / 'logs' / 'curves.csv').open()) if r['run'] == 'ref']
    assert {int(r['iter']): float(r['loss']) for r in rows} == _losses(cwd / 'ref')
    assert (cwd / 'logs' / 'loss.png').stat().st_size > 10_000 and (cwd / 'logs' / 'miou.png').is_file()
