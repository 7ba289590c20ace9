"""A new query decoder is one file: a throwaway decoder written here (a registered MaskDecoder
subclass, nothing else touched) trains one step in the mmseg segmentor and in the mmdet
detector, its own weights and the shared core's moving, and leaves the checkpoint layout of
the core (``backbone.*``, ``decode_head.*``) as EoMT's; docs/layout.md gives the steps."""
import numpy as np
import pytest
import torch
import torch.nn as nn
from mmengine.config import Config
from mmengine.optim import OptimWrapper
from mmengine.registry import DefaultScope
from mmengine.structures import PixelData
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample

from conftest import REPO
from vit5seg.models.builder import build_segmentor
from vit5seg.models.mask_classification import MaskDecoder, MaskFeatures

TINY_SEMANTIC = REPO / 'configs' / 'tiny' / 'vit5_eomt_synthetic.py'
TINY_PANOPTIC = REPO / 'configs' / 'tiny' / 'vit5_eomt_coco_panoptic_synthetic.py'


@MODELS.register_module(force=True)
class CrossAttentionTestDecoder(MaskDecoder):
    """The whole backbone once, then one cross-attention of the queries on its patch tokens,
    one prediction: a plain decoder on top of the encoder, unlike EoMT's."""

    def __init__(self, dims: int, heads: int = 2):
        super().__init__()
        self.attn = nn.MultiheadAttention(dims, heads, batch_first=True)

    def forward(self, backbone, head, inputs, supervise) -> MaskFeatures:
        B, (H, W) = inputs.shape[0], inputs.shape[-2:]
        x, (h, w), rope = backbone.embed(inputs)
        for blk in backbone.blocks:
            x = blk(x, rope, None)
        patches = backbone.norm(x)[:, 1:1 + h * w]                             # (B, h*w, C)
        queries = head.queries.weight[None].expand(B, -1, -1)
        queries = queries + self.attn(queries, patches, patches, need_weights=False)[0]
        class_logits, mask_logits = head.predict_masks(queries, patches.transpose(1, 2).reshape(B, -1, h, w))
        p = backbone.patch_size
        return MaskFeatures([class_logits], [mask_logits], (H, W), (h * p, w * p))


def trained_one_step(model, data) -> dict:
    """Each parameter's change in one mmengine training step (AdamW), by name."""
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    model.train()
    losses = model.train_step(data, OptimWrapper(torch.optim.AdamW(model.parameters(), lr=1e-2)))
    assert all(torch.isfinite(v).all() for v in losses.values()), losses
    return {k: (v.detach() - before[k]).abs().max().item() for k, v in model.named_parameters()}


def check_moved(change: dict) -> None:
    decoder = [k for k in change if k.startswith('decoder.')]
    assert decoder and all(change[k] > 0 for k in decoder), {k: change[k] for k in decoder}
    for part in ('backbone.', 'decode_head.queries', 'decode_head.class_head', 'decode_head.mask_mlp'):
        assert any(change[k] > 0 for k in change if k.startswith(part)), part
    assert set(k.split('.')[0] for k in change) == {'backbone', 'decode_head', 'decoder'}


def test_a_decoder_written_in_a_test_trains_in_the_mmseg_segmentor():
    cfg = Config.fromfile(str(TINY_SEMANTIC))
    cfg.model.decoder = dict(type='CrossAttentionTestDecoder', dims=cfg.width)
    model = build_segmentor(cfg)
    assert type(model.decoder).__name__ == 'CrossAttentionTestDecoder'
    g = torch.Generator().manual_seed(0)
    samples = []
    for _ in range(2):
        label = torch.randint(0, 4, (1, 96, 96), generator=g)
        sample = SegDataSample(metainfo=dict(img_shape=(96, 96), ori_shape=(96, 96), pad_shape=(96, 96)))
        sample.gt_sem_seg = PixelData(data=label)
        samples.append(sample)
    inputs = [torch.randint(0, 256, (3, 96, 96), generator=g, dtype=torch.uint8) for _ in range(2)]
    check_moved(trained_one_step(model, dict(inputs=inputs, data_samples=samples)))
    model.eval()
    with torch.no_grad():
        (out, *_) = model.predict(torch.randn(1, 3, 80, 112), [SegDataSample(metainfo=dict(
            img_shape=(80, 112), ori_shape=(80, 112)))])
    assert out.pred_sem_seg.data.shape == (1, 80, 112)


def test_a_decoder_written_in_a_test_trains_in_the_mmdet_detector():
    pytest.importorskip('mmdet')
    from mmdet.registry import MODELS as DET_MODELS
    from mmdet.structures import DetDataSample
    from mmdet.structures.mask import BitmapMasks
    from mmengine.structures import InstanceData
    cfg = Config.fromfile(str(TINY_PANOPTIC))
    cfg.model.decoder = dict(type='CrossAttentionTestDecoder', dims=cfg.width)
    with DefaultScope.overwrite_default_scope('mmdet'):
        model = DET_MODELS.build(cfg.model)
    things = cfg.model.num_things_classes
    rng = np.random.default_rng(0)
    samples, inputs = [], []
    for _ in range(2):
        masks = np.zeros((2, 128, 128), np.uint8)
        masks[0, 10:60, 20:90], masks[1, 70:120, 30:100] = 1, 1
        sample = DetDataSample(metainfo=dict(img_shape=(128, 128), ori_shape=(128, 128), pad_shape=(128, 128),
                                             batch_input_shape=(128, 128)))
        sample.gt_instances = InstanceData(labels=torch.tensor([3, 7]), masks=BitmapMasks(masks, 128, 128),
                                           bboxes=torch.tensor([[20., 10., 90., 60.], [30., 70., 100., 120.]]))
        stuff = np.full((1, 128, 128), 255, np.int64)
        stuff[0, :8] = things + 2                                               # one stuff class along the top
        sample.gt_sem_seg = PixelData(sem_seg=torch.from_numpy(stuff))
        samples.append(sample)
        inputs.append(torch.from_numpy(rng.integers(0, 256, (3, 128, 128), dtype=np.uint8)))
    check_moved(trained_one_step(model, dict(inputs=inputs, data_samples=samples)))
    model.eval()
    with torch.no_grad():
        (out,) = model.test_step(dict(inputs=inputs[:1], data_samples=[DetDataSample(metainfo=dict(
            img_shape=(128, 128), ori_shape=(128, 128), scale_factor=(1., 1.)))]))
    assert out.pred_panoptic_seg.sem_seg.shape == (1, 128, 128)


def test_a_decoder_the_registry_does_not_know_is_one_error_naming_it():
    cfg = Config.fromfile(str(TINY_SEMANTIC))
    cfg.model.decoder = dict(type='NoSuchDecoder')
    with pytest.raises(KeyError, match='NoSuchDecoder'):
        build_segmentor(cfg)
