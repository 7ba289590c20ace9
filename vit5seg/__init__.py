"""ViT-5 backbones for semantic segmentation in OpenMMLab (mmseg 1.x)."""
from . import compat

compat.apply()

from . import datasets, engine  # noqa: E402,F401  (registers transforms, hooks, the optimizer constructor)
from .engine import checkpoint_io  # noqa: E402
from .models import ARCH_PRESETS, ViT5, convert_checkpoint, load_pretrained  # noqa: E402

checkpoint_io.install()

__version__ = '0.1.0'
__all__ = ['ARCH_PRESETS', 'ViT5', 'convert_checkpoint', 'load_pretrained', '__version__']
