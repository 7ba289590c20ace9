"""The project's EoMT held to the independent reference (tests/reference_eomt.py) at 1e-5,
for the ViT-5, DeiT-III, DINOv2 and DINOv3 presets: every supervised prediction with masks on (P = 1) and
partly dropped (0 < P < 1, seeded), the semantic scores with patch padding, the losses on
given points, the matching, and the backbone's own forward before and after EoMT ran."""
import pytest
import torch
from mmengine.config import Config
from mmengine.structures import PixelData
from mmseg.structures import SegDataSample
from reference_eomt import RefDeiT3, RefDinoV2, RefDinoV3, RefEoMT, losses, match, semantic_targets
from reference_vit5 import RefViT5

from conftest import REPO, perturb
from vit5seg.models.checkpoint import load_pretrained
from vit5seg.models.builder import build_segmentor

TINY = REPO / 'configs' / 'tiny' / 'vit5_eomt_synthetic.py'
DIM, DEPTH, HEADS, QUERIES, MASKED = 64, 4, 2, 12, 2
# the head's parameters: ours -> the authors' EoMT names, which the reference uses
HEAD_NAMES = {'queries.': 'q.', 'mask_mlp.': 'mask_head.', '.up.': '.conv1.', '.dw.': '.conv2.'}


def close(ours, ref):
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)


def build_pair(family, tmp_path, seed=0):
    """(our EoMT, the reference) on the same random weights: the backbone through an
    authors' (ViT-5), timm (DeiT-III, DINOv2) or transformers (DINOv3) checkpoint file, the head
    copied by name."""
    if family == 'vit5':
        ref_backbone = RefViT5(dim=DIM, depth=DEPTH, heads=HEADS).randomize(seed)
        weights = ref_backbone.state_dict()
    elif family == 'deit3':
        ref_backbone = RefDeiT3(dim=DIM, depth=DEPTH, heads=HEADS).randomize(seed)
        weights = ref_backbone.vit.state_dict()
    elif family == 'dinov2':  # as EoMT builds it: timm's DINOv2 with registers at patch 16
        ref_backbone = RefDinoV2(dim=DIM, depth=DEPTH, heads=HEADS).randomize(seed)
        weights = ref_backbone.vit.state_dict()
    else:
        transformers = pytest.importorskip('transformers')
        config = transformers.DINOv3ViTConfig(hidden_size=DIM, intermediate_size=4 * DIM, num_hidden_layers=DEPTH,
                                              num_attention_heads=HEADS, patch_size=16, num_register_tokens=4)
        hf = perturb(transformers.DINOv3ViTModel(config), seed)
        ref_backbone, weights = RefDinoV3(hf, HEADS), hf.state_dict()
    path = tmp_path / f'{family}.pth'
    torch.save({'model': weights}, path)
    cfg = Config.fromfile(str(TINY)).model
    arch = {'dinov2': 'dinov2-small-reg4'}.get(family, f'{family}-small')
    cfg.backbone.update(arch=arch, embed_dims=DIM, num_layers=DEPTH, num_heads=HEADS)
    if family == 'dinov2':
        cfg.backbone.update(patch_size=16, img_size=64)
    cfg.decode_head.update(num_queries=QUERIES, num_blocks=MASKED)
    model = build_segmentor(cfg)
    assert load_pretrained(model.backbone, path) == {'vit5': 'vit5', 'deit3': 'deit3-timm', 'dinov2': 'dinov2-timm',
                                                     'dinov3': 'dinov3-hf'}[family]
    ref = RefEoMT(ref_backbone, DIM, DEPTH, num_classes=150, num_q=QUERIES, num_blocks=MASKED)
    g = torch.Generator().manual_seed(seed + 1)
    head = {}
    with torch.no_grad():
        for name, p in model.decode_head.named_parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g))  # the LayerNorms too, so every weight matters
            for ours, theirs in HEAD_NAMES.items():
                name = name.replace(ours, theirs)
            head[name] = p.detach().clone()
    missing, unexpected = ref.load_state_dict(head, strict=False)
    assert unexpected == [] and all(k.startswith('backbone.') for k in missing)
    return model.eval(), ref.eval()


def labelled(hw, n=2, seed=0):
    """Label maps with stuff halves, two objects, an ignored frame and a fully labelled
    second image; SegDataSamples around them."""
    g = torch.Generator().manual_seed(seed)
    maps, samples = [], []
    for i in range(n):
        label = torch.full(hw, 3)
        label[hw[0] // 2:] = 5
        top, left = torch.randint(0, hw[0] // 2, (2,), generator=g).tolist()
        label[top:top + 20, left:left + 30] = 7 + i
        if i == 0:
            label[:3], label[:, :3] = 255, 255
        maps.append(label)
        s = SegDataSample(metainfo=dict(img_shape=hw, ori_shape=hw, pad_shape=hw))
        s.gt_sem_seg = PixelData(data=label[None])
        samples.append(s)
    return maps, samples


# DINOv2: timm's with registers at patch 16, as EoMT's; DINOv3: its RoPE with the training rescale
FAMILIES = ['vit5', 'deit3', 'dinov2', 'dinov3']
SIZES = [(64, 80), (70, 90)]  # a multiple of the patch, and one that is padded to 80 x 96


@pytest.mark.parametrize('family', FAMILIES)
@pytest.mark.parametrize('hw', SIZES, ids=lambda s: f'{s[0]}x{s[1]}')
@pytest.mark.parametrize('probs', [(1.0, 1.0), (0.6, 0.3)], ids=['P=1', 'P=0.6,0.3'])
def test_every_supervised_prediction_equals_the_reference(family, hw, probs, tmp_path):
    model, ref = build_pair(family, tmp_path)
    x = torch.randn(2, 3, *hw, generator=torch.Generator().manual_seed(2))
    model.train()
    ref.train()  # DINOv3: the RoPE scale drawn first, then the drops
    model.decoder.mask_probs = list(probs)
    with torch.no_grad():
        torch.manual_seed(7)  # the same per-query drops: one torch.rand(B, Q) per masked block with 0 < P < 1
        feats = model.extract_feat(x)
        torch.manual_seed(7)
        expected, (h, w) = ref(x, probs)
    assert feats.padded_size == (h * 16, w * 16) and len(feats.class_logits) == len(expected) == MASKED + 1
    for (cls, masks), ours_cls, ours_masks in zip(expected, feats.class_logits, feats.mask_logits):
        close(ours_cls, cls)
        close(ours_masks, masks)
    # the masks were neither empty nor full, so the threshold decided something
    inside = (torch.nn.functional.interpolate(expected[0][1], size=(h, w), mode='bilinear') > 0).float().mean()
    assert 0.05 < inside < 0.95
    if probs[0] < 1:  # and the drop decided something: another draw, another result
        with torch.no_grad():
            torch.manual_seed(8)
            other, _ = ref(x, probs)
        assert (other[-1][1] - expected[-1][1]).abs().max() > 1e-3


@pytest.mark.parametrize('family', FAMILIES)
@pytest.mark.parametrize('hw', [(64, 80), (70, 90), (50, 33)], ids=lambda s: f'{s[0]}x{s[1]}')
def test_semantic_scores_equal_the_reference(family, hw, tmp_path):
    model, ref = build_pair(family, tmp_path)
    x = torch.randn(1, 3, *hw, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        out = model.predict(x, [SegDataSample(metainfo=dict(img_shape=hw, ori_shape=hw))])[0]
        expected = ref.semantic(x)[0]
    assert out.seg_logits.data.shape == (150, *hw)
    close(out.seg_logits.data, expected)


class GivenPoints:
    """Stands in for the ``torch`` module of mmseg's MatchMasks: its ``rand`` hands out the
    given matching points, everything else is torch's."""

    def __init__(self, points):
        self.points = iter(points)

    def rand(self, *size, **kwargs):
        return next(self.points)[None]

    def __getattr__(self, name):
        return getattr(torch, name)


def given_points(monkeypatch, num_images: int, num_masks: int, num_points: int, predictions: int):
    """Seeded matching points (per prediction, per image: (P, 2)) and loss points (per prediction:
    (M, P, 2)), handed to mmseg's MatchMasks and to the head's point sampling in that order."""
    import mmseg.utils.mask_classification as mask_classification

    import vit5seg.models.mask_classification.core as eomt
    g = torch.Generator().manual_seed(5)
    match_points = [[torch.rand(num_points, 2, generator=g) for _ in range(num_images)] for _ in range(predictions)]
    loss_points = [torch.rand(num_masks, num_points, 2, generator=g) for _ in range(predictions)]
    monkeypatch.setattr(mask_classification, 'torch', GivenPoints([p for layer in match_points for p in layer]))
    given = iter(loss_points)
    monkeypatch.setattr(eomt, 'get_uncertain_point_coords_with_randomness', lambda *args: next(given))
    return match_points, loss_points


@pytest.mark.parametrize('family', FAMILIES)
@pytest.mark.parametrize('hw', SIZES, ids=lambda s: f'{s[0]}x{s[1]}')
def test_losses_on_given_points_equal_the_reference(family, hw, tmp_path, monkeypatch):
    model, ref = build_pair(family, tmp_path)
    maps, samples = labelled(hw)
    x = torch.randn(2, 3, *hw, generator=torch.Generator().manual_seed(4))
    probs = (1.0, 0.5)
    head = model.decode_head
    M = sum(len(semantic_targets(m)[0]) for m in maps)  # every target is matched (Q > targets)
    predictions = MASKED + 1
    match_points, loss_points = given_points(monkeypatch, len(maps), M, head.train_cfg['num_points'], predictions)
    model.train()
    ref.train()
    model.decoder.mask_probs = list(probs)
    torch.manual_seed(9)
    got = head.loss(model.extract_feat(x), samples, model.train_cfg)
    torch.manual_seed(9)
    expected, (h, w) = ref(x, probs)
    for i, (cls, masks) in enumerate(expected):
        prefix = '' if i == predictions - 1 else f'm{i}.'
        want = losses(cls, masks, maps, (h * 16, w * 16), match_points[i], loss_points[i], num_classes=150)
        for ours, theirs in (('loss_cls_ce', 'cls'), ('loss_mask_ce', 'bce'), ('loss_mask_dice', 'dice')):
            close(got[prefix + ours], want[theirs])


def two_queries_two_targets():
    """Query 0 is sure of class 1 and leans to the right half; query 1 is sure of class 2
    and leans to the left half; target class 1 is the left half, class 2 the right. The
    mask logits (+-0.26) are weighed so that EoMT's costs (class 2, BCE 5, dice 5) just
    match by class, and a class weight of 1.75 or less (or heavier mask costs) by mask."""
    class_logits = torch.full((2, 4), -4.0)
    class_logits[0, 1] = class_logits[1, 2] = 4.0
    left = torch.zeros(32, 32)
    left[:, :16] = 1
    masks = torch.stack([(1 - left) * 0.52 - 0.26, left * 0.52 - 0.26])
    return class_logits, masks, torch.tensor([1, 2]), torch.stack([left, 1 - left])


SHIPPED_EOMT = REPO / 'configs' / 'eomt' / 'vit5-large_eomt_ade20k.py'


@pytest.mark.parametrize('class_weight,assignment', [('shipped', [0, 1]), (1.75, [1, 0]), (1.0, [1, 0])])
def test_the_assignment_follows_the_cost_weights(class_weight, assignment, monkeypatch):
    """The head's matching with the shipped EoMT config's costs: by class where EoMT's
    weights (training/mask_classification_semantic.py: class 2.0, mask 5.0, dice 5.0)
    decide so, by mask with a lighter class weight."""
    import mmseg.utils.mask_classification as mask_classification
    from mmengine.structures import InstanceData

    from test_models_eomt import tiny_eomt
    class_logits, mask_logits, classes, targets = two_queries_two_targets()
    points = torch.rand(1024, 2, generator=torch.Generator().manual_seed(0))
    eomt_weights = (2.0 if class_weight == 'shipped' else class_weight, 5.0, 5.0)
    rows, cols = match(class_logits, mask_logits, classes, targets, points, eomt_weights)
    assert [int(c) for _, c in sorted(zip(rows, cols))] == assignment
    train_cfg = Config.fromfile(str(SHIPPED_EOMT)).model.decode_head.train_cfg
    train_cfg.num_points = 1024
    if class_weight != 'shipped':
        train_cfg.assigner.match_costs[0].weight = class_weight
    head = tiny_eomt(num_classes=3, train_cfg=train_cfg).decode_head
    monkeypatch.setattr(mask_classification, 'torch', GivenPoints([points]))
    labels = head.match_masks.get_targets(class_logits[None], mask_logits[None],
                                          [InstanceData(labels=classes, masks=targets.long())])[0]
    assert labels[0, :2].tolist() == classes[assignment].tolist()


def test_the_shipped_recipe_samples_its_points_as_eomt(monkeypatch):
    """EoMT's training/mask_classification_semantic.py: num_points 12544, oversample_ratio
    3.0, importance_sample_ratio 0.75 for the losses; matching on 12544 uniform points. The
    head built from the shipped config passes them on (the other tests give the points)."""
    import vit5seg.models.mask_classification.core as eomt
    from test_models_eomt import labelled_batch, tiny_eomt
    calls = []
    sample = eomt.get_uncertain_point_coords_with_randomness

    def spy(logits, uncertainty, num_points, oversample_ratio, importance_sample_ratio):
        calls.append((num_points, oversample_ratio, importance_sample_ratio))
        return sample(logits, uncertainty, num_points, oversample_ratio, importance_sample_ratio)
    monkeypatch.setattr(eomt, 'get_uncertain_point_coords_with_randomness', spy)
    model = tiny_eomt(train_cfg=Config.fromfile(str(SHIPPED_EOMT)).model.decode_head.train_cfg)
    assert model.decode_head.match_masks.num_points == 12544
    inputs, samples = labelled_batch(1, hw=(64, 64))
    model.train()
    model.loss(inputs, samples)
    assert len(calls) == 3 and set(calls) == {(12544, 3.0, 0.75)}  # one per supervised prediction


@pytest.mark.parametrize('family', FAMILIES)
def test_the_backbones_own_forward_is_the_reference_before_and_after_eomt(family, tmp_path):
    model, ref = build_pair(family, tmp_path)
    bb = model.backbone
    bb.out_indices = (DEPTH - 1,)
    x = torch.randn(2, 3, 80, 112)
    with torch.no_grad():
        expected = ref.backbone.forward_features(x)
        before = bb.forward_features(x)
        model.train()
        model.decoder.mask_probs = [1.0, 0.5]
        model.extract_feat(x)            # queries, masks and the prepended RoPE rows on the way
        model.eval()
        model.extract_feat(x)
        after, (tap,) = bb.forward_features(x), bb(x)
    close(before, expected)
    assert torch.equal(after, before)
    # the tap: the final-normed patch tokens as a map
    close(tap, expected[:, 1:1 + 5 * 7].reshape(2, 5, 7, DIM).permute(0, 3, 1, 2))
