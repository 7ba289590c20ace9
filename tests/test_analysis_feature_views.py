"""tools/visualize_features.py: PCA, attention and token-norm views across input sizes."""

import cv2
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmseg.registry import MODELS

from conftest import REPO, TINY, run_script
from vit5seg.analysis import feature_views as fv
from vit5seg.models import ViT5
from vit5seg.models.layers import Attention, SequenceRope


def test_attention_rows_are_the_fused_attention_for_those_queries():
    attn = Attention(32, 2).eval()
    rope_module = SequenceRope(16, ref_grid=(3, 3), num_registers=4)
    x = torch.randn(2, 1 + 12 + 4, 32)
    rope = rope_module((3, 4), x.device, x.dtype)
    rows = attn.attention_rows(x, [0, 13, 16], rope)                      # (B, h, 3, N)
    assert rows.shape == (2, 2, 3, 17)
    assert torch.allclose(rows.sum(-1), torch.ones(2, 2, 3), atol=1e-6)
    q, k, v = attn._qkv(x, rope)
    fused = F.scaled_dot_product_attention(q, k, v)                         # (B, h, N, D)
    assert torch.allclose(rows @ v, fused[:, :, [0, 13, 16]], atol=1e-5)


def test_views_give_the_backbone_taps_and_normalised_cls_register_rows():
    backbone = ViT5(arch=dict(TINY), out_indices=(0, 1), final_norm=False).eval()
    image = torch.rand(3, 40, 72) * 255
    views = fv.backbone_views(backbone, image, taps=[0, -1])
    assert views.grid == (3, 5) and set(views.taps) == {0, 1}
    x = ((image - fv.IMAGENET_MEAN) / fv.IMAGENET_STD)[None]
    with torch.no_grad():
        taps = backbone(x)
    for i in (0, 1):
        assert torch.allclose(views.taps[i], taps[i][0].permute(1, 2, 0), atol=1e-5)
    assert views.attention.shape == (5, 3, 5)                  # cls + 4 registers over the 3x5 patches
    assert torch.allclose(views.row_sums, torch.ones(5), atol=1e-5)
    assert (views.attention.sum((1, 2)) < 1 + 1e-5).all()      # the patches' share of each row


def test_pca_colours_are_the_same_for_the_same_features_at_two_sizes():
    small = torch.randn(4, 6, 16)
    large = small.repeat_interleave(2, 0).repeat_interleave(2, 1)   # the same features on a 2x finer grid
    other = torch.randn(5, 5, 16)
    rgb_small, rgb_large, _ = fv.pca_rgb([small, large, other])
    assert rgb_small.shape == (4, 6, 3) and rgb_large.shape == (8, 12, 3)
    assert np.allclose(rgb_large[::2, ::2], rgb_small, atol=1e-6)
    assert 0 <= rgb_small.min() and rgb_small.max() <= 1 and rgb_small.std() > 0.1
    # the sign of each component is fixed: refitting on a permuted order gives the same colours
    a, b = fv.pca_rgb([small, large]), fv.pca_rgb([large, small])
    assert np.allclose(a[0], b[1], atol=1e-5) and np.allclose(a[1], b[0], atol=1e-5)


def test_planted_high_norm_token_is_found():
    torch.manual_seed(0)
    features = torch.randn(6, 8, 32)
    features[2, 5] *= 12
    norms = fv.token_norms(features)
    mask = fv.outlier_mask(norms, 3.0)
    assert mask.nonzero().tolist() == [[2, 5]]
    stats = fv.norm_stats(norms, 3.0)
    assert stats['outlier_fraction'] == pytest.approx(1 / 48)
    assert stats['max_norm'] == pytest.approx(norms[2, 5].item())


def test_grid_of_any_aspect_and_size_checks():
    assert fv.grid_shape((300, 500), 64) == (4, 7)
    image = torch.rand(3, 300, 500) * 255
    assert fv.resize_short_side(image, 64).shape == (3, 64, 107)
    with pytest.raises(ValueError, match=r'--sizes \[8\]: smaller than one 16x16 patch'):
        fv.resize_short_side(image, 8)
    with pytest.raises(ValueError, match='CONFIG:CHECKPOINT or ARCH:WEIGHTS'):
        fv.parse_model('vit5-base')
    assert fv.parse_model('vit5-base:https://x/y.pth') == ('vit5-base', 'https://x/y.pth')


@pytest.fixture(scope='module')
def models_and_images(tmp_path_factory):
    """A tiny segmentor checkpoint (CONFIG:CHECKPOINT), a ViT-5 and a DeiT-III backbone file (ARCH:WEIGHTS)."""
    from mmengine.registry import init_default_scope
    folder = tmp_path_factory.mktemp('views')
    init_default_scope('mmseg')
    tiny_cfg = REPO / 'configs' / 'tiny' / 'vit5_upernet_synthetic.py'
    segmentor = MODELS.build(Config.fromfile(str(tiny_cfg)).model)
    torch.save({'state_dict': segmentor.state_dict(), 'meta': {}}, folder / 'tiny.pth')
    for arch in ('vit5-small', 'deit3-small'):
        torch.save({'model': ViT5(arch=arch).state_dict()}, folder / f'{arch}.pth')
    images = folder / 'images'
    images.mkdir()
    rng = np.random.default_rng(0)
    for name, shape in (('wide', (48, 80)), ('tall', (72, 40))):
        img = cv2.GaussianBlur(rng.integers(0, 255, (*shape, 3), dtype=np.uint8), (5, 5), 0)
        cv2.imwrite(str(images / f'{name}.png'), img)
    (images / 'broken.png').write_bytes(b'not a png')
    specs = [f'{tiny_cfg}:{folder / "tiny.pth"}', f'vit5-small:{folder / "vit5-small.pth"}',
             f'deit3-small:{folder / "deit3-small.pth"}']
    return specs, images


def test_tool_end_to_end(models_and_images, tmp_path, capsys):
    specs, images = models_and_images
    out = tmp_path / 'out'
    result = fv.main([*specs, '--images', str(images), '--sizes', '32', '64', '--taps', '-1', '0', '--out', str(out),
                      '--names', 'tiny', 'ViT-5-S', 'DeiT-III-S', '--no-progress', '--device', 'cpu'])
    printed = capsys.readouterr().out
    assert f'skipped {images / "broken.png"}: not a readable image' in printed
    assert 'DeiT-III-S: no register tokens: attention shows the cls token only' in printed
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(['attention_tall.png', 'attention_wide.png', 'norms.csv'] +
                           [f'{view}_{img}_tap{t}.png' for view in ('pca', 'norms') for img in ('tall', 'wide')
                            for t in (-1, 0)])
    for png in out.glob('*.png'):
        pixels = cv2.imread(str(png))
        assert pixels is not None and pixels.std() > 10, png
    # PCA: rows models, columns the input then each size
    pca = result.titles['pca_wide_tap-1.png']
    assert len(pca) == 3 and all(len(row) == 3 for row in pca)
    assert pca[1][0] == 'ViT-5-S\ninput' and pca[1][1] == 'ViT-5-S\n32px (2x4 patches)'
    assert pca[2][2] == 'DeiT-III-S\n64px (4x7 patches)'
    # attention: a row per model and size; cls + 4 register panels; DeiT-III says it has none
    att = result.titles['attention_tall.png']
    assert len(att) == 6 and all(len(row) == 6 for row in att)
    assert att[2][1].startswith('cls -> patches') and att[2][5].startswith('register 3 -> patches')
    assert att[4][1].startswith('cls -> patches') and att[4][2:] == ['no registers'] * 4
    # norms: a map row and a histogram row per model
    norms = result.titles['norms_wide_tap0.png']
    assert len(norms) == 6 and norms[0][1] == 'tiny, 64px\ntoken norms' and norms[1][0].startswith('histogram')
    csv_lines = (out / 'norms.csv').read_text().splitlines()
    assert csv_lines[0] == 'model,size,tap,median_norm,max_norm,outlier_fraction'
    assert len(csv_lines) == 1 + 3 * 2 * 2


def test_tool_errors(models_and_images, tmp_path):
    specs, images = models_and_images
    tool = [REPO / 'tools' / 'visualize_features.py']
    small = run_script(*tool, specs[1], '--images', images, '--sizes', '8', '--out', tmp_path)
    assert small.returncode == 1 and small.stderr.strip() == 'error: --sizes [8]: smaller than one 16x16 patch'
    none = run_script(*tool, specs[1], '--images', images / 'broken.png', '--sizes', '32', '--out', tmp_path,
                    '--no-progress')
    assert none.returncode == 1 and 'no readable image among the inputs' in none.stderr
    taps = run_script(*tool, specs[0], '--images', images, '--sizes', '32', '--taps', '7', '--out', tmp_path)
    assert taps.returncode == 1 and '--taps [7] out of range' in taps.stderr


def test_models_are_named_by_a_short_label(models_and_images):
    """Picture titles: a config's stem or the arch, not the full path (it ran over the next panel)."""
    specs, _ = models_and_images
    assert fv.load_model(specs[0], device='cpu').name == 'vit5_upernet_synthetic'
    assert fv.load_model(specs[1], device='cpu').name == 'vit5-small'
