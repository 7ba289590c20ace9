"""Run at every interpreter start of an environment vit5seg is installed in, through
``vit5seg-mmcv-hint.pth`` in site-packages (a wheel carries it; ``bash tools/bootstrap.sh``
writes it beside an editable install, whose wheel cannot carry one).

Where mmcv has no compiled ops (mmcv-lite, the locked set), mmdet's and mmseg's APIs import
``mmcv._ext`` at import time: ``from mmdet.apis import DetInferencer`` in a fresh interpreter
stopped at ``No module named 'mmcv._ext'``. This adds one finder at the end of
``sys.meta_path`` that turns that into what to do. It imports nothing: full mmcv finds its own
``_ext`` first, and once ``import vit5seg`` has run, vit5seg.compat's stand-in answers.
Separate from the package because importing ``vit5seg`` costs torch and mmseg.
"""
import importlib.abc
import os
import sys

PTH_NAME = 'vit5seg-mmcv-hint.pth'
# silent where this module is gone (an editable install removed, the .pth left behind)
PTH_LINE = ("import importlib.util; importlib.util.find_spec('vit5seg_mmcv_hint') and "
            "__import__('vit5seg_mmcv_hint').install()\n")
MESSAGE = ("mmcv._ext: this environment's mmcv (mmcv-lite) has no compiled ops, which mmdet's and mmseg's APIs "
           "import: run `import vit5seg` first (it stands in for them with pure-PyTorch ops), or install full "
           "mmcv built for your torch")


class MmcvExtHint(importlib.abc.MetaPathFinder):
    """Asked only after every other finder: mmcv's own ``_ext`` is not there."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != 'mmcv._ext' or 'vit5seg.compat' in sys.modules:
            return None
        raise ModuleNotFoundError(MESSAGE, name=fullname)


def install() -> None:
    if not any(type(finder).__name__ == 'MmcvExtHint' for finder in sys.meta_path):
        sys.meta_path.append(MmcvExtHint())


def write_pth(site_packages: str) -> str:
    """Write the .pth into ``site_packages``; returns its path."""
    path = os.path.join(site_packages, PTH_NAME)
    with open(path, 'w') as f:
        f.write(PTH_LINE)
    return path


if __name__ == '__main__':  # python vit5seg_mmcv_hint.py: beside this interpreter's editable install
    import sysconfig
    print(write_pth(sysconfig.get_paths()['purelib']))
