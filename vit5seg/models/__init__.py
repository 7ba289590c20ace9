from .backbones import ARCH_PRESETS, ViT5
from .checkpoint import convert_checkpoint, load_pretrained

__all__ = ['ARCH_PRESETS', 'ViT5', 'convert_checkpoint', 'load_pretrained']
