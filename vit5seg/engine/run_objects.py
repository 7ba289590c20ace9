"""What a training run builds before its first step, for the recipe card to read.

``ViT5Runner.build_training_objects`` builds them (the train loop, the optimizer wrapper, the lr
rule of :func:`scale_lrs`, the param schedulers of :func:`build_schedulers`) for a training and,
through ``CardRunner``, for ``tools/print_config.py --card``; the card prints from
:class:`RunObjects` (:func:`vit5seg.engine.recipe.run_rows`), so what it shows is what the
trainer built.
"""
import copy
from typing import NamedTuple, Optional, Sequence

import torch
from mmengine.optim import OptimWrapperDict
from mmengine.registry import PARAM_SCHEDULERS

from .accumulation import BatchPlan


class RunObjects(NamedTuple):
    model: torch.nn.Module          # the segmentor, unwrapped (parameter names as the constructor saw them)
    optim_wrapper: object           # OptimWrapper or OptimWrapperDict, lr scaled
    schedulers: list                # built param schedulers, in optimizer steps
    loop: str                       # the train loop's type
    max_iters: int
    epoch: Optional[str]            # one pass over the data in iterations, where a scheduler converts epochs
    lr_scale: float = 1.0           # the factor the Runner's lr rule applied (auto_scale_lr)
    micro_batches: int = 1          # per optimizer step, as the loop (--accumulate) or the wrapper (mmengine's) runs


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


def describe_epoch(size: int, plan: BatchPlan, steps: int) -> str:
    unit = 'optimizer steps' if plan.iteration_is_step else 'iterations'
    return f'{size} images / {plan.images_per_iteration} per iteration = {steps} {unit}'


__all__ = ['RunObjects', 'any_converts_epochs', 'build_schedulers', 'converts_epochs', 'describe_epoch', 'epoch_steps',
           'lr_scale', 'scale_lrs', 'scheduler_specs', 'wrappers']
