"""``ViT5Runner``: mmengine's Runner with the recipe card and the lr rule of gradient
accumulation. ``configs/_base_/default_runtime.py`` names it (``runner_type``), so mmseg's own
``tools/train.py`` builds it too.

- The lr follows the images per iteration: with ``auto_scale_lr.enable`` every lr is
  multiplied by GPUs x images per GPU x micro-batches / ``base_batch_size``. mmengine's
  ``Runner.scale_lr`` counts GPUs x images per GPU only, so under ``--accumulate k`` it
  cut the lr k-fold (1 GPU x 2 images x 4 micro-batches, base 8: x 0.25 where the optimizer
  steps once over 8 images).
- Accumulation has one path: ``optim_wrapper.accumulative_counts`` in a config trains as
  ``--accumulate`` does (:func:`from_cfg` switches the loop to the accumulating one), and a
  by-epoch scheduler converted to iterations counts an epoch in optimizer steps
  (mmengine's conversion counts micro-batches, which stretched it k-fold).
- Every checkpoint records the run's :class:`BatchPlan` (``meta['batch_plan']``); resuming
  under other images per iteration is one error (:class:`BatchPlanHook`).
- The recipe card (:mod:`vit5seg.engine.recipe`) is the first thing ``train()`` logs, with a
  warning where the images per iteration differ from the config's, and goes into the config
  the run saves as ``recipe_card``.
"""
import copy
from typing import Sequence

from mmengine.hooks import Hook
from mmengine.optim import OptimWrapperDict
from mmengine.registry import PARAM_SCHEDULERS
from mmengine.runner import Runner
from mmseg.registry import RUNNERS

from .accumulation import (LOOP_TYPE, AccumulatingIterBasedTrainLoop, BatchPlan, apply_plan, batch_plan, check_resumed_plan, config_micro_batches,
                           steps_per_epoch)
from .recipe import lr_scale, recipe_card


def _card(cfg, gpus: int):
    micro = cfg.optim_wrapper.get('accumulative_counts', 1)
    return recipe_card(cfg, gpus, str(micro), config=cfg.filename or '')


def _trains(cfg) -> bool:
    return bool(cfg.get('train_cfg') and cfg.get('train_dataloader') and cfg.get('optim_wrapper'))


def _wrappers(optim_wrapper) -> list:
    return list(optim_wrapper.values()) if isinstance(optim_wrapper, OptimWrapperDict) else [optim_wrapper]


class BatchPlanHook(Hook):
    """Keeps the run's :class:`BatchPlan` in every checkpoint and refuses a resume under
    other images per iteration. ``ViT5Runner`` registers it."""
    priority = 'VERY_HIGH'

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        checkpoint.setdefault('meta', {})['batch_plan'] = runner.batch_plan._asdict()

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        if getattr(runner, '_resume', False):
            check_resumed_plan(checkpoint.get('meta', {}).get('batch_plan'), runner.batch_plan)


@RUNNERS.register_module()
class ViT5Runner(Runner):
    """See the module docstring."""

    @classmethod
    def from_cfg(cls, cfg) -> 'ViT5Runner':
        """mmengine's ``from_cfg``, with a config's own ``accumulative_counts`` trained by the
        accumulating loop (as ``--accumulate``)."""
        micro = config_micro_batches(cfg)
        if _trains(cfg) and micro > 1 and cfg.train_cfg.get('type', 'IterBasedTrainLoop') != LOOP_TYPE:
            cfg = copy.deepcopy(cfg)
            apply_plan(cfg, batch_plan(cfg, 1, str(micro)))  # only the micro-batches matter here
        return super().from_cfg(cfg)

    def register_hooks(self, default_hooks=None, custom_hooks=None) -> None:
        super().register_hooks(default_hooks, custom_hooks)
        self.register_hook(BatchPlanHook())

    @property
    def batch_plan(self) -> BatchPlan:
        """This run's GPUs x images per GPU x micro-batches, against ``auto_scale_lr.base_batch_size``."""
        loader, wrapper = self._train_dataloader, self.optim_wrapper
        per_gpu = loader['batch_size'] if isinstance(loader, dict) else loader.batch_size
        micro = wrapper.get('accumulative_counts', 1) if isinstance(wrapper, dict) else \
            _wrappers(wrapper)[0]._accumulative_counts
        target = (self.auto_scale_lr or {}).get('base_batch_size')
        return BatchPlan(self.world_size, per_gpu, micro, target or self.world_size * per_gpu * micro)

    def _build_param_scheduler(self, scheduler, optim_wrapper) -> list:
        """mmengine's, with an epoch of a by-epoch scheduler converted to iterations as the
        optimizer steps of one pass over the data: under the accumulating loop an iteration
        is ``accumulative_counts`` micro-batches (mmengine divides by none)."""
        micro = getattr(optim_wrapper, '_accumulative_counts', 1)
        if micro == 1 or not isinstance(self.train_loop, AccumulatingIterBasedTrainLoop):
            return super()._build_param_scheduler(scheduler, optim_wrapper)
        epoch_length = steps_per_epoch(len(self.train_dataloader), micro)
        built = []
        for item in (scheduler if isinstance(scheduler, Sequence) else [scheduler]):
            if isinstance(item, dict):
                item = copy.deepcopy(item)
                item.setdefault('end', self.max_epochs if item.get('by_epoch', True) else self.max_iters)
                item = PARAM_SCHEDULERS.build(item, default_args=dict(optimizer=optim_wrapper,
                                                                      epoch_length=epoch_length))
            built.append(item)
        return super()._build_param_scheduler(built, optim_wrapper)

    def train(self):
        """mmengine's train(), which first logs the recipe card (with a warning where the images
        per iteration differ from the config's) and saves it with the run's config."""
        if _trains(self.cfg):
            card = _card(self.cfg, self.world_size)  # the processes started: this run's own count
            text = card.text()
            self.logger.info(text)
            for warning in card.warnings:
                self.logger.warning(warning)
            self.cfg.recipe_card = text.splitlines()
            self.dump_config()  # again, now with the card (Runner.__init__ wrote it without)
        return super().train()

    def scale_lr(self, optim_wrapper, auto_scale_lr=None) -> None:
        """Every lr times images per iteration / ``base_batch_size`` (micro-batches
        included) where ``auto_scale_lr.enable``."""
        if not auto_scale_lr or not auto_scale_lr.get('enable', False):
            return
        loader = self._train_dataloader
        per_gpu = loader['batch_size'] if isinstance(loader, dict) else loader.batch_size
        for wrapper in _wrappers(optim_wrapper):
            plan = BatchPlan(self.world_size, per_gpu, wrapper._accumulative_counts, auto_scale_lr['base_batch_size'])
            ratio = lr_scale(plan, auto_scale_lr)
            self.logger.info(f'auto_scale_lr: {plan.describe()}; base_batch_size {plan.target}: every lr x {ratio:g}')
            for group in wrapper.optimizer.param_groups:
                group['lr'] = group['lr'] * ratio


__all__ = ['BatchPlanHook', 'ViT5Runner']
