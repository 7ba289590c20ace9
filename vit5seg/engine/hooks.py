"""Training hooks that keep a run's work safe: non-finite losses, exact resume, skipped samples.

``configs/_base_/default_runtime.py`` turns all three on.
"""
from typing import Optional

import torch
import torch.distributed as dist
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.registry import HOOKS  # the root registries: mmseg and mmdet configs both find them

from ..errors import ToolError


class NonFiniteLossError(RuntimeError, ToolError):
    """Training met a NaN/inf loss and was told to stop."""


def _finite_on_all_ranks(loss: torch.Tensor) -> bool:
    # Every rank must take the same decision: a rank that skipped its backward alone
    # would leave the others waiting in the gradient all-reduce.
    finite = torch.isfinite(loss.detach()).all().to(torch.int32).reshape(1)
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(finite, op=dist.ReduceOp.MIN)
    return bool(finite.item())


@HOOKS.register_module()
class NonFiniteLossHook(Hook):
    """Check the loss before every optimizer step.

    A NaN/inf loss never reaches ``backward``/``step``, so the weights in memory stay
    those of the last finite iteration and no checkpoint is ever written from them.
    With ``'skip'`` the buffers the forward pass updated (BatchNorm running statistics)
    are put back too: they are copied before each iteration, a few MB for UperNet.

    Args:
        action: ``'stop'``: raise :class:`NonFiniteLossError` naming the iteration and
            the last good checkpoint. ``'skip'``: drop that iteration's update, log it,
            and go on; ``max_skips`` skipped iterations in a row still stop the run.
        max_skips: consecutive skipped iterations tolerated with ``action='skip'``.
    """
    priority = 'VERY_HIGH'

    def __init__(self, action: str = 'stop', max_skips: int = 10):
        if action not in ('stop', 'skip'):
            raise ValueError(f"NonFiniteLossHook action must be 'stop' or 'skip', got {action!r}")
        if max_skips < 1:
            raise ValueError(f'NonFiniteLossHook max_skips must be >= 1, got {max_skips}')
        self.action = action
        self.max_skips = max_skips
        self.skipped_in_a_row = 0
        self.skipped_total = 0
        self._buffers = None

    def before_train(self, runner) -> None:
        wrapper = runner.optim_wrapper
        if getattr(wrapper, '_nonfinite_guard', False):
            return
        update_params = wrapper.update_params

        def guarded_update_params(loss, *args, **kwargs):
            if _finite_on_all_ranks(loss):
                self.skipped_in_a_row = 0
                return update_params(loss, *args, **kwargs)
            self._non_finite(runner, loss)
        wrapper.update_params = guarded_update_params
        wrapper._nonfinite_guard = True

    def _non_finite(self, runner, loss: torch.Tensor) -> None:
        it = runner.iter + 1  # the iteration being run, 1-based as the logs count
        value = loss.detach().float().cpu().reshape(-1)[0].item()
        last = runner.message_hub.get_info('last_ckpt')
        where = f'last good checkpoint: {last}' if last else 'no checkpoint was saved yet'
        if self.action == 'skip' and self.skipped_in_a_row < self.max_skips:
            self.skipped_in_a_row += 1
            self.skipped_total += 1
            runner.optim_wrapper.zero_grad()
            with torch.no_grad():
                for name, buf in runner.model.named_buffers():
                    if name in self._buffers:
                        buf.copy_(self._buffers[name])
            print_log(f'iteration {it}: non-finite loss ({value}), update skipped '
                      f'({self.skipped_in_a_row} in a row, {self.skipped_total} in all, '
                      f'stop after {self.max_skips} in a row)', logger='current', level=30)
            return
        detail = (f', after {self.skipped_in_a_row} skipped in a row (max_skips={self.max_skips})'
                  if self.action == 'skip' else '')
        raise NonFiniteLossError(
            f'non-finite loss ({value}) at iteration {it}{detail}; {where}. The update of iteration {it} '
            f'was not applied and no checkpoint was written from it. Resume with --resume '
            f'{last or "(no checkpoint yet)"} after lowering the lr or checking the data, or set '
            f"NonFiniteLossHook action='skip'.")

    def before_train_iter(self, runner, batch_idx: int, data_batch=None) -> None:
        if self.action == 'skip':
            self._buffers = {name: buf.detach().clone() for name, buf in runner.model.named_buffers()
                             if buf.is_floating_point()}

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        if self.skipped_total:
            runner.message_hub.update_scalar('train/skipped_nonfinite', self.skipped_total)


@HOOKS.register_module()
class RandomStateHook(Hook):
    """Keep torch's global RNG state in every checkpoint and restore it on resume.

    mmengine re-seeds on resume, so drop-path masks after a resume would differ from an
    uninterrupted run. The data side needs nothing: the sampler and the dataloader
    workers are seeded from the run's seed, and mmengine replays the skipped batches.
    The state is put back just before the first resumed iteration, after mmengine's
    own re-seeding and dataloader replay. Checkpoints hold rank 0's state, which is
    every rank's unless ``randomness.diff_rank_seed=True``.
    """
    priority = 'VERY_LOW'

    def __init__(self):
        self._pending: Optional[dict] = None

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        state = dict(torch=torch.get_rng_state())
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            state['cuda'] = torch.cuda.get_rng_state_all()
        checkpoint.setdefault('meta', {})['rng_state'] = state

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        if getattr(runner, '_resume', False) or runner.cfg.get('resume', False):
            self._pending = checkpoint.get('meta', {}).get('rng_state')

    def before_train_iter(self, runner, batch_idx: int, data_batch=None) -> None:
        if self._pending is None:
            return
        state, self._pending = self._pending, None
        torch.set_rng_state(state['torch'].cpu())
        cuda = state.get('cuda')
        if cuda is not None and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all([s.cpu() for s in cuda])


@HOOKS.register_module()
class SkippedSampleHook(Hook):
    """Report how many training samples ``CheckedLoading(skip_corrupt=True)`` dropped.

    The count is shared with the dataloader workers; it is logged as the scalar
    ``skipped_samples`` (in the log line and scalars.json) and once at the end.
    """
    priority = 'NORMAL'

    def __init__(self):
        self._reported = 0

    @staticmethod
    def _count(runner) -> int:
        from ..datasets.checks import skipped_samples
        return skipped_samples(runner.train_dataloader.dataset)

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        count = self._count(runner)
        if count:
            runner.message_hub.update_scalar('train/skipped_samples', count)
        if count > self._reported:
            print_log(f'{count} corrupt training sample(s) skipped so far (see the warnings above for which)',
                      logger='current', level=30)
            self._reported = count

    def after_train(self, runner) -> None:
        count = self._count(runner)
        if count:
            print_log(f'training finished with {count} corrupt sample(s) skipped', logger='current', level=30)
