"""The branches mmcv / mmseg take only for CUDA tensors, run on CPU through the dispatch
simulation (a tensor that says ``is_cuda``; ``torch.cuda.is_available`` patched inside
each test only), each compared with the pure-PyTorch reference."""
import contextlib

import pytest
import torch

import vit5seg  # noqa: F401  (applies the fallbacks)
from vit5seg import compat, ops
from vit5seg.utils.cuda_simulation import CudaLikeTensor, simulated_cuda


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


def _deform_attn_reference(value, shapes, locations, weights):
    """Multi-scale deformable attention from its definition, point by point: for each
    query and head, the sum over levels l and points p of weight x value of level l
    sampled bilinearly at (x W_l - 0.5, y H_l - 0.5), zero outside the map.
    value (B, S, h, D); locations (B, Q, h, L, P, 2) as (x, y) in [0, 1]; weights (B, Q, h, L, P)."""
    B, _, heads, D = value.shape
    Q, L, P = locations.shape[1], locations.shape[3], locations.shape[4]
    out = value.new_zeros(B, Q, heads, D)
    start = 0
    for level in range(L):
        H, W = (int(v) for v in shapes[level])
        grid = value[:, start:start + H * W].reshape(B, H, W, heads, D)
        start += H * W
        for b in range(B):
            for q in range(Q):
                for head in range(heads):
                    for p in range(P):
                        x = locations[b, q, head, level, p, 0] * W - 0.5
                        y = locations[b, q, head, level, p, 1] * H - 0.5
                        x0, y0 = int(torch.floor(x)), int(torch.floor(y))
                        sample = value.new_zeros(D)
                        for yy, xx in ((y0, x0), (y0, x0 + 1), (y0 + 1, x0), (y0 + 1, x0 + 1)):
                            if 0 <= yy < H and 0 <= xx < W:
                                sample = sample + (1 - (x - xx).abs()) * (1 - (y - yy).abs()) * grid[b, yy, xx, head]
                        out[b, q, head] = out[b, q, head] + weights[b, q, head, level, p] * sample
    return out.reshape(B, Q, heads * D)


def test_deformable_attention_stand_in_follows_the_definition():
    """The function our CUDA branch runs, against the definition written out point by point,
    with sampling points inside, on the border of and outside each map; gradients too."""
    gen = torch.Generator().manual_seed(0)
    shapes = torch.tensor([[4, 5], [2, 3]])
    value = torch.randn(2, 26, 2, 4, generator=gen, requires_grad=True)
    locations = (torch.rand(2, 3, 2, 2, 2, 2, generator=gen) * 1.4 - 0.2).requires_grad_()
    weights = torch.rand(2, 3, 2, 2, 2, generator=gen).softmax(-1).requires_grad_()
    start = torch.tensor([0, 20])
    ours = ops.DeformAttnPytorch.apply(value, shapes, start, locations, weights, 64)
    reference = _deform_attn_reference(value, shapes, locations, weights)
    torch.testing.assert_close(ours, reference, rtol=1e-5, atol=1e-6)
    probe = torch.randn_like(ours)
    for a, b in zip(torch.autograd.grad((ours * probe).sum(), (value, locations, weights)),
                    torch.autograd.grad((reference * probe).sum(), (value, locations, weights))):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_deformable_attention_cuda_branch_runs_the_stand_in_on_the_modules_inputs(monkeypatch):
    """MultiScaleDeformableAttention on the simulated CUDA branch: the call goes through
    our stand-in, and what it returns for the module's own sampling points and weights is
    the definition's value."""
    import mmcv.ops.multi_scale_deform_attn as msda
    from mmcv.ops import MultiScaleDeformableAttention
    torch.manual_seed(0)
    attn = MultiScaleDeformableAttention(embed_dims=32, num_heads=4, num_levels=3, num_points=2, batch_first=True,
                                         dropout=0.)
    torch.nn.init.normal_(attn.sampling_offsets.weight, std=0.1)  # mmcv inits them to zero
    query, reference, shapes, start = _deform_attn_inputs()
    calls = []
    stand_in = msda.MultiScaleDeformableAttnFunction

    class Spy:
        @staticmethod
        def apply(*args):
            out = stand_in.apply(*args)
            calls.append(([torch.Tensor(a.detach()) if torch.is_tensor(a) else a for a in args], out.detach()))
            return out
    monkeypatch.setattr(msda, 'MultiScaleDeformableAttnFunction', Spy)
    before = ops.FALLBACK_CALLS['ms_deform_attn']
    with simulated_cuda():
        attn(cuda_like(query[:1, :21]), value=cuda_like(query[:1]), reference_points=reference[:1, :21],
             spatial_shapes=shapes, level_start_index=start)
    assert ops.FALLBACK_CALLS['ms_deform_attn'] == before + 1 and len(calls) == 1
    (value, spatial_shapes, _, locations, weights, _), out = calls[0]
    torch.testing.assert_close(torch.Tensor(out), _deform_attn_reference(value, spatial_shapes, locations, weights),
                               rtol=1e-5, atol=1e-6)


def test_without_the_fallback_the_cuda_branch_needs_the_compiled_kernel(monkeypatch):
    """What a GPU user got before: mmcv's CUDA branch calls the missing compiled op."""
    import mmcv.ops.multi_scale_deform_attn as msda
    from mmcv.ops import MultiScaleDeformableAttention
    original = ops.DeformAttnPytorch.replaces
    monkeypatch.setattr(msda, 'MultiScaleDeformableAttnFunction', original)
    attn = MultiScaleDeformableAttention(embed_dims=32, num_heads=4, num_levels=3, num_points=2, batch_first=True, dropout=0.)
    query, reference, shapes, start = _deform_attn_inputs()
    with simulated_cuda(), pytest.raises(compat.MissingMmcvOp) as info:
        attn(cuda_like(query), value=cuda_like(query), reference_points=reference, spatial_shapes=shapes,
             level_start_index=start)
    assert info.value.op == 'ms_deform_attn_forward'
    assert "'ms_deform_attn_forward' (called by MultiScaleDeformableAttention)" in str(info.value)


def _focal_reference(logits, labels, gamma, alpha, class_weight=None, ignore=255):
    """mmseg's sigmoid focal loss on class-id labels, written from the paper's formula:
    per pixel n and class c, -alpha_t (1 - p_t)^gamma log p_t with t = [label_n is c] (with
    one class, as mmseg's CUDA branch defines it: t = [label_n is 1]), times the class's
    weight, zero at ignored pixels; 'mean' averages over all N x C terms."""
    num_classes = logits.shape[1]
    pred = logits.movedim(1, -1).reshape(-1, num_classes)
    labels = labels.reshape(-1)
    total = pred.new_zeros(())
    for n in range(pred.shape[0]):
        if labels[n] == ignore:
            continue
        for c in range(num_classes):
            positive = labels[n] == (1 if num_classes == 1 else c)
            p = torch.sigmoid(pred[n, c])
            p_t = p if positive else 1 - p
            alpha_t = alpha if positive else 1 - alpha
            term = -alpha_t * (1 - p_t) ** gamma * torch.log(p_t)
            total = total + term * (class_weight[c] if class_weight else 1.0)
    return total / pred.numel()


FOCAL_CASES = {
    'classes': dict(num_classes=4, alpha=0.25, class_weight=[1.0, 2.0, 0.5, 3.0]),
    'one-class': dict(num_classes=1, alpha=0.25, class_weight=None),
}


@pytest.mark.parametrize('case', list(FOCAL_CASES))
@pytest.mark.parametrize('cuda', [False, True], ids=['cpu', 'cuda-branch'])
def test_mmseg_sigmoid_focal_loss_follows_the_formula(cuda, case):
    """mmseg 1.2.2's CPU branch crashed ("size of tensor a (5) must match"), its CUDA branch
    needed the compiled kernel; both now give the formula's value and gradient, with alpha
    0.25 (a swapped alpha fails), per-class weights, ignored pixels and the one-class case."""
    from mmseg.models.losses import FocalLoss
    num_classes, alpha, class_weight = FOCAL_CASES[case].values()
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(2, num_classes, 3, 4, generator=gen, requires_grad=True)
    labels = torch.randint(0, max(num_classes, 2), (2, 3, 4), generator=gen)
    labels[0, :1] = 255
    expected = _focal_reference(logits, labels, 2.0, alpha, class_weight)
    expected_grad, = torch.autograd.grad(expected, logits)
    loss_fn = FocalLoss(use_sigmoid=True, gamma=2.0, alpha=alpha, class_weight=class_weight)
    x = cuda_like(logits) if cuda else logits.detach().clone().requires_grad_()
    with simulated_cuda() if cuda else contextlib.nullcontext():
        loss = loss_fn(x, labels)
    grad, = torch.autograd.grad(loss, x)
    torch.testing.assert_close(torch.Tensor(loss.detach()), expected.detach(), rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(torch.Tensor(grad), expected_grad, rtol=1e-5, atol=1e-7)
    per_pixel = loss_fn(logits.detach(), labels, reduction_override='none')
    assert per_pixel.shape == logits.shape


def _focal_kernel_loops(pred, target, gamma, alpha, weight):
    """mmcv's sigmoid_focal_loss kernel, element by element: target ids with C meaning
    background, -alpha (1-p)^gamma log p where c is the target, -(1-alpha) p^gamma log(1-p)
    elsewhere, times ``weight[target]``. For a background sample the kernel reads
    ``weight[C]``, past the end of the (C,) tensor; the stand-in uses 1 there."""
    out = torch.zeros_like(pred)
    for n in range(pred.shape[0]):
        t = int(target[n])
        for c in range(pred.shape[1]):
            p = torch.sigmoid(pred[n, c])
            if t == c:
                out[n, c] = -alpha * (1 - p) ** gamma * torch.log(p)
            else:
                out[n, c] = -(1 - alpha) * p ** gamma * torch.log(1 - p)
            if weight is not None and t < pred.shape[1]:
                out[n, c] = out[n, c] * weight[t]
    return out


@pytest.mark.parametrize('with_weight', [False, True], ids=['unweighted', 'weighted'])
def test_sigmoid_focal_loss_op_stand_in_follows_the_kernel(with_weight):
    gen = torch.Generator().manual_seed(1)
    pred = torch.randn(20, 4, generator=gen)
    target = torch.randint(0, 5, (20,), generator=gen)  # 4 = background
    weight = torch.tensor([0.5, 1.0, 2.0, 4.0]) if with_weight else None
    expected = _focal_kernel_loops(pred, target, 2.0, 0.25, weight)
    ours = ops.sigmoid_focal_loss_pytorch(pred, target, 2.0, 0.25, weight, 'none')
    torch.testing.assert_close(ours, expected, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(ops.sigmoid_focal_loss_pytorch(pred, target, 2.0, 0.25, weight, 'mean'),
                               expected.sum() / 20)  # the kernel's mean: the sum over the N samples
    torch.testing.assert_close(ops.sigmoid_focal_loss_pytorch(pred, target, 2.0, 0.25, weight, 'sum'),
                               expected.sum())


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
