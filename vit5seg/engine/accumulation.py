"""The config's images per optimizer step on any number of GPUs: gradient accumulation, two ways.

- mmengine's way, ``optim_wrapper.accumulative_counts=N`` in a config under mmengine's own
  loops (mmseg's BEiT configs are written so): an iteration is one micro-batch, ``max_iters``
  and every scheduler count micro-batches, the optimizer steps every N iterations (and once
  more over the remainder at the end). The project keeps that meaning: such a config trains
  as mmengine 0.10.7 trains it, epoch-based loops included.
- The project's flag, ``tools/train.py --accumulate N|auto`` (:func:`apply_plan`):
  :class:`AccumulatingIterBasedTrainLoop` runs N micro-batches per iteration, so an
  iteration is one optimizer step and a protocol's ``max_iters``, warm-ups, EoMT's
  annealing windows and the val/checkpoint intervals keep meaning optimizer steps; hooks run
  once per step, and a checkpoint can only fall on a step boundary, so a resumed run
  continues exactly where the step ended (the dataloader advances ``iter x N`` batches).

:class:`BatchPlan` says which (``iteration_is_step``); the recipe card prints it in one line.
"""
import logging
import os
from typing import List, NamedTuple, Optional, Sequence

import torch
from mmengine.logging import print_log
from mmengine.runner import IterBasedTrainLoop
from mmengine.registry import LOOPS  # the root registries: mmseg and mmdet configs both find them

from ..errors import ToolError

LOOP_TYPE = 'AccumulatingIterBasedTrainLoop'
# the launcher's own variable for the number of processes (read before torch.distributed starts)
WORLD_SIZE_VARIABLES = {'pytorch': 'WORLD_SIZE', 'slurm': 'SLURM_NTASKS', 'mpi': 'OMPI_COMM_WORLD_SIZE'}


class AccumulationError(ValueError, ToolError):
    """Images per iteration that the GPUs, the batch and ``--accumulate`` cannot give."""


class BatchPlan(NamedTuple):
    gpus: int
    per_gpu: int
    micro_batches: int     # accumulated per optimizer step
    target: int            # the config's images per optimizer step (auto_scale_lr.base_batch_size)
    # True: --accumulate (an iteration is one optimizer step of micro_batches micro-batches);
    # False: mmengine's accumulative_counts (an iteration is one micro-batch)
    iteration_is_step: bool = True

    @property
    def images_per_step(self) -> int:
        return self.gpus * self.per_gpu * self.micro_batches

    @property
    def images_per_iteration(self) -> int:
        return self.images_per_step if self.iteration_is_step else self.gpus * self.per_gpu

    def describe(self) -> str:
        if self.iteration_is_step:
            text = (f'{self.gpus} GPU(s) x {self.per_gpu} images x {self.micro_batches} micro-batch(es) = '
                    f'{self.images_per_step} images per iteration')
        else:
            text = (f'{self.gpus} GPU(s) x {self.per_gpu} images = {self.images_per_iteration} images per '
                    f'iteration, {self.micro_batches} iterations per optimizer step '
                    f'(optim_wrapper.accumulative_counts) = {self.images_per_step} images per optimizer step')
        if self.images_per_step != self.target:
            text += f' (the config\'s protocol: {self.target})'
        return text


def launcher_world_size(launcher: str, required: bool = True) -> int:
    """The number of training processes, from the launcher's environment (torch.distributed
    is not started yet); 1 where it is unknown and not ``required``."""
    if launcher == 'none':
        return 1
    variable = WORLD_SIZE_VARIABLES[launcher]
    if variable in os.environ:
        return int(os.environ[variable])
    if required:
        raise AccumulationError(f'--launcher {launcher}: {variable} is not set, so the number of processes is '
                                f'unknown (start through tools/dist_train.sh or tools/slurm_train.sh)')
    return 1


def batch_plan(cfg, gpus: int, accumulate: Optional[str]) -> BatchPlan:
    """``accumulate``: the ``--accumulate`` flag, 'auto' (keep ``auto_scale_lr.base_batch_size``
    images per optimizer step) or a number of micro-batches per optimizer step; None where it
    is not given (1). A config that accumulates mmengine's way keeps its own count under 'auto'
    and None, and refuses a number: the two ways cannot be stacked."""
    per_gpu = cfg.train_dataloader.batch_size
    target = cfg.get('auto_scale_lr', {}).get('base_batch_size')
    own = config_micro_batches(cfg)
    if own > 1 and not config_steps_per_iteration(cfg):
        if accumulate not in (None, 'auto'):
            raise AccumulationError(
                f'--accumulate {accumulate}: the config accumulates mmengine\'s way (optim_wrapper.'
                f'accumulative_counts={own}: an iteration is one micro-batch), --accumulate makes an iteration one '
                f'optimizer step; use one of them (--cfg-options optim_wrapper.accumulative_counts=1 --accumulate '
                f'{accumulate}, or no --accumulate)')
        return BatchPlan(gpus, per_gpu, own, target or gpus * per_gpu * own, iteration_is_step=False)
    if own > 1 and accumulate is None:  # a run's saved config: the accumulating loop and its count
        accumulate = str(own)
    accumulate = accumulate or '1'
    if accumulate != 'auto':
        micro = int(accumulate) if accumulate.isdigit() else 0
        if micro < 1:
            raise AccumulationError(f'--accumulate {accumulate}: give a positive number of micro-batches or auto')
        return BatchPlan(gpus, per_gpu, micro, target or gpus * per_gpu * micro)
    if target is None:
        raise AccumulationError('--accumulate auto keeps the config\'s images per iteration, which it reads from '
                                'auto_scale_lr.base_batch_size: the config has none')
    per_step = gpus * per_gpu
    if per_step >= target:
        return BatchPlan(gpus, per_gpu, 1, target)
    if target % per_step:
        raise AccumulationError(f'--accumulate auto: {target} images per iteration (auto_scale_lr.base_batch_size) '
                                f'are not a whole number of micro-batches of {gpus} GPU(s) x {per_gpu} images; '
                                f'use a GPU count or train_dataloader.batch_size that divides {target}, or '
                                f'--accumulate N')
    return BatchPlan(gpus, per_gpu, target // per_step, target)


def config_micro_batches(cfg) -> int:
    """The micro-batches a config asks for itself (mmengine's ``optim_wrapper.accumulative_counts``)."""
    return int((cfg.get('optim_wrapper') or {}).get('accumulative_counts', 1))


def config_steps_per_iteration(cfg) -> bool:
    """Whether the config's own train loop makes an iteration one optimizer step: the
    accumulating loop, which a run's saved config names after ``--accumulate``."""
    return (cfg.get('train_cfg') or {}).get('type') == LOOP_TYPE


def check_resumed_plan(saved: Optional[dict], plan: BatchPlan, path: str = 'the checkpoint') -> None:
    """A run resumes only with the images per iteration it was trained with: every
    iteration count of the schedule means optimizer steps of that many images."""
    if not saved:
        return  # written before checkpoints recorded their plan
    before = BatchPlan(**{k: saved[k] for k in BatchPlan._fields if k in saved})  # older: iteration_is_step
    if (before.images_per_step, before.iteration_is_step) != (plan.images_per_step, plan.iteration_is_step):
        raise AccumulationError(
            f'cannot resume from {path}: it was trained with {before.describe()}, this run has {plan.describe()}; '
            f'its schedule, lr and iteration count mean steps of {before.images_per_step} images: resume '
            + (f'with --accumulate {before.micro_batches} on {before.gpus} GPU(s) x {before.per_gpu} images, or '
               f'another split of {before.images_per_step} images (--accumulate auto)' if before.iteration_is_step
               else f'on {before.gpus} GPU(s) x {before.per_gpu} images with optim_wrapper.accumulative_counts='
                    f'{before.micro_batches} and no --accumulate'))


def apply_plan(cfg, plan: BatchPlan) -> None:
    """Train with ``plan``: the accumulating loop and ``accumulative_counts`` (the lr: ViT5Runner.scale_lr).
    A plan of mmengine's way is the config's own: nothing to change."""
    if plan.micro_batches == 1 or not plan.iteration_is_step:
        return
    loop = cfg.train_cfg.get('type', 'IterBasedTrainLoop')
    if loop not in ('IterBasedTrainLoop', LOOP_TYPE):
        raise AccumulationError(f'gradient accumulation needs train_cfg.type IterBasedTrainLoop, the config has '
                                f'{loop}')
    if cfg.optim_wrapper.get('accumulative_counts', 1) not in (1, plan.micro_batches):
        raise AccumulationError(f'optim_wrapper.accumulative_counts={cfg.optim_wrapper.accumulative_counts} '
                                f'differs from the {plan.micro_batches} micro-batches asked for')
    cfg.train_cfg.type = LOOP_TYPE
    cfg.optim_wrapper.accumulative_counts = plan.micro_batches


def _merged(batches: Sequence) -> object:
    """The micro-batches as one batch for the hooks: lists (mmseg's collate) joined, tensors
    concatenated; anything else as the list of micro-batches."""
    def join(values):
        if all(isinstance(v, list) for v in values):
            return [x for v in values for x in v]
        if all(isinstance(v, torch.Tensor) for v in values):
            return torch.cat(values)
        raise TypeError
    try:
        return {k: join([b[k] for b in batches]) for k in batches[0]}
    except (TypeError, KeyError, RuntimeError):
        return list(batches)


def _mean_outputs(outputs: List[dict]) -> dict:
    """The log values of the step: each the mean over its micro-batches."""
    def mean(values):
        if isinstance(values[0], torch.Tensor):
            return torch.stack([v.detach() for v in values]).mean(0)
        return sum(values) / len(values) if isinstance(values[0], (int, float)) else values[-1]
    return {k: mean([o[k] for o in outputs]) for k in outputs[0]}


@LOOPS.register_module()
class AccumulatingIterBasedTrainLoop(IterBasedTrainLoop):
    """mmengine's IterBasedTrainLoop whose iteration is one optimizer step over
    ``optim_wrapper.accumulative_counts`` micro-batches (see the module docstring).
    Hooks see the step's micro-batches as one batch and the mean of their log values."""

    def __init__(self, runner, *args, **kwargs):
        super().__init__(runner, *args, **kwargs)
        # the loop's own count, which it runs and the recipe card shows: the Runner builds the loop before
        # the optimizer wrapper, so it reads the wrapper's config (a built wrapper keeps it private)
        wrapper = runner.optim_wrapper
        self.micro_batches = int(wrapper.get('accumulative_counts', 1) if isinstance(wrapper, dict)
                                 else wrapper._accumulative_counts)

    def run(self) -> torch.nn.Module:
        """IterBasedTrainLoop.run with the dataloader advanced by k batches per resumed step."""
        k = self.micro_batches
        # the Runner initialised the wrapper's counts in steps; it counts micro-batches
        self.runner.optim_wrapper.initialize_count_status(self.runner.model, self._iter * k, self._max_iters * k)
        world = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
        print_log(f'gradient accumulation: {world} GPU(s) x {self.dataloader.batch_size} images x {k} '
                  f'micro-batches = {world * self.dataloader.batch_size * k} images per iteration (one optimizer '
                  f'step)', logger='current')
        self.runner.call_hook('before_train')
        self.runner.call_hook('before_train_epoch')
        if self._iter > 0:
            # mmengine's wrapper may have warned that iteration {iter} is not divisible by
            # accumulative_counts: it counted steps as micro-batches before the line above
            print_log(f'Advance dataloader {self._iter} iterations x {k} micro-batches to skip data that has '
                      f'already been trained (resumed at a step boundary: no gradient lost, whatever '
                      f'mmengine warned above)', logger='current', level=logging.WARNING)
            for _ in range(self._iter * k):
                next(self.dataloader_iterator)
        while self._iter < self._max_iters and not self.stop_training:
            self.runner.model.train()
            self.run_iter(next(self.dataloader_iterator))
            self._decide_current_val_interval()
            if (self.runner.val_loop is not None and self._iter >= self.val_begin
                    and (self._iter % self.val_interval == 0 or self._iter == self._max_iters)):
                self.runner.val_loop.run()
        self.runner.call_hook('after_train_epoch')
        self.runner.call_hook('after_train')
        return self.runner.model

    def run_iter(self, data_batch: Sequence[dict]) -> None:
        batches = [data_batch] + [next(self.dataloader_iterator) for _ in range(self.micro_batches - 1)]
        merged = _merged(batches)
        self.runner.call_hook('before_train_iter', batch_idx=self._iter, data_batch=merged)
        outputs = [self.runner.model.train_step(b, optim_wrapper=self.runner.optim_wrapper) for b in batches]
        self.runner.call_hook('after_train_iter', batch_idx=self._iter, data_batch=merged,
                              outputs=_mean_outputs(outputs))
        self._iter += 1


__all__ = ['AccumulatingIterBasedTrainLoop', 'AccumulationError', 'BatchPlan', 'apply_plan', 'batch_plan',
           'check_resumed_plan', 'config_micro_batches', 'config_steps_per_iteration', 'launcher_world_size']
