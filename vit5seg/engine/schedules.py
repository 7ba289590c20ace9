"""Learning-rate schedules of the recipes that mmengine has no scheduler for: EoMT's two-stage
warm-up (tue-mps/eomt training/two_stage_warmup_poly_schedule.py): the new parameters warm up
while the backbone's lr is 0, then the backbone warms up, then everything decays polynomially.
"""

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


__all__ = ['TwoStageWarmupPolyLR']
