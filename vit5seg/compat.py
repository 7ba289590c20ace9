"""Fixes for running the OpenMMLab 2023 releases (mmengine 0.10.7, mmcv-lite 2.1.0,
mmsegmentation 1.2.2) on torch 2.14 / current setuptools. One function per fix, each
applied once by ``import vit5seg`` and each covered by a test in tests/test_compat.py.
"""
import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import contextlib
import os.path as osp
import sys
import types

import torch

from . import ops

_applied = False


# --- 1. mmcv-lite has no compiled ``mmcv._ext`` -------------------------------------
# mmcv 2.1.0 cannot be compiled against torch 2.14, and mmcv-lite ships no ``_ext``,
# yet ``import mmseg.models`` imports ``mmcv.ops``, which loads it. The stand-in lets
# every import succeed; an op that is really called raises ModuleNotFoundError (the
# error mmseg's guarded imports expect) naming the op. Where a real compiled ``_ext``
# exists (full mmcv) the finder is not installed at all.

class MissingMmcvOp(ModuleNotFoundError):
    pass


def _calling_module(skip: int = 2):
    """Class name of the nearest ``nn.Module`` whose method is on the call stack."""
    frame = sys._getframe(skip)
    while frame is not None:
        owner = frame.f_locals.get('self')
        if isinstance(owner, torch.nn.Module):
            return type(owner).__name__
        frame = frame.f_back
    return None


def _missing_op(name: str):
    def op(*args, **kwargs):
        module = _calling_module()
        caller = f' (called by {module})' if module else ''
        error = MissingMmcvOp(
            f"mmcv compiled op '{name}'{caller} is not available: this environment "
            'uses mmcv-lite, which has no compiled CUDA/C++ ops and no pure-PyTorch equivalent of '
            'this one (see docs/gpus.md). Use another head, or install full mmcv built for your '
            'torch and CUDA.', name='mmcv._ext')
        error.op, error.module = name, module
        raise error
    op.__name__ = name
    return op


class _ExtStandIn(types.ModuleType):

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
    """Only where mmcv has no ``_ext`` of its own (mmcv-lite): full mmcv gets no stand-in."""
    if any(isinstance(f, _ExtStandInFinder) for f in sys.meta_path):
        return
    if importlib.util.find_spec('mmcv._ext') is None:  # imports mmcv, then looks along its __path__
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


# --- 3. torch.load defaults to weights_only=True -----------------------------------
# mmengine checkpoints (resume, tools/test.py) hold a MessageHub of HistoryBuffers with
# numpy arrays, and each buffer pickles its statistics *functions* via builtins.getattr,
# which must never be allowed. HistoryBuffers now pickle without them (the class-level
# registry restores them on load), and the plain data types are allowlisted, so the
# default, safe weights_only loading reads checkpoints written from here on.

def _history_buffer_state(self) -> dict:
    state = dict(self.__dict__)
    state.pop('statistics_methods', None)
    return state


def _numpy_safe_globals() -> list:
    import numpy as np
    multiarray = (getattr(np, '_core', None) or np.core).multiarray
    dtypes = [type(np.dtype(code)) for code in ('?', 'b', 'B', 'h', 'H', 'i', 'I', 'l', 'L', 'q', 'Q',
                                                'e', 'f', 'd', 'g', 'U', 'S', 'O')]
    return [multiarray._reconstruct, multiarray.scalar, np.ndarray, np.dtype, *dtypes]


def allow_weights_only_mmengine_checkpoints() -> None:
    from mmengine.logging.history_buffer import HistoryBuffer
    HistoryBuffer.__getstate__ = _history_buffer_state
    torch.serialization.add_safe_globals([HistoryBuffer, *_numpy_safe_globals()])


# --- 4. distributed runs without GPUs (torchrun / srun on CPU, gloo) ------------------
# mmengine's init_dist always calls torch.cuda.set_device and the configs ask for NCCL;
# and the Runner hands DDP device_ids=[local_rank], which DDP rejects for a CPU module.

@contextlib.contextmanager
def _no_cuda_set_device():
    original = torch.cuda.set_device
    torch.cuda.set_device = lambda device: None
    try:
        yield
    finally:
        torch.cuda.set_device = original


def _wrap_init_dist(init_dist):
    def init_dist_any_device(launcher, backend='nccl', init_backend='torch', **kwargs):
        if torch.cuda.is_available():
            return init_dist(launcher, backend, init_backend, **kwargs)
        with _no_cuda_set_device():
            return init_dist(launcher, 'gloo' if backend == 'nccl' else backend, init_backend, **kwargs)
    init_dist_any_device.__wrapped__ = init_dist
    return init_dist_any_device


def _wrap_ddp_init(ddp_init):
    def ddp_init_any_device(self, module, *args, **kwargs):
        param = next(module.parameters(), None)
        if param is not None and param.device.type == 'cpu':
            kwargs['device_ids'] = None  # CPU modules take no device ids
            kwargs.pop('output_device', None)
        ddp_init(self, module, *args, **kwargs)
    ddp_init_any_device.__wrapped__ = ddp_init
    return ddp_init_any_device


def allow_distributed_on_cpu() -> None:
    import mmengine.dist as dist_pkg
    import mmengine.dist.utils as dist_utils
    import mmengine.runner.runner as runner_mod
    from mmengine.model.wrappers import MMDistributedDataParallel
    if hasattr(dist_utils.init_dist, '__wrapped__'):
        return
    wrapped = _wrap_init_dist(dist_utils.init_dist)
    for mod in (dist_utils, dist_pkg, runner_mod):
        mod.init_dist = wrapped
    MMDistributedDataParallel.__init__ = _wrap_ddp_init(MMDistributedDataParallel.__init__)


# --- 5. mmseg's sliding-window inference and pad_shape ---------------------------------
# EncoderDecoder.slide_inference sets each crop's img_shape but leaves pad_shape at the
# whole padded image; Mask2FormerHead resizes its masks to pad_shape, so every crop
# came back at the wrong size. Each crop now carries its own pad_shape too.

def _crop_aware_slide_inference(slide_inference):
    def slide_inference_per_crop_pad(self, inputs, batch_img_metas):
        whole = self.encode_decode
        saved = [meta.get('pad_shape') for meta in batch_img_metas]

        def encode_decode(crop, metas):
            for meta in metas:
                meta['pad_shape'] = tuple(crop.shape[2:])
            return whole(crop, metas)
        self.encode_decode = encode_decode
        try:
            return slide_inference(self, inputs, batch_img_metas)
        finally:
            del self.encode_decode
            for meta, pad in zip(batch_img_metas, saved):
                if pad is not None:
                    meta['pad_shape'] = pad
    slide_inference_per_crop_pad.__wrapped__ = slide_inference
    return slide_inference_per_crop_pad


def fix_slide_inference_pad_shape() -> None:
    from mmseg.models.segmentors import EncoderDecoder
    if not hasattr(EncoderDecoder.slide_inference, '__wrapped__'):
        EncoderDecoder.slide_inference = _crop_aware_slide_inference(EncoderDecoder.slide_inference)


# --- 6. pure-PyTorch stand-ins for the compiled ops our configs reach on a GPU -----------
# mmcv picks its compiled kernel only for CUDA tensors, so without compiled ops these
# paths pass on CPU and fail on the first GPU. Where mmcv's ``_ext`` is really compiled
# (full mmcv), its kernels are kept; otherwise the CUDA branch gets the pure-PyTorch
# computation of :mod:`vit5seg.ops`, which is what the CPU branch already runs.

def has_compiled_mmcv_ops() -> bool:
    import mmcv._ext as ext
    return not isinstance(ext, _ExtStandIn)


class FocalLossInputError(ValueError, AssertionError):
    """Inputs mmseg's FocalLoss refuses with an AssertionError (its callers catch that)."""


def _focal_loss_any_device(forward):
    """mmseg 1.2.2's ``FocalLoss(use_sigmoid=True)`` one-hot encodes class-id targets as
    ``one_hot[:, num_classes]`` (one column, "size of tensor a must match") on every
    device but CUDA-with-compiled-ops; there it is ``[:, :num_classes]``. This forward
    builds the (N, C) one-hot target itself and uses mmseg's own ``py_sigmoid_focal_loss``,
    which equals the CUDA kernel for it."""
    def focal_loss_forward(self, pred, target, weight=None, avg_factor=None, reduction_override=None,
                           ignore_index=255, **kwargs):
        if not self.use_sigmoid or (pred.is_cuda and has_compiled_mmcv_ops()):
            return forward(self, pred, target, weight, avg_factor, reduction_override, ignore_index, **kwargs)
        from mmseg.models.losses.focal_loss import py_sigmoid_focal_loss
        if reduction_override not in (None, 'none', 'mean', 'sum'):
            raise FocalLossInputError(f'FocalLoss: reduction_override must be none, mean or sum, got '
                                      f'{reduction_override!r}')
        if pred.shape != target.shape and not (pred.size(0) == target.size(0) and pred.shape[2:] == target.shape[1:]):
            raise FocalLossInputError(f'FocalLoss: prediction {tuple(pred.shape)} and target {tuple(target.shape)} '
                                      'do not match')
        shape = pred.shape
        num_classes = shape[1]
        logits = pred.movedim(1, -1).reshape(-1, num_classes)          # (N, C)
        if target.shape == shape:                                      # class scores given
            one_hot = target.movedim(1, -1).reshape(-1, num_classes)
            valid = (one_hot.argmax(dim=1) != ignore_index).view(-1, 1)
        else:                                                          # class ids given
            ids = target.reshape(-1)
            valid = (ids != ignore_index).view(-1, 1)
            ids = torch.where(valid.view(-1), ids, torch.zeros_like(ids))
            one_hot = torch.nn.functional.one_hot(ids, num_classes + 1)
            # one class: the positive is id 1 (mmseg's CUDA branch); otherwise ids 0..C-1
            one_hot = one_hot[:, 1:2] if num_classes == 1 else one_hot[:, :num_classes]
        reduction = reduction_override or self.reduction
        ops.FALLBACK_CALLS['sigmoid_focal_loss'] += 1
        loss = self.loss_weight * py_sigmoid_focal_loss(
            logits, one_hot, None, weight, gamma=self.gamma, alpha=self.alpha, class_weight=self.class_weight,
            valid_mask=valid, reduction=reduction, avg_factor=avg_factor)
        if reduction == 'none':
            loss = loss.reshape(shape[0], *shape[2:], num_classes).movedim(-1, 1).contiguous()
        return loss
    focal_loss_forward.__wrapped__ = forward
    return focal_loss_forward


def use_pytorch_fallbacks_for_missing_ops() -> None:
    from mmseg.models.losses.focal_loss import FocalLoss
    if not hasattr(FocalLoss.forward, '__wrapped__'):
        FocalLoss.forward = _focal_loss_any_device(FocalLoss.forward)
    if has_compiled_mmcv_ops():
        return
    import mmcv.ops
    import mmcv.ops.focal_loss
    import mmcv.ops.multi_scale_deform_attn as msda
    ops.DeformAttnPytorch.replaces = msda.MultiScaleDeformableAttnFunction
    msda.MultiScaleDeformableAttnFunction = ops.DeformAttnPytorch
    import mmcv.ops.psa_mask
    mmcv.ops.psa_mask.psa_mask = ops.psa_mask_pytorch
    mmcv.ops.sigmoid_focal_loss = mmcv.ops.focal_loss.sigmoid_focal_loss = ops.sigmoid_focal_loss_pytorch
    import mmseg.models.losses.focal_loss as mmseg_focal
    mmseg_focal._sigmoid_focal_loss = ops.sigmoid_focal_loss_pytorch
    try:
        import mmdet.models.losses.focal_loss as mmdet_focal
    except ImportError:  # mmdet is optional (the mask2former extra)
        return
    mmdet_focal._sigmoid_focal_loss = ops.sigmoid_focal_loss_pytorch


# --- 7. mmengine re-reads every metafile of mmseg for each ``mmseg::`` base ---------------
# ``_base_ = ['mmseg::_base_/datasets/cityscapes.py']`` first looks the name up among the
# models of mmseg's model-index: mmengine parses the index and its 52 YAML metafiles (0.26 s
# on 2 cores), finds no model of that name, then takes the base path. It does so for each
# such base of each config it parses, where a tool that reads many configs (the recipe
# checks, the registry audit) pays it hundreds of times. The installed package's metafiles
# do not change while a process runs: each is parsed once; lookups and errors are as before.

def parse_metafiles_once() -> None:
    import functools

    import mmengine.config.utils as config_utils
    # its one caller, _get_cfg_metainfo, passes a path and only reads what comes back
    if not hasattr(config_utils.load, 'cache_info'):
        config_utils.load = functools.lru_cache(maxsize=None)(config_utils.load)


# --- 8. mmdet's YouTube-VIS evaluation calls numpy's removed np.float -------------------------
# mmdet 3.3's YouTube-VIS evaluation (evaluation/functional/ytviseval.py, YTVISeval.accumulate, lines 444-445)
# still calls np.float, which numpy 1.24 removed (it was the builtin float), so mmdet's YouTubeVISMetric fails
# on numpy 2. That module alone gets a numpy that has the alias back; numpy itself is left as it is.
class _NumpyWithFloatAlias(types.ModuleType):
    def __init__(self, numpy):
        super().__init__(numpy.__name__)
        self._numpy = numpy

    def __getattr__(self, name):
        return float if name == 'float' else getattr(self._numpy, name)


def restore_np_float_for_ytviseval() -> None:
    import numpy
    if hasattr(numpy, 'float') or not is_installed('mmdet'):
        return
    from mmdet.evaluation.functional import ytviseval
    if not isinstance(ytviseval.np, _NumpyWithFloatAlias):
        ytviseval.np = _NumpyWithFloatAlias(numpy)


# --- 9. mmengine formats the same config text with yapf again at every print and save ------------
# ``Config.pretty_text`` runs yapf over the whole config each time it is read: when the Runner logs
# the config, dumps it to the work dir, hands it to the visualizer and stores it in every checkpoint's
# meta: six times in a tiny twin's 2-iteration training, though the text changes once (half of that
# run under cProfile). yapf's result depends only on the text and the style, so each (text, style) is
# formatted once: that training takes 0.78x as long (medians of 4 interleaved runs in one process, 2
# threads of a Xeon with AMX). A text yapf refuses raises as before (lru_cache keeps no failure).

def _format_code_once(format_code):
    import functools

    @functools.lru_cache(maxsize=64)
    def formatted(text, style, options):
        return format_code(text, style_config=dict(style), **dict(options))

    def format_code_once(text, style_config=None, **options):
        if not isinstance(style_config, dict):  # a style name or file: as yapf takes it, not held
            return format_code(text, style_config=style_config, **options)
        return formatted(text, tuple(sorted(style_config.items())), tuple(sorted(options.items())))

    format_code_once.__wrapped__ = format_code
    return format_code_once


def format_each_config_text_once() -> None:
    import mmengine.config.config as config_module
    if not hasattr(config_module.FormatCode, '__wrapped__'):
        config_module.FormatCode = _format_code_once(config_module.FormatCode)


def apply() -> None:
    global _applied
    if _applied:
        return
    install_mmcv_ext_standin()
    replace_pkg_resources_lookups()
    allow_weights_only_mmengine_checkpoints()
    allow_distributed_on_cpu()
    fix_slide_inference_pad_shape()
    use_pytorch_fallbacks_for_missing_ops()
    parse_metafiles_once()
    restore_np_float_for_ytviseval()
    format_each_config_text_once()
    _applied = True
