"""tools/selfcheck.py: the --quick CPU subset end to end, what a failing check does, and
the report's form. (The full CPU run, with DDP, compile and figures, is in the closing
notes and docs/gpus.md: about 2.5 minutes on 2 cores.)"""
import importlib.metadata
import json
import os
import subprocess
import sysconfig
from pathlib import Path

import pytest
import torch

from conftest import REPO, run_script
import vit5seg
from vit5seg import selfcheck
from vit5seg.engine.launch import run_tool
from vit5seg.selfcheck import checks, figures, machine


def expected_install_kind() -> str:
    """From where the files are: the package inside site-packages is a regular install;
    pip's editable finder (``__editable__*vit5seg*``) there, an editable one; else a source tree."""
    site = {Path(sysconfig.get_paths()[k]).resolve() for k in ('purelib', 'platlib')}
    package = Path(vit5seg.__file__).resolve().parent
    if any(package.is_relative_to(folder) for folder in site):
        return 'regular'
    if any(list(folder.glob('__editable__*vit5seg*')) for folder in site):
        return 'editable'
    return 'source tree'


@pytest.mark.slow  # three trainings in processes of their own
def test_quick_cpu_run_passes_and_writes_the_report(tmp_path):
    out = run_script(REPO / 'tools' / 'selfcheck.py', '--device', 'cpu', '--quick', '--out', tmp_path / 'report')
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    report = json.loads((tmp_path / 'report' / 'selfcheck.json').read_text())
    assert set(report) >= {'environment', 'checks', 'figures'}
    env = report['environment']
    assert env['torch'] and env['mmseg'] == '1.2.2' and env['mmcv'].startswith('mmcv-lite')
    assert env['mmcv_compiled_ops'] is False and env['gpus'] == []
    # the code that made the report: the clone's commit, read here with git itself
    head = subprocess.run(['git', '-C', str(REPO), 'rev-parse', 'HEAD'], capture_output=True, text=True).stdout.strip()
    # the version pip recorded when it installed vit5seg, and how it installed it, read from
    # site-packages here (the report reads the install's direct_url.json)
    assert env['vit5seg'] in {d.version for d in importlib.metadata.distributions(name='vit5seg')}
    assert env['vit5seg_commit'].startswith(head)
    assert env['vit5seg_install'] == expected_install_kind()
    locked = dict(line.split('==') for line in (REPO / 'requirements' / 'lock.txt').read_text().splitlines()
                  if '==' in line and not line.startswith('#'))
    assert report['tested_set']['torch'] == locked['torch'] and report['tested_set']['python'] == '3.11'
    checks = {c['name']: c for c in report['checks']}
    assert list(checks) == list(selfcheck.CHECKS)
    for name, check in checks.items():
        assert set(check) == {'name', 'status', 'seconds', 'detail'}
        assert check['status'] == ('pass' if name in selfcheck.QUICK else 'skip'), check
    assert 'resumed to 4' in checks['train_resume_test']['detail']
    assert 'ms_deform_attn' in checks['mmcv_fallbacks']['detail']
    assert report['figures'] == {}
    text = (tmp_path / 'report' / 'selfcheck.md').read_text()
    assert '| train_resume_test | pass |' in text and '| mmcv_compiled_ops | False |' in text
    assert f"| torch | {env['torch']} | {locked['torch']} |" in text and f'commit {head}' in text
    assert '[pass] heads' in out.stdout


def test_a_failing_check_is_reported_and_exits_1(tmp_path, monkeypatch, capsys):
    def broken(ctx):
        raise RuntimeError('the GPU caught fire\nsecond line')
    monkeypatch.setitem(selfcheck.CHECKS, 'checkpoint_conversion', broken)
    code = selfcheck.main(['--device', 'cpu', '--quick', '--checks', 'checkpoint_conversion', 'amp_bf16',
                           '--out', str(tmp_path)])
    assert code == 1
    checks = json.loads((tmp_path / 'selfcheck.json').read_text())['checks']
    assert checks[0] == dict(name='checkpoint_conversion', status='fail', seconds=checks[0]['seconds'],
                             detail='RuntimeError: the GPU caught fire')
    assert checks[1]['status'] == 'skip'
    assert '0 of 2' not in capsys.readouterr().out


def test_cpu_only_checks_say_why_they_skip(tmp_path):
    report = selfcheck.selfcheck('cpu', checks=['amp_bf16', 'amp_fp16'], quick=False, out=tmp_path,
                                 repeats=1, figures=False)
    assert [c['status'] for c in report['checks']] == ['skip', 'skip']
    assert all('CUDA only' in c['detail'] for c in report['checks'])


def test_cuda_without_a_gpu_is_one_clear_error(tmp_path):
    with pytest.raises(SystemExit, match='--device cuda, but this machine has no NVIDIA GPU'):
        selfcheck.selfcheck('cuda', out=tmp_path)


FAKE_NVIDIA_SMI = """#!/bin/sh
# an 8-GPU node whose driver is older than the torch wheel's CUDA needs
for i in 0 1 2 3 4 5 6 7; do echo "NVIDIA A100-SXM4-80GB, 470.82.01"; done
"""


def test_a_gpu_node_torch_cannot_use_fails_without_any_option(tmp_path):
    """What a node with too old a driver does: nvidia-smi lists GPUs, torch sees none. The
    self-check must not fall back to the CPU and pass."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'nvidia-smi').write_text(FAKE_NVIDIA_SMI)
    (bin_dir / 'nvidia-smi').chmod(0o755)
    env = {**os.environ, 'PATH': f"{bin_dir}{os.pathsep}{os.environ['PATH']}", 'CUDA_VISIBLE_DEVICES': ''}
    out = run_script(REPO / 'tools' / 'selfcheck.py', '--quick', '--out', tmp_path / 'report', env=env)
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('error: this machine has NVIDIA GPUs'), out.stderr
    assert '8 x NVIDIA A100-SXM4-80GB; driver 470.82.01' in lines[0]
    cuda = torch.version.cuda
    if cuda:  # the CUDA build (the pinned wheel): the driver it needs and the way out
        need = machine.CUDA_MIN_DRIVER[int(cuda.split('.')[0])]
        assert f'built for CUDA {cuda}, which needs an NVIDIA driver >= {need}' in lines[0]
        assert 'update the driver' in lines[0]
    assert not (tmp_path / 'report' / 'selfcheck.json').exists()  # nothing ran


def test_fallback_check_fails_when_a_stand_in_did_not_run(tmp_path, monkeypatch):
    """PSANet does not use deformable attention: asked to see that stand-in, the check fails."""
    monkeypatch.setitem(checks.EXPECTED_FALLBACKS, 'PSAHead', 'ms_deform_attn')
    report = selfcheck.selfcheck('cpu', checks=['mmcv_fallbacks'], out=tmp_path, figures=False)
    check, = report['checks']
    assert check['status'] == 'fail' and 'PSAHead ran without its stand-in `ms_deform_attn`' in check['detail']


@pytest.mark.slow  # > 10 s on 2 cores (the quick tier: <= 3 min)
def test_ddp_check_compares_parameters_and_would_catch_unsynchronised_norms(tmp_path):
    """Two gloo ranks: parameters equal. Their BN statistics differ (plain BN on CPU, the
    Runner does not broadcast buffers), which is what the GPU run with SyncBN must not show."""
    ctx = checks.Context('cpu', 0, tmp_path, threads=2)
    detail = checks.check_ddp(ctx)
    assert detail.startswith('2 ranks (gloo), 3 iterations of 2 micro-batches, gradients all-reduced once each: all ')
    assert 'BN statistics stay per rank' in detail
    states = [torch.load(tmp_path / 'ddp' / 'run' / f'rank{r}.pth', weights_only=True) for r in range(2)]
    assert checks.ranks_differ(states, buffers=False) == []
    unsynced = checks.ranks_differ(states, buffers=True)
    assert unsynced and all(n.startswith('buffer:') and n.endswith(('running_mean', 'running_var')) for n in unsynced)
    with pytest.raises(RuntimeError, match='no SyncBatchNorm layer'):
        checks.compare_ranks(states, 'cuda')
    assert [int(s['synced_backwards']) for s in states] == [3, 3]  # of 6 backward passes: no_sync on the first
    states[1]['synced_backwards'] = torch.tensor(6)
    with pytest.raises(RuntimeError, match=r'gradients of \[3, 6\] backward passes .* in 3 optimizer steps'):
        checks.compare_ranks(states, 'cpu')
    assert checks._norm_options(REPO / 'configs' / 'vit5_upernet_ade20k.py') == [
        f'model.{part}.norm_cfg.type=SyncBN' for part in ('neck', 'decode_head', 'auxiliary_head')]


def test_a_failed_torchrun_names_its_workers_error_and_keeps_the_output(tmp_path):
    """torchrun's own last line is a '====' rule: the error must be the worker's exception."""
    (tmp_path / 'worker.py').write_text("import os\n"
                                        "raise ValueError(f\"rank {os.environ['RANK']} cannot go on\")\n")
    env = {**os.environ, 'OMP_NUM_THREADS': '1'}
    with pytest.raises(RuntimeError) as failed:
        checks._run(['-m', 'torch.distributed.run', '--nproc_per_node=1', f'--master_port={checks._free_port()}',
                     'worker.py'], tmp_path, env)
    log = tmp_path / 'torch.distributed.run.log'
    assert str(failed.value) == f'torch.distributed.run exited 1: ValueError: rank 0 cannot go on (output: {log})'
    assert 'Traceback' in log.read_text() and log.read_text().rstrip().endswith('=' * 20)


def test_a_tool_that_succeeds_ends_its_process_group():
    """Left to interpreter shutdown, a gloo group sometimes aborted the process after a run
    that had succeeded (the DDP check: 1 run in 15 here, torch 2.7.1), and torchrun failed it."""
    import torch.distributed as dist

    def tool(argv):
        dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{checks._free_port()}', rank=0, world_size=1)
        dist.all_reduce(torch.ones(2))
        return dist.get_world_size()
    try:
        assert run_tool(tool) == 1 and not dist.is_initialized()
    finally:  # this process goes on to other tests
        if dist.is_initialized():
            dist.destroy_process_group()


@pytest.mark.slow  # > 10 s on 2 cores (the quick tier: <= 3 min)
def test_schedule_estimates_measure_the_configured_step_on_1_to_8_gpus(tmp_path):
    """On CPU with the tiny config at 2 images per GPU (the GPU run does it with the entry
    configs): its own crop, batch and iterations; the hours on N GPUs = iterations x the
    micro-batches that keep its 8 images per iteration x the measured step."""
    config = tmp_path / 'two_per_gpu.py'
    config.write_text(f"_base_ = ['{REPO / 'configs' / 'tiny' / 'vit5_upernet_synthetic.py'}']\n"
                      "train_dataloader = dict(batch_size=2)\n")
    row32, row16 = figures.schedule_estimates([config], 'cpu', repeats=1, crop=64)  # the config's crop: 96
    assert [row32['precision'], row16['precision']] == ['float32', 'bf16']
    for row in (row32, row16):
        assert (row['crop'], row['images_per_gpu'], row['iterations']) == (64, 2, 300)
        assert row['images_per_iteration'] == 8 and row['micro_batches'] == {1: 4, 2: 2, 4: 1, 8: 1}
        for gpus, micro in ((1, 4), (2, 2), (4, 1), (8, 1)):
            assert row['hours'][gpus] == pytest.approx(300 * micro * row['step_s'] / 3600, abs=0.01)
        assert 0 < row['peak_gib'] < row['gpu_gib'] and row['fits'] and row['unit'] == 'process'
    assert figures.estimate_line(row16).split(' images: ')[1].startswith(f"{row16['hours'][1]:.1f} h on 1 process, ")


def test_schedule_estimate_line():
    row = dict(config='vit5_upernet_ade20k.py', precision='bf16', crop=512, images_per_gpu=2, iterations=160000,
               step_s=0.1, peak_gib=4.2, gpu_gib=139.8, fits=True, images_per_iteration=16,
               micro_batches={1: 8, 2: 4, 4: 2, 8: 1}, hours={1: 35.56, 2: 17.78, 4: 8.89, 8: 4.44})
    line = figures.estimate_line(row)
    assert line == ("vit5_upernet_ade20k.py (bf16, 512px): 0.100 s per step of 2 images; 160000 iterations of 16 "
                    "images: 35.6 h on 1 GPU, 17.8 h on 2 GPUs, 8.9 h on 4 GPUs, 4.4 h on 8 GPUs; peak 4.2 of 140 "
                    "GiB: fits")


@pytest.mark.slow
def test_eomt_figures_put_dinov3_beside_vit5():
    """Issue #39: DINOv3-L EoMT beside ViT-5-L on a GPU, the S sizes on a CPU."""
    from mmengine.config import Config
    assert {'vit5-large-eomt', 'dinov3-large-eomt'} <= set(figures.EOMT_CONFIGS)
    assert set(figures.CPU_EOMT_CONFIGS) == {'vit5-small-eomt', 'dinov3-small-eomt'}
    for name, path in {**figures.EOMT_CONFIGS, **figures.CPU_EOMT_CONFIGS}.items():
        assert path.is_file() and Config.fromfile(str(path)).model.backbone.arch == name[:-len('-eomt')]
    assert '137 images/s' in figures.EOMT_ANCHOR


@pytest.mark.slow  # > 10 s on 2 cores (the quick tier: <= 3 min)
def test_eomt_figures_eager_and_compiled_at_batch_1_and_8(tmp_path):
    """Two configs in one process (S, B and L on a GPU): each compiled row compiled its own
    graphs. Without dynamo's reset per config the second one reached the recompile limit of
    the blocks' shared code and ran eager (now an error: fail_on_recompile_limit_hit)."""
    # the config's compile arguments: dynamo without inductor's code generation, which
    # test_models_eomt.py's compiled tests pay for; float32 only (the GPU run does both)
    config = tmp_path / 'tiny_eomt.py'
    config.write_text(f"_base_ = ['{REPO / 'configs' / 'tiny' / 'vit5_eomt_synthetic.py'}']\n"
                      "model = dict(backbone=dict(compile=dict(backend='aot_eager')))\n")
    rows = figures.eomt_figures('cpu', repeats=1, configs={'tiny': config, 'tiny-again': config}, crop=64,
                                precisions=('float32',))
    assert [(r['model'], r['mode']) for r in rows] == [('tiny', 'eager'), ('tiny', 'compiled'),
                                                       ('tiny-again', 'eager'), ('tiny-again', 'compiled')]
    for row in rows:
        assert row['crop'] == 64 and min(row['infer_b1_images_s'], row['infer_b8_images_s'], row['train_images_s']) > 0
        if row['mode'] == 'compiled':
            assert row['first_train_step_s'] > 0
            assert row['compiled_graphs'] >= 4, row  # blocks without queries, with and without a mask; predictions
    assert rows[1]['compiled_graphs'] == rows[3]['compiled_graphs']  # counted per config
    rows = rows[:2]
    table = figures.eomt_table(rows)
    assert table[0].startswith('| model | mode | precision | crop |') and len(table) == 4
    assert table[0].endswith('| first_train_step_s | compiled_graphs |') and table[2].endswith('|  |  |')


