"""DINOv2 and DINOv3 presets of ViT5 against the models of timm and transformers and against
Meta's definitions (issue #39; facebookresearch/dinov2 dinov2/models/vision_transformer.py,
facebookresearch/dinov3 dinov3/models/vision_transformer.py).

Each layout is made from random weights with its owner's key names: timm's and transformers'
models give their own; Meta's keys are written here from Meta's code and read by timm's own
``checkpoint_filter_fn``, which is the reference for them. Patch tokens after the final
norm must agree within 1e-5.
"""
import math

import pytest
import timm
import torch
import torch.nn.functional as F

from conftest import perturb
from vit5seg.models.backbones.vit5 import ARCH_PRESETS, ViT5
from vit5seg.models.checkpoint import CheckpointError, load_pretrained

TOL = dict(atol=1e-5, rtol=0)
DEPTH = 4  # S width and heads; 4 of the 12 blocks (every block is the same code) keep the suite fast


def randomized(model, seed=0):
    return perturb(model, seed).eval()


def ours(arch, sd, tmp_path, name='ckpt.pth', **kwargs):
    """ViT5(arch) loaded through the file path users take (detection, conversion, fit)."""
    path = tmp_path / name
    torch.save(sd, path)
    if isinstance(arch, str):
        kwargs.setdefault('num_layers', DEPTH)
    model = ViT5(arch=arch, **kwargs).eval()
    layout = load_pretrained(model, str(path))
    return model, layout


def patch_tokens(model, img):
    with torch.no_grad():
        (feat,) = model(img)
    return feat.flatten(2).transpose(1, 2)                                       # (B, h*w, C)


def image(h, w, seed=1):
    return torch.randn(1, 3, h, w, generator=torch.Generator().manual_seed(seed))


def timm_model(name, **kwargs):
    """timm's model, randomly initialised; skipped where this timm predates it (the second
    environment's timm 0.9.16 has DINOv2 but no DINOv3: transformers' tests cover it there)."""
    if name not in timm.list_models(name):
        pytest.skip(f'timm {timm.__version__} has no {name}')
    return timm.create_model(name, pretrained=False, **{'depth': DEPTH, **kwargs})


def timm_tokens(model, img):
    with torch.no_grad():
        return model.forward_features(img)[:, model.num_prefix_tokens:]


# --- DINOv2 -----------------------------------------------------------------------------------
def meta_dinov2_state(timm_model, registers: bool):
    """Meta's hub keys (dinov2/models/vision_transformer.py) from a timm DINOv2's values:
    pos_embed with its cls row, ``register_tokens``, ``ls1.gamma``, a ``mask_token``."""
    sd = dict(timm_model.state_dict())
    if registers:  # timm keeps cls + pos[0] in cls_token and no cls row; Meta the two apart
        cls_pos = torch.randn(1, 1, sd['cls_token'].shape[-1])
        sd['pos_embed'] = torch.cat([cls_pos, sd['pos_embed']], dim=1)
        sd['cls_token'] = sd['cls_token'] - cls_pos
        sd['register_tokens'] = sd.pop('reg_token')
    sd['mask_token'] = torch.randn(1, sd['cls_token'].shape[-1])
    return sd


def meta_interpolate_pos_encoding(pos_embed, h_in, w_in, patch, offset, antialias):
    """dinov2/models/vision_transformer.py ``interpolate_pos_encoding``, written out: Meta's
    ``w`` is the input's height."""
    N = pos_embed.shape[1] - 1
    M = int(math.sqrt(N))
    w0, h0 = h_in // patch, w_in // patch
    if w0 * h0 == N and h_in == w_in:
        return pos_embed
    patch_pos = pos_embed[:, 1:].float().reshape(1, M, M, -1).permute(0, 3, 1, 2)
    kwargs = dict(scale_factor=((w0 + offset) / M, (h0 + offset) / M)) if offset else dict(size=(w0, h0))
    patch_pos = F.interpolate(patch_pos, mode='bicubic', antialias=antialias, **kwargs)
    assert patch_pos.shape[-2:] == (w0, h0)
    return torch.cat([pos_embed[:, :1], patch_pos.permute(0, 2, 3, 1).reshape(1, -1, pos_embed.shape[-1])], dim=1)


def meta_dinov2_patch_tokens(vit, meta_pos, img, patch):
    """Meta's DINOv2 forward on timm's blocks: cls + pos[0], [registers], patches + resized pos."""
    x = vit.patch_embed.proj(img).flatten(2).transpose(1, 2)
    pos = meta_interpolate_pos_encoding(meta_pos, img.shape[-2], img.shape[-1], patch, offset=0.1, antialias=False)
    x = torch.cat([vit.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + pos
    with torch.no_grad():
        for blk in vit.blocks:
            x = blk(x)
        return vit.norm(x)[:, 1:]


@pytest.mark.parametrize('layout', ['dinov2-timm', 'dinov2-meta'])
def test_dinov2_reg4_equals_timm_at_two_sizes(layout, tmp_path):
    ref = randomized(timm_model('vit_small_patch14_reg4_dinov2', dynamic_img_size=True))
    sd = ref.state_dict() if layout == 'dinov2-timm' else meta_dinov2_state(ref, registers=True)
    if layout == 'dinov2-meta':
        ref.load_state_dict(timm.models.vision_transformer.checkpoint_filter_fn(dict(sd), ref))
    model, detected = ours('dinov2-small-reg4', sd, tmp_path)
    assert detected == layout
    for h, w in ((518, 518), (224, 280)):
        torch.testing.assert_close(patch_tokens(model, image(h, w)), timm_tokens(ref, image(h, w)), **TOL)


def test_dinov2_without_registers_follows_meta_not_timm_away_from_518(tmp_path):
    ref = randomized(timm_model('vit_small_patch14_dinov2', dynamic_img_size=True))
    sd = meta_dinov2_state(ref, registers=False)
    model, detected = ours('dinov2-small', sd, tmp_path)
    assert detected == 'dinov2-meta'
    # at 518 nothing is resized: timm, Meta and this package agree
    torch.testing.assert_close(patch_tokens(model, image(518, 518)), timm_tokens(ref, image(518, 518)), **TOL)
    for h, w in ((224, 280), (252, 336)):
        expected = meta_dinov2_patch_tokens(ref, sd['pos_embed'], image(h, w), patch=14)
        got = patch_tokens(model, image(h, w))
        torch.testing.assert_close(got, expected, **TOL)
        # timm resizes otherwise (to the size, with antialias): the reason this is written from Meta's code
        assert (timm_tokens(ref, image(h, w)) - expected).abs().max() > 1e-3


def test_dinov2_at_patch_16_resamples_as_timm_builds_eomt_backbones(tmp_path):
    """EoMT's timm.create_model(..., img_size, patch_size=16) from Meta's 14-patch weights."""
    ref = randomized(timm_model('vit_small_patch14_reg4_dinov2'))
    sd = meta_dinov2_state(ref, registers=True)
    at16 = timm_model('vit_small_patch14_reg4_dinov2', img_size=256, patch_size=16, dynamic_img_size=True).eval()
    at16.load_state_dict(timm.models.vision_transformer.checkpoint_filter_fn(dict(sd), at16))
    model, _ = ours('dinov2-small-reg4', sd, tmp_path, patch_size=16, img_size=256)
    for h, w in ((256, 256), (256, 320)):
        torch.testing.assert_close(patch_tokens(model, image(h, w)), timm_tokens(at16, image(h, w)), **TOL)


def test_dinov2_giant_swiglu_layouts_of_meta_and_timm(tmp_path):
    """ViT-g's FFN (Meta's fused ``w12`` / ``w3``, timm's packed ``fc1``) on a narrow 2-block twin."""
    from timm.layers import SwiGLUPacked
    ref = randomized(timm.models.vision_transformer.VisionTransformer(
        img_size=70, patch_size=14, embed_dim=96, depth=2, num_heads=2, init_values=1.0, mlp_ratio=2.66667 * 2,
        mlp_layer=SwiGLUPacked, act_layer=torch.nn.SiLU, num_classes=0, dynamic_img_size=True))
    arch = dict(ARCH_PRESETS['dinov2-giant'], embed_dims=96, num_layers=2, num_heads=2)
    meta = meta_dinov2_state(ref, registers=False)
    for k in [k for k in meta if '.mlp.fc' in k]:
        meta[k.replace('mlp.fc1', 'mlp.w12').replace('mlp.fc2', 'mlp.w3')] = meta.pop(k)
    for sd, layout in ((ref.state_dict(), 'dinov2-timm'), (meta, 'dinov2-meta')):
        model, detected = ours(arch, sd, tmp_path, img_size=70)
        assert detected == layout
        torch.testing.assert_close(patch_tokens(model, image(70, 70)), timm_tokens(ref, image(70, 70)), **TOL)


# --- DINOv3 -----------------------------------------------------------------------------------
def meta_dinov3_state(timm_model):
    """Meta's keys (dinov3/models/vision_transformer.py, layers/) from a timm DINOv3's
    values: ``storage_tokens``, ``rope_embed.periods``, ``qkv.bias`` with a (nonzero,
    masked) key part and its ``bias_mask``, ``ls1.gamma``, ``mlp.w1/w2/w3``, ``mask_token``."""
    out = {}
    for k, v in timm_model.state_dict().items():
        if k.endswith('attn.q_bias'):
            C = v.shape[0]
            v_bias = timm_model.state_dict()[k.replace('q_bias', 'v_bias')]
            out[k.replace('q_bias', 'qkv.bias')] = torch.cat([v, torch.randn(C), v_bias])
            out[k.replace('q_bias', 'qkv.bias_mask')] = torch.cat([torch.ones(C), torch.zeros(C), torch.ones(C)])
            continue
        if k.endswith('attn.v_bias'):
            continue
        k = k.replace('reg_token', 'storage_tokens').replace('gamma_1', 'ls1.gamma').replace('gamma_2', 'ls2.gamma')
        k = k.replace('mlp.fc1_g', 'mlp.w1').replace('mlp.fc1_x', 'mlp.w2')
        out[k] = v
    if any('.mlp.w1.' in k for k in out):
        for k in [k for k in out if '.mlp.fc2.' in k]:
            out[k.replace('mlp.fc2', 'mlp.w3')] = out.pop(k)
    D = timm_model.embed_dim // timm_model.blocks[0].attn.num_heads
    out['rope_embed.periods'] = 100 ** (2 * torch.arange(D // 4, dtype=torch.float32) / (D // 2))
    out['mask_token'] = torch.randn(1, timm_model.embed_dim)
    return out


@pytest.mark.parametrize('arch,timm_name', [('dinov3-small', 'vit_small_patch16_dinov3_qkvb'),
                                            ('dinov3-small-plus', 'vit_small_plus_patch16_dinov3_qkvb')])
@pytest.mark.parametrize('layout', ['dinov3-timm', 'dinov3-meta'])
def test_dinov3_equals_timm_at_two_sizes(arch, timm_name, layout, tmp_path):
    ref = randomized(timm_model(timm_name))
    sd = ref.state_dict() if layout == 'dinov3-timm' else meta_dinov3_state(ref)
    if layout == 'dinov3-meta':  # timm's own reading of Meta's keys
        ref.load_state_dict(timm.models.eva.checkpoint_filter_fn(dict(sd), ref))
    model, detected = ours(arch, sd, tmp_path)
    assert detected == layout
    for h, w in ((224, 288), (256, 256)):
        torch.testing.assert_close(patch_tokens(model, image(h, w)), timm_tokens(ref, image(h, w)), **TOL)


def test_dinov3_timm_without_qkv_bias_loads_with_a_zero_bias(tmp_path):
    ref = randomized(timm_model('vit_small_patch16_dinov3'))
    model, detected = ours('dinov3-small', ref.state_dict(), tmp_path)
    assert detected == 'dinov3-timm'
    assert not model.blocks[0].attn.qkv.bias.any()
    torch.testing.assert_close(patch_tokens(model, image(224, 288)), timm_tokens(ref, image(224, 288)), **TOL)


def meta_rope_coords(h, w, scale=1.0):
    """dinov3/layers/rope_position_encoding.py, normalize_coords='separate'."""
    ch = torch.arange(0.5, h) / h
    cw = torch.arange(0.5, w) / w
    return (2.0 * torch.stack(torch.meshgrid(ch, cw, indexing='ij'), dim=-1).flatten(0, 1) - 1.0) * scale


def test_dinov3_rope_rescales_only_while_training():
    """Training draws one log-uniform factor in [1/2, 2] per step (Meta's and transformers'
    rescale_coords); evaluation never does, and caches its table."""
    model = ViT5(arch='dinov3-small', num_layers=1)
    rope, D = model.rope, 64
    periods = 100 ** (2 * torch.arange(D // 4, dtype=torch.float32) / (D // 2))

    def expected(scale):
        angles = (2 * math.pi * meta_rope_coords(3, 5, scale)[:, :, None] / periods).flatten(1, 2)   # (15, D/2)
        return torch.polar(torch.ones_like(angles), angles)

    model.eval()
    table = rope((3, 5), torch.device('cpu'), torch.float32)
    torch.testing.assert_close(table[1:16], expected(1.0))
    assert (table[0] == 1).all() and (table[16:] == 1).all()       # cls and the 4 storage tokens: not rotated
    assert rope((3, 5), torch.device('cpu'), torch.float32) is table
    model.train()
    torch.manual_seed(7)
    scale = torch.empty(1).uniform_(-math.log(2), math.log(2)).exp()
    torch.manual_seed(7)
    torch.testing.assert_close(rope((3, 5), torch.device('cpu'), torch.float32)[1:16], expected(scale))
    assert not torch.equal(rope((3, 5), torch.device('cpu'), torch.float32), rope((3, 5), torch.device('cpu'),
                                                                                   torch.float32))


# --- transformers ---------------------------------------------------------------------------
def hf_patch_tokens(model, img, prefix):
    with torch.no_grad():
        return model(pixel_values=img).last_hidden_state[:, prefix:]


@pytest.mark.parametrize('arch,mlp', [('dinov3-small', dict(intermediate_size=1536)),
                                      ('dinov3-small-plus', dict(intermediate_size=1536, use_gated_mlp=True,
                                                                 hidden_act='silu'))])
def test_dinov3_of_transformers_equals_its_model(arch, mlp, tmp_path):
    transformers = pytest.importorskip('transformers')
    config = transformers.DINOv3ViTConfig(hidden_size=384, num_hidden_layers=DEPTH, num_attention_heads=6,
                                          patch_size=16, num_register_tokens=4, layerscale_value=1e-5, rope_theta=100.0,
                                          layer_norm_eps=1e-5, **mlp)
    ref = randomized(transformers.DINOv3ViTModel(config))
    from safetensors.torch import save_file
    save_file({k: v.contiguous() for k, v in ref.state_dict().items()}, str(tmp_path / 'model.safetensors'))
    model = ViT5(arch=arch, num_layers=DEPTH).eval()
    assert load_pretrained(model, str(tmp_path / 'model.safetensors')) == 'dinov3-hf'
    for h, w in ((224, 288), (256, 256)):
        torch.testing.assert_close(patch_tokens(model, image(h, w)), hf_patch_tokens(ref, image(h, w), 5), **TOL)
    # transformers 4.x keys (layer.N), which EoMT pins; 5.x wraps them in model.
    old = {k[len('model.'):] if k.startswith('model.') else k: v for k, v in ref.state_dict().items()}
    model4, layout = ours(arch, old, tmp_path, name='v4.pth')
    assert layout == 'dinov3-hf'
    torch.testing.assert_close(patch_tokens(model4, image(224, 288)), hf_patch_tokens(ref, image(224, 288), 5), **TOL)


def test_dinov2_giant_swiglu_of_transformers_equals_its_model(tmp_path):
    """ViT-g's SwiGLU FFN as transformers' Dinov2 holds it, on a narrow 2-block twin."""
    transformers = pytest.importorskip('transformers')
    config = transformers.Dinov2Config(hidden_size=96, num_hidden_layers=2, num_attention_heads=2, patch_size=14,
                                       image_size=70, layerscale_value=1.0, use_swiglu_ffn=True)
    ref = randomized(transformers.Dinov2Model(config))
    arch = dict(ARCH_PRESETS['dinov2-giant'], embed_dims=96, num_layers=2, num_heads=2)
    model, layout = ours(arch, ref.state_dict(), tmp_path, img_size=70)
    assert layout == 'dinov2-hf'
    expected = hf_patch_tokens(ref, image(70, 70), 1)
    torch.testing.assert_close(patch_tokens(model, image(70, 70)), expected, **TOL)
    # the hub's files carry transformers 4.x names (attention.attention.query, mlp.weights_in / weights_out);
    # transformers 5 reads them through its own conversion mapping, the reference for them
    v4 = {}
    for key, value in ref.state_dict().items():
        for new, old in (('attention.q_proj', 'attention.attention.query'),
                         ('attention.k_proj', 'attention.attention.key'),
                         ('attention.v_proj', 'attention.attention.value'),
                         ('attention.o_proj', 'attention.output.dense'), ('mlp.down_proj', 'mlp.weights_out')):
            key = key.replace(new, old)
        if '.mlp.up_proj.' in key:
            continue
        if '.mlp.gate_proj.' in key:
            value = torch.cat([value, ref.state_dict()[key.replace('gate_proj', 'up_proj')]])
            key = key.replace('gate_proj', 'weights_in')
        v4[key] = value.contiguous()
    folder = tmp_path / 'hf4'
    config.save_pretrained(folder)
    from safetensors.torch import save_file
    save_file(v4, str(folder / 'model.safetensors'))
    reread = transformers.Dinov2Model.from_pretrained(folder).eval()
    torch.testing.assert_close(hf_patch_tokens(reread, image(70, 70), 1), expected, **TOL)
    model4, layout = ours(arch, v4, tmp_path, name='v4.pth', img_size=70)
    assert layout == 'dinov2-hf'
    torch.testing.assert_close(patch_tokens(model4, image(70, 70)), expected, **TOL)


def test_dinov2_of_transformers_equals_its_model(tmp_path):
    transformers = pytest.importorskip('transformers')
    config = transformers.Dinov2WithRegistersConfig(hidden_size=384, num_hidden_layers=DEPTH, num_attention_heads=6,
                                                    patch_size=14, image_size=518, num_register_tokens=4,
                                                    layerscale_value=1.0)
    ref = randomized(transformers.Dinov2WithRegistersModel(config))
    model, layout = ours('dinov2-small-reg4', ref.state_dict(), tmp_path)
    assert layout == 'dinov2-hf'
    for h, w in ((518, 518), (224, 280)):
        torch.testing.assert_close(patch_tokens(model, image(h, w)), hf_patch_tokens(ref, image(h, w), 5), **TOL)


# --- presets and errors -----------------------------------------------------------------------
def test_presets_build_with_the_published_sizes():
    expected = {  # (width, depth, heads, patch, MLP hidden): Meta's hub definitions
        'dinov2-large-reg4': (1024, 24, 16, 14, 4096), 'dinov2-giant': (1536, 40, 24, 14, 4096),
        'dinov3-large': (1024, 24, 16, 16, 4096), 'dinov3-small-plus': (384, 12, 6, 16, 1536),
        'dinov3-huge-plus': (1280, 32, 20, 16, 5120)}
    for arch, (width, depth, heads, patch, hidden) in expected.items():
        with torch.device('meta'):
            m = ViT5(arch=arch)
        mlp = m.blocks[0].mlp
        got_hidden = (mlp.fc1_g if hasattr(mlp, 'fc1_g') else mlp.fc1).out_features
        assert (m.embed_dims, m.num_layers, m.num_heads, m.patch_size, got_hidden) == (width, depth, heads, patch,
                                                                                        hidden), arch


def test_a_dinov3_checkpoint_of_another_rope_base_is_refused(tmp_path):
    ref = timm_model('vit_small_patch16_dinov3_qkvb', depth=1)
    sd = meta_dinov3_state(ref)
    sd['rope_embed.periods'] = 10000 ** (2 * torch.arange(16, dtype=torch.float32) / 32)
    with pytest.raises(CheckpointError, match='rope_embed.periods does not match RoPE theta=100'):
        ours('dinov3-small', sd, tmp_path, num_layers=1)


def test_dinov3_key_bias_is_held_at_zero_even_when_trained():
    """DINOv3's mask_k_bias: whatever the key bias parameter holds (training moves it: with RoPE
    it is no constant shift of the scores), the model computes with it at zero."""
    model = randomized(ViT5(arch='dinov3-small', num_layers=2))
    img = image(64, 80)
    before = patch_tokens(model, img)
    with torch.no_grad():
        for blk in model.blocks:
            C = blk.attn.qkv.weight.shape[1]
            blk.attn.qkv.bias[C:2 * C] = torch.randn(C)
    torch.testing.assert_close(patch_tokens(model, img), before, atol=0, rtol=0)
    bias = model.blocks[0].attn.qkv.bias
    model.train()(img)[0].sum().backward()
    C = bias.shape[0] // 3
    assert not bias.grad[C:2 * C].any() and bias.grad[:C].any()


def test_a_missing_dinov3_file_says_where_to_get_it_when_loaded_not_when_built(tmp_path):
    missing = tmp_path / 'checkpoints' / 'dinov3_vits16_pretrain_lvd1689m-08c60483.pth'
    model = ViT5(arch='dinov3-small', num_layers=1, init_cfg=dict(type='Pretrained', checkpoint=str(missing)))
    with pytest.raises(CheckpointError, match='gated by the DINOv3 licence: request it at https://ai.meta.com/') as e:
        model.init_weights()
    assert 'model.backbone.init_cfg.checkpoint=' in str(e.value) and isinstance(e.value, FileNotFoundError)


def test_convert_tool_resizes_dinov2_positions_by_the_presets_rule(tmp_path):
    """--img-size with --arch: Meta's resize of that preset (offset 0.1 for dinov2-small);
    without --arch: the checkpoint's own patch (14) sets the grid."""
    from vit5seg.models.convert import convert_file
    ref = randomized(timm_model('vit_small_patch14_dinov2', depth=1))
    meta = meta_dinov2_state(ref, registers=False)
    torch.save(meta, tmp_path / 'meta.pth')
    convert_file(tmp_path / 'meta.pth', tmp_path / 'arch.pth', arch=dict(ARCH_PRESETS['dinov2-small'], num_layers=1),
                 img_size=224)
    expected = meta_interpolate_pos_encoding(meta['pos_embed'], 224, 224, 14, offset=0.1, antialias=False)[:, 1:]
    got = torch.load(tmp_path / 'arch.pth', weights_only=True)['state_dict']['pos_embed']
    torch.testing.assert_close(got, expected, atol=0, rtol=0)
    convert_file(tmp_path / 'meta.pth', tmp_path / 'plain.pth', img_size=224)
    assert torch.load(tmp_path / 'plain.pth', weights_only=True)['state_dict']['pos_embed'].shape == (1, 256, 384)
