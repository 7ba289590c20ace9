"""mmdet's ``MaskFormerFusionHead`` rules (``panoptic_postprocess``, ``instance_postprocess``)
written without data-dependent shapes, for graphs (the ONNX export of a panoptic or instance
model, :mod:`vit5seg.deploy.detector`): every query is scored at once and masked, which is the
same rule as mmdet's loop over the kept queries: a query that is not kept never wins a pixel
and makes no segment. tests/test_deploy_detector.py holds both to mmdet's fusion head.
"""
from typing import Tuple

import torch
from mmdet.evaluation.functional import INSTANCE_OFFSET


def panoptic_rule(class_logits: torch.Tensor, mask_logits: torch.Tensor, num_things: int,
                  object_mask_thr: float = 0.8, iou_thr: float = 0.8
                  ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """mmdet's ``panoptic_postprocess`` with ``filter_low_score=True`` on (Q, K + 1) class and
    (Q, H, W) mask logits -> panoptic ids (H, W), and per query its segment's id, class and
    score (-1 where it makes none)."""
    return panoptic_fusion(class_logits, mask_logits.sigmoid(), num_things, object_mask_thr, iou_thr)


def panoptic_fusion(class_logits: torch.Tensor, masks: torch.Tensor, num_things: int, object_mask_thr: float = 0.8,
                    iou_thr: float = 0.8) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`panoptic_rule` on mask probabilities (Q, H, W) instead of logits (VidEoMT resizes them after
    the sigmoid, :mod:`.video_rules`)."""
    Q, K = class_logits.shape[0], class_logits.shape[1] - 1
    scores, labels = class_logits.softmax(-1).max(-1)                       # (Q,)
    keep = (labels != K) & (scores > object_mask_thr)
    # a query that is not kept scores -1: below every kept one, so it wins no pixel
    weighted = torch.where(keep[:, None, None], scores[:, None, None] * masks, -1.0)
    winner = weighted.argmax(0)                                             # (H, W)
    queries = torch.arange(Q, device=class_logits.device)
    area = (winner[None] == queries[:, None, None]).sum((1, 2))             # pixels each query wins
    original = (masks >= 0.5).sum((1, 2))
    made = keep & (area > 0) & (original > 0) & (area.float() / original.clamp(min=1).float() >= iou_thr)
    thing = labels < num_things
    number = torch.cumsum((made & thing).long(), 0)                         # mmdet's instance_id, from 1
    ids = torch.where(thing, labels + number * INSTANCE_OFFSET, labels)
    ids = torch.where(made, ids, -1)
    inside = masks.gather(0, winner[None])[0] >= 0.5
    chosen = ids[winner]
    panoptic = torch.where(inside & (chosen >= 0), chosen, K)
    return (panoptic, ids, torch.where(made, labels, -1),
            torch.where(made, scores, torch.full_like(scores, -1.0)))


def pair_probabilities(class_logits: torch.Tensor) -> torch.Tensor:
    """(Q, K + 1) class logits -> (Q, K): each (query, class) pair's softmax probability, no-object left out."""
    return class_logits.softmax(-1)[:, :-1]


def top_query_classes(class_logits: torch.Tensor, k: int) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ``k`` best (query, class) pairs of (Q, K + 1) class logits by softmax probability, no-object
    left out (mmdet's ``instance_postprocess``, VidEoMT's ``inference_video_vis``) -> their
    probabilities, queries and classes, best first."""
    K = class_logits.shape[1] - 1
    top, index = pair_probabilities(class_logits).flatten().topk(k)
    return top, torch.div(index, K, rounding_mode='floor'), index % K


def instance_rule(class_logits: torch.Tensor, mask_logits: torch.Tensor, max_per_image: int = 100
                  ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """mmdet's ``instance_postprocess`` (a model without stuff classes): the top
    ``max_per_image`` of queries x classes, masks > 0, score = class probability x the mean mask
    probability inside the mask -> masks (N, H, W), labels, scores, by class probability."""
    top, queries, labels = top_query_classes(class_logits, max_per_image)
    masks = mask_logits[queries]
    binary = masks > 0
    inside = (masks.sigmoid() * binary).flatten(1).sum(1) / (binary.flatten(1).sum(1) + 1e-6)
    return binary, labels, top * inside


__all__ = ['instance_rule', 'pair_probabilities', 'panoptic_fusion', 'panoptic_rule', 'top_query_classes']
