"""EoMT (issue #27): queries in the last blocks, masked attention annealed away, the
mask-classification loss, the recipe's optimizer and schedule, the configs, and the
tools (train, test, ONNX) on the tiny twin."""
import math

import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config, ConfigDict
from mmengine.structures import PixelData
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample
from mmseg.utils import register_all_modules

from conftest import REPO, logged_scalars, run_script
from vit5seg.models.builder import build_segmentor

TINY = REPO / 'configs' / 'tiny' / 'vit5_eomt_synthetic.py'
EOMT_CONFIGS = sorted((REPO / 'configs' / 'eomt').glob('*_eomt_ade20k.py'))  # the semantic ones (mmseg)


def tiny_eomt(**head):
    cfg = Config.fromfile(str(TINY))
    cfg.model.decode_head.update(head)
    return build_segmentor(cfg)


def labelled_batch(n=2, hw=(96, 96), ignore_all=()):
    """Random images; labels: two stuff halves and a square object, a frame of 255."""
    gen = torch.Generator().manual_seed(1)
    inputs = torch.randn(n, 3, *hw, generator=gen)
    samples = []
    for i in range(n):
        label = torch.full((1, *hw), 3)
        label[:, hw[0] // 2:] = 5
        label[:, 10:40, 20:60] = 7
        label[:, :2], label[:, :, :2] = 255, 255
        if i in ignore_all:
            label[:] = 255
        s = SegDataSample(metainfo=dict(img_shape=hw, ori_shape=hw, pad_shape=hw))
        s.gt_sem_seg = PixelData(data=label)
        samples.append(s)
    return inputs, samples


def attention_masks_seen(model, run):
    """Block index -> the attn_mask its attention got, during ``run()``."""
    seen = {}
    hooks = [blk.attn.register_forward_pre_hook(lambda m, args, i=i: seen.__setitem__(i, args[2]))
             for i, blk in enumerate(model.backbone.blocks)]
    try:
        out = run()
    finally:
        for h in hooks:
            h.remove()
    return seen, out


# --- configs -----------------------------------------------------------------------------

@pytest.mark.parametrize('path', EOMT_CONFIGS, ids=lambda p: p.name)
def test_eomt_configs_build_for_every_preset(path):
    from vit5seg.hub import OFFICIAL_WEIGHTS
    register_all_modules(init_default_scope=True)
    cfg = Config.fromfile(str(path))
    with torch.device('meta'):
        model = MODELS.build(cfg.model)
    bb, head = model.backbone, model.decode_head
    assert type(model).__name__ == 'EoMTEncoderDecoder' and bb.final_norm
    assert head.in_channels == bb.embed_dims and head.num_queries == 100 and head.num_classes == 150
    assert head.num_blocks == (4 if 'large' in path.name else 3)
    if path.name.startswith('dinov3'):  # its own recipe and gated weights: the recipe table holds both
        return
    assert cfg.crop_size == (512, 512) and cfg.train_cfg.max_iters == 31 * (20210 // 16)  # 31 epochs of 1263
    assert cfg.model.backbone.init_cfg.checkpoint == OFFICIAL_WEIGHTS[bb.arch]
    hook, = [h for h in cfg.custom_hooks if h['type'] == 'EoMTMaskAnnealingHook']
    if 'large' in path.name:  # EoMT's ADE20K ViT-L windows: consecutive sixths
        assert (hook.starts, hook.ends) == ([6520, 13040, 19560, 26080], [13040, 19560, 26080, 32600])
    else:  # EoMT's COCO S/B windows (2 of 12 epochs, 1-epoch gaps, ending at 10/12) in twelfths
        twelfth = cfg.train_cfg.max_iters / 12
        assert (hook.starts, hook.ends) == ([round(k * twelfth) for k in (2, 5, 8)], [round(k * twelfth)
                                                                                    for k in (4, 7, 10)])
    # masking ends near 5/6: the L yaml's own step 32600, S/B 10 twelfths of this schedule
    assert abs(hook.ends[-1] - cfg.train_cfg.max_iters * 5 / 6) < 30
    opt = cfg.optim_wrapper
    assert (opt.type, opt.dtype, opt.optimizer.lr, opt.optimizer.weight_decay) == ('AmpOptimWrapper', 'bfloat16',
                                                                                    1e-4, 0.05)
    assert opt.paramwise_cfg.to_dict() == dict(layer_decay_rate=0.8, layer_numbering='eomt', decay_all=True)


@pytest.mark.parametrize('size', ['small', 'base', 'large'])
def test_each_eomt_config_has_a_deit3_twin_differing_only_in_the_backbone(size):
    vit5 = Config.fromfile(str(REPO / 'configs' / 'eomt' / f'vit5-{size}_eomt_ade20k.py')).to_dict()
    deit3 = Config.fromfile(str(REPO / 'configs' / 'eomt' / f'deit3-{size}_eomt_ade20k.py')).to_dict()
    for cfg in (vit5, deit3):
        cfg.pop('filename', None)
        cfg['model']['backbone'].pop('init_cfg')
    assert (vit5['model']['backbone'].pop('arch'), deit3['model']['backbone'].pop('arch')) == (f'vit5-{size}',
                                                                                             f'deit3-{size}')
    assert vit5 == deit3


def test_the_tiny_twin_shares_the_upernet_twins_data_and_budget():
    eomt = Config.fromfile(str(TINY))
    upernet = Config.fromfile(str(REPO / 'configs' / 'tiny' / 'vit5_upernet_synthetic.py'))
    for key in ('train_pipeline', 'test_pipeline', 'train_dataloader', 'val_dataloader', 'max_iters', 'train_cfg'):
        assert eomt[key] == upernet[key], key
    # the same backbone, but for what EoMT needs (the final norm) and has no use for (taps)
    a, b = eomt.model.backbone.to_dict(), upernet.model.backbone.to_dict()
    assert (a.pop('final_norm'), b.pop('final_norm'), b.pop('out_indices')) == (True, False, (0, 1, 2, 3))
    assert b.pop('drop_path_rate') == 0.0 and a == b


@pytest.mark.parametrize('family', ['vit5', 'deit3'])
def test_both_families_train_and_predict(family):
    # DeiT-III: no RoPE table to extend, no registers behind the patches
    from vit5seg.models.builder import tiny_segmentor
    model = tiny_segmentor(REPO / 'configs' / 'eomt' / f'{family}-base_eomt_ade20k.py')
    assert model.backbone.settings['use_rope'] == (family == 'vit5')
    inputs, samples = labelled_batch(hw=(64, 64))
    model.train()
    losses = model(inputs, samples, mode='loss')
    assert torch.isfinite(sum(v for k, v in losses.items() if 'loss' in k))
    model.eval()
    with torch.no_grad():
        out = model.predict(inputs[:1, :, :50, :62], [SegDataSample(metainfo=dict(img_shape=(50, 62),
                                                                                  ori_shape=(50, 62)))])
    assert out[0].seg_logits.data.shape == (150, 50, 62)


def test_eomt_segmentor_refuses_what_it_cannot_read():
    register_all_modules(init_default_scope=True)
    cfg = Config.fromfile(str(TINY)).model
    cfg.backbone.final_norm = False
    with pytest.raises(ValueError, match='final_norm=True'):
        MODELS.build(cfg)
    cfg = Config.fromfile(str(TINY)).model
    cfg.decode_head.num_blocks = 5
    with pytest.raises(ValueError, match=r'num_blocks=5 must be within 1\.\.4'):
        MODELS.build(cfg)


# --- the backbone and the queries --------------------------------------------------------

# the backbone's own forward before and after EoMT: test_models_eomt_reference.py


@pytest.mark.parametrize('real', [False, True])
def test_queries_get_identity_rotary_rows(real):
    from vit5seg.models.layers import SequenceRope, apply_rope, prepend_identity_rows
    rope = SequenceRope(16, ref_grid=(14, 14), num_registers=4)
    table = rope((5, 7), torch.device('cpu'), torch.float32, real=real)
    Q = 6
    x = torch.randn(2, 2, Q + table.shape[0], 16)
    out = apply_rope(x, prepend_identity_rows(table, Q))
    assert torch.equal(out[..., :Q, :], x[..., :Q, :])                     # the queries: untouched
    assert torch.equal(out[..., Q:, :], apply_rope(x[..., Q:, :], table))  # the rest: as before


# --- masked attention and its annealing --------------------------------------------------

def test_masks_only_in_the_last_blocks_while_p_is_positive_and_none_at_inference():
    model = tiny_eomt()
    Q = model.decode_head.num_queries
    x = torch.randn(2, 3, 96, 80)
    h, w = 6, 5
    model.train()
    model.decoder.mask_probs = [1.0, 1.0]
    seen, feats = attention_masks_seen(model, lambda: model.extract_feat(x))
    assert seen[0] is None and seen[1] is None
    N = Q + 1 + h * w + 4
    for block, prediction in ((2, 0), (3, 1)):
        mask = seen[block]
        assert mask.dtype == torch.bool and mask.shape == (2, 1, N, N)
        # from the definition: the prediction at the block's input, at the patch grid, > 0
        inside = F.interpolate(feats.mask_logits[prediction], size=(h, w), mode='bilinear') > 0
        assert torch.equal(mask[:, 0, :Q, Q + 1:Q + 1 + h * w], inside.flatten(2))
        others = mask.clone()
        others[:, :, :Q, Q + 1:Q + 1 + h * w] = True
        assert others.all()  # cls, registers, queries and every patch row: open
    assert len(feats.class_logits) == 3  # the inputs of both masked blocks, and the output
    model.decoder.mask_probs = [0.0, 0.3]
    seen, _ = attention_masks_seen(model, lambda: model.extract_feat(x))
    assert seen[2] is None and seen[3] is not None
    model.decoder.mask_probs = [1.0, 1.0]
    model.eval()
    seen, feats = attention_masks_seen(model, lambda: model.extract_feat(x))
    assert all(m is None for m in seen.values()) and len(feats.class_logits) == 1


def test_each_query_keeps_its_mask_with_probability_p():
    model = tiny_eomt(num_queries=50)
    logits = torch.full((40, 50, 8, 8), -1.0)  # every mask empty: a kept row sees no patch
    for prob, low, high in ((1.0, 0, 0), (0.3, 0.65, 0.75), (0.8, 0.15, 0.25)):
        mask = model.attention_mask(logits, (2, 2), prob, num_tokens=50 + 1 + 4 + 4)
        opened = mask[:, 0, :50, 51:55].all(-1).float().mean().item()
        assert low <= opened <= high, (prob, opened)


def test_windows_that_end_after_the_schedule_are_one_error():
    # a shortened schedule with the recipe's windows would end training with masks on
    from types import SimpleNamespace

    from mmseg.registry import HOOKS
    cfg = Config.fromfile(str(REPO / 'configs' / 'eomt' / 'vit5-small_eomt_ade20k.py'))
    hook = HOOKS.build(cfg.custom_hooks[-1])
    model = tiny_eomt(num_blocks=3)
    with pytest.raises(ValueError, match=r'windows end at \[13051, 22839, 32628\], after train_cfg.max_iters=1000'):
        hook.before_train(SimpleNamespace(model=model, max_iters=1000))
    hook.before_train(SimpleNamespace(model=model, max_iters=39153))
    assert hook.windows == [(6526, 13051), (16314, 22839), (26102, 32628)]


def test_annealing_follows_the_poly_ramp_and_ends_at_exactly_zero():
    from vit5seg.engine.mask_annealing import default_windows, mask_probability
    # the windows of EoMT's published DINOv2 configs (tue-mps/eomt configs/dinov2/*), from their
    # schedules' lengths: ADE20K L and giant (31 epochs), COCO S/B, L and giant (12 and 24 epochs),
    # Cityscapes L (107 epochs)
    published = {(4, 39120): ([6520, 13040, 19560, 26080], [13040, 19560, 26080, 32600]),
                 (5, 39120): ([6520, 11410, 16300, 21190, 26080], [13040, 17930, 22820, 27710, 32600]),
                 (3, 88692): ([14782, 36955, 59128], [29564, 51737, 73910]),
                 (4, 88692): ([14782, 29564, 44346, 59128], [29564, 44346, 59128, 73910]),
                 (5, 88692): ([14782, 25869, 36955, 48042, 59128], [29564, 40651, 51737, 62824, 73910]),
                 (3, 177384): ([29564, 73910, 118256], [59128, 103474, 147820]),
                 (4, 19902): ([3317, 6634, 9951, 13268], [6634, 9951, 13268, 16585])}
    for (blocks, iters), (starts, ends) in published.items():
        assert default_windows(blocks, iters) == list(zip(starts, ends)), (blocks, iters)
    assert default_windows(1, 600) == [(100, 500)]
    assert mask_probability(99, 100, 200) == mask_probability(100, 100, 200) == 1.0
    assert mask_probability(150, 100, 200) == pytest.approx(0.5 ** 0.9)
    assert 0 < mask_probability(199, 100, 200) < 0.02
    assert mask_probability(200, 100, 200) == 0.0 and mask_probability(10 ** 6, 100, 200) == 0.0


# --- losses ------------------------------------------------------------------------------

def test_every_trainable_parameter_gets_a_gradient_with_masks_and_without():
    model = tiny_eomt()
    inputs, samples = labelled_batch()
    model.train()
    for probs in ([1.0, 0.5], [0.0, 0.0]):
        model.zero_grad()
        model.decoder.mask_probs = probs
        losses = model(inputs, samples, mode='loss')
        sum(v for k, v in losses.items() if 'loss' in k).backward()
        missing = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
        assert missing == [], probs
    # every supervised prediction has its three losses: m0., m1. (the masked blocks' inputs), last
    assert {k.split('decode.')[1] for k in losses} == {f'{p}loss_{n}' for p in ('m0.', 'm1.', '')
                                                        for n in ('cls_ce', 'mask_ce', 'mask_dice')}


# the losses' values, normalisation and matching against a reference: test_models_eomt_reference.py


def test_an_image_with_only_ignored_pixels_gives_a_finite_loss():
    model = tiny_eomt()
    model.train()
    for ignore_all in ((0,), (0, 1)):
        model.zero_grad()
        inputs, samples = labelled_batch(ignore_all=ignore_all)
        losses = model(inputs, samples, mode='loss')
        total = sum(v for k, v in losses.items() if 'loss' in k)
        assert torch.isfinite(total)
        total.backward()
        assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_the_loss_decreases_on_a_fixed_batch():
    model = tiny_eomt()
    model.train()
    inputs, samples = labelled_batch()
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
    totals = []
    for _ in range(12):
        losses = model(inputs, samples, mode='loss')
        total = sum(v for k, v in losses.items() if 'loss' in k)
        optim.zero_grad()
        total.backward()
        optim.step()
        totals.append(total.item())
    assert sum(totals[-3:]) / 3 < 0.8 * sum(totals[:3]) / 3, totals


def test_bf16_autocast_trains_and_predicts():
    # the recipe trains under bf16 autocast; matching and losses are float32 inside it
    model = tiny_eomt()
    inputs, samples = labelled_batch()
    model.train()
    with torch.autocast('cpu', dtype=torch.bfloat16):
        losses = model(inputs, samples, mode='loss')
    total = sum(v for k, v in losses.items() if 'loss' in k)
    assert total.dtype == torch.float32 and torch.isfinite(total)
    total.backward()
    model.eval()
    meta = [SegDataSample(metainfo=dict(img_shape=(96, 96), ori_shape=(96, 96)))]
    with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16):
        bf16 = model.predict(inputs[:1], meta)[0].pred_sem_seg.data
    with torch.no_grad():
        fp32 = model.predict(inputs[:1], meta)[0].pred_sem_seg.data
    assert (bf16 == fp32).float().mean() > 0.95


@pytest.mark.parametrize('mode', ['whole', 'slide'])
def test_predictions_have_the_input_size_for_odd_sizes(mode):
    model = tiny_eomt().eval()
    if mode == 'slide':
        model.test_cfg = ConfigDict(mode='slide', crop_size=(64, 64), stride=(48, 48))
    for hw in ((77, 101), (96, 96), (33, 129)):
        meta = [SegDataSample(metainfo=dict(img_shape=hw, ori_shape=hw))]
        with torch.no_grad():
            out = model.predict(torch.randn(1, 3, *hw), meta)[0]
        assert out.seg_logits.data.shape == (150, *hw) and out.pred_sem_seg.data.shape == (1, *hw)
        # per pixel: class probabilities summed over queries, each weighted by a mask probability
        assert (out.seg_logits.data >= 0).all()


def eomt_windows(long_side, window=512):
    """EoMT's evaluation windows along the long side (its window_imgs_semantic): ceil(L / 512)
    windows spread evenly, the overlap shared between neighbours."""
    num = math.ceil(long_side / window)
    overlap = num * window - long_side
    step = window - (overlap / (num - 1) if overlap > 0 else 0)
    return [(int(j * step), int(j * step) + window) for j in range(num)]


@pytest.mark.parametrize('long_side,same', [(512, True), (683, True), (768, True), (853, True), (854, False),
                                            (1024, False)])
def test_slide_windows_are_eomts_up_to_a_5_to_3_aspect(long_side, same):
    # mmseg's fixed stride (341) places the windows EoMT places on every short-side-512 image up to
    # 853 px long (5:3); longer ones get one window more than EoMT's
    model = tiny_eomt().eval()
    model.test_cfg = Config.fromfile(str(REPO / 'configs' / 'eomt' / 'vit5-small_eomt_ade20k.py')).model.test_cfg
    seen = []

    def encode_decode(crop, metas):  # the image's pixels hold their column: the crop says where it was
        seen.append((int(crop[0, 0, 0, 0]), int(crop[0, 0, 0, -1]) + 1))
        return torch.zeros(1, 1, *crop.shape[-2:])
    model.encode_decode, model.out_channels = encode_decode, 1  # one score map: only the windows matter
    image = torch.arange(long_side, dtype=torch.float).expand(1, 3, 512, long_side)
    model.slide_inference(image, [dict(img_shape=(512, long_side), ori_shape=(512, long_side))])
    assert (seen == eomt_windows(long_side)) == same, (seen, eomt_windows(long_side))


# --- the recipe --------------------------------------------------------------------------

def test_eomt_layer_numbering_and_backbone_groups():
    from mmengine.optim import build_optim_wrapper
    model = tiny_eomt()
    cfg = Config.fromfile(str(TINY)).optim_wrapper
    wrapper = build_optim_wrapper(model, cfg)
    by_param = {id(p): g for g in wrapper.optimizer.param_groups for p in g['params']}
    L, lr = 4, 1e-3
    for name, p in model.named_parameters():
        group = by_param[id(p)]
        # EoMT: block i at 0.8 ** (L - 1 - i); the embeddings as block 0; norm and head at lr
        if name.startswith('backbone.blocks.'):
            expected = lr * 0.8 ** (L - 1 - int(name.split('.')[2]))
        elif name.startswith(('backbone.patch_embed', 'backbone.pos_embed', 'backbone.cls_token',
                              'backbone.reg_token')):
            expected = lr * 0.8 ** (L - 1)
        else:
            expected = lr
        assert group['lr'] == pytest.approx(expected), name
        assert group['backbone'] == name.startswith('backbone.')
        assert group['weight_decay'] == 0.05  # decay_all: every parameter, as EoMT


def test_two_stage_warmup_then_poly_per_group_and_on_resume():
    from mmengine.optim import OptimWrapper
    from vit5seg.engine.schedules import TwoStageWarmupPolyLR
    w1, w2, T = 5, 10, 40

    def expected(t, base, backbone):  # EoMT's schedule, written out
        if not backbone:
            return base * (t / w1 if t < w1 else (1 - (t - w1) / (T - w1)) ** 0.9)
        if t < w1:
            return 0.0
        if t < w1 + w2:
            return base * (t - w1) / w2
        return base * (1 - (t - w1 - w2) / (T - w1 - w2)) ** 0.9

    def build():
        a, b = torch.nn.Parameter(torch.zeros(1)), torch.nn.Parameter(torch.zeros(1))
        optim = torch.optim.AdamW([dict(params=[a], lr=0.5, backbone=True), dict(params=[b], lr=1.0, backbone=False)])
        wrapper = OptimWrapper(optim)
        return wrapper, TwoStageWarmupPolyLR(wrapper, warmup_new=w1, warmup_backbone=w2, end=T)

    wrapper, sched = build()
    for t in range(T):
        lrs = [g['lr'] for g in wrapper.param_groups[:2]]  # (OptimWrapper adds an empty third for logging)
        assert lrs == pytest.approx([expected(t, 0.5, True), expected(t, 1.0, False)]), t
        wrapper.step()
        sched.step()
        if t == 17:
            state = sched.state_dict()
            saved = [dict(g) for g in wrapper.param_groups]
    resumed, sched2 = build()
    for g, s in zip(resumed.param_groups, saved):
        g.update({k: v for k, v in s.items() if k != 'params'})
    sched2.load_state_dict(state)
    resumed.step()
    sched2.step()
    assert [g['lr'] for g in resumed.param_groups[:2]] == pytest.approx([expected(19, 0.5, True),
                                                                     expected(19, 1.0, False)])
    with pytest.raises(ValueError, match='backbone=True/False'):
        TwoStageWarmupPolyLR(OptimWrapper(torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1)), warmup_new=w1,
                             warmup_backbone=w2, end=T)


# --- the tools on the tiny twin ----------------------------------------------------------

@pytest.mark.slow
def test_tiny_eomt_trains_compiled_logs_its_annealing_tests_and_exports(tmp_path):
    """tools/train.py with model.backbone.compile=True (a graph per kind of block, none per
    step: test_compiled_eomt_equals_eager_and_recompiles_on_no_step), then test, export and
    inference from the checkpoint, eager."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    from vit5seg.datasets import make_synthetic_ade20k
    root = make_synthetic_ade20k(tmp_path / 'data', num_train=8, num_val=4, size=96, seed=0)
    iters = 6  # P_i reaches 0 at 2 and 4
    opts = [f'{k}.dataset.data_root={root}' for k in ('train_dataloader', 'val_dataloader', 'test_dataloader')]
    opts += [f'train_cfg.max_iters={iters}', f'train_cfg.val_interval={iters}', 'train_dataloader.batch_size=2',
             f'param_scheduler.0.end={iters}', 'param_scheduler.0.warmup_new=2', 'param_scheduler.0.warmup_backbone=2',
             'default_hooks.logger.interval=1', 'model.backbone.compile=True',
             'custom_hooks.3.starts=[0,2]', 'custom_hooks.3.ends=[2,4]']
    work = tmp_path / 'work'
    torch._dynamo.reset()
    counters.clear()
    out = run_script(REPO / 'tools' / 'train.py', TINY, '--work-dir', work, '--cfg-options', *opts, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    # blocks without queries, with queries and a mask, with queries and none; the prediction;
    # validation's no-grad versions at its image sizes: not one per step
    # and at least the four kinds of training graphs: an eager fallback compiles none
    assert 4 <= counters['stats']['unique_graphs'] <= 8, dict(counters['stats'])  # 6 with torch 2.14
    records = [r for r in logged_scalars(work) if 'mask_prob_0' in r]
    probs = {r['iter']: (r['mask_prob_0'], r['mask_prob_1']) for r in records}
    # logged after iteration t + 1 ran with P(t): block 0 anneals over [0, 2), block 1 over [2, 4)
    assert probs[1] == (1.0, 1.0) and probs[2] == pytest.approx((0.5 ** 0.9, 1.0))
    assert probs[3] == (0.0, 1.0) and probs[4] == pytest.approx((0.0, 0.5 ** 0.9)) and probs[6] == (0.0, 0.0)
    assert any('mIoU' in r for r in logged_scalars(work))  # validated at the end
    from vit5seg.analysis.runs import read_result
    run = read_result(work)  # compare.py pairs EoMT runs with EoMT runs only
    assert run.family == 'ViT-5' and run.size.endswith(' EoMT') and run.single['mIoU'] >= 0
    checkpoint = (work / 'last_checkpoint').read_text().strip()

    # a fixed-size export (the dynamic one, 3x slower to make, is held for UperNet in test_deploy.py)
    out = run_script(REPO / 'tools' / 'export_onnx.py', TINY, checkpoint, '--out', tmp_path / 'eomt.onnx',
                     '--shape', '80', '112', '--repeats', '1', cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    rows = [line.split('|') for line in out.stdout.splitlines() if line.startswith('| ') and 'x' in line.split('|')[1]]
    assert len(rows) == 1 and float(rows[0][3].strip(' %')) >= 99.9, out.stdout

    from vit5seg.apis import inference_model, init_model
    model = init_model(str(TINY), checkpoint, device='cpu')
    image = sorted((root / 'images' / 'validation').glob('*.jpg'))[0]
    result = inference_model(model, str(image))
    assert result.pred_sem_seg.data.shape[1:] == (96, 120)


# --- torch.compile -----------------------------------------------------------------------

def _features(model, inputs, samples, seed):
    torch.manual_seed(seed)  # the same mask drops and loss points for both models
    losses = model.loss(inputs, samples)
    total = sum(v for k, v in losses.items() if 'loss' in k)
    params = [p for p in model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(total, params, allow_unused=True)
    return total.detach(), [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]


@pytest.mark.slow
def test_compiled_eomt_equals_eager_and_recompiles_on_no_step():
    """Blocks and predictions compiled (model.backbone.compile=True), the mask drop outside:
    the losses, every gradient and the prediction equal eager's within 1e-5; a second
    training step with other mask probabilities, and a second prediction, compile nothing."""
    import time

    import torch._dynamo
    from torch._dynamo.utils import counters

    eager = tiny_eomt()
    cfg = Config.fromfile(str(TINY))
    cfg.model.backbone.compile = True
    compiled = build_segmentor(cfg)
    compiled.load_state_dict(eager.state_dict())
    inputs, samples = labelled_batch(hw=(64, 64))
    eager.train(), compiled.train()
    torch._dynamo.reset()
    counters.clear()
    for step, probs in enumerate(([0.6, 0.3], [0.5, 0.2], [0.3, 0.0])):
        eager.decoder.mask_probs = compiled.decoder.mask_probs = probs
        start = time.perf_counter()
        # step 1: other probabilities, nothing to compile; step 2: P = 0 for the second block
        # compiles a block with queries and no mask, once for the rest of training
        with torch._dynamo.config.patch(error_on_recompile=step == 1):
            loss_c, grads_c = _features(compiled, inputs, samples, seed=step)
        seconds = time.perf_counter() - start
        loss_e, grads_e = _features(eager, inputs, samples, seed=step)
        torch.testing.assert_close(loss_c, loss_e, rtol=1e-5, atol=1e-5)
        scale = max(g.abs().max() for g in grads_e)
        assert max((a - b).abs().max() for a, b in zip(grads_c, grads_e)) <= 1e-5 * scale
        print(f'compiled EoMT, training step {step}: {seconds:.1f} s')
        if step == 0:  # something compiled: an eager fallback would pass every comparison
            assert counters['stats']['unique_graphs'] >= 3, dict(counters['stats'])
    eager.eval(), compiled.eval()
    meta = [SegDataSample(metainfo=dict(img_shape=(64, 64), ori_shape=(64, 64)))] * 2
    with torch.no_grad():
        expected = eager.predict(inputs, meta)
        compiled.predict(inputs, meta)
        with torch._dynamo.config.patch(error_on_recompile=True):
            got = compiled.predict(inputs, meta)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a.seg_logits.data, b.seg_logits.data, rtol=1e-5, atol=1e-5)
