"""The pieces of tools/resolution_sweep.py and tools/feature_similarity.py that need no
training: test scales, position policies reaching the backbone, the similarity measure.
The tools themselves run end to end on trained tiny twins in test_tools_e2e.py."""
import pytest
import torch

from conftest import TINY
from vit5seg.analysis.resolution import (Policy, backbone_config, build_backbone, feature_similarity, parse_rope_grid,
                                         policies, scale_for)
from vit5seg.models import ViT5


def test_scale_keeps_the_config_proportion():
    assert scale_for(512, (2048, 512)) == (2048, 512)
    assert scale_for(1024, (2048, 512)) == (4096, 1024)
    assert scale_for(128, (160, 128)) == (160, 128)  # the tiny config's own test scale
    assert scale_for(64, (160, 128)) == (80, 64)


def test_policies_and_their_backbone_options():
    assert parse_rope_grid('authors') == 'authors' and parse_rope_grid('32') == 32
    with pytest.raises(ValueError, match="'authors', 'integer' or a positive grid side"):
        parse_rope_grid('squeeze')
    both = policies(['authors', 'integer'], ['bicubic', 'bilinear'], has_rope=True)
    assert len(both) == 4 and Policy('integer', 'bilinear') in both
    assert policies(['authors', 'integer'], ['bicubic'], has_rope=False) == [Policy('n/a', 'bicubic')]
    assert Policy('authors').backbone_options(True) == dict(interpolate_mode='bicubic', rope_ref_grid=None)
    assert Policy('integer', 'bilinear').backbone_options(True) == dict(interpolate_mode='bilinear',
                                                                        rope_ref_grid='integer')
    assert Policy(24).backbone_options(True)['rope_ref_grid'] == 24
    assert Policy('n/a', 'area').backbone_options(False) == dict(interpolate_mode='area')


def test_policies_change_the_backbone_only_off_the_pretraining_grid(tmp_path):
    arch = dict(TINY, layer_scale_init=1.0)  # untrained blocks with 1e-4 LayerScale barely touch the tokens
    model = ViT5(arch=arch, img_size=32)
    path = tmp_path / 'backbone.pth'
    torch.save({'state_dict': model.state_dict()}, path)
    config = tmp_path / 'backbone.py'
    config.write_text(f"model = dict(backbone=dict(type='ViT5', arch={arch!r}, img_size=32, init_cfg=None))\n")
    built = {p: build_backbone(backbone_config(str(config)), str(path), p, device='cpu')
             for p in (Policy('authors', 'bicubic'), Policy('integer', 'bicubic'), Policy('authors', 'bilinear'))}
    assert built[Policy('integer', 'bicubic')].rope.ref_grid is None
    assert built[Policy('authors', 'bilinear')].interpolate_mode == 'bilinear'
    with torch.no_grad():
        same = [m.forward_features(torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(0)))
                for m in built.values()]
        larger = [m.forward_features(torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(0)))
                  for m in built.values()]
    assert all(torch.allclose(same[0], s, atol=1e-6) for s in same[1:])  # 2x2 grid: nothing to place
    assert not torch.allclose(larger[0], larger[1], atol=1e-4)  # RoPE positions differ at 4x4
    assert not torch.allclose(larger[0], larger[2], atol=1e-4)  # pos_embed resized differently


def _images(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.rand(3, 40, 56, generator=g) * 255 for _ in range(n)]


def test_feature_similarity_is_one_at_the_pretraining_size_and_reports_the_unrelated_level():
    backbone = ViT5(arch=dict(TINY), img_size=32)
    rows = feature_similarity(backbone, _images(4), [32, 64, 96])
    assert [r['size'] for r in rows] == [32, 64, 96] and rows[0]['images'] == 4
    assert rows[0]['cls_cos'] == pytest.approx(1.0, abs=1e-6) and rows[0]['patch_cos'] == pytest.approx(1.0, abs=1e-6)
    for r in rows:
        assert -1 <= r['patch_cos'] <= 1 + 1e-6 and -1 <= r['cls_cos'] <= 1 + 1e-6
        assert r['unrelated_patch_cos'] < 0.999
    # the same picture twice is "unrelated" to nothing: the baseline says so instead of hiding it
    same = _images(1) * 2
    assert feature_similarity(backbone, same, [64])[0]['unrelated_patch_cos'] == pytest.approx(1.0, abs=1e-5)


def test_feature_similarity_compares_the_same_image_area():
    """A backbone whose tokens are the mean colour of their patch (all weights zero but the
    patch embedding) gives patch similarity 1 at every size when images are smooth: the
    larger map is pooled onto the same positions, not compared token by token."""
    backbone = ViT5(arch=dict(TINY), img_size=32, use_rope=False, num_registers=0)
    with torch.no_grad():
        for p in backbone.parameters():
            p.zero_()
        backbone.patch_embed.proj.weight[:3, :3] = torch.eye(3)[:, :, None, None] / 256  # mean colour per channel
        backbone.patch_embed.proj.bias[3] = 0.05  # a dark patch still has a direction
        for m in backbone.modules():
            if hasattr(m, 'weight') and m.weight is not None and m.weight.ndim == 1:
                m.weight.fill_(1.0)
    smooth = [torch.linspace(0, 255, 64).view(1, 64, 1).expand(3, 64, 64) * torch.tensor([1., .5, .2]).view(3, 1, 1)]
    rows = feature_similarity(backbone, smooth * 2, [32, 64, 128])
    # token by token (the 64 and 128 maps' top-left corner) this gives 0.73 and 0.59
    assert all(r['patch_cos'] > 0.995 for r in rows), rows


def test_a_linear_probes_test_scale_sets_the_short_side_only_as_meta_does():
    """configs/linear/ resize the short side only (Meta's FixedSideResize): the sweep's sizes keep that rule."""
    from mmengine.config import Config

    from conftest import REPO
    from vit5seg.analysis.resolution import _test_scale
    cfg = Config.fromfile(str(REPO / 'configs' / 'linear' / 'dinov3-small_linear_ade20k.py'))
    config_scale = _test_scale(cfg)
    for size in (256, 512, 1024):
        long, short = scale_for(size, config_scale)
        assert short == size and long >= 32 * size   # a 1:32 panorama still keeps its short side
