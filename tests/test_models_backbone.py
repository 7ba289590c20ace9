"""ViT5 construction, taps, switches and the per-grid caches."""
import copy
import shutil
import warnings

import pytest
import torch
from mmseg.registry import MODELS
from reference_vit5 import reference_freqs, reference_rotate

from conftest import TINY
from vit5seg.models import ViT5
from vit5seg.models.layers import RMSNorm, SequenceRope, apply_rope


def tiny(**kw):
    return ViT5(arch=dict(TINY), **kw)


def test_builds_from_registry_with_interface_dict():
    model = MODELS.build(dict(type='ViT5', arch='vit5-small', img_size=224, out_indices=(11,), final_norm=True))
    assert isinstance(model, ViT5) and model.embed_dims == 384 and model.num_registers == 4


@pytest.mark.parametrize('hw,grid', [((64, 64), (4, 4)), ((48, 80), (3, 5)), ((50, 70), (4, 5)),
                                     ((17, 33), (2, 3))])
def test_tap_shapes_any_size_padded_like_mmseg(hw, grid):
    model = tiny(out_indices=(0, 1)).eval()
    taps = model(torch.randn(2, 3, *hw))
    assert len(taps) == 2 and all(t.shape == (2, 32, *grid) for t in taps)


def test_padding_is_bottom_right_zeros():
    model = tiny(out_indices=(1,)).eval()
    x = torch.randn(1, 3, 40, 40)
    padded = torch.nn.functional.pad(x, (0, 8, 0, 8))
    with torch.no_grad():
        assert torch.allclose(model(x)[0], model(padded)[0], atol=1e-6)


def test_output_cls_token_pairs_like_mmseg_vit():
    model = tiny(out_indices=(0, 1), output_cls_token=True).eval()
    taps = model(torch.randn(2, 3, 32, 48))
    for feat, cls in taps:
        assert feat.shape == (2, 32, 2, 3) and cls.shape == (2, 32)


def test_final_norm_applies_to_last_tap_only():
    model = tiny(out_indices=(1,), final_norm=True).eval()
    raw = tiny(out_indices=(1,), final_norm=False).eval()
    raw.load_state_dict(model.state_dict())
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        normed, plain = model(x)[0], raw(x)[0]
        tokens = plain.flatten(2).transpose(1, 2)
        assert torch.allclose(normed.flatten(2).transpose(1, 2), model.norm(tokens), atol=1e-6)


def test_pos_embed_resize_is_identity_at_native_grid_and_bicubic_elsewhere():
    model = tiny(img_size=64)
    assert model.resized_pos_embed((4, 4)) is model.pos_embed
    grid = model.pos_embed.detach().reshape(1, 4, 4, 32).permute(0, 3, 1, 2)
    expected = torch.nn.functional.interpolate(grid, size=(6, 3), mode='bicubic', align_corners=False)
    got = model.resized_pos_embed((6, 3)).reshape(1, 6, 3, 32).permute(0, 3, 1, 2)
    assert torch.allclose(got, expected, atol=1e-6)


def test_rope_matches_hand_computed_rotation_per_axis():
    head_dim, grid, ref = 16, (3, 5), 4
    rope = SequenceRope(head_dim, theta=10000., ref_grid=(ref, ref), num_registers=4, register_theta=100.)
    table = rope(grid, torch.device('cpu'), torch.float32)
    n = grid[0] * grid[1]
    assert table.shape == (1 + n + 4, head_dim // 2) and table.is_complex()
    q = torch.randn(1, 1, 1 + n + 4, head_dim)
    out = apply_rope(q, table)
    assert torch.equal(out[..., 0, :], q[..., 0, :])  # cls is not rotated
    patches = reference_rotate(q[..., 1:1 + n, :], *grid, ref, ref, reference_freqs(head_dim, 10000.))
    regs = reference_rotate(q[..., 1 + n:, :], 2, 2, 2, 2, reference_freqs(head_dim, 100.))
    assert torch.allclose(out[..., 1:1 + n, :], patches, atol=1e-6)
    assert torch.allclose(out[..., 1 + n:, :], regs, atol=1e-6)
    # one pair by hand: token at row 2, col 1 of a 3x5 grid squeezed into 4x4;
    # row angle uses channels (0, 1) at frequency 1, column angle channels (8, 9).
    t_row, t_col = 2 / 3 * 4, 1 / 5 * 4
    tok = 1 + 2 * 5 + 1
    a, b = q[0, 0, tok, 0], q[0, 0, tok, 1]
    assert torch.allclose(out[0, 0, tok, 0], a * torch.cos(torch.tensor(t_row)) - b * torch.sin(torch.tensor(t_row)))
    c, d = q[0, 0, tok, 8], q[0, 0, tok, 9]
    assert torch.allclose(out[0, 0, tok, 9], d * torch.cos(torch.tensor(t_col)) + c * torch.sin(torch.tensor(t_col)))


def test_complex_rope_equals_timms_rotation():
    from timm.layers.pos_embed_sincos import apply_rot_embed_cat
    rope = SequenceRope(32, ref_grid=(14, 14), num_registers=4)
    sincos = rope._build((5, 7), torch.device('cpu'))
    q = torch.randn(2, 3, 1 + 35 + 4, 32)
    assert torch.allclose(apply_rope(q, rope((5, 7), torch.device('cpu'), torch.float32)),
                          apply_rot_embed_cat(q, sincos), atol=1e-6)


def test_real_rope_table_equals_the_complex_one_and_is_used_while_tracing(monkeypatch):
    rope = SequenceRope(32, ref_grid=(14, 14), num_registers=4)
    complex_table = rope((5, 7), torch.device('cpu'), torch.float32)
    real_table = rope((5, 7), torch.device('cpu'), torch.float32, real=True)
    assert real_table.shape == (*complex_table.shape, 2) and not real_table.is_complex()
    q = torch.randn(2, 3, 1 + 35 + 4, 32, requires_grad=True)
    by_complex, by_real = apply_rope(q, complex_table), apply_rope(q, real_table)
    assert (by_complex - by_real).abs().max() <= 1e-6
    grads = [torch.autograd.grad(out.square().sum(), q)[0] for out in (apply_rope(q, complex_table),
                                                                     apply_rope(q, real_table))]
    assert (grads[0] - grads[1]).abs().max() <= 1e-5
    # eager keeps the faster complex table; compile=True and graph tracing get the real one
    model, seen = tiny(num_layers=1, out_indices=(0,)), []
    monkeypatch.setattr(model.blocks[0].attn, 'forward', lambda x, rope=None, attn_mask=None: seen.append(rope.is_complex()) or x)
    model(torch.randn(1, 3, 32, 32))
    monkeypatch.setattr(torch.compiler, 'is_compiling', lambda: True)
    model(torch.randn(1, 3, 32, 32))
    assert seen == [True, False]


def _authors_rms_norm(x, weight, eps=1e-6):
    """The authors' order, written from the spec: normalise in float32, round to x's dtype, scale."""
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize('autocast', [False, True], ids=['plain', 'autocast-bf16'])
def test_rmsnorm_implementations_follow_one_dtype_policy(dtype, autocast):
    """Both implementations return the authors' value and dtype (float32 out of a bf16/fp16
    input: the weight stays float32), with and without autocast."""
    x = (torch.randn(2, 7, 16) * 3).to(dtype).requires_grad_()
    weight = torch.linspace(0.5, 1.5, 16) + 2 ** -12  # not representable in bf16: rounding it shows
    norms = {impl: RMSNorm(16, impl=impl) for impl in ('exact', 'fused')}
    for norm in norms.values():
        with torch.no_grad():
            norm.weight.copy_(weight)
    expected = _authors_rms_norm(x.detach(), weight)
    probe = torch.randn(2, 7, 16)
    grads = {}
    for impl, norm in norms.items():
        with torch.autocast('cpu', dtype=torch.bfloat16, enabled=autocast):
            out = norm(x)
        assert out.dtype == torch.float32, impl
        torch.testing.assert_close(out.detach(), expected, rtol=1e-6, atol=1e-6, msg=impl)
        grads[impl] = torch.autograd.grad((out * probe).sum(), x)[0]
    tol = 1e-5 if dtype == torch.float32 else 1e-2  # the gradient comes back in x's dtype
    torch.testing.assert_close(grads['exact'].float(), grads['fused'].float(), rtol=tol, atol=tol)


def test_rms_norm_impl_switch_reaches_every_norm_and_auto_picks_per_device():
    model = tiny(rms_norm_impl='fused')
    norms = [m for m in model.modules() if isinstance(m, RMSNorm)]
    assert norms and {m.impl for m in norms} == {'fused'}  # block norms, QK-norm, final norm
    assert {m.impl for m in tiny().modules() if isinstance(m, RMSNorm)} == {'auto'}
    with pytest.raises(ValueError, match="rms_norm_impl must be one of"):
        tiny(rms_norm_impl='fast')
    calls = []
    norm = RMSNorm(8)
    original = torch.nn.functional.rms_norm
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch.nn.functional, 'rms_norm', lambda *a, **k: calls.append('fused') or original(*a, **k))
        norm(torch.randn(2, 8))                      # CPU: the exact (hand-written) one
        assert calls == []
        norm.impl = 'fused'
        norm(torch.randn(2, 8))
        assert calls == ['fused']


def test_rmsnorm_follows_the_spec_formula_and_dtype_order():
    norm = RMSNorm(16)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(4, 16) * 3
    spec = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * norm.weight
    assert torch.allclose(norm(x), spec, atol=1e-6)
    xb = x.bfloat16()  # low precision: normalised in float32, cast, then scaled
    expected = (xb.float() * torch.rsqrt(xb.float().pow(2).mean(-1, keepdim=True) + 1e-6)).bfloat16() * norm.weight
    assert torch.equal(norm(xb), expected)


def _spec_rmsnorm(x, weight):
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * weight


@pytest.mark.parametrize('dtype,tolerance', [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
def test_rmsnorm_backward_equals_autograd_of_the_formula(dtype, tolerance):
    norm = RMSNorm(16)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    # a permuted (non-contiguous) input, as q and k reach QK-norm
    base = (torch.randn(2, 5, 3, 16) * 3).to(dtype)
    grad = torch.randn(2, 3, 5, 16)
    results = []
    for fn in (norm, lambda t: _spec_rmsnorm(t, norm.weight)):
        x = base.clone().requires_grad_(True)
        norm.weight.grad = None
        out = fn(x.transpose(1, 2))
        out.backward(grad.to(out.dtype))
        results.append((out.detach(), x.grad, norm.weight.grad.clone()))
    for mine, spec in zip(*results):
        assert mine.dtype == spec.dtype
        assert torch.allclose(mine.float(), spec.float(), rtol=tolerance, atol=tolerance)
    # frozen input, trainable weight (and the reverse) as with frozen stages
    out = norm(base.float())
    out.sum().backward()
    x = base.float().requires_grad_(True)
    norm.weight.requires_grad_(False)
    norm(x).sum().backward()
    assert x.grad is not None


def test_rope_integer_positions_option():
    model = tiny(rope_ref_grid='integer')
    assert model.rope.ref_grid is None
    table = model.rope((3, 3), torch.device('cpu'), torch.float32)
    squeeze = tiny(img_size=48).rope((3, 3), torch.device('cpu'), torch.float32)
    assert torch.allclose(table, squeeze)  # at the pretraining grid both rules agree
    assert not torch.allclose(model.rope((6, 6), torch.device('cpu'), torch.float32),
                              tiny(img_size=48).rope((6, 6), torch.device('cpu'), torch.float32))


def test_rope_tables_built_once_per_grid_across_blocks_and_calls():
    model = ViT5(arch=dict(embed_dims=32, num_layers=12, num_heads=2)).eval()
    x = torch.randn(1, 3, 32, 48)
    model(x)
    model(x)
    assert model.rope.num_builds == 1
    model(torch.randn(1, 3, 48, 48))
    assert model.rope.num_builds == 2


def test_table_made_under_inference_mode_serves_training():
    model = tiny()
    x = torch.randn(1, 3, 32, 32)
    with torch.inference_mode():
        model.eval()(x)
    model.train()(x)[0].sum().backward()
    assert model.pos_embed.grad is not None


def _param_names(model):
    return {n for n, _ in model.named_parameters()}


def test_each_switch_changes_the_parameter_set():
    base = _param_names(tiny())
    assert {'reg_token', 'blocks.0.attn.q_norm.weight', 'blocks.0.gamma_1'} <= base
    assert not any(n.endswith('norm1.bias') or n.endswith('qkv.bias') for n in base)
    swiglu = _param_names(tiny(mlp_type='swiglu'))
    assert {'blocks.0.mlp.fc1_g.weight', 'blocks.0.mlp.fc1_x.weight', 'blocks.0.mlp.fc2.weight'} <= swiglu
    assert 'blocks.0.mlp.fc1.weight' not in swiglu
    geglu = tiny(mlp_type='geglu').blocks[0].mlp
    assert isinstance(geglu.act, torch.nn.GELU) and geglu.act.approximate == 'tanh'
    assert geglu.fc1_g.weight.shape == tiny(mlp_type='swiglu').blocks[0].mlp.fc1_g.weight.shape
    sandwich = _param_names(tiny(sandwich_norm=True))
    assert {'blocks.0.post_attn_norm.weight', 'blocks.0.post_mlp_norm.weight'} <= sandwich - base
    no_bias = _param_names(tiny(linear_bias=False, mlp_type='swiglu'))
    assert not any(n.endswith('.bias') and n.startswith('blocks.') for n in no_bias)
    assert 'blocks.0.attn.proj.bias' in base and 'blocks.0.mlp.fc1.bias' in base
    assert not any('gamma' in n for n in _param_names(tiny(layer_scale_init=0)))
    assert 'blocks.0.norm1.bias' in _param_names(tiny(norm_type='layernorm'))
    assert isinstance(tiny().blocks[0].norm1, RMSNorm)
    assert not any('q_norm' in n for n in _param_names(tiny(qk_norm=False)))
    assert 'blocks.0.attn.qkv.bias' in _param_names(tiny(qkv_bias=True))
    assert 'reg_token' not in _param_names(tiny(num_registers=0))
    assert tiny(use_rope=False).rope is None
    assert tiny(register_rope=False).rope.register_grid is None
    # registers without their own RoPE are left unrotated: identity rows in the table
    table = tiny(register_rope=False).rope((2, 2), torch.device('cpu'), torch.float32)
    assert torch.equal(table[-4:], torch.ones(4, 8, dtype=torch.complex64))


def test_deit3_is_a_preset_of_the_same_class():
    model = ViT5(arch='deit3-small')
    assert model.rope is None and model.reg_token is None and isinstance(model.blocks[0].norm1, torch.nn.LayerNorm)
    assert model.blocks[0].attn.qkv.bias is not None


def test_drop_path_schedules():
    const = ViT5(arch=dict(TINY, num_layers=4), drop_path_rate=0.2)
    assert [b.drop_path.drop_prob for b in const.blocks] == [0.2] * 4
    linear = ViT5(arch=dict(TINY, num_layers=4), drop_path_rate=0.3, drop_path_schedule='linear')
    assert isinstance(linear.blocks[0].drop_path, torch.nn.Identity)
    assert linear.blocks[-1].drop_path.drop_prob == pytest.approx(0.3)


def test_with_cp_gives_identical_outputs_and_gradients():
    ref = tiny(out_indices=(0, 1)).train()
    cp = tiny(out_indices=(0, 1), with_cp=True).train()
    cp.load_state_dict(ref.state_dict())
    x = torch.randn(2, 3, 32, 48)
    outs = [sum(t.pow(2).sum() for t in m(x)) for m in (ref, cp)]
    assert torch.equal(outs[0], outs[1])
    for out in outs:
        out.backward()
    for (n, p), (_, q) in zip(ref.named_parameters(), cp.named_parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-6, rtol=1e-5), n


def test_frozen_stages():
    model = tiny(frozen_stages=1).train()
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
    assert {'pos_embed', 'cls_token', 'reg_token', 'patch_embed.proj.weight', 'blocks.0.attn.qkv.weight'} <= frozen
    assert not any(n.startswith('blocks.1.') for n in frozen)
    assert not model.blocks[0].training and model.blocks[1].training


@pytest.mark.parametrize('kwargs,message', [
    (dict(arch='vit5-huge'), "unknown arch 'vit5-huge'"),
    (dict(arch=dict(TINY), out_indices=(2,)), 'out_indices contains 2, but the model has 2 blocks'),
    (dict(arch=dict(TINY), norm_type='batchnorm'), "norm_type must be 'rmsnorm' or 'layernorm'"),
    (dict(arch=dict(TINY), mlp_type='reglu'), "mlp_type must be 'mlp', 'swiglu' or 'geglu'"),
    (dict(arch=dict(TINY), num_registers=3), 'num_registers=3 is not a square'),
    (dict(arch=dict(embed_dims=30, num_layers=2, num_heads=4)), 'not divisible by num_heads'),
])
def test_bad_config_values_say_what(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ViT5(**kwargs)


def test_compile_flag_compiles_the_block_stack_once_with_its_arguments(monkeypatch):
    calls = []

    def fake_compile(fn, **kwargs):  # records, runs eagerly: the wiring without the compile time
        calls.append((fn.__name__, kwargs))
        return fn
    monkeypatch.setattr(torch, 'compile', fake_compile)
    model = tiny(compile=dict(mode='reduce-overhead'), out_indices=(0, 1))
    eager = tiny(out_indices=(0, 1))
    eager.load_state_dict(model.state_dict())
    x = torch.randn(1, 3, 32, 48)
    for a, b in zip(model(x), eager(x)):
        assert torch.equal(a, b)
    model(x)
    assert calls == [('_run_blocks', {'mode': 'reduce-overhead'})]
    assert copy.deepcopy(model)._compiled_blocks is None  # rebuilt on use, never copied
    assert tiny().compile_cfg is None and tiny(compile=True).compile_cfg == {}
    with pytest.raises(ValueError, match='compile must be a bool or a dict'):
        tiny(compile='yes')


@pytest.mark.skipif(shutil.which('c++') is None and shutil.which('g++') is None,
                    reason="torch.compile's CPU backend needs a C++ compiler")
def test_compiled_backbone_trains_like_the_eager_one():
    arch = dict(embed_dims=32, num_layers=1, num_heads=2, layer_scale_init=1.0)
    compiled, eager = ViT5(arch=arch, compile=True).train(), ViT5(arch=arch).train()
    eager.load_state_dict(compiled.state_dict())
    x = torch.randn(2, 3, 32, 48)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        losses = [m(x)[0].pow(2).mean() for m in (compiled, eager)]
    # the real-valued RoPE table: inductor generates code for the whole block stack
    assert not [w for w in caught if 'complex' in str(w.message)]
    assert torch.allclose(*losses, rtol=1e-5)
    for loss in losses:
        loss.backward()
    for (name, p), q in zip(compiled.named_parameters(), eager.parameters()):
        assert torch.allclose(p.grad, q.grad, rtol=1e-4, atol=1e-6), name
