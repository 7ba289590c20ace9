"""A panoptic or instance EoMT (mmdet's ``EoMT`` detector) as one ONNX graph, photo in.

Input ``image``: float32 (1, 3, H, W), the photo as cv2 reads it (BGR, 0-255). In the graph, as
the config's test pipeline and the model do: the long side to the config's square (bilinear with
antialiasing, as PIL resizes, rounded to whole levels as PIL's uint8 result), raw 0 padding to
the square, the mean/std, the network, the mask logits bilinearly to the square, cut to the
resized image and resized to the photo, then mmdet's ``MaskFormerFusionHead`` rule written
without data-dependent shapes (:mod:`vit5seg.models.mask_classification.postprocess`):

- panoptic: ``panoptic`` (H, W) int64 ids as mmdet's (class + instance x 1000, stuff: the class,
  void: the number of classes) and a segment table over the queries: ``segment_ids``,
  ``labels``, ``scores`` (-1 where a query makes no segment);
- instance: ``masks`` (100, H, W) bool, ``labels``, ``scores``, highest class probability first;
- both: ``class_logits`` (Q, K + 1) and ``mask_logits`` (Q, H, W), what mmdet's fusion head is given
  (the export's check holds them to mmdet's: :mod:`.agreement`).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..models.mask_classification.postprocess import instance_rule, panoptic_rule
from .runtime import LOGIT_OUTPUTS


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
            decided = panoptic_rule(class_logits[0], masks[0], self.detector.num_things_classes,
                                    self.object_mask_thr, self.iou_thr)
        else:
            decided = instance_rule(class_logits[0], masks[0], self.max_per_image)
        return (*decided, class_logits[0], masks[0])


OUTPUTS = {'panoptic': ['panoptic', 'segment_ids', 'labels', 'scores', *LOGIT_OUTPUTS],
           'instance': ['masks', 'labels', 'scores', *LOGIT_OUTPUTS]}
