"""mmseg's FocalLoss as vit5seg patches it (vit5seg.compat._focal_loss_any_device: every
device but CUDA with compiled mmcv ops runs the patched forward). mmseg's own
tests/test_models/test_losses/ is not in its source distribution (a folder without
__init__.py), so test_compat_mmseg_unit_tests.py cannot run it: the behaviour it holds FocalLoss
to is checked here, against the values mmcv's CUDA kernel gave (recorded on a GPU in that
file's test_same) and against the loss's own API contract."""
import pytest
import torch
import torch.nn.functional as F
from mmseg.models import build_loss

import vit5seg  # noqa: F401  (patches FocalLoss)

# test_same's input: (2, 3, 2, 2) scores and their class ids / one-hot targets
PRED = torch.tensor([[[[0.1998772621, 0.3659250736], [0.9128918052, 0.2723454833]],
                      [[0.1373604536, 0.2495964766], [0.9785252810, 0.5094971061]],
                      [[0.2959728837, 0.8378278613], [0.5674484372, 0.3124643564]]],
                     [[[0.2381041050, 0.8065491915], [0.2052971125, 0.9496635199]],
                      [[0.2494341135, 0.9726386070], [0.9316667318, 0.2813754082]],
                      [[0.2399672866, 0.3493354321], [0.9550838470, 0.8279340863]]]])
IDS = torch.tensor([[[2, 2], [1, 2]], [[0, 1], [2, 0]]])
ONE_HOT = F.one_hot(IDS, 3).permute(0, 3, 1, 2)
CLASS_WEIGHT = [0.052917540073394775, 0.27414458990097046, 0.5211336612701416]
PIXEL_WEIGHT = torch.tensor([0.4344, 0.8858, 0.7353, 0.5068, 0.5316, 0.1429, 0.5781, 0.7336])
# reduction 'sum', alpha 0.4, gamma 2: mmcv's CUDA kernel (weight, class_weight) -> loss
KERNEL_SUMS = {(None, None): 3.6949386596679688, (None, 'cw'): 0.9553812742233276,
               ('pixel', None): 2.1043241024017334, ('pixel', 'cw'): 0.5577910542488098}


@pytest.mark.parametrize('alpha', [0.4, [0.4] * 3], ids=['float', 'per-class'])
@pytest.mark.parametrize('target', ['ids', 'one-hot'])
@pytest.mark.parametrize('ignore_index', [255, 4])
@pytest.mark.parametrize('weights', list(KERNEL_SUMS), ids=lambda w: '-'.join(str(x) for x in w))
def test_equals_the_cuda_kernel(weights, ignore_index, target, alpha):
    loss = build_loss(dict(type='FocalLoss', alpha=alpha, class_weight=CLASS_WEIGHT if weights[1] else None))
    value = loss(PRED, IDS if target == 'ids' else ONE_HOT, weight=PIXEL_WEIGHT if weights[0] else None,
                 ignore_index=ignore_index, reduction_override='sum')
    assert value.item() == pytest.approx(KERNEL_SUMS[weights], rel=1e-5)


def _inputs(classes=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(3, classes, 5, 6, generator=gen), torch.randint(0, 4, (3, 5, 6), generator=gen)


def test_reductions_weights_and_class_weights():
    loss = build_loss(dict(type='FocalLoss', reduction='none'))
    pred, ids = _inputs()
    per_element = loss(pred, ids)
    assert per_element.shape == pred.shape
    assert loss(pred, ids, reduction_override='mean').item() == pytest.approx(per_element.mean().item(), rel=1e-6)
    assert loss(pred, ids, reduction_override='sum').item() == pytest.approx(per_element.sum().item(), rel=1e-6)
    weighted = build_loss(dict(type='FocalLoss', reduction='none', class_weight=[1.0, 2.0, 3.0, 4.0]))
    torch.testing.assert_close(weighted(pred, ids), per_element * torch.tensor([1., 2., 3., 4.]).view(1, 4, 1, 1))
    # a per-pixel weight as (N, 1), (N,) or (N, C): one loss
    weight = torch.rand(3 * 5 * 6, 1, generator=torch.Generator().manual_seed(1))
    mean = build_loss(dict(type='FocalLoss'))
    values = [mean(pred, ids, weight=w) for w in (weight, weight.view(-1), weight.expand(-1, 4))]
    assert values[0] == values[1] == values[2]
    # class ids and their one-hot scores: one loss
    assert mean(pred, ids) == mean(pred, F.one_hot(ids, 4).permute(0, 3, 1, 2))


def test_ignored_pixels_add_nothing():
    loss = build_loss(dict(type='FocalLoss', reduction='none'))
    pred, ids = _inputs(classes=5)
    ids[0, 1, 2] = ids[2, 4, 5] = 4  # an index inside the C classes
    by_ids = loss(pred, ids, ignore_index=4)
    by_one_hot = loss(pred, F.one_hot(ids, 5).permute(0, 3, 1, 2), ignore_index=4)
    torch.testing.assert_close(by_ids, by_one_hot)
    assert (by_ids[0, :, 1, 2] == 0).all() and (by_ids[2, :, 4, 5] == 0).all() and by_ids.sum() > 0
    pred, ids = _inputs()
    ids[1, 0, 0] = 255  # outside them
    assert (loss(pred, ids, ignore_index=255)[1, :, 0, 0] == 0).all()


def test_what_it_refuses():
    with pytest.raises(AssertionError):  # mmseg's FocalLoss is sigmoid only
        build_loss(dict(type='FocalLoss', use_sigmoid=False))
    loss = build_loss(dict(type='FocalLoss'))
    pred, ids = _inputs()
    with pytest.raises(AssertionError):
        loss(pred, ids, reduction_override='test')
    wrong = F.one_hot(torch.randint(0, 4, (3, 2, 2)), 4).permute(0, 3, 1, 2)
    with pytest.raises(AssertionError):  # mmseg's own contract (and a ValueError: one clear error)
        loss(pred, wrong)
    loss.use_sigmoid = False
    with pytest.raises(NotImplementedError):  # mmseg's answer for the softmax form, which it does not have
        loss(pred, ids)
