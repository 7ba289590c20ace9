"""The branches mmcv / mmseg take only for CUDA tensors, run on CPU through the dispatch
simulation (a tensor that says ``is_cuda``; ``torch.cuda.is_available`` patched inside
each test only), each compared with the pure-PyTorch reference."""
import contextlib

import pytest
import torch
import torch.nn.functional as F

import vit5seg  # noqa: F401  (applies the fallbacks)
from vit5seg import compat
from vit5seg.registry_audit import CudaLikeTensor, simulated_cuda


def cuda_like(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone().as_subclass(CudaLikeTensor).requires_grad_(t.requires_grad)


def test_simulation_is_confined_to_the_context():
    import mmcv.ops.multi_scale_deform_attn as msda
    with simulated_cuda():
        assert torch.cuda.is_available() and msda.IS_CUDA_AVAILABLE
        assert cuda_like(torch.zeros(1)).is_cuda and (cuda_like(torch.zeros(1)) + 1).is_cuda
    assert not torch.cuda.is_available() and not msda.IS_CUDA_AVAILABLE


def _deform_attn_inputs(seed=0):
    gen = torch.Generator().manual_seed(seed)
    shapes = torch.tensor([[8, 8], [4, 4], [2, 2]])
    num_keys = int((shapes[:, 0] * shapes[:, 1]).sum())
    query = torch.randn(2, num_keys, 32, generator=gen)
    reference = torch.rand(2, num_keys, 3, 2, generator=gen)
    start = torch.cat([shapes.new_zeros(1), (shapes[:, 0] * shapes[:, 1]).cumsum(0)[:-1]])
    return query, reference, shapes, start


def test_deformable_attention_cuda_branch_equals_pytorch_path():
    from mmcv.ops import MultiScaleDeformableAttention
    torch.manual_seed(0)
    attn = MultiScaleDeformableAttention(embed_dims=32, num_heads=4, num_levels=3, num_points=2, batch_first=True, dropout=0.)
    torch.nn.init.normal_(attn.sampling_offsets.weight, std=0.1)  # mmcv inits them to zero
    query, reference, shapes, start = _deform_attn_inputs()

    def run(q):
        out = attn(q, value=q, reference_points=reference, spatial_shapes=shapes, level_start_index=start)
        out.square().sum().backward()
        grads = [p.grad.clone() for p in attn.parameters()]
        attn.zero_grad()
        return out, grads

    cpu_out, cpu_grads = run(query)
    before = compat.FALLBACK_CALLS['ms_deform_attn']
    with simulated_cuda():
        sim_out, sim_grads = run(cuda_like(query))
    assert compat.FALLBACK_CALLS['ms_deform_attn'] == before + 1  # the CUDA branch ran, through ours
    torch.testing.assert_close(torch.Tensor(sim_out), cpu_out, rtol=0, atol=1e-6)
    for a, b in zip(sim_grads, cpu_grads):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)


def test_without_the_fallback_the_cuda_branch_needs_the_compiled_kernel(monkeypatch):
    """What a GPU user got before: mmcv's CUDA branch calls the missing compiled op."""
    import mmcv.ops.multi_scale_deform_attn as msda
    from mmcv.ops import MultiScaleDeformableAttention
    original = compat._DeformAttnPytorch.replaces
    monkeypatch.setattr(msda, 'MultiScaleDeformableAttnFunction', original)
    attn = MultiScaleDeformableAttention(embed_dims=32, num_heads=4, num_levels=3, num_points=2, batch_first=True, dropout=0.)
    query, reference, shapes, start = _deform_attn_inputs()
    with simulated_cuda(), pytest.raises(compat.MissingMmcvOp) as info:
        attn(cuda_like(query), value=cuda_like(query), reference_points=reference, spatial_shapes=shapes,
             level_start_index=start)
    assert info.value.op == 'ms_deform_attn_forward'
    assert "'ms_deform_attn_forward' (called by MultiScaleDeformableAttention)" in str(info.value)


def _focal_reference(logits, labels, gamma=2.0, alpha=0.5, ignore=255):
    """Sigmoid focal loss over the non-ignored pixels, written from the paper's formula."""
    num_classes = logits.shape[1]
    pred = logits.movedim(1, -1).reshape(-1, num_classes)
    labels = labels.reshape(-1)
    valid = labels != ignore
    target = F.one_hot(labels.clamp(max=num_classes - 1), num_classes).float() * valid[:, None]
    p = pred.sigmoid()
    p_t = p * target + (1 - p) * (1 - target)
    alpha_t = alpha * target + (1 - alpha) * (1 - target)
    loss = -alpha_t * (1 - p_t) ** gamma * torch.log(p_t.clamp(min=1e-12))
    return (loss * valid[:, None]).sum() / loss.numel()


@pytest.mark.parametrize('cuda', [False, True], ids=['cpu', 'cuda-branch'])
def test_mmseg_sigmoid_focal_loss_equals_the_formula(cuda):
    """mmseg 1.2.2's CPU branch crashed ("size of tensor a (5) must match"), its CUDA branch
    needed the compiled kernel; both now give the formula's value and gradient."""
    from mmseg.models.losses import FocalLoss
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 5, 6, 7, generator=gen, requires_grad=True)
    labels = torch.randint(0, 5, (2, 6, 7), generator=gen)
    labels[0, :2] = 255
    expected = _focal_reference(logits, labels)
    expected_grad, = torch.autograd.grad(expected, logits)
    loss_fn = FocalLoss(use_sigmoid=True, gamma=2.0, alpha=0.5)
    x = cuda_like(logits) if cuda else logits.detach().clone().requires_grad_()
    with simulated_cuda() if cuda else contextlib.nullcontext():
        loss = loss_fn(x, labels)
    grad, = torch.autograd.grad(loss, x)
    torch.testing.assert_close(torch.Tensor(loss.detach()), expected.detach(), rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(torch.Tensor(grad), expected_grad, rtol=1e-5, atol=1e-7)
    per_pixel = loss_fn(logits.detach(), labels, reduction_override='none')
    assert per_pixel.shape == logits.shape


def test_sigmoid_focal_loss_op_equals_mmseg_pytorch_version():
    """The stand-in for mmcv's compiled op (class ids, C = background) against mmseg's
    pure function on one-hot targets, including background rows."""
    from mmseg.models.losses.focal_loss import py_sigmoid_focal_loss
    gen = torch.Generator().manual_seed(1)
    pred = torch.randn(20, 4, generator=gen)
    target = torch.randint(0, 5, (20,), generator=gen)  # 4 = background
    one_hot = F.one_hot(target, 5)[:, :4]
    ours = compat.sigmoid_focal_loss_pytorch(pred, target, 2.0, 0.25, None, 'none')
    theirs = py_sigmoid_focal_loss(pred, one_hot, None, gamma=2.0, alpha=0.25, reduction='none')
    torch.testing.assert_close(ours, theirs)
    assert torch.isclose(compat.sigmoid_focal_loss_pytorch(pred, target, 2.0, 0.25, None, 'mean'), ours.sum() / 20)


def _psa_mask_loops(mask, psa_type, hm, wm):
    """mmcv's psamask kernel, loop by loop: window cell (i, j) of centre (h, w) lands on
    position (h + i - hm//2, w + j - wm//2)."""
    n, _, h, w = mask.shape
    out = torch.zeros(n, h * w, h, w)
    for y in range(h):
        for x in range(w):
            for i in range(hm):
                for j in range(wm):
                    ty, tx = y + i - (hm - 1) // 2, x + j - (wm - 1) // 2
                    if 0 <= ty < h and 0 <= tx < w:
                        if psa_type == 0:
                            out[:, ty * w + tx, y, x] = mask[:, i * wm + j, y, x]
                        else:
                            out[:, y * w + x, ty, tx] = mask[:, i * wm + j, y, x]
    return out


@pytest.mark.parametrize('psa_type', [0, 1], ids=['collect', 'distribute'])
def test_psa_mask_equals_the_kernel_loops(psa_type):
    from mmcv.ops import PSAMask
    h, w = 4, 5
    hm, wm = 2 * h - 1, 2 * w - 1
    mask = torch.randn(2, hm * wm, h, w, requires_grad=True)
    module = PSAMask('collect' if psa_type == 0 else 'distribute', (hm, wm))
    with simulated_cuda():
        out = module(cuda_like(mask))
    torch.testing.assert_close(torch.Tensor(out.detach()), _psa_mask_loops(mask.detach(), psa_type, hm, wm))
    out = module(mask)
    weights = torch.randn_like(out)
    grad, = torch.autograd.grad((out * weights).sum(), mask)
    expected, = torch.autograd.grad((_psa_mask_loops(mask, psa_type, hm, wm) * weights).sum(), mask)
    torch.testing.assert_close(grad, expected)


def test_an_op_without_a_pure_version_names_the_op_and_the_module():
    from mmcv.ops import DeformConv2dPack
    conv = DeformConv2dPack(4, 4, 3, padding=1)
    with simulated_cuda(), pytest.raises(compat.MissingMmcvOp) as info:
        conv(cuda_like(torch.randn(1, 4, 8, 8)))
    message = str(info.value)
    assert info.value.module == 'DeformConv2dPack' and 'deform_conv' in info.value.op
    assert f"'{info.value.op}' (called by DeformConv2dPack)" in message and 'mmcv-lite' in message
