"""ViT-5 backbones for semantic segmentation in OpenMMLab (mmseg 1.x)."""
from . import environment, paths

environment.check()  # one line, before anything fails further in, if a release is outside the ranges

from . import compat  # noqa: E402

compat.apply()

from . import datasets, engine  # noqa: E402,F401  (registers transforms, hooks, the optimizer constructor)
import importlib.util  # noqa: E402

if importlib.util.find_spec('mmdet') is not None:  # the video metrics (mmdet: the [mask2former] extra)
    from . import evaluation  # noqa: F401
from .engine import checkpoint_io  # noqa: E402
from .models import ARCH_PRESETS, ViT5, convert_checkpoint, load_pretrained  # noqa: E402
from .version import __version__  # noqa: E402

checkpoint_io.install()
paths.record_commit()  # a plain copy of this clone names its code too

__all__ = ['ARCH_PRESETS', 'ViT5', 'convert_checkpoint', 'load_pretrained', '__version__']
