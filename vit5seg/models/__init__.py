from .backbones import ARCH_PRESETS, ViT5
from .checkpoint import convert_checkpoint, load_pretrained
from .linear_probe import LinearProbeHead
from .mask_classification import EoMTEncoderDecoder, QueryHead

__all__ = ['ARCH_PRESETS', 'EoMTEncoderDecoder', 'LinearProbeHead', 'QueryHead', 'ViT5', 'convert_checkpoint',
           'load_pretrained']
