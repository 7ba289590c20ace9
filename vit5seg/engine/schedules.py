"""Learning-rate schedules of the recipes that mmengine has no scheduler for:

- EoMT's two-stage warm-up (tue-mps/eomt training/two_stage_warmup_poly_schedule.py): the new
  parameters warm up while the backbone's lr is 0, then the backbone warms up, then everything
  decays polynomially;
- Meta's ``WarmupOneCycleLR`` of its segmentation evaluations (facebookresearch/dinov3
  dinov3/eval/segmentation/schedulers.py), the linear probe's schedule;
- PMT's ``WarmupCosineSchedule`` (tue-mps/pmt image/training/warmup_cosine_schedule.py): a linear
  warm-up from 0 and a cosine to an absolute floor. mmengine's LinearLR cannot start at 0 (its
  chained factors divide by the previous one) and its cosine's floor is reached at ``end``, so
  both are one closed form here.
"""
import math

from mmengine.optim.scheduler.lr_scheduler import LRSchedulerMixin
from mmengine.optim.scheduler.param_scheduler import _ParamScheduler
from mmengine.registry import PARAM_SCHEDULERS  # the root registry: mmseg and mmdet configs both find it


@PARAM_SCHEDULERS.register_module()
class TwoStageWarmupPolyLR(LRSchedulerMixin, _ParamScheduler):
    """Per step t (closed form, so a resumed run gets the same lr):

    - new parameters (groups without ``backbone``): ``t / w1`` of their lr until ``w1``,
      then ``(1 - (t - w1) / (T - w1)) ** power``;
    - backbone groups (``backbone=True``, set by ViT5OptimWrapperConstructor): 0 until
      ``w1``, ``(t - w1) / w2`` until ``w1 + w2``, then
      ``(1 - (t - w1 - w2) / (T - w1 - w2)) ** power``.

    ``end`` is T. Args ``warmup_new`` (w1) and ``warmup_backbone`` (w2).
    """

    def __init__(self, optimizer, warmup_new: int = 500, warmup_backbone: int = 1000, power: float = 0.9,
                 begin: int = 0, end: int = 40000, last_step: int = -1, by_epoch: bool = False,
                 verbose: bool = False):
        if warmup_new <= 0 or warmup_backbone < 0 or warmup_new + warmup_backbone >= end - begin:
            raise ValueError(f'the warm-ups ({warmup_new} + {warmup_backbone} iterations) must end before '
                             f'the schedule ({end - begin})')
        groups = optimizer.param_groups
        if not any('backbone' in g for g in groups):
            raise ValueError('TwoStageWarmupPolyLR needs parameter groups marked backbone=True/False: use '
                             "optim_wrapper.constructor='ViT5OptimWrapperConstructor'")
        self.warmup_new, self.warmup_backbone, self.power = warmup_new, warmup_backbone, power
        super().__init__(optimizer, begin=begin, end=end, last_step=last_step,
                         by_epoch=by_epoch, verbose=verbose)

    def factor(self, t: int, backbone: bool) -> float:
        total = self.end - self.begin
        w1, w2 = self.warmup_new, self.warmup_backbone
        if not backbone:
            return t / w1 if t < w1 else (1 - (t - w1) / (total - w1)) ** self.power
        if t < w1:
            return 0.0
        if t < w1 + w2:
            return (t - w1) / w2
        return (1 - (t - w1 - w2) / (total - w1 - w2)) ** self.power

    def _get_value(self):
        return [g['initial_lr'] * self.factor(self.last_step, g.get('backbone', False))
                for g in self.optimizer.param_groups]


@PARAM_SCHEDULERS.register_module()
class WarmupOneCycleLR(LRSchedulerMixin, _ParamScheduler):
    """Meta's ``WarmupOneCycleLR`` without momentum cycling (its linear probe's ``use_beta1: False``,
    ``update_momentum: False``; ``pct_start`` changes no lr there). Per step t of T = end - begin,
    for a group whose lr is m (closed form, so a resumed run gets the same lr):

    - t < ``warmup_iters`` (w), ``warmup_ratio`` r > 0: ``m (1 - (1 - t/w)(1 - r)) (1 - t/T)``;
      with r = 0 (Meta's other rule): ``m / f + m (1 + cos(pi t / T)) / 2 * t / w``;
    - after: the anneal from m to ``m / (d f)`` (d = ``div_factor``, f = ``final_div_factor``) at
      ``(t + 1) / T`` for ``'cos'`` (Meta's cosine looks one step ahead), ``t / T`` for ``'linear'``.

    ``lag``: step t runs at the rule's lr of max(t - lag, 0). Meta's loop steps its scheduler after
    every iteration but the first (facebookresearch/dinov3 dinov3/eval/segmentation/train.py:140,
    ``if global_step > 0: scheduler.step()``), so its iteration t runs at the lr of t - 1: lag 1.

    Meta's linear probe: w 1500, r 1e-6, f inf (the lr ends at 0), cosine, lag 1.
    """

    def __init__(self, optimizer, warmup_iters: int = 0, warmup_ratio: float = 0., div_factor: float = 25.,
                 final_div_factor: float = 1000., anneal_strategy: str = 'cos', lag: int = 0, begin: int = 0,
                 end: int = 40000, last_step: int = -1, by_epoch: bool = False, verbose: bool = False):
        if anneal_strategy not in ('cos', 'linear'):
            raise ValueError(f"WarmupOneCycleLR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
        if not 0 <= warmup_iters < end - begin:
            raise ValueError(f'WarmupOneCycleLR: warmup_iters={warmup_iters} must be within the schedule '
                             f'({end - begin} steps)')
        if not 0 <= warmup_ratio <= 1:
            raise ValueError(f'WarmupOneCycleLR: warmup_ratio={warmup_ratio} must be within [0, 1]')
        self.warmup_iters, self.warmup_ratio, self.anneal_strategy = warmup_iters, warmup_ratio, anneal_strategy
        if lag < 0:
            raise ValueError(f'WarmupOneCycleLR: lag={lag} must be 0 or more steps')
        self.div_factor, self.final_div_factor, self.lag = div_factor, final_div_factor, lag
        super().__init__(optimizer, begin=begin, end=end, last_step=last_step, by_epoch=by_epoch, verbose=verbose)

    def factor(self, t: int) -> float:
        """The lr of step t over the group's lr."""
        total, w = self.end - self.begin, self.warmup_iters
        if t < w:
            if self.warmup_ratio:
                return (1 - (1 - t / w) * (1 - self.warmup_ratio)) * (1 - t / total)
            return 1 / self.final_div_factor + (1 + math.cos(math.pi * t / total)) / 2 * t / w
        low = 1 / (self.div_factor * self.final_div_factor)
        if self.anneal_strategy == 'cos':
            return low + (1 - low) / 2 * (math.cos(math.pi * (t + 1) / total) + 1)
        return (low - 1) * t / total + 1

    def _get_value(self):
        return [g['initial_lr'] * self.factor(max(self.last_step - self.lag, 0)) for g in self.optimizer.param_groups]


@PARAM_SCHEDULERS.register_module()
class WarmupCosineLR(LRSchedulerMixin, _ParamScheduler):
    """PMT's schedule. Per step t of T = end - begin, for a group whose lr is m:
    ``m t / w`` for t < w (``warmup_iters``), then ``min_lr + (m - min_lr)(1 + cos(pi (t - w) / (T - w))) / 2``.
    """

    def __init__(self, optimizer, warmup_iters: int = 0, min_lr: float = 1e-9, begin: int = 0, end: int = 40000,
                 last_step: int = -1, by_epoch: bool = False, verbose: bool = False):
        if not 0 <= warmup_iters < end - begin:
            raise ValueError(f'WarmupCosineLR: warmup_iters={warmup_iters} must be within the schedule '
                             f'({end - begin} steps)')
        self.warmup_iters, self.min_lr = warmup_iters, min_lr
        super().__init__(optimizer, begin=begin, end=end, last_step=last_step, by_epoch=by_epoch, verbose=verbose)

    def lr(self, t: int, base: float) -> float:
        w, total = self.warmup_iters, self.end - self.begin
        if t < w:
            return base * t / w
        return self.min_lr + 0.5 * (base - self.min_lr) * (1 + math.cos(math.pi * (t - w) / max(1, total - w)))

    def _get_value(self):
        return [self.lr(self.last_step, g['initial_lr']) for g in self.optimizer.param_groups]


__all__ = ['TwoStageWarmupPolyLR', 'WarmupCosineLR', 'WarmupOneCycleLR']
