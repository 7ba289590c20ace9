"""A Runner's dataloader workers end when ``train``, ``test`` or ``val`` returns or raises, not
when the garbage collector frees the Runner: an iteration-based loop's infinite iterator and a
``persistent_workers`` loader kept them alive, and freeing them later joined each worker with
torch's 5 s timeout (vit5seg.engine.runner). Worker processes are read from the standard
library (``multiprocessing.active_children``)."""
import multiprocessing

import pytest
from mmengine.evaluator import BaseMetric
from mmengine.hooks import Hook

from test_engine_accumulation import Points, Regressor
from vit5seg.engine import ViT5Runner


def children() -> set:
    return {p.pid for p in multiprocessing.active_children()}


class Workers(Hook):
    """The worker processes started since it was made, seen at each training iteration; raises
    at iteration ``fail_at``."""
    def __init__(self, fail_at=None):
        self.before, self.seen, self.fail_at = children(), set(), fail_at

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        self.seen |= children() - self.before
        if runner.iter + 1 == self.fail_at:
            raise RuntimeError('stopped by the test')


class Count(BaseMetric):
    def process(self, data_batch, data_samples):
        self.results.append(len(data_batch['x']))

    def compute_metrics(self, results):
        return dict(images=sum(results))


def predicting_regressor():
    model = Regressor()
    loss_forward = model.forward
    model.forward = lambda x, y, mode='loss': loss_forward(x, y) if mode == 'loss' else [0] * len(x)
    return model


def runner(tmp_path, hook, persistent):
    loader = dict(dataset=Points(), batch_size=4, num_workers=2, persistent_workers=persistent,
                  collate_fn=dict(type='default_collate'))
    return ViT5Runner(
        model=predicting_regressor(), work_dir=str(tmp_path), default_scope='mmseg', custom_hooks=[hook],
        train_dataloader=dict(loader, sampler=dict(type='InfiniteSampler', shuffle=True)),
        train_cfg=dict(type='IterBasedTrainLoop', max_iters=3, val_interval=3),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.01)),
        val_dataloader=dict(loader, sampler=dict(type='DefaultSampler', shuffle=False)),
        val_cfg=dict(), val_evaluator=dict(type=Count),
        test_dataloader=dict(loader, sampler=dict(type='DefaultSampler', shuffle=False)),
        test_cfg=dict(), test_evaluator=dict(type=Count),
        default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=1000)), log_level='WARNING')


@pytest.mark.parametrize('persistent', [False, True])
def test_workers_end_when_train_val_and_test_return(tmp_path, persistent):
    hook = Workers()
    run = runner(tmp_path, hook, persistent)
    run.train()
    assert len(hook.seen) >= 2 and children() <= hook.before   # the train and validation workers are gone
    before = children()
    assert run.val() == {'images': 64} and children() <= before
    assert run.test() == {'images': 64} and children() <= before
    if persistent:  # the loaders' workers ran, and are gone: their iterators are dropped
        assert run.val_dataloader._iterator is None and run.test_dataloader._iterator is None


def test_workers_end_when_training_raises(tmp_path):
    hook = Workers(fail_at=2)
    with pytest.raises(RuntimeError, match='stopped by the test'):
        runner(tmp_path, hook, persistent=False).train()
    assert len(hook.seen) >= 2 and children() <= hook.before


class ReadsTheIteration(Hook):
    """Reads ``runner.iter`` at each test iteration, as mmseg's SegVisualizationHook does under
    tools/test.py --show-dir: mmengine then builds the train loop, whose iterator starts the train
    loader's workers."""
    def __init__(self):
        self.seen = set()

    def after_test_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        assert runner.iter == 0
        self.seen |= children()


def test_the_train_workers_a_test_run_starts_end_with_it(tmp_path):
    before = children()
    hook = ReadsTheIteration()
    run = runner(tmp_path, hook, persistent=False)
    assert run.test() == {'images': 64}
    assert len(hook.seen - before) >= 4    # the test loader's 2 and the train loader's 2
    assert children() <= before and run.train_loop.dataloader_iterator._iterator is None
