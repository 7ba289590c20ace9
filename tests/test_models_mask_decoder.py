"""A new query decoder is one file: a throwaway decoder written here (a registered MaskDecoder
subclass, nothing else touched) trains one step in the mmseg segmentor and in the mmdet
detector, its own weights and the shared core's moving, and leaves the checkpoint layout of
the core (``backbone.*``, ``decode_head.*``) as EoMT's. A new task is one file too: a model
written here carries its queries from frame to frame of a clip through the core and trains.
docs/layout.md gives the steps."""
import numpy as np
import pytest
import torch
import torch.nn as nn
from mmengine.config import Config
from mmengine.model import BaseModel
from mmengine.optim import OptimWrapper
from mmengine.registry import DefaultScope
from mmengine.structures import PixelData
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample
from mmseg.utils import seg_data_to_instance_data

from conftest import REPO
from vit5seg.models.builder import build_segmentor
from vit5seg.models.mask_classification import MaskClassificationCore, MaskDecoder, MaskFeatures

TINY_SEMANTIC = REPO / 'configs' / 'tiny' / 'vit5_eomt_synthetic.py'
TINY_PANOPTIC = REPO / 'configs' / 'tiny' / 'vit5_eomt_coco_panoptic_synthetic.py'


@MODELS.register_module(force=True)
class CrossAttentionTestDecoder(MaskDecoder):
    """One cross-attention of the queries on the encoder's last normed tokens, one prediction: a plain
    decoder on top of the encoder, unlike EoMT's. It names its tap (the last block) and so reads it from
    the base's encode, as it would from a pass shared with other decoders."""

    def __init__(self, dims: int, heads: int = 2):
        super().__init__()
        self.attn = nn.MultiheadAttention(dims, heads, batch_first=True)

    def check_parts(self, backbone, head):
        super().check_parts(backbone, head)
        self.tap_indices = (backbone.num_layers - 1,)

    def decode(self, backbone, head, encoded, supervise, state=None) -> MaskFeatures:
        (tokens,), (h, w) = encoded.taps, encoded.grid
        B = tokens.shape[0]
        patches = tokens[:, 1:1 + h * w]                                           # (B, h*w, C)
        queries = head.queries.weight[None].expand(B, -1, -1)
        if state is not None:                          # a task that carries the last call's output queries
            queries = queries + state
        queries = queries + self.attn(queries, patches, patches, need_weights=False)[0]
        class_logits, mask_logits = head.predict_masks(queries, patches.transpose(1, 2).reshape(B, -1, h, w))
        p = backbone.patch_size
        return MaskFeatures([class_logits], [mask_logits], encoded.input_size, (h * p, w * p), state=queries)


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


@MODELS.register_module(force=True)
class ClipTestModel(MaskClassificationCore, BaseModel):
    """A task written here, touching no other file: a clip (B, T, 3, H, W) frame by frame through the
    core, each frame's decoder given what the last one handed on (``MaskFeatures.state``), each frame's
    prediction supervised by its own label map; mmengine's BaseModel does the training step."""

    def __init__(self, backbone: dict, decode_head: dict, decoder: dict, data_preprocessor=None):
        super().__init__(data_preprocessor=data_preprocessor)
        self.backbone, self.decode_head = MODELS.build(backbone), MODELS.build(decode_head)
        self.build_decoder(decoder)

    def frames(self, clip: torch.Tensor) -> list:
        state, out = None, []
        for t in range(clip.shape[1]):
            feats = self.extract_feat(clip[:, t], state=state)
            state = feats.state
            out.append(feats)
        return out

    def forward(self, inputs, data_samples=None, mode='tensor'):
        feats = self.frames(inputs)
        if mode != 'loss':
            return [self.decode_head(f) for f in feats]
        losses = {}
        for t, f in enumerate(feats):
            gts = seg_data_to_instance_data(255, [clip[t] for clip in data_samples])
            for name, value in self.decode_head.loss_targets(f, gts).items():
                losses[f'frame{t}.{name}'] = value
        return losses


def clip_model():
    cfg = Config.fromfile(str(TINY_SEMANTIC))
    return MODELS.build(dict(type='ClipTestModel', backbone=cfg.model.backbone, decode_head=cfg.model.decode_head,
                             decoder=dict(type='CrossAttentionTestDecoder', dims=cfg.width)))


def test_a_task_written_in_a_test_carries_its_queries_through_a_clip_and_trains_one_step():
    torch.manual_seed(0)
    model = clip_model()
    clip = torch.randn(2, 3, 3, 64, 64, requires_grad=True)
    # the third frame's prediction depends on the first frame's pixels only through the carried queries
    (class_logits, _) = model(clip)[2]
    class_logits.sum().backward()
    assert clip.grad[:, 0].abs().sum() > 0 and clip.grad[:, 2].abs().sum() > 0
    g = torch.Generator().manual_seed(1)
    samples = []
    for _ in range(2):
        frames = []
        for _ in range(3):
            sample = SegDataSample(metainfo=dict(img_shape=(64, 64)))
            sample.gt_sem_seg = PixelData(data=torch.randint(0, 4, (1, 64, 64), generator=g))
            frames.append(sample)
        samples.append(frames)
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    model.train()
    losses = model.train_step(dict(inputs=clip.detach(), data_samples=samples),
                              OptimWrapper(torch.optim.AdamW(model.parameters(), lr=1e-2)))
    assert {k.split('.')[0] for k in losses} == {'loss', 'frame0', 'frame1', 'frame2'}  # and their sum
    assert all(torch.isfinite(v).all() for v in losses.values()), losses
    moved = {k for k, v in model.named_parameters() if not torch.equal(v, before[k])}
    assert any(k.startswith('decoder.attn') for k in moved) and any(k.startswith('backbone.') for k in moved)


def test_a_decoder_that_carries_nothing_refuses_a_state():
    from vit5seg.models.mask_classification import EoMTDecoder
    cfg = Config.fromfile(str(TINY_SEMANTIC))
    model = MODELS.build(dict(type='ClipTestModel', backbone=cfg.model.backbone, decode_head=cfg.model.decode_head,
                              decoder=dict(type='EoMTDecoder')))
    assert isinstance(model.decoder, EoMTDecoder)
    assert all(f.state is None for f in model.frames(torch.randn(1, 2, 3, 64, 64)))   # it hands nothing on
    with pytest.raises(ValueError, match='EoMTDecoder carries no state'):
        model.extract_feat(torch.randn(1, 3, 64, 64), state=torch.zeros(1, 16, cfg.width))
