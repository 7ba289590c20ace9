"""A panoptic or instance EoMT (mmdet's ``EoMT`` detector) as one ONNX graph, photo in.

Input ``image``: float32 (1, 3, H, W), the photo as cv2 reads it (BGR, 0-255). In the graph, as
the config's test pipeline and the model do: the long side to the config's square (bilinear with
antialiasing, as PIL resizes, rounded to whole levels as PIL's uint8 result), raw 0 padding to
the square, the mean/std, the network, the mask logits bilinearly to the square, cut to the
resized image and resized to the photo, then mmdet's ``MaskFormerFusionHead`` rule written
without data-dependent shapes:

- panoptic: ``panoptic`` (H, W) int64 ids as mmdet's (class + instance x 1000, stuff: the class,
  void: the number of classes) and a segment table over the queries: ``segment_ids``,
  ``labels``, ``scores`` (-1 where a query makes no segment);
- instance: ``masks`` (100, H, W) bool, ``labels``, ``scores``, highest class probability first.

mmdet's rule loops over the kept queries; here every query is scored at once and masked, which
is the same rule: a query that is not kept never wins a pixel and makes no segment.
"""
from typing import Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..apis.infer_det import INSTANCE_OFFSET


def panoptic_rule(class_logits: torch.Tensor, mask_logits: torch.Tensor, num_things: int,
                  object_mask_thr: float = 0.8, iou_thr: float = 0.8
                  ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """mmdet's ``panoptic_postprocess`` with ``filter_low_score=True`` on (Q, K + 1) class and
    (Q, H, W) mask logits -> panoptic ids (H, W), and per query its segment's id, class and
    score (-1 where it makes none)."""
    Q, K = class_logits.shape[0], class_logits.shape[1] - 1
    scores, labels = class_logits.softmax(-1).max(-1)                       # (Q,)
    masks = mask_logits.sigmoid()                                           # (Q, H, W)
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


def instance_rule(class_logits: torch.Tensor, mask_logits: torch.Tensor, max_per_image: int = 100
                  ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """mmdet's ``instance_postprocess`` (a model without stuff classes): the top
    ``max_per_image`` of queries x classes, masks > 0, score = class probability x the mean mask
    probability inside the mask -> masks (N, H, W), labels, scores, by class probability."""
    K = class_logits.shape[1] - 1
    probs = class_logits.softmax(-1)[:, :-1]
    top, index = probs.flatten().topk(max_per_image)
    masks = mask_logits[torch.div(index, K, rounding_mode='floor')]
    binary = masks > 0
    inside = (masks.sigmoid() * binary).flatten(1).sum(1) / (binary.flatten(1).sum(1) + 1e-6)
    return binary, index % K, top * inside


class OnnxDetector(nn.Module):
    """What mmdet's ``inference_detector`` computes for one photo with an EoMT config."""

    def __init__(self, detector: nn.Module, side: int, task: str):
        super().__init__()
        self.detector, self.side, self.task = detector, side, task
        pre = detector.data_preprocessor
        self.bgr_to_rgb = bool(pre._channel_conversion)
        self.register_buffer('mean', pre.mean.detach().clone().float().view(1, 3, 1, 1))
        self.register_buffer('std', pre.std.detach().clone().float().view(1, 3, 1, 1))
        cfg = detector.test_cfg or {}
        self.object_mask_thr, self.iou_thr = cfg.get('object_mask_thr', 0.8), cfg.get('iou_thr', 0.8)
        self.max_per_image = cfg.get('max_per_image', 100)

    def resized_size(self, H, W):
        """mmcv's keep-ratio rescale to the square: the long side to ``side``, sides rounded."""
        long = torch.sym_max(H, W)
        return (H * self.side + long // 2) // long, (W * self.side + long // 2) // long

    def resize(self, image: torch.Tensor) -> torch.Tensor:
        """The test pipeline's keep-ratio ``Resize`` (PIL's bilinear on the uint8 photo), in floats."""
        x = F.interpolate(image, size=self.resized_size(*image.shape[2:]), mode='bilinear', align_corners=False,
                          antialias=True)
        return x.round().clamp(0, 255)                                  # PIL's result is whole levels

    def forward(self, image: torch.Tensor):
        H, W = image.shape[2:]
        x = self.resize(image)
        h, w = x.shape[2:]
        x = F.pad(x, (0, self.side - w, 0, self.side - h), value=0.0)  # EoMT's raw-0 padding
        x = x.flip(1) if self.bgr_to_rgb else x
        x = (x - self.mean) / self.std
        class_logits, masks = self.detector.predict_logits(x)           # masks bilinear to (side, side)
        masks = F.interpolate(masks[..., :h, :w], size=(H, W), mode='bilinear', align_corners=False)
        if self.task == 'panoptic':
            return panoptic_rule(class_logits[0], masks[0], self.detector.num_things_classes,
                                 self.object_mask_thr, self.iou_thr)
        return instance_rule(class_logits[0], masks[0], self.max_per_image)


OUTPUTS = {'panoptic': ['panoptic', 'segment_ids', 'labels', 'scores'], 'instance': ['masks', 'labels', 'scores']}
