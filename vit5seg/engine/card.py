"""The recipe card without a training: ``tools/print_config.py --card`` builds what a training
of the config builds before its first step, with the Runner's own code (:class:`CardRunner`),
and reads the card from it (:func:`vit5seg.engine.recipe.recipe_card`)."""
import copy
from typing import Optional

import torch
from mmengine.registry import DATASETS  # the root registry: mmseg and mmdet configs both find it

from .accumulation import BatchPlan, apply_plan, batch_plan
from .recipe import recipe_card
from .run_objects import RunObjects, any_converts_epochs, converts_epochs, scheduler_specs
from .runner import ViT5Runner, forget_runner, trains


@DATASETS.register_module()
class RecipeCardStandInDataset(torch.utils.data.Dataset):
    """The card's train data where the config's is not read: the loop is built over it and never
    iterated."""
    metainfo: dict = {}

    def __len__(self) -> int:
        return 1

    def __getitem__(self, index):
        raise IndexError('the recipe card builds the train loop without data and never iterates it')


class CardRunner(ViT5Runner):
    """ViT5Runner for ``tools/print_config.py --card``: it builds what a training builds before its
    first step (:meth:`build_training_objects`, the same code) and nothing else. What differs is
    where it builds: the model on the meta device (names and shapes, no memory), no device move or
    DDP, the plan :func:`card` computed once (``cfg.batch_plan``, the key tools/train.py writes too)
    for the lr rule, the train loader without workers (the config's data where a scheduler counts
    epochs and the data can be read, else a stand-in the loop never iterates; the card then says
    the epoch is unknown), a throwaway work dir."""

    @property
    def batch_plan(self) -> BatchPlan:
        """The plan :func:`card` computed, once: no processes to count here."""
        return BatchPlan(**self.cfg.batch_plan)

    @property
    def world_size(self) -> int:
        return self.batch_plan.gpus

    def build_model(self, model):
        if isinstance(model, torch.nn.Module):
            return model
        try:  # a copy each time: a segmentor's constructor edits its config (mmseg moves `pretrained`)
            with torch.device('meta'):
                return super().build_model(copy.deepcopy(model))
        except (RuntimeError, NotImplementedError):  # a head that reads a value while it builds (.item())
            return super().build_model(copy.deepcopy(model))

    def wrap_model(self, model_wrapper_cfg, model):
        return model

    # it writes nothing: no config dump, no environment log, no visualizer backend (each formats the
    # whole config with yapf, 95% of a card's time)
    def _log_env(self, env_cfg) -> None:
        pass

    def dump_config(self) -> None:
        pass

    def build_visualizer(self, visualizer=None):
        from mmengine.visualization import Visualizer
        return Visualizer.get_instance(self._experiment_name)

    def build_dataloader(self, dataloader, seed=None, diff_rank_seed=False):
        """mmengine's; where the config's data cannot be read here, the stand-in, and the reason
        kept for the card."""
        try:
            return super().build_dataloader(dataloader, seed=seed, diff_rank_seed=diff_rank_seed)
        except Exception as e:  # no data here
            self._data_unknown = f'{type(e).__name__}: {e}'
            return super().build_dataloader({**dataloader, 'dataset': dict(type='RecipeCardStandInDataset')},
                                            seed=seed, diff_rank_seed=diff_rank_seed)

    def _build_param_scheduler(self, scheduler, optim_wrapper) -> list:
        unknown = getattr(self, '_data_unknown', None)
        if unknown and any_converts_epochs(scheduler):  # no epoch to convert: the card says why
            scheduler = [s for s in scheduler_specs(scheduler) if not converts_epochs(s)]
            self._epoch = (f'unknown: the train dataset cannot be read here ({unknown})', None)
        return super()._build_param_scheduler(scheduler, optim_wrapper)


def _card_cfg(cfg, plan: BatchPlan, work_dir: str):
    """``cfg`` as :class:`CardRunner` builds it: the plan's loop and counts, no weights to load,
    logs at warnings only, a loader without workers over the config's data where a scheduler
    counts epochs, else the stand-in."""
    cfg = copy.deepcopy(cfg)
    apply_plan(cfg, plan)
    cfg.update(work_dir=work_dir, load_from=None, resume=False, log_level='WARNING', batch_plan=plan._asdict(),
               launcher='none')
    if cfg.optim_wrapper.get('type') == 'AmpOptimWrapper' and not torch.cuda.is_available():
        cfg.optim_wrapper.type = 'OptimWrapper'  # AmpOptimWrapper asserts a GPU when built; same param groups
        for key in ('loss_scale', 'dtype', 'use_fsdp'):
            cfg.optim_wrapper.pop(key, None)
    loader = cfg.train_dataloader
    loader.update(num_workers=0, persistent_workers=False)
    if not any_converts_epochs(cfg.get('param_scheduler')):  # no epoch to count: the data is not read
        loader.dataset = dict(type='RecipeCardStandInDataset')
    return cfg


def card_run_objects(cfg, plan: BatchPlan) -> RunObjects:
    """The objects a training of ``cfg`` under ``plan`` builds before its first step, built by
    :class:`CardRunner` (the Runner's own code); nothing of it is left behind: its work dir,
    logger and visualizer are removed and the random state is restored."""
    import random
    import tempfile

    import numpy as np
    from mmseg.utils import register_all_modules
    register_all_modules(init_default_scope=False)
    states = random.getstate(), np.random.get_state(), torch.get_rng_state()
    with tempfile.TemporaryDirectory(prefix='vit5seg-card-') as work_dir:
        runner = CardRunner.from_cfg(_card_cfg(cfg, plan, work_dir))
        try:
            return runner.build_training_objects()
        finally:
            forget_runner(runner)
            random.setstate(states[0])
            np.random.set_state(states[1])
            torch.set_rng_state(states[2])


def card(cfg, gpus: int, accumulate: Optional[str] = 'auto', config: str = ''):
    """The recipe card of ``cfg`` launched on ``gpus`` processes with ``accumulate`` (as
    ``tools/train.py --accumulate``; None: no flag), read from the objects the training would
    build (:func:`card_run_objects`): what ``tools/print_config.py --card`` prints."""
    plan = batch_plan(cfg, gpus, accumulate)
    run = card_run_objects(cfg, plan) if trains(cfg) else None
    return recipe_card(cfg, gpus, config=config, run=run, plan=plan)


__all__ = ['CardRunner', 'RecipeCardStandInDataset', 'card', 'card_run_objects']
