"""Segmentation by mask classification: a core every query decoder uses, the decoders (EoMT's
last blocks, VidEoMT's queries carried on them from frame to frame, PMT's plain mask decoder),
one module per task's glue (mmseg's segmentor; mmdet's detector, panoptic and instance), the
post-processing rules graphs use, and the release tables. docs/layout.md says where a new task,
decoder or release kind goes."""
import importlib.util

from .core import EncoderPass, MaskClassificationCore, MaskDecoder, MaskFeatures, QueryHead
from .eomt import EoMTDecoder
from .pmt import PMTDecoder
from .segmentor import EoMTEncoderDecoder
from .videomt import VidEoMTDecoder

if importlib.util.find_spec('mmdet') is not None:  # panoptic and instance (mmdet: the [mask2former] extra)
    from .detector import EoMT, EoMTDetDataPreprocessor  # noqa: F401  (registered in mmdet)
    from .video import VideoMaskClassifier  # noqa: F401  (video instance segmentation, registered in mmdet)

__all__ = ['EncoderPass', 'EoMTDecoder', 'EoMTEncoderDecoder', 'MaskClassificationCore', 'MaskDecoder', 'MaskFeatures',
           'PMTDecoder', 'QueryHead', 'VidEoMTDecoder']
