"""What a training run builds before its first step, for the recipe card to read.

``ViT5Runner`` builds its optimizer wrapper, scales its lr and builds its param schedulers
with the functions here; :func:`build_run_objects` builds the same objects for
``tools/print_config.py --card`` without data or weights: the model on the meta device
(shapes and names, no memory), the optimizer wrapper from the config's own constructor, the
lr scaled by the run's plan, the schedulers converted to optimizer steps. The card prints
from these objects (:func:`vit5seg.engine.recipe.run_rows`), so what it shows is what the
trainer builds.
"""
import copy
from typing import NamedTuple, Optional, Sequence

import torch
from mmengine.optim import OptimWrapperDict, build_optim_wrapper
from mmengine.optim.scheduler.param_scheduler import INF
from mmengine.registry import PARAM_SCHEDULERS

from .accumulation import BatchPlan


class RunObjects(NamedTuple):
    model: torch.nn.Module          # the segmentor, unwrapped (parameter names as the constructor saw them)
    optim_wrapper: object           # OptimWrapper or OptimWrapperDict, lr scaled
    schedulers: list                # built param schedulers, in optimizer steps
    loop: str                       # the train loop's type
    max_iters: int
    epoch: Optional[str]            # one pass over the data in optimizer steps, where a scheduler converts epochs


def wrappers(optim_wrapper) -> list:
    return list(optim_wrapper.values()) if isinstance(optim_wrapper, OptimWrapperDict) else [optim_wrapper]


def lr_scale(plan: BatchPlan, auto_scale_lr: Optional[dict]) -> float:
    """The factor on every lr: images per optimizer step / ``base_batch_size`` where
    ``auto_scale_lr.enable`` (micro-batches count: the optimizer steps once over all of
    them, whichever way they accumulate), else 1."""
    if not auto_scale_lr or not auto_scale_lr.get('enable', False):
        return 1.0
    return plan.images_per_step / auto_scale_lr['base_batch_size']


def scale_lrs(optim_wrapper, plan: BatchPlan, auto_scale_lr: Optional[dict]) -> float:
    """Every param group's lr times :func:`lr_scale`; returns the factor."""
    ratio = lr_scale(plan, auto_scale_lr)
    if ratio != 1.0:
        for wrapper in wrappers(optim_wrapper):
            for group in wrapper.optimizer.param_groups:
                group['lr'] = group['lr'] * ratio
    return ratio


def converts_epochs(spec) -> bool:
    return isinstance(spec, dict) and spec.get('by_epoch', True) and spec.get('convert_to_iter_based', False)


def scheduler_specs(specs) -> list:
    """A config's ``param_scheduler`` (one or a list, or None) as a list."""
    return list(specs) if isinstance(specs, Sequence) else [specs] if specs else []


def any_converts_epochs(specs) -> bool:
    return any(converts_epochs(s) for s in scheduler_specs(specs))


def epoch_steps(dataset_size: int, plan: BatchPlan) -> int:
    """Iterations of one pass over ``dataset_size`` images (optimizer steps under
    ``--accumulate``, micro-batches under mmengine's ``accumulative_counts``): whole iterations
    of the plan's images per iteration (EoMT counts an epoch so: its loader drops the last
    incomplete batch), at least 1. mmengine converts with ``len(train_dataloader)``: batches of
    one rank over the whole dataset (its InfiniteSampler's length), GPUs (x k) too many."""
    return max(1, dataset_size // plan.images_per_iteration)


def build_schedulers(specs, optim_wrapper, epoch_length: Optional[int], max_iters: int) -> list:
    """The param schedulers of one optimizer wrapper, as mmengine's Runner builds them for an
    iteration-based loop, with ``epoch_length`` optimizer steps to an epoch."""
    built = []
    for spec in scheduler_specs(specs):
        if isinstance(spec, dict):
            spec = copy.deepcopy(spec)
            spec.setdefault('end', 1 if spec.get('by_epoch', True) else max_iters)  # the loop's max_epochs is 1
            spec = PARAM_SCHEDULERS.build(spec, default_args=dict(optimizer=optim_wrapper, epoch_length=epoch_length))
        built.append(spec)
    return built


def _meta_model(model_cfg) -> torch.nn.Module:
    from mmseg.registry import MODELS
    try:
        with torch.device('meta'):  # names and shapes only: no memory, no initialisation cost
            return MODELS.build(copy.deepcopy(model_cfg))
    except (RuntimeError, NotImplementedError):  # a head that reads a value while it builds (.item())
        return MODELS.build(copy.deepcopy(model_cfg))


def _card_wrapper_cfg(optim_cfg: dict) -> dict:
    """``AmpOptimWrapper`` asserts a GPU when built; its param groups are an OptimWrapper's."""
    optim_cfg = copy.deepcopy(optim_cfg)
    if optim_cfg.get('type') == 'AmpOptimWrapper' and not torch.cuda.is_available():
        optim_cfg['type'] = 'OptimWrapper'
        for key in ('loss_scale', 'dtype', 'use_fsdp'):
            optim_cfg.pop(key, None)
    return optim_cfg


def train_dataset_size(cfg) -> int:
    from mmseg.registry import DATASETS
    return len(DATASETS.build(copy.deepcopy(cfg.train_dataloader.dataset)))


def build_run_objects(cfg, plan: BatchPlan) -> RunObjects:
    """The objects ``ViT5Runner.train`` builds from ``cfg`` (the plan applied) before its first
    step, without data (unless a scheduler converts epochs: then the train set is read for its
    size) and without weights."""
    from mmengine.registry import DefaultScope
    from mmseg.utils import register_all_modules
    register_all_modules(init_default_scope=False)
    with DefaultScope.overwrite_default_scope(cfg.get('default_scope') or 'mmseg'):  # as the Runner's
        return _build(cfg, plan)


def _build(cfg, plan: BatchPlan) -> RunObjects:
    model = _meta_model(cfg.model)
    optim_wrapper = build_optim_wrapper(model, _card_wrapper_cfg(cfg.optim_wrapper))
    scale_lrs(optim_wrapper, plan, cfg.get('auto_scale_lr'))
    specs = scheduler_specs(cfg.get('param_scheduler'))
    epoch, epoch_length = None, None
    if any_converts_epochs(specs):
        try:
            size = train_dataset_size(cfg)
        except Exception as e:  # no data here: the card says so instead of guessing
            epoch = f'unknown: the train dataset cannot be read here ({type(e).__name__}: {e})'
            specs = [s for s in specs if not converts_epochs(s)]
        else:
            epoch_length = epoch_steps(size, plan)
            epoch = describe_epoch(size, plan, epoch_length)
    max_iters = cfg.train_cfg.get('max_iters', INF)
    schedulers = build_schedulers(specs, optim_wrapper, epoch_length, max_iters) if specs else []
    return RunObjects(model, optim_wrapper, schedulers, cfg.train_cfg.get('type', 'IterBasedTrainLoop'), max_iters,
                      epoch)


def describe_epoch(size: int, plan: BatchPlan, steps: int) -> str:
    unit = 'optimizer steps' if plan.iteration_is_step else 'iterations'
    return f'{size} images / {plan.images_per_iteration} per iteration = {steps} {unit}'


__all__ = ['RunObjects', 'any_converts_epochs', 'build_run_objects', 'build_schedulers', 'describe_epoch',
           'epoch_steps', 'lr_scale', 'scale_lrs', 'scheduler_specs', 'train_dataset_size', 'wrappers']
