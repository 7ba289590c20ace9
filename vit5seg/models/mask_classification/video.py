"""Video segmentation by mask classification as an mmdet tracking model (the task's glue around the
core, as :mod:`.detector` is for images): a clip in, identities kept across its frames. ``test_cfg.task``
picks VidEoMT's rule (:mod:`.video_rules`): instance (YouTube-VIS, OVIS; described below), semantic
(VSPW: a label map a frame) or panoptic (VIPSeg: mmdet's panoptic ids a frame, a thing's the same on
every frame); the metrics of the last two are :mod:`vit5seg.evaluation`'s.

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
are the whole clip's. The semantic rule streams the same way; the panoptic one keeps a segment by its
areas over the whole clip, so it takes whole clips only.

Training (``loss``) is VidEoMT's (``videomt_online``): clips of a few frames run online, each frame's
every supervised prediction a loss image with the image losses (``QueryHead.matched_losses``: class CE,
mask BCE and dice on points), each object matched to one query on the frame where it first appears and
held to it on every frame (:mod:`.video_matching`). VidEoMT's criterion also defines a re-identification
loss, which its ``videomt_online`` computes on no output (its ``pred_reid_embed`` is never made), so it is
not here either.
"""
from typing import List, Optional

import torch
from mmdet.models.mot import BaseMOTModel
from mmdet.registry import MODELS as DET_MODELS
from mmdet.structures import TrackDataSample
from mmengine.registry import DefaultScope
from mmengine.structures import InstanceData, PixelData
from mmseg.registry import MODELS as SEG_MODELS

from .core import MaskClassificationCore
from .postprocess import pair_probabilities
from .video_matching import clip_objects, clip_targets
from .video_rules import video_instances, video_panoptic, video_semantic


@DET_MODELS.register_module()
class VideoMaskClassifier(MaskClassificationCore, BaseMOTModel):
    """A mask-classification model over video in mmdet (its ``TrackDataSample``, its VIS datasets,
    metric and ``VideoSampler``): each clip's frames run online through the decoder, its state carried.

    Args:
        backbone: a ViT5 of mmseg's registry.
        decode_head: a QueryHead of mmseg's registry; ``num_classes`` the dataset's.
        decoder: a registered ``MaskDecoder`` whose state carries from frame to frame
            (``dict(type='VidEoMTDecoder', embed_dims=C)``).
        test_cfg: ``task``: ``'instance'`` (``pred_track_instances``, YouTube-VIS and OVIS), ``'semantic'``
            (``pred_sem_seg`` a frame, VSPW) or ``'panoptic'`` (``pred_panoptic_seg`` a frame, VIPSeg): VidEoMT's
            ``MODEL.VideoMT.TEST.TASK`` vis / vss / vps. ``max_per_video``: the identities a clip keeps
            (``TEST.MAX_NUM``: 10 on YouTube-VIS, ``configs/ytvis19/Base_R50.yaml``). ``object_mask_thr``,
            ``overlap_thr``: the panoptic rule's (``OBJECT_MASK_THRESHOLD``, ``OVERLAP_THRESHOLD``: 0.8 and 0.8,
            ``configs/VIPSeg/Base_R50_720p.yaml``).
        num_things_classes: the panoptic task's things, which come first (mmdet's rule).
        train_cfg: the head's matching and point sampling (``QueryHead``'s ``train_cfg``), where mmdet's
            models keep it; VidEoMT's costs and points are EoMT's (``configs/ytvis19/Base_R50.yaml``).
        data_preprocessor: mmdet's ``TrackDataPreprocessor`` (VidEoMT normalises, then pads with 0 to
            a multiple of its ``SIZE_DIVISIBILITY``: ``pad_size_divisor``).
    """

    TASKS = ('instance', 'semantic', 'panoptic')

    def __init__(self, backbone: dict, decode_head: dict, decoder: dict, test_cfg: Optional[dict] = None,
                 num_things_classes: Optional[int] = None, train_cfg: Optional[dict] = None,
                 data_preprocessor: Optional[dict] = None, init_cfg: Optional[dict] = None):
        with DefaultScope.overwrite_default_scope('mmdet'):   # init_track_model sets no scope: its preprocessor
            super(BaseMOTModel, self).__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        head = dict(decode_head)
        if head.get('train_cfg') is None:  # mmdet's place for it is the model's train_cfg, as the image detector's
            head['train_cfg'] = train_cfg
        with DefaultScope.overwrite_default_scope('mmseg'):   # the head's losses and assigner are mmseg's
            self.backbone = SEG_MODELS.build(backbone)
            self.decode_head = SEG_MODELS.build(head)
            self.build_decoder(decoder)
        if not self.decoder.carries_state:
            raise ValueError(f'{type(self.decoder).__name__} carries nothing from one frame to the next: a video '
                             f'model takes a decoder that does (VidEoMTDecoder)')
        self.num_classes = self.decode_head.num_classes
        self._stream = None   # a video streamed one frame a call: what carries to its next frame
        self.test_cfg = {'task': 'instance', 'max_per_video': 10, 'object_mask_thr': 0.8, 'overlap_thr': 0.8,
                         **(test_cfg or {})}
        task, top = self.test_cfg['task'], self.test_cfg['max_per_video']
        if task not in self.TASKS:
            raise ValueError(f'test_cfg.task={task!r}: a video model predicts one of {self.TASKS}')
        if not isinstance(top, int) or isinstance(top, bool) or top < 1:
            raise ValueError(f'test_cfg.max_per_video must be a positive int (the identities a clip keeps), '
                             f'got {top!r}')
        if task == 'panoptic' and not (isinstance(num_things_classes, int) and
                                       0 <= num_things_classes <= self.num_classes):
            raise ValueError(f'the panoptic task needs num_things_classes (the things among the '
                             f'{self.num_classes} classes, first), got {num_things_classes!r}')
        self.num_things_classes = num_things_classes

    def loss(self, inputs: torch.Tensor, data_samples, **kwargs) -> dict:
        """VidEoMT's training on a batch of clips (B, T, C, H, W): the frames run online, each handed the one
        before's state (gradients flow through it, as upstream), and each supervised prediction of every frame
        is a loss image matched clip-consistently (:mod:`.video_matching`)."""
        if inputs.dim() != 5:
            raise ValueError(f'{type(self).__name__} trains on clips, (B, T, C, H, W); got {tuple(inputs.shape)}')
        T = inputs.shape[1]
        state, frames = None, []
        for t in range(T):
            feats = self.extract_feat(inputs[:, t], state=state)
            state = feats.state
            frames.append(feats)
        frames_gt = [video[t].gt_instances for video in data_samples for t in range(T)]
        clips = clip_objects(frames_gt, T, frames[0].padded_size)
        head, levels, losses = self.decode_head, len(frames[0].class_logits), {}
        for level in range(levels):
            class_logits = torch.stack([f.class_logits[level] for f in frames], 1)    # (B, T, Q, K + 1)
            mask_logits = torch.stack([f.mask_logits[level] for f in frames], 1)      # (B, T, Q, h, w)
            with torch.autocast(inputs.device.type, enabled=False):   # costs decide an assignment: float32
                targets = clip_targets(head.match_masks, class_logits.detach().float(),
                                       mask_logits.detach().float(), clips, self.num_classes)
            prefix = head.level_prefix(level, levels)
            for name, value in head.matched_losses(class_logits.flatten(0, 1), mask_logits.flatten(0, 1),
                                                   *targets).items():
                losses[prefix + name] = value
        return losses

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

    def clip_predictions(self, class_logits: torch.Tensor, masks, padded_size, metas: List[dict],
                         rescale: bool = True) -> list:
        """The task's rule (:mod:`.video_rules`) on a clip's mean class logits and its frames' mask logits -> one
        ``InstanceData`` (instance) or (H, W) map (semantic labels, panoptic ids) a frame."""
        cfg = self.test_cfg
        if cfg['task'] == 'semantic':
            return video_semantic(class_logits, masks, padded_size, metas, rescale)
        if cfg['task'] == 'panoptic':
            return video_panoptic(class_logits, masks, padded_size, metas, self.num_things_classes,
                                  cfg['object_mask_thr'], cfg['overlap_thr'], rescale)
        return video_instances(class_logits, masks, padded_size, metas, cfg['max_per_video'], rescale)

    def stream_frame(self, frame: torch.Tensor, metainfo: dict, rescale: bool = True):
        """The next frame of a video streamed one frame a call (module docstring): ``metainfo``'s ``frame_id``
        0 starts a video, any other must follow the frame before."""
        if self.test_cfg['task'] == 'panoptic':
            raise ValueError(f'{type(self).__name__} keeps a panoptic segment by its areas over the whole clip '
                             '(VidEoMT\'s inference_video_vps): it predicts whole clips, not one frame a call')
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
        predicted, = self.clip_predictions(total / (frame_id + 1), [mask_logits], padded_size, [metainfo], rescale)
        if isinstance(predicted, InstanceData):
            predicted.instances_id = predicted.query_ids * self.num_classes + predicted.labels
        return predicted

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
            predicted = self.clip_predictions(class_logits, masks, padded_size, [f.metainfo for f in frames], rescale)
        field = {'instance': 'pred_track_instances', 'semantic': 'pred_sem_seg',
                 'panoptic': 'pred_panoptic_seg'}[self.test_cfg['task']]
        for sample, prediction in zip(frames, predicted):
            setattr(sample, field,
                    prediction if field == 'pred_track_instances' else PixelData(sem_seg=prediction[None]))
        result = TrackDataSample()
        result.video_data_samples = frames
        return [result]


__all__ = ['VideoMaskClassifier', 'video_instances']
