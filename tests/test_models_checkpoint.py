"""Checkpoint layouts load into ViT5 and give the source model's features exactly."""
import argparse
import os

import pytest
import timm
import torch
from reference_vit5 import RefViT5
from safetensors.torch import save_file

from conftest import REPO, run_script
from vit5seg.models import ViT5
from vit5seg.models.checkpoint import CheckpointError, convert_checkpoint, detect_layout, load_pretrained


def _authors_file(tmp_path, seed=0, with_ema=True):
    ref = RefViT5(dim=64, depth=2, heads=2).randomize(seed).eval()
    obj = {'model': ref.state_dict(), 'epoch': 299, 'args': argparse.Namespace(model='vit5_small', lr=4e-3)}
    if with_ema:
        obj['model_ema'] = RefViT5(dim=64, depth=2, heads=2).randomize(seed + 1).state_dict()
    path = tmp_path / 'vit5_tiny_patch16_224.pth'
    torch.save(obj, path)
    return ref, path


def _vit5(**kw):
    return ViT5(arch=dict(embed_dims=64, num_layers=2, num_heads=2), out_indices=(1,), final_norm=True, **kw).eval()


def test_authors_vit5_checkpoint_gives_authors_features(tmp_path):
    ref, path = _authors_file(tmp_path)
    model = _vit5(init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    model.init_weights()
    img = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        expected = ref.forward_features(img)
        assert (model.forward_features(img) - expected).abs().max() < 1e-5
        tap, = model(img)
    # the last tap with final_norm is the normalized patch tokens as (B, C, 14, 14)
    patches = expected[:, 1:197].reshape(2, 14, 14, 64).permute(0, 3, 1, 2)
    assert tap.shape == (2, 64, 14, 14)
    assert (tap - patches).abs().max() < 1e-5


@pytest.mark.parametrize('size', [(320, 480), (288, 160)])
def test_authors_features_at_other_resolutions(tmp_path, size):
    ref, path = _authors_file(tmp_path, with_ema=False)
    model = _vit5()
    load_pretrained(model, path)
    img = torch.randn(1, 3, *size)
    with torch.no_grad():
        assert (model.forward_features(img) - ref.forward_features(img)).abs().max() < 1e-5


def test_ema_weights_on_request(tmp_path):
    _, path = _authors_file(tmp_path)
    ema = RefViT5(dim=64, depth=2, heads=2).randomize(1).eval()
    model = _vit5()
    load_pretrained(model, path, use_ema=True)
    img = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        assert (model.forward_features(img) - ema.forward_features(img)).abs().max() < 1e-5


def _timm_deit3():
    # timm's DeiT-III skeleton at a tiny width: patch-only pos_embed, LayerScale, qkv bias.
    return timm.models.vision_transformer.VisionTransformer(
        img_size=224, patch_size=16, embed_dim=64, depth=2, num_heads=2, no_embed_class=True,
        init_values=1e-4, num_classes=10).eval()


def _randomize(module):
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return module


@pytest.mark.parametrize('layout,suffix', [('deit3-timm', '.pth'), ('deit3-timm', '.safetensors'),
                                           ('deit3-fb', '.pth')])
def test_deit3_layouts_give_timm_features(tmp_path, layout, suffix):
    peer = _randomize(_timm_deit3())
    sd = peer.state_dict()
    if layout == 'deit3-fb':
        sd = {k.replace('.ls1.gamma', '.gamma_1').replace('.ls2.gamma', '.gamma_2'): v for k, v in sd.items()}
    path = tmp_path / f'deit3{suffix}'
    if suffix == '.safetensors':
        save_file({k: v.contiguous() for k, v in sd.items()}, str(path))
    else:
        torch.save({'model': sd}, path)
    model = ViT5(arch=dict(embed_dims=64, num_layers=2, num_heads=2, norm_type='layernorm', use_rope=False,
                           num_registers=0, qk_norm=False, qkv_bias=True)).eval()
    assert load_pretrained(model, path) == layout
    img = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        assert (model.forward_features(img) - peer.forward_features(img)).abs().max() < 1e-5


def test_deit3_preset_matches_timm_deit3_small_parameter_count():
    peer = timm.create_model('deit3_small_patch16_224', pretrained=False)  # timm < 1.0.20 cannot build on meta
    with torch.device('meta'):
        ours = ViT5(arch='deit3-small')
    peer_count = sum(p.numel() for n, p in peer.named_parameters() if not n.startswith('head.'))
    assert sum(p.numel() for p in ours.parameters()) == peer_count


@pytest.mark.parametrize('arch,dims,millions', [('vit5-small', (384, 12, 6), 22), ('vit5-base', (768, 12, 12), 87),
                                                ('vit5-large', (1024, 24, 16), 304),
                                                ('vit5-xlarge', (1152, 28, 16), 449)])
def test_vit5_preset_parameter_counts_match_authors_model(arch, dims, millions):
    with torch.device('meta'):
        ours = ViT5(arch=arch)
        ref = RefViT5(*dims)
    ref_count = sum(p.numel() for n, p in ref.named_parameters() if not n.startswith('head.'))
    count = sum(p.numel() for p in ours.parameters())
    assert count == ref_count
    # the paper's table counts the 1000-class classifier too
    width = dims[0]
    assert round((count + width * 1000 + 1000) / 1e6) == millions


def test_wrong_arch_lists_mismatched_keys(tmp_path):
    _, path = _authors_file(tmp_path)
    with pytest.raises(CheckpointError) as e:
        load_pretrained(ViT5(arch=dict(embed_dims=32, num_layers=2, num_heads=2)), path)
    msg = str(e.value)
    assert 'width 64, depth 2' in msg and 'width 32' in msg
    assert 'shape mismatch' in msg and 'blocks.0.attn.qkv.weight: checkpoint (192, 64) vs model (96, 32)' in msg
    with pytest.raises(CheckpointError, match=r'missing in checkpoint \(\d+\): .*norm1.bias'):
        load_pretrained(ViT5(arch=dict(embed_dims=64, num_layers=2, num_heads=2, norm_type='layernorm',
                                       use_rope=False, num_registers=0, qk_norm=False, qkv_bias=True)), path)


def test_rope_theta_mismatch_is_refused(tmp_path):
    _, path = _authors_file(tmp_path)
    with pytest.raises(CheckpointError, match='theta=500'):
        load_pretrained(_vit5(rope_theta=500.), path)


def test_truncated_and_missing_files(tmp_path):
    _, path = _authors_file(tmp_path)
    cut = tmp_path / 'cut.pth'
    cut.write_bytes(path.read_bytes()[:5000])
    with pytest.raises(CheckpointError, match='truncated or not a PyTorch checkpoint'):
        load_pretrained(_vit5(), cut)
    with pytest.raises(CheckpointError, match='does not exist'):
        load_pretrained(_vit5(), tmp_path / 'nope.pth')


class _Exploit:
    def __reduce__(self):
        return (os.system, (f'touch {self.marker}',))


def test_code_executing_pickle_is_refused(tmp_path):
    exploit = _Exploit()
    exploit.marker = tmp_path / 'pwned'
    path = tmp_path / 'evil.pth'
    torch.save({'model': {'cls_token': torch.zeros(1, 1, 64)}, 'x': exploit}, path)
    with pytest.raises(CheckpointError, match='refusing to load .*allow_unsafe=True'):
        load_pretrained(_vit5(), path)
    assert not exploit.marker.exists()


def test_classifier_is_not_a_backbone(tmp_path):
    path = tmp_path / 'resnet.pth'
    torch.save({'state_dict': {'conv1.weight': torch.zeros(8, 3, 3, 3), 'fc.weight': torch.zeros(2, 8)}}, path)
    with pytest.raises(CheckpointError, match='not a backbone checkpoint of a known layout'):
        load_pretrained(_vit5(), path)


def test_segmentor_checkpoint_backbone_prefix_is_taken(tmp_path):
    src = _vit5()
    path = tmp_path / 'iter_100.pth'
    torch.save({'state_dict': {**{f'backbone.{k}': v for k, v in src.state_dict().items()},
                               'decode_head.conv_seg.weight': torch.zeros(3, 8, 1, 1)}, 'meta': {}}, path)
    model = _vit5()
    load_pretrained(model, path)
    for k, v in src.state_dict().items():
        assert torch.equal(model.state_dict()[k], v)


def test_convert_pos_embed_resize_to_384_grid(tmp_path):
    ref, path = _authors_file(tmp_path)
    sd, layout = convert_checkpoint(path, grid=(24, 24))
    assert layout == 'vit5' and sd['pos_embed'].shape == (1, 576, 64)
    assert not any(k.startswith('head.') or k.endswith('freqs') for k in sd)
    # a model pretrained at 384 loading the 224 file gets the same resized table
    model = _vit5(img_size=384)
    load_pretrained(model, path)
    assert torch.equal(model.pos_embed, sd['pos_embed'])


def test_convert_tool_writes_a_file_the_same_config_loads(tmp_path):
    ref, path = _authors_file(tmp_path)
    dst = tmp_path / 'converted.pth'
    arch = "{'embed_dims': 64, 'num_layers': 2, 'num_heads': 2}"
    out = run_script(REPO / 'tools' / 'convert_checkpoint.py', path, dst, '--arch', arch, '--ema', cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert 'vit5' in out.stdout and str(dst) in out.stdout
    assert detect_layout(torch.load(dst, weights_only=True)['state_dict']) == 'vit5'
    model = _vit5(init_cfg=dict(type='Pretrained', checkpoint=str(dst)))
    model.init_weights()
    ema = RefViT5(dim=64, depth=2, heads=2).randomize(1).eval()
    img = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        assert (model.forward_features(img) - ema.forward_features(img)).abs().max() < 1e-5
    helptext = run_script(REPO / 'tools' / 'convert_checkpoint.py', '--help').stdout
    for flag in ('--arch', '--ema', '--img-size', '--allow-unsafe'):
        assert flag in helptext
