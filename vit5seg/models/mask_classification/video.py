"""Video instance segmentation by mask classification as an mmdet tracking model (the task's glue
around the core, as :mod:`.detector` is for images): a clip in, identities kept across its frames.

The network runs online, one frame at a time: the decoder the config names hands each frame's
``MaskFeatures.state`` to the next (VidEoMT's carried queries, :mod:`.videomt`), so a query
follows what it found without a tracker. The clip's prediction is VidEoMT's
(tue-mps/videomt ``videomt/videomt.py``, ``videomt_online.post_processing`` and
``inference_video_vis``): every query's class logits averaged over the frames, the clip's top
``max_per_video`` (query, class) pairs by softmax probability, and each pair's mask on every frame
(bilinear to the padded input, its padding cut off, bilinear to the frame's original size,
logit > 0). A pair is one identity (``instances_id``: its rank by score, as mmdet's Mask2Former-VIS
numbers them; ``query_ids``: the query that made it), and its score is its class probability on
every frame, which mmdet's ``YouTubeVISMetric`` reads.

Training a video model (VidEoMT's clip-consistent matching and re-identification loss,
``videomt/criterion_videomt.py``) is not here yet: ``loss`` says so.
"""
from typing import List, Optional, Sequence

import torch
import torch.nn.functional as F
from mmdet.models.mot import BaseMOTModel
from mmdet.registry import MODELS as DET_MODELS
from mmdet.structures import TrackDataSample
from mmdet.structures.mask import mask2bbox
from mmengine.registry import DefaultScope
from mmengine.structures import InstanceData
from mmseg.registry import MODELS as SEG_MODELS

from .core import MaskClassificationCore
from .postprocess import top_query_classes


def video_instances(class_logits: torch.Tensor, mask_logits: Sequence[torch.Tensor], padded_size,
                    frame_metas: List[dict], max_per_video: int, rescale: bool = True) -> List[InstanceData]:
    """VidEoMT's clip prediction (module docstring) from the clip's mean class logits (Q, K + 1) and each
    frame's mask logits at the decoder's resolution (Q, h, w), which cover ``padded_size`` of the input
    -> one ``InstanceData`` per frame. Only the kept queries' masks are resized."""
    Q, K = class_logits.shape[0], class_logits.shape[1] - 1
    scores, queries, labels = top_query_classes(class_logits, min(max_per_video, Q * K))
    out = []
    for masks, meta in zip(mask_logits, frame_metas):
        masks = F.interpolate(masks[None, queries], size=tuple(padded_size), mode='bilinear', align_corners=False)
        h, w = meta['img_shape'][:2]
        masks = masks[..., :h, :w]   # the padding cut off
        if rescale:
            masks = F.interpolate(masks, size=tuple(meta['ori_shape'][:2]), mode='bilinear', align_corners=False)
        binary = masks[0] > 0
        out.append(InstanceData(masks=binary, bboxes=mask2bbox(binary), labels=labels, scores=scores,
                                instances_id=torch.arange(len(queries)), query_ids=queries))
    return out


@DET_MODELS.register_module()
class VideoMaskClassifier(MaskClassificationCore, BaseMOTModel):
    """A mask-classification model over video in mmdet (its ``TrackDataSample``, its VIS datasets,
    metric and ``VideoSampler``): each clip's frames run online through the decoder, its state carried.

    Args:
        backbone: a ViT5 of mmseg's registry.
        decode_head: a QueryHead of mmseg's registry; ``num_classes`` the dataset's.
        decoder: a registered ``MaskDecoder`` whose state carries from frame to frame
            (``dict(type='VidEoMTDecoder', embed_dims=C)``).
        test_cfg: ``max_per_video``: the identities a clip keeps (VidEoMT's ``TEST.MAX_NUM``:
            10 on YouTube-VIS, ``configs/ytvis19/Base_R50.yaml``).
        data_preprocessor: mmdet's ``TrackDataPreprocessor`` (VidEoMT normalises, then pads with 0 to
            a multiple of its ``SIZE_DIVISIBILITY``: ``pad_size_divisor``).
    """

    def __init__(self, backbone: dict, decode_head: dict, decoder: dict, test_cfg: Optional[dict] = None,
                 data_preprocessor: Optional[dict] = None, init_cfg: Optional[dict] = None):
        with DefaultScope.overwrite_default_scope('mmdet'):   # init_track_model sets no scope: its preprocessor
            super(BaseMOTModel, self).__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        with DefaultScope.overwrite_default_scope('mmseg'):   # the head's losses and assigner are mmseg's
            self.backbone = SEG_MODELS.build(backbone)
            self.decode_head = SEG_MODELS.build(decode_head)
            self.build_decoder(decoder)
        if not self.decoder.carries_state:
            raise ValueError(f'{type(self.decoder).__name__} carries nothing from one frame to the next: a video '
                             f'model takes a decoder that does (VidEoMTDecoder)')
        self.num_classes = self.decode_head.num_classes
        self.test_cfg = {'max_per_video': 10, **(test_cfg or {})}
        top = self.test_cfg['max_per_video']
        if not isinstance(top, int) or isinstance(top, bool) or top < 1:
            raise ValueError(f'test_cfg.max_per_video must be a positive int (the identities a clip keeps), '
                             f'got {top!r}')

    def loss(self, inputs: torch.Tensor, data_samples, **kwargs) -> dict:
        raise NotImplementedError(f'{type(self).__name__} predicts; training it (VidEoMT\'s clip-consistent '
                                  f'matching and re-identification loss, tue-mps/videomt '
                                  f'videomt/criterion_videomt.py) is not in this release')

    def clip_logits(self, clip: torch.Tensor):
        """The frames of ``clip`` (T, C, H, W) one after another, each handed the one before's state
        -> (the mean class logits (Q, K + 1), each frame's mask logits at the decoder's resolution
        (Q, h, w), the input size they cover)."""
        state, total, masks = None, 0, []
        for frame in clip:
            feats = self.extract_feat(frame[None], state=state)
            class_logits, mask_logits = self.decode_head(feats)
            state, total = feats.state, total + class_logits[0]
            masks.append(mask_logits[0])
        return total / len(clip), masks, feats.padded_size

    def predict(self, inputs: torch.Tensor, data_samples, rescale: bool = True) -> List[TrackDataSample]:
        if inputs.dim() != 5 or len(data_samples) != 1:
            raise ValueError(f'{type(self).__name__} predicts one clip at a time, (1, T, C, H, W) with one '
                             f'TrackDataSample (a batch size of 1, as mmdet\'s video test loops); got '
                             f'{tuple(inputs.shape)} and {len(data_samples)} samples')
        video = data_samples[0]
        class_logits, masks, padded_size = self.clip_logits(inputs[0])
        frames = [video[t] for t in range(len(video))]
        predicted = video_instances(class_logits, masks, padded_size, [f.metainfo for f in frames],
                                    self.test_cfg['max_per_video'], rescale)
        for sample, instances in zip(frames, predicted):
            sample.pred_track_instances = instances
        result = TrackDataSample()
        result.video_data_samples = frames
        return [result]


__all__ = ['VideoMaskClassifier', 'video_instances']
