"""tools/get_flops.py and the complexity counter behind it; tools/analyze_logs.py."""
import csv
import json

import pytest
import torch

from conftest import REPO, run_script
from vit5seg.analysis import count_gmacs, model_complexity
from vit5seg.models import ViT5

TINY = REPO / 'configs' / 'tiny' / 'vit5_upernet_synthetic.py'


def test_backbone_macs_match_the_formula_attention_included():
    C, L, grid = 64, 3, (4, 6)
    model = ViT5(arch=dict(embed_dims=C, num_layers=L, num_heads=2)).eval()
    P = grid[0] * grid[1]
    N = 1 + P + 4  # cls + patches + registers
    per_block = N * C * 3 * C + N * C * C + 2 * N * C * 4 * C + 2 * N * N * C  # qkv, proj, mlp, QK^T and AV
    expected = P * C * 3 * 16 * 16 + L * per_block
    x = torch.zeros(1, 3, 64, 96)
    assert count_gmacs(model, x) * 1e9 == pytest.approx(expected, rel=1e-9)
    assert count_gmacs(model, x, attention=False) * 1e9 == pytest.approx(expected - L * 2 * N * N * C, rel=1e-9)


def test_counting_on_fake_tensors_equals_a_real_run():
    """model_complexity counts on shapes alone; a real forward of the same model counts the same."""
    from mmseg.structures import SegDataSample

    from vit5seg.models.builder import build_segmentor
    result = model_complexity(TINY, (64, 96))
    model = build_segmentor(TINY).eval()
    sample = SegDataSample(metainfo=dict(img_shape=(64, 96), ori_shape=(64, 96), pad_shape=(64, 96)))
    real = [count_gmacs(model.predict, torch.rand(1, 3, 64, 96), [sample], attention=a) for a in (True, False)]
    assert [result['gflops'], result['gflops_no_attn']] == pytest.approx(real, rel=1e-12)
    assert real[0] > real[1]


def test_deit3_base_upernet_matches_the_published_cost():
    # DeiT-III paper: ViT-B UperNet, 128M params, 1283 GFLOPs at 512x2048 (mmcv's count)
    result = model_complexity(REPO / 'configs' / 'deit3_upernet_ade20k.py', (512, 2048))
    assert result['gflops_no_attn'] == pytest.approx(1283, rel=0.01)
    assert result['gflops'] > result['gflops_no_attn'] * 1.05  # attention over 4096 tokens is not free
    assert result['params'] / 1e6 == pytest.approx(128, abs=1.5)


def test_get_flops_cli(tmp_path):
    out = run_script(REPO / 'tools' / 'get_flops.py', TINY, '--shape', '64', cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert 'input shape: 64x64' in out.stdout
    params = float(out.stdout.split('params: ')[1].split()[0])
    assert params == pytest.approx(model_complexity(TINY, (64, 64))['params'] / 1e6, abs=0.01)


def test_print_config_resolves_bases_and_options(tmp_path):
    out = run_script(REPO / 'tools' / 'print_config.py', REPO / 'configs' / 'deit3_upernet_ade20k.py', '--cfg-options',
                   'train_dataloader.batch_size=4', '--save', tmp_path / 'resolved.py')
    assert out.returncode == 0, out.stderr[-2000:]
    assert "arch='deit3-base'" in out.stdout and "type='UPerHead'" in out.stdout
    from mmengine.config import Config
    saved = Config.fromfile(str(tmp_path / 'resolved.py'))
    assert saved.train_dataloader.batch_size == 4 and saved.model.backbone.arch == 'deit3-base'


def _write_scalars(work_dir, stamp, records, cut_last=False):
    path = work_dir / stamp / 'vis_data' / 'scalars.json'
    path.parent.mkdir(parents=True)
    text = '\n'.join(json.dumps(r) for r in records) + '\n'
    path.write_text(text[:-15] if cut_last else text)


def test_analyze_logs_merges_resumed_launches_and_finds_the_spike(tmp_path):
    import cv2
    run = tmp_path / 'vit5_run'
    first = [{'loss': 2.0 - 0.01 * i, 'lr': 1e-3, 'iter': i, 'step': i} for i in range(1, 31)]
    first.insert(20, {'mIoU': 40.0, 'mAcc': 50.0, 'aAcc': 70.0, 'step': 20})
    # killed after 30, resumed from 24: the second launch repeats 25..30 and wins
    second = [{'loss': (6.0 if i == 35 else 1.5), 'lr': 1e-3, 'iter': i, 'step': i} for i in range(25, 41)]
    second.append({'mIoU': 45.5, 'mAcc': 55.0, 'aAcc': 75.0, 'step': 40})
    second.append({'loss': 1.5, 'iter': 41, 'step': 41})  # cut off mid-line by the kill
    _write_scalars(run, '20260101_000000', first)
    _write_scalars(run, '20260102_000000', second, cut_last=True)
    out = tmp_path / 'out'
    result = run_script(REPO / 'tools' / 'analyze_logs.py', run, '--out', out)
    assert result.returncode == 0, result.stderr
    summary = (out / 'summary.txt').read_text()
    assert 'vit5_run: 40 logged iterations (1..40), final loss 1.5000' in summary
    assert 'mIoU: best 45.50 at iteration 40, last 45.50 at iteration 40' in summary
    assert 'spikes: 1\n    iteration 35: loss 6.0000 = 4.00 x 1.5000' in summary
    rows = list(csv.DictReader((out / 'curves.csv').open()))
    by_iter = {int(r['iter']): r for r in rows}
    assert float(by_iter[28]['loss']) == 1.5 and float(by_iter[20]['mIoU']) == 40.0 and len(rows) == 40
    for name in ('loss.png', 'miou.png'):
        img = cv2.imread(str(out / name))
        assert img.shape == (400, 700, 3) and img.std() > 10  # a drawn figure, not a blank canvas
    missing = run_script(REPO / 'tools' / 'analyze_logs.py', tmp_path / 'nope', '--out', out)
    assert missing.returncode == 1 and 'no */vis_data/scalars.json' in missing.stderr


def test_compare_rows_paper_delta_tolerance_and_unfinished(tmp_path):
    from mmengine.config import Config

    from vit5seg.analysis.compare import compare, to_markdown
    from vit5seg.analysis.runs import RunResult, read_result
    runs = [RunResult('a', 'ViT-5', 'base', single={'mIoU': 52.1, 'mAcc': 63.0, 'aAcc': 84.0}),
            RunResult('b', 'DeiT-III', 'base', single={'mIoU': 49.6, 'mAcc': 60.0, 'aAcc': 83.0}),
            RunResult('c', 'ViT-5', 'large', single={'mIoU': 54.0})]
    base, large = compare(runs, tolerance=1.0)
    assert base['delta mIoU (ss)'] == 2.5 and base['paper delta mIoU (ss)'] == 2.7 and base['within tolerance'] == 'yes'
    assert compare(runs, tolerance=0.1)[0]['within tolerance'] == 'no'
    assert large['DeiT-III status'] == 'missing (no work dir given)' and large['within tolerance'] == 'no paper figure'
    assert ('| base | 52.10 | 1 | 49.60 | 1 | +2.50 | one run: no interval | +2.7 | one run: no interval | yes |'
            in to_markdown([base, large], runs, 1.0))
    # multi-scale tests in their own work dirs join the single-scale row of the same size
    ms = [RunResult('a-ms', 'ViT-5', 'base', multi={'mIoU': 53.0}), RunResult('b-ms', 'DeiT-III', 'base',
                                                                              multi={'mIoU': 50.2})]
    merged = compare(runs + ms, tolerance=1.0)[0]
    assert (merged['ViT-5 mIoU (ss)'], merged['ViT-5 mIoU (ms)'], merged['delta mIoU (ms)']) == (52.1, 53.0, 2.8)
    assert merged['ViT-5 work_dir'] == 'a, a-ms' and merged['delta mIoU (ss)'] == 2.5
    # a training run stopped at iteration 10 of 300, never evaluated
    launch = tmp_path / 'run' / '20260101_000000' / 'vis_data'
    launch.mkdir(parents=True)
    Config.fromfile(str(TINY)).dump(str(launch / 'config.py'))
    (launch / 'scalars.json').write_text(json.dumps({'loss': 3.0, 'iter': 10, 'step': 10}) + '\n')
    run = read_result(tmp_path / 'run')
    assert (run.family, run.size) == ('ViT-5', 'small (embed_dims=64, num_layers=4, num_heads=2)')
    assert run.status == 'unfinished (iteration 10 of 300, no metrics yet)'


def test_compare_puts_the_four_families_in_one_table(tmp_path):
    """Issue #39: DINOv2 and DINOv3 runs pair with ViT-5 by size (DINOv2's registers are no size)
    and get their own table and deltas; the ViT-5 vs DeiT-III table stays as it is."""
    from mmengine.config import Config
    from scipy import stats

    from vit5seg.analysis.compare import compare, to_markdown
    from vit5seg.analysis.runs import RunResult, read_result
    vit5, dinov2 = [52.0, 53.0], [54.5, 55.5, 55.0]
    runs = [RunResult(f'v{i}', 'ViT-5', 'base', single={'mIoU': m}, training=f'v{i}', seed=i)
            for i, m in enumerate(vit5)]
    runs += [RunResult(f'd{i}', 'DINOv2', 'base', single={'mIoU': m}, training=f'd{i}', seed=i)
             for i, m in enumerate(dinov2)]
    runs += [RunResult('deit', 'DeiT-III', 'base', single={'mIoU': 49.3}),
             RunResult('d3', 'DINOv3', 'base', single={'mIoU': 56.0})]
    row, = compare(runs, tolerance=1.0)
    assert row['ViT-5 - DINOv2 mIoU (ss)'] == round(sum(vit5) / 2 - sum(dinov2) / 3, 2)
    welch = stats.ttest_ind(vit5, dinov2, equal_var=False).confidence_interval(0.95)
    interval = row['_interval vs DINOv2 (ss)']
    assert (interval.low, interval.high) == pytest.approx((welch.low, welch.high), abs=1e-6)
    assert row['ViT-5 - DINOv3 mIoU (ss)'] == -3.5 and row['delta mIoU (ss)'] == 3.2
    md = to_markdown([row], runs, 1.0)
    assert '| size | ViT-5 | DeiT-III | DINOv2 | DINOv3 | ViT-5 - DINOv2 | ViT-5 - DINOv3 |' in md
    assert f'| base | 52.50 ± 0.71 (2) | 49.30 (1) | 55.00 ± 0.50 (3) | 56.00 (1) | -2.50 [{welch.low:+.2f}, ' in md
    assert '- base, DINOv3: ok' in md
    # only ViT-5 and DeiT-III: no four-family table, no DINO lines
    plain = to_markdown(compare(runs[:2] + runs[5:6], 1.0), runs[:2] + runs[5:6], 1.0)
    assert 'four families' not in plain and 'DINOv2' not in plain
    # a DINOv2 twin's run pairs with the ViT-5 twin's size
    launch = tmp_path / 'run' / '20260101_000000' / 'vis_data'
    launch.mkdir(parents=True)
    Config.fromfile(str(REPO / 'configs' / 'tiny' / 'dinov2_upernet_synthetic.py')).dump(str(launch / 'config.py'))
    (launch / 'scalars.json').write_text(json.dumps({'loss': 3.0, 'iter': 10, 'step': 10}) + '\n')
    run = read_result(tmp_path / 'run')
    assert (run.family, run.size) == ('DINOv2', 'small (embed_dims=64, num_layers=4, num_heads=2)')


@pytest.mark.parametrize('config, tag', [
    ('vit5_upernet_ade20k.py', ''), ('eomt/vit5-base_eomt_ade20k.py', ' EoMT'),
    ('eomt/dinov3-large_eomt_coco-panoptic-640.py', ' EoMT panoptic'), ('pmt/dinov3-large_pmt_ade20k-512.py', ' PMT'),
    ('pmt/dinov3-large_pmt_coco-instance-640.py', ' PMT instance'), ('linear/deit3-small_linear_ade20k.py', ' linear'),
    ('linear/dinov2-base_linear_ade20k.py', ' linear')])
def test_runs_pair_by_recipe_so_frozen_and_fine_tuned_never_meet(config, tag):
    """tools/compare.py pairs runs of the same family, size and recipe: a linear probe's or PMT's run is never
    compared with a fine-tuned UperNet's of the same backbone."""
    from mmengine.config import Config

    from vit5seg.analysis.runs import recipe_tag
    cfg = Config.fromfile(str(REPO / 'configs' / config))
    assert recipe_tag(cfg) == tag
    cfg.model.backbone.frozen = False
    if tag == ' linear':
        assert recipe_tag(cfg) == ' linear (fine-tuned)'
