"""``ViT5Runner``: mmengine's Runner with the recipe card and the lr rule of gradient
accumulation. ``configs/_base_/default_runtime.py`` names it (``runner_type``), so mmseg's own
``tools/train.py`` builds it too.

- The lr follows the images per iteration: with ``auto_scale_lr.enable`` every lr is
  multiplied by GPUs x images per GPU x micro-batches / ``base_batch_size``. mmengine's
  ``Runner.scale_lr`` counts GPUs x images per GPU only, so under ``--accumulate k`` it
  cut the lr k-fold (1 GPU x 2 images x 4 micro-batches, base 8: x 0.25 where the optimizer
  steps once over 8 images).
- The recipe card (:mod:`vit5seg.engine.recipe`) is the first thing ``train()`` logs, with a
  warning where the images per iteration differ from the config's, and goes into the config
  the run saves as ``recipe_card``.
"""
from mmengine.optim import OptimWrapperDict
from mmengine.runner import Runner
from mmseg.registry import RUNNERS

from .accumulation import BatchPlan
from .recipe import lr_scale, recipe_card


def _card(cfg, gpus: int):
    micro = cfg.optim_wrapper.get('accumulative_counts', 1)
    return recipe_card(cfg, gpus, str(micro), config=cfg.filename or '')


def _trains(cfg) -> bool:
    return bool(cfg.get('train_cfg') and cfg.get('train_dataloader') and cfg.get('optim_wrapper'))


@RUNNERS.register_module()
class ViT5Runner(Runner):
    """See the module docstring."""

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
        wrappers = list(optim_wrapper.values()) if isinstance(optim_wrapper, OptimWrapperDict) else [optim_wrapper]
        loader = self._train_dataloader
        per_gpu = loader['batch_size'] if isinstance(loader, dict) else loader.batch_size
        for wrapper in wrappers:
            plan = BatchPlan(self.world_size, per_gpu, wrapper._accumulative_counts, auto_scale_lr['base_batch_size'])
            ratio = lr_scale(plan, auto_scale_lr)
            self.logger.info(f'auto_scale_lr: {plan.describe()}; base_batch_size {plan.target}: every lr x {ratio:g}')
            for group in wrapper.optimizer.param_groups:
                group['lr'] = group['lr'] * ratio


__all__ = ['ViT5Runner']
