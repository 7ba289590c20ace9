"""VidEoMT's training targets for a clip (tue-mps/videomt ``videomt/modeling/matcher.py``,
``VideoHungarianMatcher_Consistent``, and ``videomt/videomt.py``, ``videomt_online.frame_decoder_loss_reshape``):
each frame of a clip is one image of the loss, and a query keeps one object over the whole clip.

An object is matched once, on the first frame where it is seen: the frames where some object first appears
are taken in order, and on each the Hungarian assignment (mmseg's assigner with the head's costs, on points
sampled uniformly, as :class:`mmseg.utils.MatchMasks`) pairs those objects with the queries no earlier frame
took. The pairs hold on every frame of the clip, also where the object is hidden or gone: there its query is
still taught the object's class, and an empty mask. Every object of the clip counts on every frame
(``num_masks`` = objects x frames, as VidEoMT normalises).

The clip's objects come from mmdet's ``Mask2FormerTrackHead.preprocess_gt`` (the objects seen on some frame,
each frame's mask, -1 where unseen), which Mask2Former-VIS trains on.
"""
from types import SimpleNamespace
from typing import List, Tuple

import torch
import torch.nn.functional as F
from mmcv.ops import point_sample
from mmdet.models.tracking_heads.mask2former_track_head import Mask2FormerTrackHead
from mmengine.structures import InstanceData
from mmseg.utils import MatchMasks


def clip_objects(frames_gt: List[InstanceData], num_frames: int, padded_size: Tuple[int, int]) -> List[InstanceData]:
    """Each clip's objects from its frames' ``gt_instances`` (clip by clip, ``num_frames`` each: ``labels``,
    ``masks``, ``instances_ids``) -> per clip ``labels`` (N,), ``masks`` (N, T, H, W) zero-padded to
    ``padded_size`` (what the mask logits cover), ``instances_id`` (N, T), -1 on a frame where unseen."""
    if num_frames < 2:
        raise ValueError(f'a video model trains on clips of 2 or more frames (VidEoMT: 5), got {num_frames}; '
                         f'its image segmenter trains as EoMT does')
    # mmdet's method reads only num_frames of its head: its own clip grouping, reused as is, on copies (it turns
    # each frame's masks into tensors in place, which would leave the samples unfit for a second call)
    frames_gt = [InstanceData(labels=g.labels, masks=g.masks, instances_ids=g.instances_ids) for g in frames_gt]
    clips = Mask2FormerTrackHead.preprocess_gt(SimpleNamespace(num_frames=num_frames), frames_gt)
    ph, pw = padded_size
    for clip in clips:
        H, W = clip.masks.shape[-2:]
        if (H, W) != (ph, pw):
            clip.masks = F.pad(clip.masks, (0, pw - W, 0, ph - H))
    return clips


def _assign(match_masks: MatchMasks, class_logits: torch.Tensor, mask_logits: torch.Tensor, labels: torch.Tensor,
            masks: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """mmseg's assignment of one image (``MatchMasks._get_targets_single``'s points and assigner) -> the
    matched (query, target) indices, rows sorted."""
    points = torch.rand((1, match_masks.num_points, 2), device=class_logits.device)
    pred_points = point_sample(mask_logits.unsqueeze(1), points.repeat(len(mask_logits), 1, 1)).squeeze(1)
    gt_points = point_sample(masks.unsqueeze(1).float(), points.repeat(len(masks), 1, 1)).squeeze(1)
    return match_masks.assigner.assign(pred_instances=InstanceData(scores=class_logits, masks=pred_points),
                                       gt_instances=InstanceData(labels=labels, masks=gt_points))


def clip_assignment(match_masks: MatchMasks, class_logits: torch.Tensor, mask_logits: torch.Tensor,
                    clip: InstanceData) -> Tuple[torch.Tensor, torch.Tensor]:
    """One clip's (query, object) pairs, each object matched on its first frame to a query no earlier frame
    took (module docstring). ``class_logits`` (T, Q, K + 1), ``mask_logits`` (T, Q, h, w) -> (queries, objects)."""
    seen = clip.instances_id != -1                                         # (N, T)
    first = seen.int().argmax(1)                                           # the frame where each is first seen
    taken = torch.zeros(class_logits.shape[1], dtype=torch.bool, device=class_logits.device)
    queries, objects = [], []
    for frame in sorted(set(first.tolist())):
        new = (first == frame).nonzero().flatten()
        free = (~taken).nonzero().flatten()
        q, o = _assign(match_masks, class_logits[frame, free], mask_logits[frame, free], clip.labels[new],
                       clip.masks[new, frame])
        queries.append(free[q.to(free.device)])
        objects.append(new[o.to(new.device)])
        taken[queries[-1]] = True
    empty = torch.zeros(0, dtype=torch.long, device=class_logits.device)
    return (torch.cat(queries), torch.cat(objects)) if queries else (empty, empty)


def clip_targets(match_masks: MatchMasks, class_logits: torch.Tensor, mask_logits: torch.Tensor,
                 clips: List[InstanceData], num_classes: int) -> tuple:
    """Predictions of B clips, ``class_logits`` (B, T, Q, K + 1) and ``mask_logits`` (B, T, Q, h, w), and their
    objects (:func:`clip_objects`) -> what ``QueryHead.matched_losses`` takes for the B x T frames as images
    (clip by clip, frame by frame): labels (B*T, Q), mask targets (M, H, W), mask weights (B*T, Q), num_masks."""
    B, T, Q = class_logits.shape[:3]
    labels = torch.full((B, T, Q), num_classes, dtype=torch.long, device=class_logits.device)
    weights = torch.zeros((B, T, Q), device=class_logits.device)
    mask_targets, num_masks = [], 0
    for b, clip in enumerate(clips):
        queries, objects = clip_assignment(match_masks, class_logits[b], mask_logits[b], clip)
        order = queries.argsort()                       # matched_losses reads the matched masks in query order
        queries, objects = queries[order], objects[order]
        labels[b][:, queries] = clip.labels[objects].to(labels)
        weights[b][:, queries] = 1
        mask_targets += [clip.masks[objects, t] for t in range(T)]
        num_masks += len(clip.labels) * T
    masks = torch.cat(mask_targets) if mask_targets else class_logits.new_zeros((0,) + mask_logits.shape[-2:])
    return labels.flatten(0, 1), masks, weights.flatten(0, 1), num_masks


__all__ = ['clip_assignment', 'clip_objects', 'clip_targets']
