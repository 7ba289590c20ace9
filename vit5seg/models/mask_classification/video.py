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

Frame by frame (mmdet's ``inference_mot``: one frame a call, its ``frame_id`` counting from 0 and
its ``ori_video_length`` more than 1) the model streams: it keeps
only the carried state and the running sum of the class logits, so memory does not grow with the
video. Each frame's prediction is the same rule on the frames seen so far (their mean class logits,
this frame's masks), and an identity is a (query, class) pair (``instances_id`` = query x classes +
class), so it keeps its id on every frame where it is kept; on a video's last frame the kept pairs
are the whole clip's.

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
from .postprocess import pair_probabilities, top_query_classes


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
        self._stream = None   # a video streamed one frame a call: what carries to its next frame
        self.test_cfg = {'max_per_video': 10, **(test_cfg or {})}
        top = self.test_cfg['max_per_video']
        if not isinstance(top, int) or isinstance(top, bool) or top < 1:
            raise ValueError(f'test_cfg.max_per_video must be a positive int (the identities a clip keeps), '
                             f'got {top!r}')

    def loss(self, inputs: torch.Tensor, data_samples, **kwargs) -> dict:
        raise NotImplementedError(f'{type(self).__name__} predicts; training it (VidEoMT\'s clip-consistent '
                                  f'matching and re-identification loss, tue-mps/videomt '
                                  f'videomt/criterion_videomt.py) is not in this release')

    def frame_logits(self, frame: torch.Tensor, state=None):
        """One frame (C, H, W) handed the previous frame's ``state`` -> (its class logits (Q, K + 1), its mask
        logits at the decoder's resolution (Q, h, w), the input size they cover, the state to hand on)."""
        feats = self.extract_feat(frame[None], state=state)
        class_logits, mask_logits = self.decode_head(feats)
        return class_logits[0], mask_logits[0], feats.padded_size, feats.state

    def clip_logits(self, clip: torch.Tensor):
        """The frames of ``clip`` (T, C, H, W) one after another, each handed the one before's state
        -> (the mean class logits (Q, K + 1), each frame's mask logits at the decoder's resolution
        (Q, h, w), the input size they cover)."""
        state, total, masks = None, 0, []
        for frame in clip:
            class_logits, mask_logits, padded_size, state = self.frame_logits(frame, state)
            total = total + class_logits
            masks.append(mask_logits)
        return total / len(clip), masks, padded_size

    def stream_frame(self, frame: torch.Tensor, metainfo: dict, rescale: bool = True) -> InstanceData:
        """The next frame of a video streamed one frame a call (module docstring): ``metainfo``'s ``frame_id``
        0 starts a video, any other must follow the frame before."""
        frame_id = metainfo.get('frame_id')
        stream = self._stream
        if frame_id != 0 and (stream is None or stream['next'] != frame_id):
            expected = 0 if stream is None else stream['next']
            raise ValueError(f'{type(self).__name__} streams a video one frame a call, in order from frame_id 0: '
                             f'got frame_id {frame_id!r} where frame {expected} comes next')
        state, total = (None, 0) if frame_id == 0 else (stream['state'], stream['total'])
        class_logits, mask_logits, padded_size, state = self.frame_logits(frame, state)
        total = total + class_logits
        self._stream = dict(state=state, total=total, next=frame_id + 1)   # all it keeps: memory stays flat
        instances, = video_instances(total / (frame_id + 1), [mask_logits], padded_size, [metainfo],
                                     self.test_cfg['max_per_video'], rescale)
        instances.instances_id = instances.query_ids * self.num_classes + instances.labels
        return instances

    def stream_scores(self) -> torch.Tensor:
        """(Q, K): each (query, class) pair's probability over the frames streamed so far (their mean class
        logits, softmax without the no-object column); the score :meth:`stream_frame` gives its kept pairs."""
        if self._stream is None:
            raise ValueError(f'{type(self).__name__} has streamed no frame yet')
        return pair_probabilities(self._stream['total'] / self._stream['next'])

    def predict(self, inputs: torch.Tensor, data_samples, rescale: bool = True) -> List[TrackDataSample]:
        if inputs.dim() != 5 or len(data_samples) != 1:
            raise ValueError(f'{type(self).__name__} predicts one clip at a time, (1, T, C, H, W) with one '
                             f'TrackDataSample (a batch size of 1, as mmdet\'s video test loops); got '
                             f'{tuple(inputs.shape)} and {len(data_samples)} samples')
        video = data_samples[0]
        frames = [video[t] for t in range(len(video))]
        if len(frames) == 1 and frames[0].metainfo.get('ori_video_length', 1) > 1:   # one frame a call
            predicted = [self.stream_frame(inputs[0, 0], frames[0].metainfo, rescale)]
        else:
            class_logits, masks, padded_size = self.clip_logits(inputs[0])
            predicted = video_instances(class_logits, masks, padded_size, [f.metainfo for f in frames],
                                        self.test_cfg['max_per_video'], rescale)
        for sample, instances in zip(frames, predicted):
            sample.pred_track_instances = instances
        result = TrackDataSample()
        result.video_data_samples = frames
        return [result]


__all__ = ['VideoMaskClassifier', 'video_instances']
