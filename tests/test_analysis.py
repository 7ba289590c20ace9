"""tools/get_flops.py and the complexity counter behind it."""
import subprocess
import sys

import pytest
import torch

from conftest import REPO
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


@pytest.mark.slow
def test_deit3_base_upernet_matches_the_published_cost():
    # DeiT-III paper: ViT-B UperNet, 128M params, 1283 GFLOPs at 512x2048 (mmcv's count)
    result = model_complexity(REPO / 'configs' / 'deit3_upernet_ade20k.py', (512, 2048))
    assert result['gflops_no_attn'] == pytest.approx(1283, rel=0.01)
    assert result['gflops'] > result['gflops_no_attn'] * 1.05  # attention over 4096 tokens is not free
    assert result['params'] / 1e6 == pytest.approx(128, abs=1.5)


def test_get_flops_cli(tmp_path):
    out = subprocess.run([sys.executable, str(REPO / 'tools' / 'get_flops.py'), str(TINY), '--shape', '64'],
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert 'input shape: 64x64' in out.stdout
    params = float(out.stdout.split('params: ')[1].split()[0])
    assert params == pytest.approx(model_complexity(TINY, (64, 64))['params'] / 1e6, abs=0.01)


def test_print_config_resolves_bases_and_options(tmp_path):
    out = subprocess.run([sys.executable, str(REPO / 'tools' / 'print_config.py'),
                          str(REPO / 'configs' / 'deit3_upernet_ade20k.py'), '--cfg-options',
                          'train_dataloader.batch_size=4', '--save', str(tmp_path / 'resolved.py')],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "arch='deit3-base'" in out.stdout and "type='UPerHead'" in out.stdout
    from mmengine.config import Config
    saved = Config.fromfile(str(tmp_path / 'resolved.py'))
    assert saved.train_dataloader.batch_size == 4 and saved.model.backbone.arch == 'deit3-base'
