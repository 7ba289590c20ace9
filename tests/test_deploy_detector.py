"""The photo-in graph of panoptic and instance EoMT (vit5seg/deploy/detector.py) against mmdet's
own code on the same inputs: its post-processing written without data-dependent shapes gives
``MaskFormerFusionHead``'s panoptic map and instances exactly, and its in-graph resize gives
PIL's resize of the uint8 photo (mmdet's test pipeline, backend='pillow')."""
import numpy as np
import pytest
import torch
from PIL import Image

from vit5seg.deploy.detector import OnnxDetector
from vit5seg.models.mask_classification.postprocess import instance_rule, panoptic_rule
from vit5seg.deploy.export import generated_image

pytest.importorskip('mmdet')
THINGS, STUFF, QUERIES = 6, 4, 24


def fusion_head(max_per_image=30):
    from mmdet.registry import MODELS
    from mmengine.registry import DefaultScope
    with DefaultScope.overwrite_default_scope('mmdet'):
        return MODELS.build(dict(type='MaskFormerFusionHead', num_things_classes=THINGS, num_stuff_classes=STUFF,
                                 loss_panoptic=None, init_cfg=None,
                                 test_cfg=dict(object_mask_thr=0.8, iou_thr=0.8, filter_low_score=True,
                                               max_per_image=max_per_image)))


def crowded_logits(seed: int):
    """Queries whose classes are confident (most kept) and whose masks are blobs that overlap:
    some queries lose too much of their mask to others and are dropped by the 0.8 rule."""
    g = torch.Generator().manual_seed(seed)
    classes = torch.randn(QUERIES, THINGS + STUFF + 1, generator=g) * 6
    yy, xx = torch.meshgrid(torch.arange(48.), torch.arange(64.), indexing='ij')
    centres = torch.rand(QUERIES, 2, generator=g) * torch.tensor([48., 64.])
    radius = 4 + 10 * torch.rand(QUERIES, 1, 1, generator=g)
    dist = ((yy - centres[:, :1, None]) ** 2 + (xx - centres[:, 1:, None]) ** 2).sqrt()
    masks = (radius - dist) * 0.8 + torch.randn(QUERIES, 48, 64, generator=g) * 0.5
    return classes, masks


@pytest.mark.parametrize('seed', range(4))
def test_the_panoptic_rule_is_mmdets_fusion_head(seed):
    classes, masks = crowded_logits(seed)
    expected = fusion_head().panoptic_postprocess(classes, masks).sem_seg[0]
    panoptic, ids, labels, scores = panoptic_rule(classes, masks, THINGS)
    assert torch.equal(panoptic.int(), expected)
    kept = (classes.softmax(-1).max(-1).values > 0.8) & (classes.argmax(-1) < THINGS + STUFF)
    made = ids >= 0
    assert kept.sum() > made.sum() > 3, (int(kept.sum()), int(made.sum()))   # the 0.8 overlap rule dropped some
    assert set(expected.unique().tolist()) - {THINGS + STUFF} <= set(ids[made].tolist())
    assert torch.equal(labels[made], classes.argmax(-1)[made]) and (scores[~made] == -1).all()


def test_the_panoptic_rule_with_nothing_kept_is_void():
    classes, masks = crowded_logits(0)
    classes[:, -1] = 100.0   # every query: no object
    panoptic, ids, _, _ = panoptic_rule(classes, masks, THINGS)
    assert (panoptic == THINGS + STUFF).all() and (ids == -1).all()
    assert (fusion_head().panoptic_postprocess(classes, masks).sem_seg[0] == THINGS + STUFF).all()


def test_the_instance_rule_is_mmdets_fusion_head():
    from mmdet.registry import MODELS
    from mmengine.registry import DefaultScope
    classes, masks = crowded_logits(1)
    with DefaultScope.overwrite_default_scope('mmdet'):
        head = MODELS.build(dict(type='MaskFormerFusionHead', num_things_classes=THINGS + STUFF, num_stuff_classes=0,
                                 loss_panoptic=None, init_cfg=None, test_cfg=dict(max_per_image=30)))
    expected = head.instance_postprocess(classes, masks)
    found_masks, found_labels, found_scores = instance_rule(classes, masks, max_per_image=30)
    ours = sorted(zip(found_scores.tolist(), found_labels.tolist(), [m.flatten().tolist() for m in found_masks]))
    theirs = sorted(zip(expected.scores.tolist(), expected.labels.tolist(), [m.flatten().tolist()
                                                                               for m in expected.masks]))
    assert [(l, m) for _, l, m in ours] == [(l, m) for _, l, m in theirs]
    np.testing.assert_allclose([s for s, _, _ in ours], [s for s, _, _ in theirs], rtol=1e-6)


@pytest.mark.parametrize('hw', [(96, 128), (75, 61), (130, 40)])
def test_the_graphs_resize_is_pils_on_the_uint8_photo(hw):
    """mmdet's test pipeline: Resize(scale=(side, side), keep_ratio=True, backend='pillow')."""
    import mmcv
    photo = generated_image(hw, seed=3)
    expected = mmcv.imrescale(photo, (64, 64), interpolation='bilinear', backend='pillow').astype(np.float32)
    wrapper = OnnxDetector.__new__(OnnxDetector)
    torch.nn.Module.__init__(wrapper)
    wrapper.side = 64
    found = wrapper.resize(torch.from_numpy(photo).permute(2, 0, 1)[None].float())[0].permute(1, 2, 0).numpy()
    assert found.shape == expected.shape
    # PIL works in fixed point: 16-18% of the values come out one level apart (the float resize unrounded:
    # next to none equal)
    assert np.abs(found - expected).max() <= 1 and (found == expected).mean() >= 0.75
