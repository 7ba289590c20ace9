"""The recipe card as the first thing a training logs: :class:`RecipeCardHook`, which ``ViT5Runner``
registers by its registry name (so the Runner does not import the card)."""
from mmengine.hooks import Hook
from mmengine.registry import HOOKS  # the root registry: mmseg and mmdet configs both find it
from mmengine.runner import BaseLoop

from .recipe import recipe_card
from .runner import trains


@HOOKS.register_module()
class RecipeCardHook(Hook):
    """Logs the recipe card of the run before its first step, read from the objects the Runner
    built (optimizer wrapper, schedulers, train loop: ``before_run`` comes after them), with a
    warning where the images per iteration differ from the config's, and saves it with the
    run's config as ``recipe_card``."""
    priority = 'HIGHEST'

    def before_run(self, runner) -> None:
        if not (isinstance(runner._train_loop, BaseLoop) and trains(runner.cfg)):
            return  # a test or validation run
        plan, run = runner.batch_plan, runner.run_objects()
        card = recipe_card(runner.cfg, plan.gpus, config=runner.cfg.filename or '', run=run, plan=plan)
        text = card.text()
        runner.logger.info(text)
        for warning in card.warnings:
            runner.logger.warning(warning)
        runner.cfg.recipe_card = text.splitlines()
        runner.dump_config()  # again, now with the card (Runner.__init__ wrote it without)


__all__ = ['RecipeCardHook']
