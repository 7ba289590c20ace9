"""``ViT5Runner``: mmengine's Runner with the recipe card and the lr rule of gradient
accumulation. ``configs/_base_/default_runtime.py`` names it (``runner_type``), so mmseg's own
``tools/train.py`` builds it too.

- The lr follows the images per iteration: with ``auto_scale_lr.enable`` every lr is
  multiplied by GPUs x images per GPU x micro-batches / ``base_batch_size``. mmengine's
  ``Runner.scale_lr`` counts GPUs x images per GPU only, so under ``--accumulate k`` it
  cut the lr k-fold (1 GPU x 2 images x 4 micro-batches, base 8: x 0.25 where the optimizer
  steps once over 8 images).
- Accumulation keeps both meanings (:mod:`.accumulation`): a config's own
  ``optim_wrapper.accumulative_counts`` trains as mmengine trains it (an iteration is a
  micro-batch), ``--accumulate`` makes an iteration one optimizer step. A by-epoch scheduler
  converted to iterations counts an epoch as the iterations of one pass over the data on all
  GPUs (mmengine's conversion counts one rank's batches over the whole dataset).
- Every checkpoint records the run's :class:`BatchPlan` (``meta['batch_plan']``); resuming
  under other images per iteration is one error (:class:`BatchPlanHook`).
- The recipe card (:mod:`vit5seg.engine.recipe`), read from the optimizer wrapper, schedulers
  and loop this Runner built, is the first thing a training logs (``RecipeCardHook`` of
  :mod:`vit5seg.engine.card_hook`, registered by name: this module does not import the card;
  ``tools/print_config.py --card`` builds the same objects: :mod:`vit5seg.engine.card`),
  with a warning where the images per iteration differ from the config's, and goes into the
  config the run saves as ``recipe_card``.
- ``train``, ``val`` and ``test`` end their dataloader workers when they return or raise.
  An iteration-based loop's loader never runs out, and a persistent one keeps its workers:
  their iterators lived on in the Runner's reference cycles, and an iterator the garbage
  collector frees waits out torch's 5 s join timeout per worker (measured with a bare
  DataLoader of 2 workers: 10 s; 0.01 s when its last reference goes). A Python process that
  ran a training stalled at some later moment; here the workers stop when the run ends.
"""

from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper
from mmengine.runner import BaseLoop, IterBasedTrainLoop, Runner
from mmengine.registry import RUNNERS  # the root registries: mmseg and mmdet configs both find them

from .accumulation import LOOP_TYPE, BatchPlan, check_resumed_plan
from .run_objects import (RunObjects, any_converts_epochs, build_schedulers, describe_epoch, epoch_steps, scale_lrs,
                          wrappers)


def end_loader_workers(holder) -> None:
    """Stop the worker processes of the live iterator ``holder`` keeps: mmengine's infinite
    iterator of an iteration-based train loop, or a ``persistent_workers`` DataLoader."""
    iterator = getattr(holder, '_iterator', None)
    if iterator is not None and hasattr(iterator, '_shutdown_workers'):
        iterator._shutdown_workers()  # what torch's iterator runs itself once it is exhausted
        holder._iterator = None


def trains(cfg) -> bool:
    """Whether ``cfg`` trains (mmengine's three keys of a training are set)."""
    return bool(cfg.get('train_cfg') and cfg.get('train_dataloader') and cfg.get('optim_wrapper'))


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

    def train(self):
        try:
            self.build_training_objects()
            return super().train()  # mmengine's build_* calls return the objects built here
        finally:
            self._end_workers(self._train_loop, self._val_loop)

    def build_training_objects(self) -> RunObjects:
        """What ``train`` builds before its first step, in mmengine's order: the train loop, the
        optimizer wrapper, the lr rule, the param schedulers. The run trains with them and its
        recipe card reads them; ``tools/print_config.py --card`` builds them by this same method
        (:func:`card_run_objects`)."""
        self._train_loop = self.build_train_loop(self._train_loop)
        self.optim_wrapper = self.build_optim_wrapper(self.optim_wrapper)
        self.scale_lr(self.optim_wrapper, self.auto_scale_lr)
        if self.param_schedulers is not None:
            self.param_schedulers = self.build_param_scheduler(self.param_schedulers)
        return self.run_objects()

    def run_objects(self) -> RunObjects:
        """The built objects the recipe card reads (after :meth:`build_training_objects`)."""
        schedulers = self.param_schedulers or []
        if isinstance(schedulers, dict):
            schedulers = [s for group in schedulers.values() for s in group]
        model = self.model.module if is_model_wrapper(self.model) else self.model
        size, length = getattr(self, '_epoch', (None, None))
        epoch = describe_epoch(size, self.batch_plan, length) if isinstance(size, int) else size
        micro = getattr(self.train_loop, 'micro_batches', None) or wrappers(self.optim_wrapper)[0]._accumulative_counts
        return RunObjects(model, self.optim_wrapper, list(schedulers), type(self.train_loop).__name__,
                          self.max_iters, epoch, getattr(self, '_lr_scale', 1.0), micro)

    # mmengine's Runner.iter builds the train loop, whose infinite iterator starts the train loader's
    # workers, when a hook asks for the iteration outside training (mmseg's SegVisualizationHook does
    # under tools/test.py --show-dir): val and test end those workers too
    def val(self):
        try:
            return super().val()
        finally:
            self._end_workers(self._val_loop, self._train_loop)

    def test(self):
        try:
            return super().test()
        finally:
            self._end_workers(self._test_loop, self._train_loop)

    @staticmethod
    def _end_workers(*loops) -> None:
        for loop in loops:
            if isinstance(loop, BaseLoop):  # built (a config dict until then)
                end_loader_workers(getattr(loop, 'dataloader_iterator', None))
                end_loader_workers(loop.dataloader)

    def register_hooks(self, default_hooks=None, custom_hooks=None) -> None:
        super().register_hooks(default_hooks, custom_hooks)
        self.register_hook(BatchPlanHook())
        self.register_hook(dict(type='RecipeCardHook'))   # vit5seg.engine.card_hook, by its registry name

    @property
    def batch_plan(self) -> BatchPlan:
        """This run's GPUs x images per GPU x micro-batches, against ``auto_scale_lr.base_batch_size``,
        read from what this Runner was given (the truth a resume is checked against, whatever the
        config says)."""
        loader, wrapper = self._train_dataloader, self.optim_wrapper
        per_gpu = loader['batch_size'] if isinstance(loader, dict) else loader.batch_size
        micro = wrapper.get('accumulative_counts', 1) if isinstance(wrapper, dict) else \
            wrappers(wrapper)[0]._accumulative_counts
        target = (self.auto_scale_lr or {}).get('base_batch_size')
        loop = self._train_loop
        steps = (loop.get('type') if isinstance(loop, dict) else type(loop).__name__) == LOOP_TYPE
        return BatchPlan(self.world_size, per_gpu, micro, target or self.world_size * per_gpu * micro,
                         iteration_is_step=steps or micro == 1)

    def _build_param_scheduler(self, scheduler, optim_wrapper) -> list:
        """mmengine's, with an epoch of a by-epoch scheduler converted to iterations as the
        iterations of one pass over the data (:func:`epoch_steps`). mmengine converts with
        ``len(train_dataloader)``, batches of one rank over the whole dataset: on n GPUs an
        epoch lasted n times too long, k x n under ``--accumulate k``."""
        if not isinstance(self.train_loop, IterBasedTrainLoop):
            return super()._build_param_scheduler(scheduler, optim_wrapper)
        epoch_length = None
        if any_converts_epochs(scheduler):
            size = len(self.train_dataloader.dataset)
            epoch_length = epoch_steps(size, self.batch_plan)
            self._epoch = (size, epoch_length)  # what the card shows: the length the schedulers were built with
        return build_schedulers(scheduler, optim_wrapper, epoch_length, self.max_iters)

    def scale_lr(self, optim_wrapper, auto_scale_lr=None) -> None:
        """Every lr times images per optimizer step / ``base_batch_size`` (micro-batches
        included) where ``auto_scale_lr.enable``; once (``train`` calls it after
        :meth:`build_training_objects` did). The factor is kept for the card."""
        if hasattr(self, '_lr_scale'):
            return
        self._lr_scale = 1.0
        if not auto_scale_lr or not auto_scale_lr.get('enable', False):
            return
        plan = self.batch_plan
        self._lr_scale = scale_lrs(optim_wrapper, plan, auto_scale_lr)
        self.logger.info(f'auto_scale_lr: {plan.describe()}; base_batch_size {plan.target}: every lr x '
                         f'{self._lr_scale:g}')


def forget_runner(runner) -> None:
    """Close and unregister the named logger and visualizer a Runner made, which a later Runner of
    the same second in this process would otherwise reuse (pointing into a removed folder), and
    remove its timestamped log folder."""
    import shutil
    for instance in (runner.logger, runner.visualizer):
        for handler in getattr(instance, 'handlers', []):
            handler.close()
        type(instance)._instance_dict.pop(instance.instance_name, None)
    shutil.rmtree(runner.log_dir, ignore_errors=True)


__all__ = ['BatchPlanHook', 'ViT5Runner', 'end_loader_workers', 'forget_runner', 'trains']
