from .vit5 import ARCH_PRESETS, ViT5, resolve_arch

__all__ = ['ARCH_PRESETS', 'ViT5', 'resolve_arch']
