"""Meta's linear probe of frozen features (facebookresearch/dinov3
dinov3/eval/segmentation/models/heads/linear_head.py, ``LinearHead``) as an mmseg decode head.

Meta's head is BatchNorm and a 1x1 convolution over the backbone's taps, resized to the first
and concatenated, with a channel dropout before the BatchNorm while training. mmseg's
``BaseDecodeHead`` has the dropout and the convolution (``conv_seg``, initialised N(0, 0.01)
with bias 0 as Meta's) but puts the dropout after the features, just before ``conv_seg``, and
has no norm of its own: this head adds the norm and keeps Meta's order.
"""
from typing import List, Sequence, Union

import torch
from mmcv.cnn import build_norm_layer
from mmseg.models.decode_heads.decode_head import BaseDecodeHead
from mmseg.registry import MODELS


@MODELS.register_module()
class LinearProbeHead(BaseDecodeHead):
    """Per-pixel classes from frozen features: dropout (training), BatchNorm, 1x1 conv.

    Args:
        in_channels: the width of the tap (an int), or of each tap (a list: they are resized
            to the first and concatenated, mmseg's ``input_transform='resize_concat'``).
        num_classes: the classes of the dataset.
        dropout_ratio: Meta's ``Dropout2d(0.1)``.
        norm_cfg: Meta's ``SyncBatchNorm`` (``None``: no norm, Meta's ``use_batchnorm=False``).
        align_corners: of the resizes (Meta's: False).
    """

    def __init__(self, in_channels: Union[int, Sequence[int]], num_classes: int, dropout_ratio: float = 0.1,
                 norm_cfg: dict = dict(type='SyncBN', requires_grad=True), align_corners: bool = False, **kwargs):
        many = not isinstance(in_channels, int)
        if many:
            in_channels = list(in_channels)
            kwargs.setdefault('in_index', list(range(len(in_channels))))
            kwargs.setdefault('input_transform', 'resize_concat')
        channels = sum(in_channels) if many else in_channels
        super().__init__(in_channels=in_channels, channels=channels, num_classes=num_classes,
                         dropout_ratio=dropout_ratio, norm_cfg=norm_cfg, align_corners=align_corners, **kwargs)
        self.bn = build_norm_layer(norm_cfg, channels)[1] if norm_cfg else torch.nn.Identity()

    def forward(self, inputs: List[torch.Tensor]) -> torch.Tensor:
        """Taps, each (B, C_i, h, w) -> class logits (B, K, h, w) at the first tap's size."""
        x = self._transform_inputs(inputs)          # (B, sum C_i, h, w)
        if self.dropout is not None:
            x = self.dropout(x)
        return self.conv_seg(self.bn(x))


__all__ = ['LinearProbeHead']
