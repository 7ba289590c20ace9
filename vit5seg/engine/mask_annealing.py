"""The masked-attention annealing of mask-classification decoders (EoMT's recipe, tue-mps/eomt
training/lightning_module.py): each masked block i keeps its mask with probability
P_i(t) = 1 before s_i, (1 - (t - s_i) / (e_i - s_i)) ** 0.9 between, 0 from e_i on; the hook
sets the query decoder's ``mask_probs`` every iteration.
"""
import math
from typing import List, Optional, Sequence

from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper
from mmengine.registry import HOOKS  # the root registry: mmseg and mmdet configs both find it

from ..utils.config_values import defaults_of


def default_windows(num_blocks: int, max_iters: int) -> List[tuple]:
    """The windows of EoMT's published DINOv2 recipes (ADE20K, COCO, Cityscapes; 3, 4 or 5
    masked blocks): each block anneals over a sixth of the schedule, the starts spread
    evenly from 1/6 to 4/6, so masking always ends at 5/6 (halves rounded up, as theirs).
    One block: 1/6 to 5/6."""
    def rounded(x: float) -> int:
        return math.floor(x + 0.5)
    sixth = max_iters / 6
    if num_blocks == 1:
        return [(rounded(sixth), rounded(5 * sixth))]
    starts = [rounded(sixth + i * 3 * sixth / (num_blocks - 1)) for i in range(num_blocks)]
    return [(start, start + rounded(sixth)) for start in starts]


def annealing_windows(starts: Optional[Sequence[int]], ends: Optional[Sequence[int]], num_blocks: int,
                      max_iters: int) -> List[tuple]:
    """Each masked block's (start, end): the given ones, or :func:`default_windows` of the
    schedule where none are given (what EoMTMaskAnnealingHook anneals over)."""
    if starts is None:
        return default_windows(num_blocks, max_iters)
    return list(zip(starts, ends))


def mask_probability(t: int, start: int, end: int, power: float = 0.9) -> float:
    if t < start:
        return 1.0
    if t >= end:
        return 0.0
    return (1 - (t - start) / (end - start)) ** power


@HOOKS.register_module()
class EoMTMaskAnnealingHook(Hook):
    """Sets the query decoder's ``mask_probs`` before every training iteration from the
    iteration count (so a resumed run continues where it stopped) and logs each as
    ``mask_prob_{i}``.

    Args:
        starts, ends: iteration windows per masked block, first block first; ``None``:
            :func:`default_windows` of ``train_cfg.max_iters`` (EoMT's recipes' rule).
        power: of the polynomial ramp.
    """

    priority = 'NORMAL'
    anneals_masks = True   # what the query head's card row asks of a custom hook

    @classmethod
    def card_rows(cls, given: dict, prefix: str, cfg):
        """The recipe card's rows: the windows in iterations (the head's masked blocks, the run's
        ``max_iters``) and the ramp's power, as (section, key, value, where from)."""
        from mmseg.registry import MODELS
        head = cfg.model.get('decode_head') or {}
        head_cls = MODELS.get(head.get('type')) if isinstance(head.get('type'), str) else None
        num_blocks = {**(defaults_of(head_cls, {}) if head_cls else {}), **head}.get('num_blocks')
        if num_blocks is None:
            yield 'schedule', 'mask annealing windows', 'none: the model has no masked blocks to anneal', 'derived'
            return
        hook = {**defaults_of(cls, {}), **given}
        windows = annealing_windows(hook['starts'], hook['ends'], num_blocks, cfg.train_cfg.max_iters)
        yield 'schedule', 'mask annealing windows', tuple(f'block {i}: {s}-{e}' for i, (s, e) in enumerate(windows)), \
            'derived'
        yield 'schedule', 'mask annealing power', hook['power'], 'default' if 'power' not in given else 'derived'

    def __init__(self, starts: Optional[Sequence[int]] = None, ends: Optional[Sequence[int]] = None,
                 power: float = 0.9):
        if (starts is None) != (ends is None):
            raise ValueError('give EoMTMaskAnnealingHook both starts and ends, or neither')
        if starts is not None:
            if len(starts) != len(ends) or any(e <= s for s, e in zip(starts, ends)):
                raise ValueError(f'annealing windows need one end after each start, got starts={starts} '
                                 f'ends={ends}')
        self.starts, self.ends, self.power = starts, ends, power
        self.windows = None

    @staticmethod
    def _decoder(runner):
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        decoder = getattr(model, 'decoder', None)
        if not getattr(decoder, 'mask_probs', None):
            raise TypeError(f'EoMTMaskAnnealingHook needs a query decoder with masked blocks (EoMT\'s, PMT\'s), '
                            f'got {type(model).__name__}')
        return decoder

    def before_train(self, runner) -> None:
        blocks = len(self._decoder(runner).mask_probs)
        if self.starts is not None and len(self.starts) != blocks:
            raise ValueError(f'EoMTMaskAnnealingHook has {len(self.starts)} windows for {blocks} masked blocks')
        self.windows = annealing_windows(self.starts, self.ends, blocks, runner.max_iters)
        late = [e for _, e in self.windows if e > runner.max_iters]
        if late:
            # the model would still be masked when training ends, and inference never masks
            raise ValueError(f'EoMTMaskAnnealingHook: the annealing windows end at {late}, after '
                             f'train_cfg.max_iters={runner.max_iters}; shorter schedules need their own '
                             f'custom_hooks starts=/ends= (or neither: the default windows of any schedule)')

    def before_train_iter(self, runner, batch_idx: int, data_batch=None) -> None:
        decoder = self._decoder(runner)
        decoder.mask_probs = [mask_probability(runner.iter, s, e, self.power) for s, e in self.windows]
        for i, p in enumerate(decoder.mask_probs):
            runner.message_hub.update_scalar(f'train/mask_prob_{i}', p)


__all__ = ['EoMTMaskAnnealingHook', 'annealing_windows', 'default_windows', 'mask_probability']
