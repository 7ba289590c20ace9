import importlib.util

from .backbones import ARCH_PRESETS, ViT5
from .checkpoint import convert_checkpoint, load_pretrained
from .eomt import EoMTEncoderDecoder, EoMTHead

if importlib.util.find_spec('mmdet') is not None:  # panoptic and instance EoMT (mmdet: the [mask2former] extra)
    from . import eomt_det  # noqa: F401  (registers EoMT and its data preprocessor in mmdet)

__all__ = ['ARCH_PRESETS', 'EoMTEncoderDecoder', 'EoMTHead', 'ViT5', 'convert_checkpoint', 'load_pretrained']
