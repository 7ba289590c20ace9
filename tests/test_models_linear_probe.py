"""Meta's linear probe (issue #53): the head against a reference written from Meta's
``LinearHead`` (facebookresearch/dinov3 dinov3/eval/segmentation/models/heads/linear_head.py),
the schedule against one written from Meta's ``WarmupOneCycleLR``
(dinov3/eval/segmentation/schedulers.py), and the frozen encoder it reads."""
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.registry import PARAM_SCHEDULERS
from mmseg.registry import MODELS

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / 'configs/linear/dinov3-small_linear_ade20k.py'


def meta_linear_head(taps, bn: dict, conv_weight, conv_bias, training: bool, dropout_mask=None):
    """Meta's LinearHead from its definition: the taps resized (bilinear) to the first and
    concatenated; training: Dropout2d(0.1), BatchNorm on the batch, 1x1 conv; predict: BatchNorm
    with the running statistics, 1x1 conv."""
    x = torch.cat([F.interpolate(t, size=taps[0].shape[2:], mode='bilinear', align_corners=False) for t in taps], 1)
    if training:
        x = x * dropout_mask / 0.9                       # Dropout2d: whole channels, kept ones scaled
        mean, var = x.mean((0, 2, 3)), x.var((0, 2, 3), unbiased=False)
    else:
        mean, var = bn['running_mean'], bn['running_var']
    x = (x - mean[:, None, None]) / torch.sqrt(var[:, None, None] + 1e-5) * bn['weight'][:, None, None] \
        + bn['bias'][:, None, None]
    return torch.einsum('bchw,kc->bkhw', x, conv_weight[:, :, 0, 0]) + conv_bias[:, None, None]


def meta_lr_curve(max_lr: float, total: int, warmup: int, ratio: float, steps: int):
    """Meta's WarmupOneCycleLR (use_beta1 and update_momentum off), stepped as its LRScheduler:
    the lr of optimizer step s is computed after s scheduler steps, with its cosine anneal from
    max_lr to max_lr / 25 / final_div_factor (inf: 0) read one step ahead."""
    out = []
    for step in range(steps):
        if step < warmup:
            k = (1 - step / warmup) * (1 - ratio)
            out.append(max_lr * (1 - k) * (1 - step / total))
        else:
            pct = (step + 1) / total
            out.append(0.0 + (max_lr - 0.0) / 2.0 * (math.cos(math.pi * pct) + 1))
    return out


def meta_loop_lrs(curve, iterations: int):
    """The lr each iteration of Meta's training loop runs at (dinov3/eval/segmentation/train.py): the
    scheduler steps after the optimizer, except after iteration 0 (``if global_step > 0``)."""
    steps, out = 0, []
    for global_step in range(iterations):
        out.append(curve[steps])
        if global_step > 0:
            steps += 1
    return out


@pytest.fixture(scope='module')
def probe():
    from mmengine.registry import init_default_scope
    init_default_scope('mmseg')
    cfg = Config.fromfile(str(CONFIG))
    cfg.model.backbone.init_cfg = None
    cfg.model.decode_head.norm_cfg = dict(type='BN', requires_grad=True)  # SyncBN trains only distributed
    model = MODELS.build(cfg.model)
    model.init_weights()
    return cfg, model


def test_the_dinov3_small_probe_equals_metas_linear_head_on_its_features(probe):
    cfg, model = probe
    head = model.decode_head
    torch.manual_seed(0)
    with torch.no_grad():
        head.bn.weight.normal_()
        head.bn.bias.normal_()
        head.bn.running_mean.normal_()
        head.bn.running_var.uniform_(0.5, 2.0)
        head.conv_seg.weight.normal_(0, 0.01)
        head.conv_seg.bias.normal_()
    bn = {k: v.clone() for k, v in head.bn.state_dict().items()}
    taps = model.backbone(torch.randn(2, 3, 96, 128))
    assert [tuple(t.shape) for t in taps] == [(2, 384, 6, 8)]   # the last block's patch tokens only
    model.eval()
    ours = head(taps)
    ref = meta_linear_head(list(taps), bn, head.conv_seg.weight, head.conv_seg.bias, False)
    assert (ours - ref).abs().max() <= 1e-4
    model.train()
    torch.manual_seed(3)
    ours = head(taps)
    torch.manual_seed(3)  # the same draw: Dropout2d's noise is one Bernoulli per (image, channel)
    mask = F.dropout2d(torch.ones(2, 384, 1, 1), 0.1, True) * 0.9
    assert 0 < mask.sum() < mask.numel()
    ref = meta_linear_head(list(taps), bn, head.conv_seg.weight, head.conv_seg.bias, True, mask)
    assert (ours - ref).abs().max() <= 1e-4
    # Meta's init: N(0, 0.01), bias 0 (mmseg's conv_seg init)
    fresh = MODELS.build(cfg.model).decode_head
    fresh.init_weights()
    assert abs(fresh.conv_seg.weight.std().item() - 0.01) < 1e-3 and not fresh.conv_seg.bias.any()


def test_the_probes_lr_at_every_iteration_equals_metas_loops(probe):
    """The lr of each of the 40000 iterations, as mmengine's ParamSchedulerHook steps the scheduler (after
    every iteration), against the lr Meta's loop runs each iteration at: the same at every one, the
    iteration 1500 of the warm-up's end included (where a scheduler stepped every iteration is 3.5% of the
    peak ahead)."""
    cfg, _ = probe
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.AdamW([param], lr=1e-3)
    scheduler = PARAM_SCHEDULERS.build(dict(cfg.param_scheduler[0], optimizer=optimizer))
    ours = []
    for _ in range(cfg.train_cfg.max_iters):
        ours.append(optimizer.param_groups[0]['lr'])
        scheduler.step()
    curve = meta_lr_curve(1e-3, 40000, 1500, 1e-6, 40000)
    ref = meta_loop_lrs(curve, 40000)
    assert max(abs(a - b) for a, b in zip(ours, ref)) <= 1e-12
    assert ours[0] == ours[1] == pytest.approx(1e-9) and ours[-1] < 1e-11
    assert abs(curve[1500] - ref[1500]) > 0.03 * 1e-3   # what lag 1 changes


def test_a_frozen_encoder_keeps_its_tensors_its_eval_mode_and_no_activations(probe):
    cfg, model = probe
    from mmengine.optim import build_optim_wrapper
    model.train()
    bb = model.backbone
    assert not bb.training and all(not m.training for m in bb.modules())
    assert not any(p.requires_grad for p in bb.parameters())
    wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    in_optimizer = {id(p) for g in wrapper.optimizer.param_groups for p in g['params']}
    assert not in_optimizer & {id(p) for p in bb.parameters()}
    assert in_optimizer == {id(p) for p in model.decode_head.parameters()}
    before = {k: v.clone() for k, v in bb.state_dict().items()}
    head_before = model.decode_head.conv_seg.weight.clone()
    from mmseg.structures import SegDataSample
    from mmengine.structures import PixelData
    samples = []
    for _ in range(2):
        s = SegDataSample(gt_sem_seg=PixelData(data=torch.randint(0, 150, (1, 64, 64))))
        s.set_metainfo(dict(img_shape=(64, 64), pad_shape=(64, 64), ori_shape=(64, 64)))
        samples.append(s)
    inputs = torch.randn(2, 3, 64, 64)
    # no graph is kept through the encoder, even for an input that asks for one
    assert not bb(inputs.clone().requires_grad_())[0].requires_grad
    losses = model.loss(inputs, samples)
    wrapper.update_params(sum(losses.values()))
    assert all(torch.equal(before[k], v) for k, v in bb.state_dict().items())
    assert not torch.equal(head_before, model.decode_head.conv_seg.weight)


def test_eomt_refuses_a_frozen_encoder():
    cfg = Config.fromfile(str(REPO / 'configs/tiny/vit5_eomt_synthetic.py'))
    cfg.model.backbone.frozen = True
    with pytest.raises(ValueError, match='cannot be frozen'):
        MODELS.build(cfg.model)
