"""End to end on synthetic ADE20K-layout data, CPU: tools/train.py, tools/test.py,
--resume, torchrun with two ranks, and the demo's training measurably learning."""
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

from conftest import REPO, logged_scalars, run_script
from vit5seg.datasets import make_synthetic_ade20k
from vit5seg.selfcheck.checks import DDP_WORKER, RANK_BOOKKEEPING

pytestmark = pytest.mark.slow
ENV = {**os.environ, 'OMP_NUM_THREADS': '2', 'PYTHONUNBUFFERED': '1'}


def _run(args, cwd):
    """A tool as its command line runs it (in this process: the same script, no interpreter start)."""
    out = run_script(*args, cwd=cwd)
    assert out.returncode == 0, (out.stdout[-2000:], out.stderr[-4000:])
    return out.stdout + out.stderr


@pytest.fixture(scope='module')
def project(tmp_path_factory):
    """A user's folder outside the repo: their own config inheriting ours, the data."""
    cwd = tmp_path_factory.mktemp('user')
    make_synthetic_ade20k(cwd / 'data' / 'synthetic_ade20k', num_train=16, num_val=8, size=96, seed=1)
    config = cwd / 'my_config.py'
    config.write_text(textwrap.dedent(f"""
        _base_ = ['{REPO / 'configs' / 'tiny' / 'vit5_upernet_synthetic.py'}']
        train_cfg = dict(max_iters=20, val_interval=20)
        default_hooks = dict(checkpoint=dict(interval=10))
    """))
    log = _run([REPO / 'tools' / 'train.py', config, '--work-dir', 'run'], cwd)
    return cwd, config, log


def test_train_writes_mmengine_work_dir(project):
    cwd, _, _ = project
    run = cwd / 'run'
    assert (run / 'iter_10.pth').is_file() and (run / 'iter_20.pth').is_file()
    assert (run / 'last_checkpoint').read_text().strip().endswith('iter_20.pth')
    records = logged_scalars(run)
    assert any('mIoU' in r for r in records) and any('loss' in r for r in records)


def test_training_starts_with_the_recipe_card_print_config_shows(project):
    """The card tools/print_config.py --card prints for this launch (1 process, no
    accumulation: a plain tools/train.py run) is what the run logs before its first iteration,
    and what its saved config keeps."""
    cwd, config, _ = project
    shown = run_script(REPO / 'tools' / 'print_config.py', config, '--card', '--gpus', '1', '--accumulate', '1',
                       cwd=cwd)
    assert shown.returncode == 0, shown.stderr
    card = shown.stdout.rstrip('\n')
    assert card.startswith(f'recipe card: {config}\ncode: vit5seg ') and 'images per iteration: 8' in card
    log = next((cwd / 'run').glob('*/*.log')).read_text()
    assert card in log and log.index(card) < log.index('Iter(train)')
    saved = (cwd / 'run' / 'my_config.py').read_text()
    assert 'recipe_card = [' in saved and all(repr(line) in saved for line in card.splitlines()[2:])


def _log_of(work_dir):
    return next(work_dir.glob('*/*.log')).read_text()


def test_accumulation_in_the_config_keeps_mmengine_meaning_and_the_flag_keeps_ours(project):
    """The issue #51 done-when: accumulative_counts=4 in the config with max_iters=8 is 8 iterations
    of one micro-batch, 2 AdamW steps (mmengine's meaning); --accumulate 4 with max_iters=2 is 2
    iterations of 4 micro-batches, 2 steps too (the project's). Each run logs the card
    print_config.py shows, and that card says which."""
    cwd, config, _ = project
    options = ['train_dataloader.batch_size=2', 'default_hooks.checkpoint.interval={n}', 'train_cfg.val_interval={n}',
               'train_cfg.max_iters={n}']
    runs = {'in_config': (8, ['--cfg-options', 'optim_wrapper.accumulative_counts=4'],
                          '  max_iters counts: 8 iterations of 1 micro-batch = 2 optimizer steps of 8 images',
                          "  schedulers in iterations: ('LinearLR lr iterations 0-20 start_factor=0.001 "
                          "end_factor=1.0', "
                          "'PolyLR lr iterations 20-300 eta_min=0.0 power=1.0')",
                          '  train loop: IterBasedTrainLoop'),
            'flag': (2, ['--accumulate', '4', '--cfg-options'],
                     '  max_iters counts: 2 optimizer steps of 8 images (4 micro-batch(es) each)',
                     "  schedulers in optimizer steps: ('LinearLR lr steps 0-20 start_factor=0.001 end_factor=1.0', "
                     "'PolyLR lr steps 20-300 eta_min=0.0 power=1.0')",
                     '  train loop: AccumulatingIterBasedTrainLoop')}
    for name, (iters, args, *lines) in runs.items():
        args = [*args, *[o.format(n=iters) for o in options]]
        _run([REPO / 'tools' / 'train.py', config, '--work-dir', name, *args], cwd)
        shown = run_script(REPO / 'tools' / 'print_config.py', config, '--card', '--gpus', '1', *args, cwd=cwd)
        assert shown.returncode == 0, shown.stderr
        card = shown.stdout.rstrip('\n')
        for line in lines:
            assert line in card.splitlines(), (name, line)
        log = _log_of(cwd / name)
        assert card in log and log.index(card) < log.index('Saving checkpoint at'), name
        saved = torch.load(cwd / name / f'iter_{iters}.pth', weights_only=False)
        steps = {int(state['step']) for state in saved['optimizer']['state'].values()}
        assert steps == {2} and saved['meta']['iter'] == iters, (name, steps)  # AdamW stepped twice
        assert saved['meta']['batch_plan'] == dict(gpus=1, per_gpu=2, micro_batches=4, target=8,
                                                   iteration_is_step=name == 'flag')
    plain = run_script(REPO / 'tools' / 'print_config.py', config, '--card', '--gpus', '1', '--accumulate', '1',
                       '--cfg-options', *[o.format(n=2) for o in options], cwd=cwd).stdout
    assert '  train loop: IterBasedTrainLoop' in plain.splitlines()


def test_test_tool_reproduces_the_metric_logged_at_the_end_of_training(project):
    cwd, config, _ = project
    logged = [r for r in logged_scalars(cwd / 'run') if 'mIoU' in r][-1]
    _run([REPO / 'tools' / 'test.py', config, 'run/iter_20.pth', '--work-dir', 'test_out', '--show-dir', 'vis'],
         cwd)
    metrics_json = sorted((cwd / 'test_out').glob('*/*.json'))
    assert metrics_json, list((cwd / 'test_out').rglob('*'))
    tested = json.loads(metrics_json[-1].read_text())
    for key in ('mIoU', 'mAcc', 'aAcc'):
        assert tested[key] == pytest.approx(logged[key], abs=1e-2), key
    assert len(list((cwd / 'test_out' / 'vis').rglob('*.png'))) == 8


def test_test_tool_takes_the_checkpoint_by_hub_id(project, tmp_path):
    """``tools/test.py CONFIG hf://OWNER/NAME/FILE``: the file comes through huggingface_hub from a Hub served
    on 127.0.0.1 into a fresh cache, and gives the metric training logged."""
    from local_server import serve_hub
    cwd, config, _ = project
    logged = [r for r in logged_scalars(cwd / 'run') if 'mIoU' in r][-1]
    env = {k: v for k, v in ENV.items() if not k.startswith(('HF_', 'HUGGINGFACE'))}
    env.update(HF_HOME=str(tmp_path / 'hf_home'), XDG_CACHE_HOME=str(tmp_path / 'cache'), HF_HUB_DISABLE_TELEMETRY='1')
    with serve_hub({'someone/tiny_run': cwd / 'run'}) as hub:   # HF_ENDPOINT is read on import: a second process
        done = subprocess.run([sys.executable, str(REPO / 'tools' / 'test.py'), str(config),
                               'hf://someone/tiny_run/iter_20.pth', '--work-dir', str(tmp_path / 'hub_test')],
                              capture_output=True, text=True, cwd=cwd, timeout=600,
                              env=dict(env, HF_ENDPOINT=hub.endpoint, HF_HUB_OFFLINE='0'))
        assert done.returncode == 0, done.stderr[-3000:]
        assert any(method == 'GET' and path.endswith('/iter_20.pth') for method, path, *_ in hub.requests)
    assert list((tmp_path / 'hf_home' / 'hub' / 'models--someone--tiny_run').glob('snapshots/*/iter_20.pth'))
    tested = json.loads(sorted((tmp_path / 'hub_test').glob('*/*.json'))[-1].read_text())
    for key in ('mIoU', 'mAcc', 'aAcc'):
        assert tested[key] == pytest.approx(logged[key], abs=1e-2), key


def test_resume_continues_iteration_lr_and_optimizer_state(project):
    cwd, config, _ = project
    shutil.copytree(cwd / 'run', cwd / 'run_more')  # keep 'run' as it is for the other tests
    log = _run([REPO / 'tools' / 'train.py', config, '--work-dir', 'run_more', '--resume',
                '--cfg-options', 'train_cfg.max_iters=30'], cwd)
    assert 'resumed epoch: 0, iter: 20' in log  # auto: the work dir's last checkpoint
    records = [r for r in logged_scalars(cwd / 'run_more') if 'lr' in r]
    before = {r['iter']: r['lr'] for r in records if r['iter'] <= 20}
    after = [r for r in records if r['iter'] > 20]
    assert after and min(r['iter'] for r in after) == 30 and before
    ckpt = torch.load(cwd / 'run_more' / 'iter_30.pth', map_location='cpu', weights_only=True)  # compat: safe load
    assert ckpt['meta']['iter'] == 30
    steps = {int(s['step']) for s in ckpt['optimizer']['state'].values()}
    assert steps == {30}  # AdamW's step counts continued from the checkpoint's 20
    # a named checkpoint, not the work dir's last (iteration 20), is the one resumed; that the run
    # then equals the uninterrupted one (weights, lr, schedule, bitwise): test_engine_reliability.py
    resumed_from_10 = _run([REPO / 'tools' / 'train.py', config, '--work-dir', 'run10', '--resume',
                            str(cwd / 'run' / 'iter_10.pth'), '--cfg-options', 'train_cfg.max_iters=11'], cwd)
    assert 'resumed epoch: 0, iter: 10' in resumed_from_10 and (cwd / 'run10' / 'iter_11.pth').is_file()


RANK_DUMP = DDP_WORKER  # trains through tools/train.py's logic, saves each rank's parameters


def test_torchrun_two_ranks_on_cpu_end_with_identical_weights(project):
    cwd, config, _ = project
    script = cwd / 'rank_dump.py'
    script.write_text(RANK_DUMP)
    env = {**ENV, 'OMP_NUM_THREADS': '1'}
    out = subprocess.run([sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node=2',
                          '--master_port=29533', str(script), str(config), '--launcher', 'pytorch',
                          '--accumulate', 'auto', '--work-dir', 'ddp', '--cfg-options', 'train_cfg.max_iters=6',
                          'train_cfg.val_interval=6', 'train_dataloader.batch_size=2'],
                         cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    # the tiny config's 8 images per iteration on 2 ranks of 2: 2 micro-batches, the first without all-reduce
    assert 'images per iteration: 2 GPU(s) x 2 images x 2 micro-batch(es) = 8 images per iteration' in out.stdout
    assert 'gradient accumulation: 2 GPU(s) x 2 images x 2 micro-batches' in out.stdout
    ranks = [torch.load(cwd / 'ddp' / f'rank{r}.pth', weights_only=True) for r in (0, 1)]
    assert ranks[0].keys() == ranks[1].keys()
    # parameters (BN running stats are per rank without SyncBN, as in mmseg)
    # 6 steps of 2 micro-batches: DDP all-reduced on the second backward of each step only (no_sync)
    assert [int(r['synced_backwards']) for r in ranks] == [6, 6] and int(ranks[0]['iterations']) == 6
    params = [n for n in ranks[0] if n not in RANK_BOOKKEEPING and not n.startswith('buffer:')]
    assert len(params) > 100
    for name in params:
        assert torch.equal(ranks[0][name], ranks[1][name]), name
    start = torch.load(cwd / 'run' / 'iter_10.pth', weights_only=True)['state_dict']
    assert not torch.equal(start['backbone.blocks.0.attn.qkv.weight'], ranks[0]['backbone.blocks.0.attn.qkv.weight'])


@pytest.fixture(scope='module')
def deit3_run(project):
    cwd, _, _ = project
    config = REPO / 'configs' / 'tiny' / 'deit3_upernet_synthetic.py'
    _run([REPO / 'tools' / 'train.py', config, '--work-dir', 'deit3', '--cfg-options', 'train_cfg.max_iters=4',
          'train_cfg.val_interval=4', 'default_hooks.checkpoint.interval=4'], cwd)
    return cwd / 'deit3'


def test_tiny_deit3_twin_trains_and_tests(deit3_run):
    ckpt = torch.load(deit3_run / 'iter_4.pth', map_location='cpu', weights_only=True)
    assert 'backbone.blocks.0.attn.qkv.bias' in ckpt['state_dict'] and 'backbone.reg_token' not in ckpt['state_dict']
    assert any('mIoU' in r for r in logged_scalars(deit3_run))


def test_compare_pairs_the_twins_and_reports_missing_runs(project, deit3_run):
    import csv
    cwd, config, _ = project
    _run([REPO / 'tools' / 'test.py', config, 'run/iter_20.pth', '--work-dir', 'vit5_test'], cwd)
    tested = json.loads(sorted((cwd / 'vit5_test').glob('*/*.json'))[-1].read_text())
    deit3_val = [r for r in logged_scalars(deit3_run) if 'mIoU' in r][-1]
    _run([REPO / 'tools' / 'compare.py', 'vit5_test', 'deit3', 'nowhere', '--out', 'cmp'], cwd)
    rows = list(csv.DictReader((cwd / 'cmp' / 'comparison.csv').open()))
    assert len(rows) == 1
    row = rows[0]
    assert row['size'] == 'small (embed_dims=64, num_layers=4, num_heads=2)'
    assert float(row['ViT-5 mIoU (ss)']) == pytest.approx(tested['mIoU'])
    assert float(row['DeiT-III mIoU (ss)']) == pytest.approx(deit3_val['mIoU'])
    assert float(row['delta mIoU (ss)']) == pytest.approx(tested['mIoU'] - deit3_val['mIoU'], abs=0.006)
    assert row['ViT-5 status'] == 'ok' and row['DeiT-III status'] == 'ok (last validation; no test run here)'
    assert row['within tolerance'] == 'no paper figure' and row['ViT-5 mIoU (ms)'] == ''
    md = (cwd / 'cmp' / 'comparison.md').read_text()
    assert f"| {row['size']} | {tested['mIoU']:.2f} | 1 | {deit3_val['mIoU']:.2f} | 1 |" in md
    assert row['ViT-5 n'] == row['DeiT-III n'] == '1' and row['paper delta in ci95'] == 'no paper figure'
    assert '- `nowhere`: missing (no mmengine run in this folder)' in md


def test_resolution_sweep_on_the_twins(project, deit3_run):
    import csv

    import cv2
    cwd, config, _ = project
    deit3_config = REPO / 'configs' / 'tiny' / 'deit3_upernet_synthetic.py'
    log = _run([REPO / 'tools' / 'resolution_sweep.py', config, 'run/iter_20.pth', deit3_config, 'deit3/iter_4.pth',
                '--names', 'vit5', 'deit3', '--sizes', '64', '128', '--rope-ref-grid', 'authors', 'integer',
                '--pos-embed-mode', 'bicubic', 'bilinear', '--out', 'sweep'], cwd)
    assert 'sweep: 100%' in log  # the progress bar
    rows = list(csv.DictReader((cwd / 'sweep' / 'sweep.csv').open()))
    assert list(rows[0])[:5] == ['model', 'size', 'mode', 'mIoU', 'mAcc']
    # ViT-5: 2 RoPE x 2 pos_embed policies; DeiT-III has no RoPE: 2 policies. x 2 sizes x 2 modes
    assert len(rows) == (4 + 2) * 2 * 2
    assert {r['model'] for r in rows if r['model'].startswith('deit3')} == {
        'deit3 [rope=n/a, pos=bicubic]', 'deit3 [rope=n/a, pos=bilinear]'}

    def row(model, size, mode):
        return next(r for r in rows if r['model'] == model and r['size'] == str(size) and r['mode'] == mode)

    # at the config's own test scale (short side 128), whole image, default policy: the validation
    # logged at the end of training of the same checkpoint
    for model, work_dir in (('vit5 [rope=authors, pos=bicubic]', cwd / 'run'),
                            ('deit3 [rope=n/a, pos=bicubic]', deit3_run)):
        logged = [r for r in logged_scalars(work_dir) if 'mIoU' in r][-1]
        got = row(model, 128, 'whole')
        assert (float(got['mIoU']), float(got['mAcc'])) == pytest.approx((logged['mIoU'], logged['mAcc']), abs=1e-2)
        assert got['scale'] == '160x128' and got['train_crop'] == '96x96'
        # short side 64 is inside one 96x96 window: sliding = whole
        assert row(model, 64, 'slide')['mIoU'] == row(model, 64, 'whole')['mIoU']
    png = cv2.imread(str(cwd / 'sweep' / 'sweep.png'))
    assert png is not None and png.shape[1] > png.shape[0] and png.std() > 10  # two panels, drawn


def test_feature_similarity_tool_on_trained_backbones(project, deit3_run):
    import csv

    import cv2
    cwd, config, _ = project
    images = cwd / 'data' / 'synthetic_ade20k' / 'ADEChallengeData2016' / 'images' / 'validation'
    _run([REPO / 'tools' / 'feature_similarity.py', config, 'run/iter_20.pth',
          REPO / 'configs' / 'tiny' / 'deit3_upernet_synthetic.py', 'deit3/iter_4.pth', '--names', 'vit5', 'deit3',
          '--images', images, '--sizes', '224', '448', '--rope-ref-grid', 'authors', 'integer', '--out', 'feat'], cwd)
    rows = list(csv.DictReader((cwd / 'feat' / 'features.csv').open()))
    assert [(r['model'], r['size']) for r in rows] == [
        ('vit5 [rope=authors, pos=bicubic]', '224'), ('vit5 [rope=authors, pos=bicubic]', '448'),
        ('vit5 [rope=integer, pos=bicubic]', '224'), ('vit5 [rope=integer, pos=bicubic]', '448'), ('deit3', '224'),
        ('deit3', '448')]
    for r in rows:
        assert r['images'] == '8'
        if r['size'] == '224':  # the same input as the reference
            assert float(r['patch_cos']) == pytest.approx(1.0, abs=1e-4) and float(r['cls_cos']) == pytest.approx(1.0,
                                                                                                                abs=1e-4)
        else:
            assert float(r['unrelated_patch_cos']) < float(r['patch_cos']) < 1.0
    png = cv2.imread(str(cwd / 'feat' / 'features.png'))
    assert png is not None and png.std() > 10
