"""The config's images per iteration on any GPU count (issue #33): the plan, the
accumulating loop against one big batch on mmengine's Runner, resuming at a step boundary,
and the gradients of 4 micro-batches of 2 against one batch of 8 on our segmentors:
equal where the loss is a mean over equal parts, and exactly what changes where not (BN,
EoMT's per-micro-batch normalisation)."""
import pytest
import torch
import torch.nn as nn
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.model import BaseModel
from mmengine.runner import Runner

import vit5seg  # noqa: F401  (registers the loop)
from conftest import REPO, run_script
from test_models_eomt import labelled_batch, tiny_eomt
from vit5seg.engine.accumulation import AccumulationError, BatchPlan, apply_plan, batch_plan
from vit5seg.engine.recipe import recipe_card
from vit5seg.engine.card import card
from vit5seg.engine.runner import ViT5Runner
from vit5seg.models.builder import tiny_segmentor

ENTRY = REPO / 'configs' / 'vit5_upernet_ade20k.py'


# --- the plan ----------------------------------------------------------------------------

@pytest.mark.parametrize('gpus, micro', [(1, 8), (2, 4), (4, 2), (8, 1), (16, 1)])
def test_auto_keeps_16_images_per_iteration_on_1_to_8_gpus(gpus, micro):
    cfg = Config.fromfile(str(ENTRY))
    plan = batch_plan(cfg, gpus, 'auto')
    assert plan == BatchPlan(gpus, 2, micro, 16)
    assert plan.images_per_iteration == max(16, 2 * gpus)
    apply_plan(cfg, plan)
    lr = cfg.optim_wrapper.optimizer.lr
    if micro > 1:
        assert cfg.train_cfg.type == 'AccumulatingIterBasedTrainLoop' and cfg.optim_wrapper.accumulative_counts == micro
    else:
        assert cfg.train_cfg.type == 'IterBasedTrainLoop' and 'accumulative_counts' not in cfg.optim_wrapper
    assert lr == 6e-5 and cfg.train_cfg.max_iters == 160000  # lr and schedule as configured


def test_plans_that_cannot_be_are_one_error():
    cfg = Config.fromfile(str(ENTRY))
    with pytest.raises(AccumulationError, match='16 images per iteration.*3 GPU'):
        batch_plan(cfg, 3, 'auto')
    for bad in ('0', 'x', '-2'):
        with pytest.raises(AccumulationError, match='positive number'):
            batch_plan(cfg, 1, bad)
    cfg.pop("auto_scale_lr")
    with pytest.raises(AccumulationError, match='auto_scale_lr.base_batch_size'):
        batch_plan(cfg, 1, 'auto')
    assert batch_plan(cfg, 2, '3') == BatchPlan(2, 2, 3, 12)
    cfg.train_cfg.type = 'EpochBasedTrainLoop'
    with pytest.raises(AccumulationError, match='IterBasedTrainLoop'):
        apply_plan(cfg, BatchPlan(1, 2, 8, 16))


def test_a_card_of_two_accumulations_is_one_line():
    out = run_script(REPO / 'tools' / 'print_config.py', ENTRY, '--card', '--accumulate', '3', '--cfg-options',
                     'optim_wrapper.accumulative_counts=4')
    assert out.returncode == 1 and out.stderr == (
        "error: --accumulate 3: the config accumulates mmengine's way (optim_wrapper.accumulative_counts=4: an "
        "iteration is one micro-batch), --accumulate makes an iteration one optimizer step; use one of them "
        "(--cfg-options optim_wrapper.accumulative_counts=1 --accumulate 3, or no --accumulate)\n"), out.stderr
    # a run's saved config (the accumulating loop named) keeps its count; another is refused
    saved = ['train_cfg.type=AccumulatingIterBasedTrainLoop', 'optim_wrapper.accumulative_counts=4']
    out = run_script(REPO / 'tools' / 'print_config.py', ENTRY, '--card', '--gpus', '1', '--cfg-options', *saved)
    assert out.returncode == 0 and '  max_iters counts: 160000 optimizer steps of 8 images (4 micro-batch(es) ' \
        'each)' in out.stdout.splitlines(), out.stderr
    out = run_script(REPO / 'tools' / 'print_config.py', ENTRY, '--card', '--accumulate', '3', '--cfg-options', *saved)
    assert out.returncode == 1 and out.stderr == ('error: optim_wrapper.accumulative_counts=4 differs from the 3 '
                                                  'micro-batches asked for\n'), out.stderr


BEIT = 'beit/beit-large_upernet_8xb1-amp-160k_ade20k-640x640{}.py'


@pytest.mark.parametrize('variant', ['', '_ms'])
def test_mmseg_beit_large_accumulates_the_mmengine_way_on_the_card(variant):
    """mmseg's own BEiT-L configs (accumulative_counts=2, schedule_320k, PolyLR to 160000): 320000
    iterations are micro-batches of 8 images on 8 GPUs, so 160000 optimizer steps of 16 images; the
    lr schedule ends halfway and the card says so. Only the card on stdout (issue #51)."""
    import mmseg
    from pathlib import Path
    config = Path(mmseg.__file__).parent / '.mim' / 'configs' / BEIT.format(variant)
    out = run_script(REPO / 'tools' / 'print_config.py', config, '--card', '--gpus', '8')
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f'recipe card: {config}' and 'set param' not in out.stdout and 'set param' in out.stderr
    assert 'WARNING: PolyLR ends at iteration 160000 of 320000: lr 0 after' in lines
    # a component's line: what the config gives, then after '|' what the class fills in (mmseg's defaults)
    assert '  train_dataloader.dataset.pipeline.3: RandomCrop crop_size=(640, 640) cat_max_ratio=0.75 | ' \
           'ignore_index=255' in lines
    for line in ('  micro-batches per step: 2', '  images per iteration: 8', '  train loop: IterBasedTrainLoop',
                 '  max_iters counts: 320000 iterations of 1 micro-batch = 160000 optimizer steps of 16 images',
                 "  schedulers in iterations: ('LinearLR lr iterations 0-3000 start_factor=1e-06 end_factor=1.0', "
                 "'PolyLR lr iterations 3000-160000 eta_min=0.0 power=1.0')"):
        assert line in lines, line


def test_run_seeds_on_2_gpus_prints_16_images_per_iteration():
    out = run_script(REPO / 'tools' / 'run_seeds.py', ENTRY, '--seeds', '0', '--gpus', '2', '--print', cwd=REPO)
    assert out.returncode == 0, out.stderr
    comment, command = out.stdout.splitlines()
    assert comment == '# each seed: 2 GPU(s) x 2 images x 4 micro-batch(es) = 16 images per iteration'
    assert 'dist_train.sh' in command and f'{ENTRY} 2 ' in command and '--accumulate auto' in command
    dist = (REPO / 'tools' / 'dist_train.sh').read_text() + (REPO / 'tools' / 'slurm_train.sh').read_text()
    assert dist.count('--accumulate auto "${@:') == 2  # before the user's arguments: theirs win


# --- the loop on mmengine's Runner -------------------------------------------------------

class Points(torch.utils.data.Dataset):
    def __init__(self, n=64):
        gen = torch.Generator().manual_seed(0)
        self.x, self.y = torch.randn(n, 6, generator=gen), torch.randn(n, 3, generator=gen)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return dict(x=self.x[i], y=self.y[i])


class Regressor(BaseModel):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))

    def forward(self, x, y, mode='loss'):
        return dict(loss=((self.net(x) - y) ** 2).mean())


class Losses(Hook):
    def __init__(self):
        self.seen = []

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        self.seen.append((runner.iter, float(outputs['loss'].detach()), len(data_batch['x'])))


class Lrs(Hook):
    """The lr each optimizer step used (logged before the step's schedulers move it)."""
    def __init__(self):
        self.seen = []

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        self.seen.append(runner.optim_wrapper.get_lr()['lr'][0])


def train_points(work_dir, batch, micro, iters, resume=False, checkpoint=100, optimizer=None, runner_type=ViT5Runner,
                 auto_scale_lr=None, schedule=True, points=64, loop=None, hooks=()):
    losses = Losses()
    loop = loop or ('AccumulatingIterBasedTrainLoop' if micro > 1 else 'IterBasedTrainLoop')
    # SGD with momentum: an update is linear in the loss's scale, so a loss divided by k once too
    # often (or not at all) changes the weights (AdamW normalises such an error away)
    runner = runner_type(
        model=Regressor(), work_dir=str(work_dir), default_scope='mmseg', custom_hooks=[losses, *hooks],
        train_dataloader=dict(dataset=Points(points), batch_size=batch, num_workers=0,
                              sampler=dict(type='InfiniteSampler', shuffle=False),
                              collate_fn=dict(type='default_collate')),
        train_cfg=dict(type=loop, max_iters=iters, val_interval=1000),
        optim_wrapper=dict(optimizer=optimizer or dict(type='SGD', lr=0.05, momentum=0.9),
                           accumulative_counts=micro),
        # warm-up and decay in iterations: counted in micro-batches they would end early
        param_scheduler=schedule if isinstance(schedule, list) else
        [dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=3),
         dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=3, end=6)] if schedule else None,
        auto_scale_lr=auto_scale_lr,
        default_hooks=dict(checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=checkpoint),
                           logger=dict(type='LoggerHook', interval=1)),
        resume=resume, randomness=dict(seed=0), log_level='WARNING')
    runner.train()
    return runner, losses.seen


def test_four_micro_batches_of_2_step_as_one_batch_of_8_and_resume_at_step_boundaries(tmp_path):
    big, big_losses = train_points(tmp_path / 'big', 8, 1, 6)
    acc, acc_losses = train_points(tmp_path / 'acc', 2, 4, 6)
    assert acc.iter == 6 and acc.optim_wrapper._inner_count == 24
    # the hooks see one step: its 8 images and the mean loss over them
    assert [(i, n) for i, _, n in acc_losses] == [(i, 8) for i in range(6)]
    assert [loss for _, loss, _ in acc_losses] == pytest.approx([loss for _, loss, _ in big_losses], rel=1e-5)
    for (name, p), q in zip(big.model.named_parameters(), acc.model.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-5, atol=1e-6, msg=name)
    assert acc.optim_wrapper.get_lr()['lr'] == pytest.approx(big.optim_wrapper.get_lr()['lr'])
    # and with AdamW, the protocol's optimizer
    big_adamw, _ = train_points(tmp_path / 'big_adamw', 8, 1, 6, optimizer=dict(type='AdamW', lr=0.05))
    acc_adamw, _ = train_points(tmp_path / 'acc_adamw', 2, 4, 6, optimizer=dict(type='AdamW', lr=0.05))
    for (name, p), q in zip(big_adamw.model.named_parameters(), acc_adamw.model.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-5, atol=1e-6, msg=name)

    # stopped at step 3 (checkpoint), resumed to 6: the same weights as the run never stopped
    train_points(tmp_path / 'cut', 2, 4, 3, checkpoint=3)
    assert (tmp_path / 'cut' / 'iter_3.pth').is_file()
    resumed, resumed_losses = train_points(tmp_path / 'cut', 2, 4, 6, resume=True)
    assert [i for i, _, _ in resumed_losses] == [3, 4, 5]
    assert [loss for _, loss, _ in resumed_losses] == [loss for _, loss, _ in acc_losses[3:]]
    for p, q in zip(acc.model.parameters(), resumed.model.parameters()):
        assert torch.equal(p, q)


def _points_cfg(work_dir, loop, max_iters, micro, **extra):
    return Config(dict(
        model=dict(type='Regressor'), work_dir=str(work_dir), default_scope='mmseg',
        train_dataloader=dict(dataset=dict(type='Points'), batch_size=2, num_workers=0,
                              sampler=dict(type='DefaultSampler' if 'Epoch' in loop else 'InfiniteSampler',
                                           shuffle=False),
                              collate_fn=dict(type='default_collate')),
        train_cfg=dict(type=loop, val_interval=1000, **max_iters),
        optim_wrapper=dict(optimizer=dict(type='AdamW', lr=0.05), accumulative_counts=micro),
        param_scheduler=[dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=3)],
        randomness=dict(seed=0), log_level='WARNING', **extra))


@pytest.mark.parametrize('loop, length', [('IterBasedTrainLoop', dict(max_iters=10)),
                                          ('EpochBasedTrainLoop', dict(max_epochs=1))])
def test_accumulative_counts_in_the_config_trains_as_mmengine_trains_it(tmp_path, loop, length):
    """mmengine's own way, optim_wrapper.accumulative_counts=4 under mmengine's loops: an iteration
    is a micro-batch, the optimizer steps every 4 and once more over the remainder (10 iterations:
    3 steps; one epoch of 64 points in batches of 2: 32 iterations, 8 steps). ViT5Runner gives the
    weights, iterations and lrs of mmengine's own Runner (issue #51)."""
    from mmseg.registry import DATASETS, MODELS
    runs = {}
    with MODELS.switch_scope_and_registry('mmseg'):
        MODELS.register_module(module=Regressor, force=True)
        DATASETS.register_module(module=Points, force=True)
        for name, runner_type in (('ours', ViT5Runner), ('mmengine', Runner)):
            runner = runner_type.from_cfg(_points_cfg(tmp_path / name, loop, length, 4))
            runner.train()
            runs[name] = runner
    ours, theirs = runs['ours'], runs['mmengine']
    assert type(ours.train_loop).__name__ == loop
    assert ours.iter == theirs.iter == (10 if length.get('max_iters') else 32)
    assert ours.optim_wrapper._inner_count == theirs.optim_wrapper._inner_count == ours.iter
    steps = {int(s['step']) for s in ours.optim_wrapper.optimizer.state_dict()['state'].values()}
    assert steps == {-(-ours.iter // 4)}  # AdamW's own count: 3 (the last over 2 micro-batches), or 8
    assert ours.optim_wrapper.get_lr() == theirs.optim_wrapper.get_lr()
    for p, q in zip(theirs.model.parameters(), ours.model.parameters()):
        assert torch.equal(p, q)
    assert ours.batch_plan == BatchPlan(1, 2, 4, 8, iteration_is_step=False)


def test_a_by_epoch_scheduler_under_accumulation_counts_an_epoch_in_optimizer_steps(tmp_path):
    """16 images, 2 per micro-batch, 4 micro-batches a step: an epoch is 2 optimizer steps, so a
    by-epoch LinearLR over 1 epoch ends after 2 steps (mmengine's conversion: 8 steps)."""
    lrs = Lrs()
    linear = [dict(type='LinearLR', start_factor=0.1, by_epoch=True, begin=0, end=1, convert_to_iter_based=True)]
    runner, _ = train_points(tmp_path / 'acc', 2, 4, 4, points=16, optimizer=dict(type='SGD', lr=1e-3),
                             schedule=linear, hooks=[lrs])
    assert lrs.seen == pytest.approx([1e-4, 1e-3, 1e-3, 1e-3])  # mmengine's LinearLR: end - 1 steps up
    assert (runner.param_schedulers[0].begin, runner.param_schedulers[0].end) == (0, 2)
    # without accumulation an epoch is its 8 steps of 2 images, as mmengine counts
    plain = Lrs()
    train_points(tmp_path / 'plain', 2, 1, 3, points=16, optimizer=dict(type='SGD', lr=1e-3), schedule=linear,
                 hooks=[plain])
    assert plain.seen == pytest.approx([1e-4, 1e-4 + 9e-4 / 7, 1e-4 + 2 * 9e-4 / 7])  # the 2.29e-4, 3.57e-4


def test_a_checkpoint_keeps_its_plan_and_resumes_only_with_its_images_per_iteration(tmp_path):
    train_points(tmp_path / 'run', 2, 4, 2, checkpoint=2)
    saved = torch.load(tmp_path / 'run' / 'iter_2.pth', weights_only=False)['meta']['batch_plan']
    assert saved == dict(gpus=1, per_gpu=2, micro_batches=4, target=8, iteration_is_step=True)
    with pytest.raises(AccumulationError, match=r'cannot resume from .*trained with 1 GPU\(s\) x 2 images x 4 '
                                                r'micro-batch\(es\) = 8 images per iteration, this run has 1 GPU\(s\) '
                                                r'x 2 images x 2 micro-batch\(es\) = 4 .*--accumulate 4'):
        train_points(tmp_path / 'run', 2, 2, 4, resume=True)
    resumed, losses = train_points(tmp_path / 'run', 4, 2, 3, resume=True)  # 8 images, split otherwise
    assert resumed.iter == 3 and [i for i, _, _ in losses] == [2]


def _sgd_step_by_hand(batch_of_8, lr):
    """One SGD step of the regressor on the mean loss over ``batch_of_8``, from the definition."""
    model = Regressor()
    x, y = batch_of_8
    loss = ((model.net(x) - y) ** 2).mean()
    grads = torch.autograd.grad(loss, list(model.parameters()))
    return [p.detach() - lr * g for p, g in zip(model.parameters(), grads)]


def test_auto_scale_lr_follows_the_images_per_iteration_with_micro_batches(tmp_path):
    """1 process x 2 images x 4 micro-batches = 8 images, base_batch_size 8: the lr is the
    config's 0.08, and the step is one SGD step over the 8 images. mmengine's Runner counts 1 x 2
    images and uses 0.02."""
    scale = dict(enable=True, base_batch_size=8)
    sgd = dict(type='SGD', lr=0.08)
    ours, _ = train_points(tmp_path / 'ours', 2, 4, 1, optimizer=sgd, auto_scale_lr=scale, schedule=False)
    assert ours.optim_wrapper.get_lr()['lr'] == [pytest.approx(0.08)]
    points = Points()
    for p, expected in zip(ours.model.parameters(), _sgd_step_by_hand((points.x[:8], points.y[:8]), 0.08)):
        torch.testing.assert_close(p.detach(), expected, rtol=1e-5, atol=1e-7)
    theirs, _ = train_points(tmp_path / 'theirs', 2, 4, 1, optimizer=sgd, auto_scale_lr=scale, schedule=False,
                             runner_type=Runner)
    assert theirs.optim_wrapper.get_lr()['lr'] == [pytest.approx(0.02)]  # mmengine 0.10.7: world x batch only
    # 2 x 2 images x 2 micro-batches on base 4: the same rule, scale 2 (more images than the base)
    double, _ = train_points(tmp_path / 'double', 2, 4, 1, optimizer=sgd, schedule=False,
                             auto_scale_lr=dict(enable=True, base_batch_size=4))
    assert double.optim_wrapper.get_lr()['lr'] == [pytest.approx(0.16)]


def test_the_card_states_the_lr_used_and_warns_with_the_factor():
    """The lr the card shows is the Runner's: read from the optimizer after ViT5Runner.scale_lr
    (every group's lr, not the config's value times a factor computed apart)."""
    cfg = Config.fromfile(str(ENTRY))
    cfg.auto_scale_lr.enable = True
    one = card(cfg, 1, 'auto').values()
    assert (one['micro-batches per step'], one['images per iteration'], one['lr used']) == (8, 16, 6e-5)
    assert {entry.rsplit(' ', 1)[1] for entry in one['lr by layer']} == {'6e-05'}   # every group of every layer
    scaled = card(cfg, 16, 'auto')
    assert scaled.values()['images per iteration'] == 32 and scaled.values()['lr used'] == pytest.approx(1.2e-4)
    assert scaled.values()['lr scale'] == 2.0
    assert {entry.rsplit(' ', 1)[1] for entry in scaled.values()['lr by layer']} == {'0.00012'}
    card_text = scaled.text()
    assert card_text.splitlines()[2] == f'WARNING: {scaled.warnings[0]}'   # the card prints its warnings
    warning, = scaled.warnings
    assert warning.startswith("32 images per iteration are 2x the config's 16") and 'scaled by the same 2' in warning
    assert warning.endswith('fewer GPUs or a smaller train_dataloader.batch_size keep the protocol')
    warning, = recipe_card(cfg, 1, '1').warnings  # a plain tools/train.py run: fewer images
    assert warning.startswith("2 images per iteration are 0.125x the config's 16") and warning.endswith(
        '--accumulate auto keeps 16')
    cfg.auto_scale_lr.enable = False
    twelve = card(cfg, 12, 'auto')
    assert twelve.values()['lr used'] == 6e-5
    warning, = twelve.warnings
    assert "24 images per iteration are 1.5x the config's 16" in warning and 'the lr stays as configured' in warning
    assert not recipe_card(cfg, 8, 'auto').warnings


# --- gradients of our segmentors ---------------------------------------------------------

def no_dropout(model):
    """The same network for a batch and its micro-batches."""
    for m in model.modules():
        if isinstance(m, nn.modules.dropout._DropoutNd):  # Dropout2d in the decode heads
            m.p = 0.0
        if hasattr(m, 'drop_prob'):  # timm's DropPath
            m.drop_prob = 0.0


def _grads(model, loss_fn):
    model.zero_grad()
    loss_fn().backward()
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


def _upernet_batch(n, seed):
    gen = torch.Generator().manual_seed(seed)
    inputs = torch.randn(n, 3, 64, 64, generator=gen)
    labels = torch.randint(0, 150, (n, 1, 64, 64), generator=gen)
    labels[:, :, :8] = 255  # ignored pixels: the CE averages over every pixel (mmseg's avg_non_ignore=False)
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample
    samples = []
    for label in labels:
        s = SegDataSample(metainfo=dict(img_shape=(64, 64), ori_shape=(64, 64), pad_shape=(64, 64)))
        s.gt_sem_seg = PixelData(data=label)
        samples.append(s)
    return inputs, samples


def _accumulated(model, inputs, samples, k):
    def loss():
        total = 0
        for j in range(k):
            part = slice(j * len(inputs) // k, (j + 1) * len(inputs) // k)
            losses = model.loss(inputs[part], samples[part])
            total = total + sum(v for n, v in losses.items() if 'loss' in n) / k  # mmengine's scale_loss
        return total
    return loss


def _whole(model, inputs, samples):
    return lambda: sum(v for n, v in model.loss(inputs, samples).items() if 'loss' in n)


@pytest.mark.slow  # > 10 s on 2 cores (the quick tier: <= 3 min)
def test_upernet_gradients_equal_one_batch_of_8_except_through_batch_norm():
    model = tiny_segmentor(ENTRY)
    inputs, samples = _upernet_batch(8, 0)
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    assert bns  # the neck and heads normalise with (Sync)BN
    model.train()
    no_dropout(model)
    for bn in bns:  # statistics from the running estimates: the loss is a mean over equal parts
        bn.eval()
    whole = _grads(model, _whole(model, inputs, samples))
    acc = _grads(model, _accumulated(model, inputs, samples, 4))
    torch.testing.assert_close(acc, whole, rtol=1e-4, atol=1e-7)
    # as trained, BN normalises each micro-batch of 2 by its own statistics (SyncBN: 2 per GPU)
    for bn in bns:
        bn.train()
    whole = _grads(model, _whole(model, inputs, samples))
    acc = _grads(model, _accumulated(model, inputs, samples, 4))
    # not equal: 0.93 of the norm apart, cosine 0.65, on this untrained net and random labels
    assert ((acc - whole).norm() / whole.norm()).item() > 0.1
    assert 0.3 < torch.nn.functional.cosine_similarity(acc, whole, dim=0) < 0.99


def _fixed_rand(*shape, generator=None, device=None, dtype=None, **kwargs):
    """A stand-in for torch.rand whose rows do not depend on how many there are: each mask
    and each image gets the same points in a batch of 8 and in a micro-batch of 2."""
    shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)) else shape
    tail = shape[-2:] if len(shape) >= 2 else shape
    n = int(torch.tensor(tail).prod())
    row = torch.frac(torch.arange(1, n + 1, dtype=torch.float64) * 0.6180339887498949).reshape(tail)
    return row.to(dtype or torch.float32).to(device).expand(shape).contiguous()


def _eomt_parts(model, inputs, samples):
    """The batch's class CE and mask losses (BCE + dice), summed over the supervised blocks."""
    losses = model.loss(inputs, samples)
    ce = sum(v for n, v in losses.items() if n.endswith('loss_cls_ce'))
    return ce, sum(v for n, v in losses.items() if n.endswith(('loss_mask_ce', 'loss_mask_dice')))


def test_eomt_micro_batches_weigh_their_losses_by_1_over_k_not_by_their_target_masks(monkeypatch):
    """A batch of 8 normalises the mask losses by its M target masks and the class CE by its
    summed class weights A; 4 micro-batches each by their own M_j, A_j, then average. So the
    batch's gradient is sum_j (M_j / M) grad L_j (resp. A_j / A) where accumulation gives
    sum_j grad L_j / 4: equal when every micro-batch has as many target masks."""
    monkeypatch.setattr(torch, 'rand', _fixed_rand)
    model = tiny_eomt(num_queries=6)
    no_dropout(model)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    inputs, samples = labelled_batch(8, hw=(64, 64))
    # targets per image, counted here from the labels: 3 (two halves and the square), or 2
    for i in (2, 3, 5, 7):
        samples[i].gt_sem_seg.data[:, 10:40, 20:60] = 3
    counts = [len(set(s.gt_sem_seg.data.unique().tolist()) - {255}) for s in samples]
    assert counts == [3, 3, 2, 2, 3, 2, 3, 2]
    no_object = model.decode_head._losses()[0].class_weight[-1]
    Q = model.decode_head.num_queries

    def grad(loss):
        grads = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
        return torch.cat([(torch.zeros_like(p) if g is None else g).flatten() for p, g in zip(params, grads)])
    whole_ce, whole_mask = map(grad, _eomt_parts(model, inputs, samples))
    parts = [_eomt_parts(model, inputs[2 * j:2 * j + 2], samples[2 * j:2 * j + 2]) for j in range(4)]
    ce_j = [grad(ce) for ce, _ in parts]
    mask_j = [grad(mask) for _, mask in parts]
    M_j = [sum(counts[2 * j:2 * j + 2]) for j in range(4)]
    A_j = [sum(c + no_object * (Q - c) for c in counts[2 * j:2 * j + 2]) for j in range(4)]
    M, A = sum(M_j), sum(A_j)
    torch.testing.assert_close(sum(m / M * g for m, g in zip(M_j, mask_j)), whole_mask, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(sum(a / A * g for a, g in zip(A_j, ce_j)), whole_ce, rtol=1e-4, atol=1e-6)
    accumulated = sum(mask_j) / 4 + sum(ce_j) / 4
    whole = whole_mask + whole_ce
    # what accumulation gives instead: 0.115 of the norm apart here (docs/gpus.md's bound,
    # max_j |1/k - M_j/M| sum_j |g_j|, follows from the identities above: no test of its own)
    assert M_j == [6, 4, 5, 5] and (accumulated - whole).norm() / whole.norm() > 1e-3
    # as many target masks in every micro-batch: the same gradient
    same = [0, 2, 1, 3, 4, 5, 6, 7]  # pairs of 3 + 2
    inputs, samples = inputs[same], [samples[i] for i in same]
    whole = sum(map(grad, _eomt_parts(model, inputs, samples)))
    accumulated = sum(grad(sum(_eomt_parts(model, inputs[2 * j:2 * j + 2], samples[2 * j:2 * j + 2]))) / 4
                      for j in range(4))
    torch.testing.assert_close(accumulated, whole, rtol=1e-4, atol=1e-6)
