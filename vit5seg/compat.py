"""Fixes for running the OpenMMLab 2023 releases (mmengine 0.10.7, mmcv-lite 2.1.0,
mmsegmentation 1.2.2) on torch 2.14 / current setuptools. One function per fix, each
applied once by ``import vit5seg`` and each covered by a test in tests/test_compat.py.
"""
import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import os.path as osp
import sys
import types

_applied = False


# --- 1. mmcv-lite has no compiled ``mmcv._ext`` -------------------------------------
# mmcv 2.1.0 cannot be compiled against torch 2.14, and mmcv-lite ships no ``_ext``,
# yet ``import mmseg.models`` imports ``mmcv.ops``, which loads it. The stand-in lets
# every import succeed; an op that is really called raises ModuleNotFoundError (the
# error mmseg's guarded imports expect) naming the op. A real compiled ``_ext`` is
# always found first: the finder sits at the end of ``sys.meta_path``.

class MissingMmcvOp(ModuleNotFoundError):
    pass


def _missing_op(name: str):
    def op(*args, **kwargs):
        raise MissingMmcvOp(
            f"mmcv compiled op '{name}' is not available: this environment uses mmcv-lite "
            '(no CUDA/C++ ops; see README "Why mmcv-lite"). Use a pure-PyTorch head, or '
            'the docker image with full mmcv.', name='mmcv._ext')
    op.__name__ = name
    return op


class _ExtStandIn(types.ModuleType):
    is_vit5seg_standin = True

    def __getattr__(self, name):
        if name.startswith('__'):
            raise AttributeError(name)
        return _missing_op(name)


class _ExtStandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    name = 'mmcv._ext'

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        # A proper spec: pkgutil.find_loader (used by mmengine) rejects a module without one.
        return importlib.machinery.ModuleSpec(fullname, self, origin='vit5seg.compat')

    def create_module(self, spec):
        return _ExtStandIn(spec.name)

    def exec_module(self, module):
        pass


def install_mmcv_ext_standin() -> None:
    if not any(isinstance(f, _ExtStandInFinder) for f in sys.meta_path):
        sys.meta_path.append(_ExtStandInFinder())


# --- 2. setuptools >= 81 has no ``pkg_resources`` ---------------------------------
# mmengine looks packages up through pkg_resources, so ``_base_ = 'mmseg::...'`` configs
# fail. The same lookups through importlib.metadata replace them.

def _module_name(dist: importlib.metadata.Distribution, package: str) -> str:
    top = (dist.read_text('top_level.txt') or '').split()
    return top[0] if top else package.replace('-', '_')


def is_installed(package: str) -> bool:
    try:
        importlib.metadata.distribution(package)
        return True
    except importlib.metadata.PackageNotFoundError:
        spec = importlib.util.find_spec(package)
        return spec is not None and spec.origin is not None


def get_installed_path(package: str) -> str:
    try:
        module = _module_name(importlib.metadata.distribution(package), package)
    except importlib.metadata.PackageNotFoundError:
        module = package
    spec = importlib.util.find_spec(module)
    if spec is None:
        raise importlib.metadata.PackageNotFoundError(package)
    if spec.origin is None:
        raise RuntimeError(f'{package} is a namespace package, which is invalid for `get_install_path`')
    return osp.dirname(spec.origin)


def replace_pkg_resources_lookups() -> None:
    try:
        import pkg_resources  # noqa: F401
        return
    except ImportError:
        pass
    import mmengine.config.config as config_mod
    import mmengine.utils as utils_mod
    import mmengine.utils.package_utils as pkg_mod
    for mod in (pkg_mod, utils_mod, config_mod):
        mod.is_installed = is_installed
        mod.get_installed_path = get_installed_path


def apply() -> None:
    global _applied
    if _applied:
        return
    install_mmcv_ext_standin()
    replace_pkg_resources_lookups()
    _applied = True
