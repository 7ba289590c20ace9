"""What only shows on more than one process (issue #43), in one torchrun launch of two gloo
ranks on CPU: ``auto_scale_lr`` scales the lr of every param group by the images of every
rank, and an EoMT step split over two ranks gives the losses one process computes on all the
images (the mask losses are normalised by the mean of the ranks' target-mask counts, and
DDP averages the ranks' gradients)."""
import json
import os
import socket
import subprocess
import sys

import pytest
import torch

from conftest import REPO
from test_engine_accumulation import _fixed_rand
from test_models_eomt import labelled_batch

pytestmark = pytest.mark.slow

WORKER = r'''
import json, os, sys
import torch
import torch.nn as nn
from mmengine.model import BaseModel
sys.path.insert(0, sys.argv[2])  # the tests folder
import vit5seg
from vit5seg.engine.runner import ViT5Runner
from test_engine_accumulation import Points, _fixed_rand
from test_models_eomt import labelled_batch


class TwoParts(BaseModel):
    def __init__(self):
        super().__init__()
        self.body, self.head = nn.Linear(6, 8), nn.Linear(8, 3)

    def forward(self, x, y, mode='loss'):
        return dict(loss=((self.head(torch.tanh(self.body(x))) - y) ** 2).mean())


out, rank = sys.argv[1], int(os.environ['RANK'])
# 2 ranks x 2 images x 2 micro-batches = 8 images per step, base 4: every lr x 2; the head at 0.1 of it
runner = ViT5Runner(
    model=TwoParts(), work_dir=os.path.join(out, 'lr'), default_scope='mmseg', launcher='pytorch',
    env_cfg=dict(dist_cfg=dict(backend='gloo')),
    train_dataloader=dict(dataset=Points(), batch_size=2, num_workers=0, collate_fn=dict(type='default_collate'),
                          sampler=dict(type='InfiniteSampler', shuffle=False)),
    train_cfg=dict(type='AccumulatingIterBasedTrainLoop', max_iters=1, val_interval=100),
    optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1), accumulative_counts=2,
                       paramwise_cfg=dict(custom_keys={'head': dict(lr_mult=0.1)})),
    auto_scale_lr=dict(enable=True, base_batch_size=4), randomness=dict(seed=0), log_level='WARNING')
runner.train()
model = runner.model.module
names = {id(p): n for n, p in model.named_parameters()}
lrs = {names[id(p)]: g['lr'] for g in runner.optim_wrapper.optimizer.param_groups for p in g['params']}

# an EoMT loss on this rank's half of the batch, the same model and points on both ranks
from vit5seg.models.builder import build_segmentor
from mmengine.config import Config
torch.rand = _fixed_rand
torch.manual_seed(0)
eomt = build_segmentor(Config.fromfile(sys.argv[3]))
eomt.train()
inputs, samples = labelled_batch(4, hw=(64, 64))
losses = eomt.loss(inputs[2 * rank:2 * rank + 2], samples[2 * rank:2 * rank + 2])
with open(os.path.join(out, f'rank{rank}.json'), 'w') as f:
    json.dump(dict(lrs=lrs, world=runner.world_size,
                   losses={k: float(v) for k, v in losses.items() if 'loss' in k}), f)
from vit5seg.engine.launch import end_process_group
end_process_group()  # before interpreter shutdown, where gloo can abort a run that succeeded
'''
TINY_EOMT = REPO / 'configs' / 'tiny' / 'vit5_eomt_synthetic.py'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


@pytest.fixture(scope='module')
def ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp('two_ranks')
    (out / 'worker.py').write_text(WORKER)
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'MASTER_ADDR': '127.0.0.1'}
    done = subprocess.run([sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node=2',
                           f'--master_port={_free_port()}', str(out / 'worker.py'), str(out), str(REPO / 'tests'),
                           str(TINY_EOMT)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return [json.loads((out / f'rank{r}.json').read_text()) for r in (0, 1)]


def test_auto_scale_lr_on_two_processes_scales_every_param_group(ranks):
    for rank in ranks:
        assert rank['world'] == 2
        assert rank['lrs'] == pytest.approx({'body.weight': 0.2, 'body.bias': 0.2, 'head.weight': 0.02,
                                             'head.bias': 0.02})


def test_an_eomt_step_on_two_ranks_gives_the_losses_of_one_process(ranks, monkeypatch):
    """Each image of labelled_batch has 3 target masks, so both ranks count as many: the mean of
    the two ranks' losses is the one-process loss on the 4 images, each loss term alone."""
    from mmengine.config import Config

    from vit5seg.models.builder import build_segmentor
    monkeypatch.setattr(torch, 'rand', _fixed_rand)
    torch.manual_seed(0)
    model = build_segmentor(Config.fromfile(str(TINY_EOMT)))
    model.train()
    inputs, samples = labelled_batch(4, hw=(64, 64))
    whole = {k: float(v) for k, v in model.loss(inputs, samples).items() if 'loss' in k}
    assert set(whole) == set(ranks[0]['losses']) and any('mask_dice' in k for k in whole)
    mean = {k: (ranks[0]['losses'][k] + ranks[1]['losses'][k]) / 2 for k in whole}
    assert mean == pytest.approx(whole, rel=1e-5)
