"""Seeds and ablations: mean, std and Welch intervals over crafted runs (checked by hand),
duplicates flagged, the ablation table and forest plot, tools/run_seeds.py; and the whole
loop on real tiny trainings (seeds -> compare -> table with intervals)."""
import csv
import json
import math
import subprocess
import sys

import cv2
import pytest
from mmengine.config import Config
from scipy import stats as scipy_stats

from conftest import REPO, run_script
from vit5seg.analysis import compare as cmp
from vit5seg.analysis.ablations import ablations
from vit5seg.analysis.groups import merge_group
from vit5seg.analysis.runs import read_result
from vit5seg.analysis.stats import seeds_needed, summarize, welch_interval
from vit5seg.datasets import make_synthetic_ade20k
from vit5seg.engine.seeds import main as run_seeds_main
from vit5seg.engine.seeds import seed_runs

ENTRY = REPO / 'configs' / 'vit5_upernet_ade20k.py'
DEIT3 = REPO / 'configs' / 'deit3_upernet_ade20k.py'


def test_welch_interval_by_hand():
    a, b = [52.0, 52.4, 51.8], [49.3, 49.9]
    mean_a, mean_b = 156.2 / 3, 49.6
    var_a = ((52.0 - mean_a) ** 2 + (52.4 - mean_a) ** 2 + (51.8 - mean_a) ** 2) / 2   # 0.093333
    var_b = (0.3 ** 2 + 0.3 ** 2) / 1                                                   # 0.18
    assert summarize(a).std == pytest.approx(math.sqrt(var_a)) and summarize(b).std == pytest.approx(0.42426, abs=1e-5)
    se2 = var_a / 3 + var_b / 2
    df = se2 ** 2 / ((var_a / 3) ** 2 / 2 + (var_b / 2) ** 2 / 1)
    assert df == pytest.approx(1.70877, abs=1e-4)
    half = scipy_stats.t.ppf(0.975, df) * math.sqrt(se2)
    interval = welch_interval(a, b)
    assert interval.delta == pytest.approx(mean_a - mean_b)
    assert interval.low == pytest.approx(mean_a - mean_b - half)
    assert interval.high == pytest.approx(mean_a - mean_b + half)
    assert interval.contains(2.7) and not interval.contains(10.0)
    single = welch_interval([52.0], b)
    assert single.low is None and single.note == 'one run: no interval' and single.contains(2.7) is None
    assert welch_interval([], b) is None


def test_seeds_needed_formula():
    # half-width t(0.975, 2n-2) * s * sqrt(2/n) <= d: s = d = 0.3 needs n = 9 (t=2.120: 2*2.120^2 = 8.99 <= 9),
    # not 8 (t=2.145: 9.20 > 8)
    assert seeds_needed(0.3, 0.3) == 9
    assert 2 * scipy_stats.t.ppf(0.975, 16) ** 2 <= 9 and 2 * scipy_stats.t.ppf(0.975, 14) ** 2 > 8
    assert seeds_needed(0.3, 0.3, power=0.8) == 17
    assert seeds_needed(0.3, 2.7) == 2
    with pytest.raises(ValueError):
        seeds_needed(0, 0.3)


def _launch(work_dir, stamp, config, seed=None, log_seed=None, train=True, val=None, test=None, load_from=None,
            tta=False, options=None):
    """A launch folder as mmengine writes it: config, scalars, the log's seed line, test metrics."""
    launch = work_dir / stamp
    (launch / 'vis_data').mkdir(parents=True)
    cfg = Config.fromfile(str(config))
    if seed is not None:
        cfg.randomness = dict(seed=seed)
    if load_from:
        cfg.load_from = str(load_from)
    if options:
        cfg.merge_from_dict(options)
    if tta:
        cfg.model = dict(type='SegTTAModel', module=cfg.model)
    cfg.dump(str(launch / 'vis_data' / 'config.py'))
    records = []
    if train:
        records += [{'loss': 1.0, 'iter': 160000, 'step': 160000}]
    if val is not None:
        records.append({'mIoU': val, 'mAcc': 60.0, 'aAcc': 80.0, 'step': 160000})
    (launch / 'vis_data' / 'scalars.json').write_text(''.join(json.dumps(r) + '\n' for r in records))
    (launch / f'{stamp}.log').write_text(f'Runtime environment:\n    cudnn_benchmark: True\n    seed: '
                                         f'{log_seed if log_seed is not None else 12345}\n    Distributed: False\n')
    if test is not None:
        (launch / f'{stamp}.json').write_text(json.dumps({'mIoU': test, 'mAcc': 61.0, 'aAcc': 81.0}))
    return work_dir


def test_compare_groups_seeds_attaches_test_dirs_and_reports_intervals(tmp_path):
    dirs = []
    for seed, val, test, ms in ((0, 51.0, 52.0, 53.1), (1, 51.5, 52.4, 53.0), (2, 51.2, 51.8, 52.9)):
        train = _launch(tmp_path / f'vit5_seed{seed}', '20260101_000000', ENTRY, seed=seed, val=val)
        ss_dir = _launch(tmp_path / f'vit5_seed{seed}_test', '20260102_000000', ENTRY, train=False, test=test,
                         load_from=train / 'iter_160000.pth', log_seed=999)
        ms_dir = _launch(tmp_path / f'vit5_seed{seed}_ms', '20260102_000000', ENTRY, train=False, test=ms,
                         load_from=train / 'iter_160000.pth', tta=True, log_seed=998)
        dirs += [train, ss_dir, ms_dir]
    for log_seed, val in ((11, 49.3), (12, 49.9)):  # no randomness.seed: the seed mmengine drew and logged
        dirs.append(_launch(tmp_path / f'deit3_{log_seed}', '20260101_000000', DEIT3, log_seed=log_seed, val=val))
    runs = [read_result(d) for d in dirs]
    assert runs[1].seed == 0 and runs[1].training == str(dirs[0].resolve())  # the test dir joins its training
    row, = cmp.compare(runs, tolerance=1.0)
    assert (row['ViT-5 n'], row['DeiT-III n']) == (3, 2)
    assert row['ViT-5 seeds'] == '0 1 2' and row['DeiT-III seeds'] == '11 12'
    assert row['ViT-5 mIoU (ss)'] == pytest.approx(52.0667, abs=1e-4)       # the tests, not the validations
    assert row['ViT-5 mIoU std (ss)'] == pytest.approx(0.3055, abs=1e-4)
    assert row['DeiT-III mIoU (ss)'] == pytest.approx(49.6) and row['DeiT-III mIoU std (ss)'] == pytest.approx(0.4243)
    interval = welch_interval([52.0, 52.4, 51.8], [49.3, 49.9])
    assert (row['delta ci95 low (ss)'], row['delta ci95 high (ss)']) == (round(interval.low, 2), round(interval.high, 2))
    assert row['delta mIoU (ss)'] == 2.47 and row['paper delta in ci95'] == 'yes'
    assert row['ViT-5 mIoU (ms)'] == pytest.approx(53.0) and row['delta ci95 low (ms)'] is None  # DeiT-III: no ms
    assert row['notes'] == ''
    md = cmp.to_markdown([row], runs, 1.0)
    assert f"| base | 52.07 ± 0.31 | 3 | 49.60 ± 0.42 | 2 | +2.47 | [{interval.low:+.2f}, {interval.high:+.2f}] | " \
           f"+2.7 | yes | yes |" in md
    out = tmp_path / 'out'
    cmp.main([str(d) for d in dirs] + ['--out', str(out)])
    table = list(csv.DictReader((out / 'comparison.csv').open()))[0]
    for column in ('ViT-5 n', 'ViT-5 mIoU std (ss)', 'delta ci95 low (ss)', 'delta ci95 high (ss)',
                   'paper delta in ci95'):
        assert column in table


def test_duplicate_seeds_and_tests_are_flagged_not_dropped(tmp_path):
    a = _launch(tmp_path / 'a', '20260101_000000', ENTRY, seed=0, val=51.0)
    b = _launch(tmp_path / 'b', '20260101_000000', ENTRY, seed=0, val=52.0)   # another training, same seed
    t1 = _launch(tmp_path / 't1', '20260102_000000', ENTRY, train=False, test=51.5, load_from=a / 'iter_1.pth')
    t2 = _launch(tmp_path / 't2', '20260102_000000', ENTRY, train=False, test=51.7, load_from=a / 'iter_1.pth')
    group = merge_group([read_result(d) for d in (a, b, t1, t2)])
    assert sorted(group.values[('mIoU', 'ss')]) == [51.7, 52.0]    # a's last test, b's validation: both counted
    assert any('2 single-scale tests of one training' in n and 't1' in n and 't2' in n for n in group.notes)
    assert any('seed 0 appears in 2 different trainings' in n for n in group.notes)


def test_ablation_table_names_variants_and_draws_the_forest_plot(tmp_path):
    refs = [_launch(tmp_path / f'ref{s}', '20260101_000000', ENTRY, seed=s, val=v) for s, v in ((0, 52.0), (1, 52.4))]
    swiglu = [_launch(tmp_path / f'swiglu{s}', '20260101_000000', ENTRY, seed=s, val=v,
                      options={'model.backbone.mlp_type': 'swiglu'}) for s, v in ((0, 51.5), (1, 51.9))]
    no_ls = [_launch(tmp_path / 'nols0', '20260101_000000', ENTRY, seed=0, val=51.8,
                     options={'model.backbone.layer_scale_init': 0})]
    both = [_launch(tmp_path / 'both0', '20260101_000000', ENTRY, seed=0, val=51.0,
                    options={'model.backbone.mlp_type': 'swiglu', 'model.backbone.layer_scale_init': 0})]
    out = tmp_path / 'out'
    cmp.main([str(d) for d in swiglu + no_ls + both] + ['--reference'] + [str(d) for d in refs] + ['--out', str(out)])
    rows = list(csv.DictReader((out / 'ablations.csv').open()))
    assert list(rows[0])[:7] == ['variant', 'n', 'mIoU', 'std', 'delta', 'ci95 low', 'ci95 high']
    by_name = {r['variant']: r for r in rows}
    assert list(by_name) == ['reference', 'mlp_type=swiglu', 'layer_scale_init=0', 'layer_scale_init=0, mlp_type=swiglu']
    sw = by_name['mlp_type=swiglu']
    interval = welch_interval([51.5, 51.9], [52.0, 52.4])
    assert (sw['n'], float(sw['delta']), float(sw['ci95 low'])) == ('2', -0.5, round(interval.low, 2))
    assert sw['paper ImageNet delta'] == '-0.42' and by_name['layer_scale_init=0']['paper ImageNet delta'] == '-0.29'
    assert by_name['layer_scale_init=0']['ci95 low'] == '' and 'one run: no interval' in by_name['layer_scale_init=0']['notes']
    assert by_name['layer_scale_init=0, mlp_type=swiglu']['paper ImageNet delta'] == ''
    assert '| mlp_type=swiglu | 2 | 51.70 | 0.28 | -0.50 |' in (out / 'ablations.md').read_text()
    plot = cv2.imread(str(out / 'ablations.png'))
    assert plot is not None and plot.std() > 10
    mixed = _launch(tmp_path / 'deit', '20260101_000000', DEIT3, seed=0, val=49.0)
    with pytest.raises(SystemExit):
        cmp.main([str(swiglu[0]), '--reference', str(refs[0]), str(mixed), '--out', str(out)])


def test_run_seeds_commands(tmp_path, capsys):
    config = str(REPO / 'configs' / 'tiny' / 'vit5_upernet_synthetic.py')
    runs = seed_runs(config, [0, 1], launcher='pytorch', gpus=8, work_root='W', cfg_options=['a=1'],
                     train_args=['--amp'])
    assert [str(r.work_dir) for r in runs] == ['W/vit5_upernet_synthetic_seed0', 'W/vit5_upernet_synthetic_seed1']
    assert runs[1].argv[1].endswith('tools/dist_train.sh') and runs[1].argv[2:4] == [config, '8']
    assert runs[1].argv[4:] == ['--work-dir', 'W/vit5_upernet_synthetic_seed1', '--resume', '--accumulate', 'auto',
                                '--cfg-options', 'a=1', 'randomness.seed=1', '--amp']
    slurm = seed_runs(config, [3], launcher='slurm', gpus=16, partition='gpu', name='abl')[0]
    assert slurm.env == {'GPUS': '16'} and slurm.argv[2:5] == ['gpu', 'abl_seed3', config]
    assert slurm.shell().startswith('GPUS=16 bash ')
    run_seeds_main([config, '--seeds', '0', '1', '--print', '--work-root', str(tmp_path), '--max-keep-ckpts', '1'])
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == '# each seed: 1 GPU(s) x 8 images x 1 micro-batch(es) = 8 images per iteration'
    assert len(printed) == 3 and printed[1].endswith('randomness.seed=0 --max-keep-ckpts 1')
    for bad in (['--seeds', '1', '1'], ['--seeds', '1', '--launcher', 'slurm'],
                ['--seeds', '1', '--gpus', '2', '--launcher', 'none'],
                ['--seeds', '1', '--gpus', '3', '--cfg-options', 'train_dataloader.batch_size=1']):
        with pytest.raises(SystemExit):
            run_seeds_main([config, '--print', *bad])


@pytest.mark.slow
def test_seeds_to_table_on_real_tiny_trainings(tmp_path):
    """Two seeds of the tiny ViT-5 and DeiT-III twins and a tiny SwiGLU ablation, trained for
    real (a few iterations), then the comparison and the ablation table."""
    make_synthetic_ade20k(tmp_path / 'data' / 'synthetic_ade20k', num_train=8, num_val=4, size=64, seed=3)
    short = ['train_cfg.max_iters=2', 'train_cfg.val_interval=2', 'default_hooks.checkpoint.interval=2']
    tool = [REPO / 'tools' / 'run_seeds.py']  # it starts one training process per seed
    jobs = [(REPO / 'configs' / 'tiny' / 'vit5_upernet_synthetic.py', [], None),
            (REPO / 'configs' / 'tiny' / 'deit3_upernet_synthetic.py', [], None),
            (REPO / 'configs' / 'tiny' / 'vit5_upernet_synthetic.py', ['model.backbone.mlp_type=swiglu'], 'swiglu')]
    for config, extra, name in jobs:
        cmd = tool + [str(config), '--seeds', '0', '1', '--work-root', 'runs', '--cfg-options', *short, *extra]
        cmd += ['--name', name] if name else []
        out = run_script(*cmd, cwd=tmp_path)
        assert out.returncode == 0, out.stderr[-3000:]
    runs = tmp_path / 'runs'
    vit5 = [runs / f'vit5_upernet_synthetic_seed{s}' for s in (0, 1)]
    deit3 = [runs / f'deit3_upernet_synthetic_seed{s}' for s in (0, 1)]
    swiglu = [runs / f'swiglu_seed{s}' for s in (0, 1)]
    assert all((d / 'iter_2.pth').is_file() for d in vit5 + deit3 + swiglu)
    row, = cmp.compare([read_result(d) for d in vit5 + deit3], tolerance=1.0)
    assert row['ViT-5 seeds'] == '0 1' and row['DeiT-III seeds'] == '0 1' and row['ViT-5 n'] == 2
    vals = [json.loads(line)['mIoU'] for d in vit5 for line in
            sorted(d.glob('*/vis_data/scalars.json'))[-1].read_text().splitlines() if 'mIoU' in line]
    assert row['ViT-5 mIoU (ss)'] == pytest.approx(sum(vals) / 2, abs=1e-3)
    assert row['delta ci95 low (ss)'] is not None or row['ViT-5 mIoU std (ss)'] == 0
    rows = ablations([read_result(d) for d in swiglu], [read_result(d) for d in vit5])
    assert [r['variant'] for r in rows] == ['reference', 'mlp_type=swiglu'] and rows[1]['n'] == 2
    assert rows[1]['paper ImageNet delta'] == -0.42
    # a process of its own: the training it starts writes to the file descriptors, read here
    again = subprocess.run([sys.executable, str(tool[0]), str(jobs[0][0]), '--seeds', '0', '--work-root', 'runs',
                            '--cfg-options', *short], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0 and 'resumed' in (again.stdout + again.stderr)  # a finished seed resumes, no retraining
