"""Panoptic and instance segmentation by mask classification as an mmdet detector
(docs/panoptic.md): the tasks' glue around the core.

The network, its per-block predictions, the mask annealing and the loss are the core's
(:class:`.core.MaskClassificationCore`, :class:`.core.QueryHead` and the decoder the config
names, EoMT's by default): one implementation for both libraries, and one checkpoint layout
(``backbone.*``, ``decode_head.*``, a decoder's own ``decoder.*``). What is mmdet's
here is what surrounds it: targets from ``gt_instances`` (things) and ``gt_sem_seg``
(stuff), and mmdet's ``MaskFormerFusionHead``, which with EoMT's thresholds is EoMT's own
panoptic and instance post-processing (tue-mps/eomt training/mask_classification_panoptic.py and _instance.py), into ``DetDataSample``.
"""
from typing import List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from mmdet.models.data_preprocessors import DetDataPreprocessor
from mmdet.models.detectors import MaskFormer, SingleStageDetector
from mmdet.models.utils import preprocess_panoptic_gt
from mmdet.registry import MODELS as DET_MODELS
from mmengine.registry import DefaultScope
from mmengine.structures import InstanceData
from mmseg.registry import MODELS as SEG_MODELS

from .core import EncoderPass, MaskClassificationCore


@DET_MODELS.register_module()
class EoMT(MaskClassificationCore, MaskFormer):
    """EoMT in mmdet: mmdet's MaskFormer (its fusion head, its data samples, its tools)
    whose ``extract_feat`` and loss are EoMT's.

    Args:
        backbone: a ViT5 of mmseg's registry (``type='ViT5'`` or ``'mmseg.ViT5'``) with
            ``final_norm=True``.
        decode_head: a QueryHead of mmseg's registry; ``num_classes`` = things + stuff.
        num_things_classes, num_stuff_classes: things come first (mmdet's rule); instance
            models have no stuff.
        panoptic_fusion_head: mmdet's ``MaskFormerFusionHead``; its class counts are set here.
        test_cfg: the fusion head's (``panoptic_on``, ``instance_on``, ``object_mask_thr``,
            ``iou_thr``, ``filter_low_score``, ``max_per_image``).
        decoder: a registered ``MaskDecoder`` of mmseg's registry (default ``dict(type='EoMTDecoder')``).
    """

    def __init__(self, backbone: dict, decode_head: dict, num_things_classes: int, num_stuff_classes: int,
                 panoptic_fusion_head: Optional[dict] = None, train_cfg: Optional[dict] = None,
                 test_cfg: Optional[dict] = None, data_preprocessor: Optional[dict] = None,
                 init_cfg: Optional[dict] = None, decoder: Optional[dict] = None):
        # MaskFormer builds a query decoder head: straight to the detector base, as MaskFormer does
        super(SingleStageDetector, self).__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        head = dict(decode_head)
        if head.get('train_cfg') is None:  # mmdet's place for it is the model's train_cfg
            head['train_cfg'] = train_cfg
        # in mmseg's scope: the head's losses and assigner are mmseg's (mmdet has others of those names)
        with DefaultScope.overwrite_default_scope('mmseg'):
            self.backbone = SEG_MODELS.build(backbone)
            self.decode_head = SEG_MODELS.build(head)
            self.build_decoder(decoder)
        self.num_things_classes, self.num_stuff_classes = num_things_classes, num_stuff_classes
        self.num_classes = num_things_classes + num_stuff_classes
        if self.decode_head.num_classes != self.num_classes:
            raise ValueError(f'decode_head.num_classes={self.decode_head.num_classes} differs from '
                             f'num_things_classes + num_stuff_classes = {self.num_classes}')
        fusion = dict(panoptic_fusion_head or dict(type='MaskFormerFusionHead'))
        fusion.update(num_things_classes=num_things_classes, num_stuff_classes=num_stuff_classes,
                      test_cfg=test_cfg)
        self.panoptic_fusion_head = DET_MODELS.build(fusion)
        self.train_cfg, self.test_cfg = train_cfg, test_cfg

    def targets(self, batch_data_samples) -> List[InstanceData]:
        """Per image: things (``gt_instances``; crowd ones are mmdet's ``ignored_instances``,
        so dropped as EoMT's training drops them) then one mask per stuff class of
        ``gt_sem_seg`` (panoptic models)."""
        gts = []
        for sample in batch_data_samples:
            sem = sample.gt_sem_seg.sem_seg if self.num_stuff_classes and 'gt_sem_seg' in sample else None
            labels, masks = preprocess_panoptic_gt(sample.gt_instances.labels, sample.gt_instances.masks, sem,
                                                   self.num_things_classes, self.num_stuff_classes)
            gts.append(InstanceData(labels=labels, masks=masks))
        return gts

    def loss(self, batch_inputs: torch.Tensor, batch_data_samples) -> dict:
        return self.decode_head.loss_targets(self.extract_feat(batch_inputs), self.targets(batch_data_samples))

    def predict_logits(self, batch_inputs: Optional[torch.Tensor],
                       encoded: Optional[EncoderPass] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """Class logits (B, Q, K + 1) and mask logits (B, Q, H, W) at the input's (padded) size, of
        ``batch_inputs`` or of an encoder pass already made (``encoded``)."""
        feats = self.extract_feat(batch_inputs, encoded)
        class_logits, mask_logits = self.decode_head(feats)
        # EoMT: bilinear to the padded input; the fusion head crops the padding, then resizes
        masks = F.interpolate(mask_logits, size=feats.padded_size, mode='bilinear', align_corners=False)
        H, W = feats.input_size
        return class_logits, masks[..., :H, :W]

    def predict(self, batch_inputs: torch.Tensor, batch_data_samples, rescale: bool = True):
        return self.predict_encoded(None, batch_data_samples, rescale, batch_inputs)

    def predict_encoded(self, encoded: Optional[EncoderPass], batch_data_samples, rescale: bool = True,
                        batch_inputs: Optional[torch.Tensor] = None):
        """mmdet's ``predict`` from an encoder pass already made (one shared by several tasks' decoders)."""
        class_logits, masks = self.predict_logits(batch_inputs, encoded)
        results = self.panoptic_fusion_head.predict(class_logits, masks, batch_data_samples, rescale=rescale)
        return self.add_pred_to_datasample(batch_data_samples, results)

    def _forward(self, batch_inputs: torch.Tensor, batch_data_samples=None):
        return self.predict_logits(batch_inputs)


@DET_MODELS.register_module()
class EoMTDetDataPreprocessor(DetDataPreprocessor):
    """mmdet's data preprocessor that first pads each image bottom/right to ``pad_size``
    with raw 0, as EoMT does before normalising (mmdet's own padding comes after the
    normalisation, with 0 in normalised space, which is the mean colour, not black);
    ``img_shape`` stays the unpadded image's, so the prediction's padding is cut off."""

    def __init__(self, pad_size: Sequence[int], **kwargs):
        super().__init__(**kwargs)
        self.pad_size = tuple(pad_size)

    def forward(self, data: dict, training: bool = False) -> dict:
        H, W = self.pad_size
        padded = []
        for img in data['inputs']:
            h, w = img.shape[-2:]
            if h > H or w > W:
                raise ValueError(f'an image of {h}x{w} is larger than the data preprocessor\'s pad_size '
                                 f'{H}x{W}: resize it to fit first (the test pipeline\'s Resize keeps the ratio '
                                 f'within the pad size)')
            padded.append(F.pad(img, (0, W - w, 0, H - h), value=0))
        return super().forward(dict(data, inputs=padded), training)
