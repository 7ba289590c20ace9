"""Every value of every shipped recipe's card, written from its source (issue #38).

``EXPECTED[config]`` maps each key of ``recipe_card(config).values()`` to ``(value, source)``.
The values are written here from the sources named beside them, not read from the configs:
the segmentation protocol this project follows (DeiT-III's, arXiv 2204.07118, run on XCiT's
segmentation code; the BEiT / MAE recipe for _ld), EoMT's code and ADE20K yaml (tue-mps/eomt), the ViT-5
architecture (arXiv 2602.08071), mmseg 1.2.2's own configs and the defaults of
the classes the card lists. tests/test_engine_recipes.py compares each card with its row here and
checks that a changed number in any config file fails that comparison.

The blocks below compose as the sources do (a protocol, then a size, then a family), each
entry keeping the source it was written from.
"""
import itertools
import re
from typing import Dict, NamedTuple, Tuple

Pin = Tuple[object, str]

# --- the sources ---------------------------------------------------------------------------
PROTOCOL = 'DeiT-III (arXiv 2204.07118) on XCiT\'s code: facebookresearch/xcit semantic_segmentation/configs'
P_MODEL = f'{PROTOCOL} _base_/models/upernet_xcit_p16.py, xcit/upernet/upernet_xcit_small_12_p16_160k_ade20k.py'
P_DATA = f'{PROTOCOL} _base_/datasets/ade20k.py'
P_OPT = f'{PROTOCOL} xcit/upernet/upernet_xcit_small_12_p16_160k_ade20k.py optimizer, lr_config'
P_LD = ('BEiT/MAE: microsoft/unilm beit/semantic_segmentation/configs/beit/upernet/, facebookresearch/mae '
        'FINETUNE.md')
ARCH = 'the ViT-5 paper, arXiv 2602.08071'
EOMT = 'tue-mps/eomt'
EOMT_SEMANTIC = f'{EOMT} training/mask_classification_semantic.py defaults'
EOMT_YAML = f'{EOMT} configs/dinov2/ade20k/semantic/eomt_large_512.yaml'
EOMT_COCO_S = f'{EOMT} configs/dinov2/coco/panoptic/eomt_small_640.yaml (no ADE20K S/B recipe: its COCO windows)'
EOMT_MAIN = f'{EOMT} main.py trainer defaults'
EOMT_TRANSFORMS = f'{EOMT} datasets/transforms.py'
EOMT_ADE = f'{EOMT} datasets/ade20k_semantic.py'
EOMT_NET = f'{EOMT} models/eomt.py'
EOMT_NOTES = f'{EOMT} models/eomt.py, training/lightning_module.py'
MMSEG = 'mmseg 1.2.2'
MMSEG_ADE = f'{MMSEG} configs/_base_/datasets/ade20k.py'
MMSEG_RUNTIME = f'{MMSEG} configs/_base_/default_runtime.py'
MMSEG_SCHEDULE = f'{MMSEG} configs/_base_/schedules/schedule_160k.py'
MMSEG_80K = f'{MMSEG} configs/_base_/schedules/schedule_80k.py'
MMSEG_VIT_UPERNET = f'{MMSEG} configs/_base_/models/upernet_vit-b16_ln_mln.py'
MMCV_LOAD = 'mmcv 2.1 LoadImageFromFile defaults'
MMSEG_DEFAULT = f'{MMSEG} transform defaults'
OURS = 'vit5seg (docs/reliability.md, docs/data.md): checks and hooks that compute nothing of the model'
RUNNER = 'vit5seg.engine.runner: the lr follows the images per iteration (issue #38)'
DERIVED = 'follows from the values above'
TINY = ('this project\'s CPU shrink of the protocol, no paper\'s value: sized to train on 2 CPU cores in the tests '
        '(docs/configs.md, tiny twins)')
WEIGHTS_VIT5 = 'the authors\' ImageNet-1k weights (docs/checkpoints.md)'
MAE_FINETUNE = 'facebookresearch/mae FINETUNE.md: --layer_decay 0.65 for ViT-B, 0.75 for ViT-L'
KEEP_CKPTS = ('vit5seg: the 3 newest interval checkpoints kept (disk; the best mIoU is kept apart by save_best), '
              'no value of mmseg\'s schedules')
WEIGHTS_DEIT3 = 'DeiT-III ImageNet-1k weights, the fair twin (segmentation protocol)'


def pin(source: str, prefix: str = '', **values) -> Dict[str, Pin]:
    """``prefix.key`` -> (value, source) for each keyword."""
    return {f'{prefix}.{k}' if prefix else k: (v, source) for k, v in values.items()}


def pins(source: str, values: dict) -> Dict[str, Pin]:
    """Keys that are no Python names ('lr used', ...)."""
    return {k: (v, source) for k, v in values.items()}


def join(*blocks: Dict[str, Pin]) -> Dict[str, Pin]:
    out = {}
    for block in blocks:
        out.update(block)
    return out


# --- blocks every config shares ------------------------------------------------------------
RUNTIME = join(
    pin(RUNNER, runner_type='ViT5Runner'),
    pin(MMSEG_SCHEDULE, 'default_hooks.timer', type='IterTimerHook'),
    pin(MMSEG_SCHEDULE, 'default_hooks.logger', type='LoggerHook', interval=50, log_metric_by_epoch=False),
    pin(MMSEG_SCHEDULE, 'default_hooks.param_scheduler', type='ParamSchedulerHook'),
    pin(MMSEG_SCHEDULE, 'default_hooks.sampler_seed', type='DistSamplerSeedHook'),
    pin(MMSEG_SCHEDULE, 'default_hooks.visualization', type='SegVisualizationHook'),
    pin(OURS, 'custom_hooks.0', type='NonFiniteLossHook', action='stop'),
    pin(OURS, 'custom_hooks.1', type='RandomStateHook'),
    pin(OURS, 'custom_hooks.2', type='SkippedSampleHook'),
    pin(MMSEG_RUNTIME, 'env_cfg', cudnn_benchmark=True),
    pin(MMSEG_RUNTIME, 'env_cfg.mp_cfg', mp_start_method='fork', opencv_num_threads=0),
    pin(MMSEG_RUNTIME, 'env_cfg.dist_cfg', backend='nccl'),
    pin(MMSEG_RUNTIME, 'log_processor', by_epoch=False),
    pin(MMSEG_RUNTIME, 'tta_model', type='SegTTAModel'),
    pin(MMSEG_SCHEDULE, 'val_cfg', type='ValLoop'),
    pin(MMSEG_SCHEDULE, 'test_cfg', type='TestLoop'),
    pins(MMSEG_ADE, {'test_dataloader': 'the same as val_dataloader', 'test_evaluator': 'the same as val_evaluator'}),
)
NORMALISATION = pin('ImageNet mean/std, RGB, of the pretrained weights (mmseg\'s ADE20K configs)',
                    'model.data_preprocessor', type='SegDataPreProcessor', mean=(123.675, 116.28, 103.53),
                    std=(58.395, 57.12, 57.375), bgr_to_rgb=True, pad_val=0, seg_pad_val=255)


def load_image(prefix: str) -> Dict[str, Pin]:
    return pin(MMCV_LOAD, prefix, type='LoadImageFromFile', to_float32=False, color_type='color',
               imdecode_backend='cv2', ignore_empty=False)


def load_annotations(prefix: str, reduce_zero_label: bool, source: str) -> Dict[str, Pin]:
    block = join(pin(MMSEG_DEFAULT, prefix, type='LoadAnnotations', imdecode_backend='pillow', reduce_zero_label=None))
    if reduce_zero_label:
        block.update(pin(source, prefix, reduce_zero_label=True))
    return block


def checked_loading(prefix: str, num_classes: int, reduce_zero_label: bool, source: str) -> Dict[str, Pin]:
    return join(pin(OURS, prefix, type='CheckedLoading', skip_corrupt=False, ignore_index=255),
                pin(source, prefix, num_classes=num_classes),
                load_image(f'{prefix}.transforms.0'),
                load_annotations(f'{prefix}.transforms.1', reduce_zero_label, source))


def mmseg_train_pipeline(num_classes: int, reduce_zero_label: bool, scale, crop, source: str,
                         ratio=(0.5, 2.0)) -> Dict[str, Pin]:
    """mmseg's train pipeline: RandomResize, RandomCrop (cat_max_ratio 0.75), flip 0.5,
    PhotoMetricDistortion, behind vit5seg's checked loading."""
    p = 'train_dataloader.dataset.pipeline'
    rule = (f'RandomResize: the image fitted into {scale} x r, r uniform in [{ratio[0]}, {ratio[1]}]: its short side '
            f'{scale[1]} r unless its long side would pass {scale[0]} r')
    return join(
        checked_loading(f'{p}.0', num_classes, reduce_zero_label, source),
        pin(source, f'{p}.1', type='RandomResize', scale=scale, ratio_range=ratio, keep_ratio=True),
        pin(MMSEG_DEFAULT, f'{p}.1', resize_type='Resize'),
        pin(source, f'{p}.2', type='RandomCrop', crop_size=crop, cat_max_ratio=0.75),
        pin(MMSEG_DEFAULT, f'{p}.2', ignore_index=255),
        pin(source, f'{p}.3', type='RandomFlip', prob=0.5),
        pin(MMSEG_DEFAULT, f'{p}.3', direction='horizontal', swap_seg_labels=None),
        pin(source, f'{p}.4', type='PhotoMetricDistortion'),
        pin(f'{MMSEG_DEFAULT}: PhotoMetricDistortion, the protocol\'s photometric distortion', f'{p}.4',
            brightness_delta=32, contrast_range=(0.5, 1.5), saturation_range=(0.5, 1.5), hue_delta=18),
        pin(source, f'{p}.5', type='PackSegInputs'),
        pins(DERIVED, {'scale rule': rule}),
    )


def test_pipeline(prefix: str, num_classes: int, reduce_zero_label: bool, scale, source: str) -> Dict[str, Pin]:
    return join(
        load_image(f'{prefix}.0'),
        pin(source, f'{prefix}.1', type='Resize', scale=scale, keep_ratio=True),
        pin(MMSEG_DEFAULT, f'{prefix}.1', scale_factor=None, clip_object_border=True, backend='cv2',
            interpolation='bilinear'),
        load_annotations(f'{prefix}.2', reduce_zero_label, source),
        pin(OURS, f'{prefix}.3', type='CheckSegSample', ignore_index=255),
        pin(source, f'{prefix}.3', num_classes=num_classes),
        pin(source, f'{prefix}.4', type='PackSegInputs'),
    )


def loaders(dataset: str, root: str, prefixes: dict, per_gpu: int, source: str, workers=4,
            persistent=True) -> Dict[str, Pin]:
    """The train and val dataloaders around their pipelines (``prefixes``: split -> (img, seg))."""
    out = {}
    for split, sampler, batch in (('train', 'InfiniteSampler', per_gpu), ('val', 'DefaultSampler', 1)):
        key = f'{split}_dataloader'
        img, seg = prefixes[split]
        out.update(join(
            pin(source, key, batch_size=batch, num_workers=workers, persistent_workers=persistent),
            pin(source, f'{key}.sampler', type=sampler, shuffle=split == 'train'),
            pin(source, f'{key}.dataset', type=dataset, data_root=root),
            pin(source, f'{key}.dataset.data_prefix', img_path=img, seg_map_path=seg)))
    return out


def tta(source: str) -> Dict[str, Pin]:
    """mmseg's multi-scale + flip test (--tta): ratios 0.5-1.75, both flips."""
    out = join(load_image('tta_pipeline.0'), pin(source, 'tta_pipeline.0', backend_args=None),
               pin(source, 'tta_pipeline.1', type='TestTimeAug'))
    for i, ratio in enumerate((0.5, 0.75, 1.0, 1.25, 1.5, 1.75)):
        out.update(pin(source, f'tta_pipeline.1.transforms.0.{i}', type='Resize', scale_factor=ratio, keep_ratio=True))
    for i, prob in enumerate((0.0, 1.0)):
        out.update(pin(source, f'tta_pipeline.1.transforms.1.{i}', type='RandomFlip', prob=prob,
                       direction='horizontal'))
    out.update(pin(source, 'tta_pipeline.1.transforms.2.0', type='LoadAnnotations'))
    out.update(pin(source, 'tta_pipeline.1.transforms.3.0', type='PackSegInputs'))
    return out


ADE20K_PREFIXES = {'train': ('images/training', 'annotations/training'),
                   'val': ('images/validation', 'annotations/validation')}
ADE20K = join(
    loaders('ADE20KDataset', 'data/ade/ADEChallengeData2016', ADE20K_PREFIXES, 2, MMSEG_ADE),
    pin(f'{P_DATA}: 150 classes', 'model.decode_head', num_classes=150),
    mmseg_train_pipeline(150, True, (2048, 512), (512, 512), P_DATA),
    test_pipeline('val_dataloader.dataset.pipeline', 150, True, (2048, 512), P_DATA),
    pin(MMSEG_ADE, 'val_evaluator', type='IoUMetric', iou_metrics=('mIoU',)),
    tta(P_DATA),
    pin(f'{P_DATA}: single scale, whole image as in the XCiT recipe', 'model.test_cfg', mode='whole'),
    pin(P_MODEL, 'model.auxiliary_head', num_classes=150),
)


# --- the backbones -------------------------------------------------------------------------
def vit5_switches(source: str = ARCH) -> Dict[str, Pin]:
    return pin(source, 'model.backbone', norm_type='rmsnorm', use_rope=True, num_registers=4, register_rope=True,
               qk_norm=True, layer_scale_init=0.0001, mlp_type='mlp', qkv_bias=False, sandwich_norm=False,
               linear_bias=True)


def deit3_switches() -> Dict[str, Pin]:
    return pin(f'{ARCH}: DeiT-III, LayerNorm, qkv bias, none of the ViT-5 extras', 'model.backbone',
               norm_type='layernorm', use_rope=False, num_registers=0, register_rope=False, qk_norm=False,
               layer_scale_init=0.0001, mlp_type='mlp', qkv_bias=True, sandwich_norm=False, linear_bias=True)


SIZES = {'small': (384, 12, 6), 'base': (768, 12, 12), 'large': (1024, 24, 16)}
DINOV2_HUB = 'facebookresearch/dinov2 dinov2/hub/backbones.py'
DINOV3_HUB = 'facebookresearch/dinov3 dinov3/hub/backbones.py'
_DINOV3_FILES = {'small': 'vits16_pretrain_lvd1689m-08c60483', 'base': 'vitb16_pretrain_lvd1689m-73cec8be',
                 'large': 'vitl16_pretrain_lvd1689m-8aa4cbdd'}
URLS = {'vit5': 'https://huggingface.co/FengWang3211/ViT-5/resolve/main/vit5_{}_patch16_224.pth',
        'deit3': 'https://dl.fbaipublicfiles.com/deit/deit_3_{}_224_1k.pth',
        'dinov2': 'https://dl.fbaipublicfiles.com/dinov2/dinov2_vit{0[0]}14/dinov2_vit{0[0]}14_reg4_pretrain.pth',
        'dinov3': 'checkpoints/dinov3_{}.pth'}
WEIGHTS = {'vit5': WEIGHTS_VIT5, 'deit3': WEIGHTS_DEIT3,
           'dinov2': f'{DINOV2_HUB}: the _reg4 files (dinov2/hub/utils.py _DINOV2_BASE_URL)',
           'dinov3': f'{DINOV3_HUB}: Meta\'s gated files, by their hub names, where the user puts them'}
BACKBONE_DEFAULTS = join(
    pin(f'{ARCH} "Sizes": patch 16, MLP ratio 4', 'model.backbone', patch_size=16, mlp_ratio=4.0, in_channels=3),
    pin(f'{ARCH} "Block": RMSNorm eps 1e-6', 'model.backbone', norm_eps=1e-06, rms_norm_impl='auto'),
    pin(f'{ARCH} "Attention": patch RoPE theta 10000, registers theta 100, squeezed into the pretraining grid',
        'model.backbone', rope_theta=10000.0, register_rope_theta=100.0, rope_ref_grid=None),
    pin(f'{ARCH} "Block": drop path, the same rate in every block', 'model.backbone',
        drop_path_schedule='constant', drop_rate=0.0, attn_drop_rate=0.0),
    pin(f'{ARCH} "Token sequence": pos_embed resized bicubic', 'model.backbone', interpolate_mode='bicubic'),
    pin(f'{ARCH} "Token sequence": a learned pos_embed, resized to the grid without antialias', 'model.backbone',
        abs_pos_embed=True, interpolate_offset=0.0, interpolate_antialias=False),
    pin('ViT5 defaults: the DINOv3 RoPE rescale only where a DINOv3 preset sets it', 'model.backbone',
        rope_train_rescale=None),
    pin('ViT5 defaults: nothing frozen, no checkpointing, no compile, patch tokens only', 'model.backbone',
        output_cls_token=False, with_cp=False, compile=False, frozen_stages=-1, pretrained=None),
    pin('ViT5 defaults: the encoder fine-tunes', 'model.backbone', frozen=False),
)


def dinov2_switches() -> Dict[str, Pin]:
    source = f'{DINOV2_HUB} vit_*(num_register_tokens=4, interpolate_antialias=True, interpolate_offset=0.0)'
    return join(
        deit3_switches(),
        pin(source, 'model.backbone', num_registers=4, layer_scale_init=1.0, patch_size=14, norm_eps=1e-06,
            interpolate_offset=0.0, interpolate_antialias=True))


def dinov3_switches() -> Dict[str, Pin]:
    source = (f'{DINOV3_HUB} dinov3_vit*16: pos_embed_rope_base 100, rescale_coords 2, n_storage_tokens 4, '
              'layerscale_init 1e-5, layernormbf16 (eps 1e-5), mask_k_bias, no learned positions')
    return join(
        deit3_switches(),
        pin(source, 'model.backbone', use_rope='dinov3', rope_theta=100.0, rope_train_rescale=2.0, num_registers=4,
            layer_scale_init=1e-05, norm_eps=1e-05, qkv_bias='qv', abs_pos_embed=False, patch_size=16))


def backbone(family: str, size: str) -> Dict[str, Pin]:
    width, depth, heads = SIZES[size]
    arch = f'{family}-{size}' + ('-reg4' if family == 'dinov2' else '')
    switches = {'vit5': vit5_switches, 'deit3': deit3_switches, 'dinov2': dinov2_switches,
                'dinov3': dinov3_switches}[family]()
    size_source = {'dinov2': DINOV2_HUB, 'dinov3': DINOV3_HUB}.get(family, f'{ARCH} "Sizes"')
    return join(
        BACKBONE_DEFAULTS, switches,
        pin(f'{size_source}: {arch}', 'model.backbone', type='ViT5', arch=arch, embed_dims=width, num_layers=depth,
            num_heads=heads),
        pin(f'{DINOV2_HUB}: pretrained at 518' if family == 'dinov2' else f'{ARCH}: pretrained at 224',
            'model.backbone', img_size=518 if family == 'dinov2' else 224),
        pin(WEIGHTS[family], 'model.backbone.init_cfg', type='Pretrained',
            checkpoint=URLS[family].format(_DINOV3_FILES[size] if family == 'dinov3' else size)),
    )


# --- UperNet on ADE20K: the protocol -------------------------------------------------------
def upernet(width: int, depth: int, channels: int = 512) -> Dict[str, Pin]:
    taps = (3, 5, 7, 11) if depth == 12 else (7, 11, 15, 23)
    norm = 'SyncBN for multi-GPU runs'
    return join(
        pin(MMSEG_VIT_UPERNET, 'model', type='EncoderDecoder', pretrained=None),
        pin(f'{P_MODEL}: 4 evenly spaced taps, patch tokens only', 'model.backbone', out_indices=taps),
        pin(f'{P_MODEL}: the XCiT/DeiT-III taps are raw block outputs', 'model.backbone', final_norm=False),
        pin(f'{P_MODEL}: Feature2Pyramid(rescales=[4, 2, 1, 0.5])', 'model.neck', type='Feature2Pyramid',
            embed_dim=width, rescales=(4, 2, 1, 0.5)),
        pin(f'{P_MODEL}: {norm}', 'model.neck.norm_cfg', type='SyncBN', requires_grad=True),
        pin(f'{P_MODEL}: UPerHead, pool scales (1, 2, 3, 6), dropout 0.1', 'model.decode_head', type='UPerHead',
            in_channels=(width,) * 4, in_index=(0, 1, 2, 3), pool_scales=(1, 2, 3, 6), dropout_ratio=0.1,
            align_corners=False),
        pin(f'{P_MODEL}: UPerHead channels {channels}' if channels == 512 else f'{P_LD}: UPerHead channels 768',
            'model.decode_head', channels=channels),
        pin(f'{P_MODEL}: {norm}', 'model.decode_head.norm_cfg', type='SyncBN', requires_grad=True),
        pin(f'{MMSEG_VIT_UPERNET}: cross entropy', 'model.decode_head.loss_decode', type='CrossEntropyLoss',
            use_sigmoid=False, loss_weight=1.0),
        pin(f'{P_MODEL}: auxiliary FCNHead on the third tap', 'model.auxiliary_head', type='FCNHead',
            in_channels=width, in_index=2, dropout_ratio=0.1, align_corners=False),
        pin(MMSEG_VIT_UPERNET, 'model.auxiliary_head', channels=256, num_convs=1, concat_input=False),
        pin(f'{P_MODEL}: {norm}', 'model.auxiliary_head.norm_cfg', type='SyncBN', requires_grad=True),
        pin(f'{P_MODEL}: auxiliary loss weight 0.4', 'model.auxiliary_head.loss_decode', type='CrossEntropyLoss',
            use_sigmoid=False, loss_weight=0.4),
    )


def lr_by_layer(lr: float, rate: float, depth: int, numbering: str, full_last: int = 0) -> Tuple[str, ...]:
    """Written from the two definitions: BEiT's (mmseg's LearningRateDecayOptimizerConstructor:
    layer id i of depth + 2 gets rate ** (depth + 1 - i); embeddings are id 0, block j is j + 1,
    the rest depth + 1) and EoMT's (training/lightning_module.py: block j gets rate ** (depth - 1 - j),
    embeddings as block 0, everything after the blocks the full rate; with llrd_l2_enabled False
    the last ``full_last`` blocks, those the queries join, the full rate too)."""
    if numbering == 'beit':
        exponents = {'embeddings': depth + 1, **{f'block {j}': depth - j for j in range(depth)}, 'head and neck': 0}
    else:
        exponents = {'embeddings': depth - 1,
                     **{f'block {j}': 0 if j >= depth - full_last else depth - 1 - j for j in range(depth)},
                     'head and neck': 0}
    return tuple(f'{name} {lr * rate ** e:.4g}' for name, e in exponents.items())


NO_DECAY_NAMES = ('pos_embed', 'cls_token', 'reg_token')
NO_DECAY_HEAD_EMBEDDINGS = ('query_embed.weight', 'query_feat.weight', 'level_embed.weight')


class DecayRule(NamedTuple):
    """The protocol's weight decay, applied by tests/test_engine_recipes.py to the config's own model
    (built there on the meta device): ``weight_decay`` on every parameter but the 1-d ones
    (norms, biases, LayerScale gammas), biases, the cls/register tokens and pos_embed, and (as
    mmseg's Mask2Former configs) query/level embeddings; EoMT decays every parameter."""
    weight_decay: float
    decay_all: bool = False

    def exempt(self, name: str, shape) -> bool:
        return not self.decay_all and (len(shape) == 1 or name.endswith('.bias') or name.endswith(
            NO_DECAY_HEAD_EMBEDDINGS) or name.split('.')[-1] in NO_DECAY_NAMES)

    def expect(self, named_shapes) -> Dict[str, object]:
        """The card's 'weight decay' and 'no weight decay on' for these (name, shape) pairs;
        block and layer indices shown as ``*``."""
        exempt = [name for name, shape in named_shapes if self.exempt(name, shape)]
        counts = {0.0: len(exempt), self.weight_decay: len(named_shapes) - len(exempt)}
        return {'weight decay': tuple(f'{d:g} on {n} tensors' for d, n in sorted(counts.items()) if n),
                'no weight decay on': tuple(sorted({re.sub(r'\.\d+(?=\.)', '.*', n) for n in exempt}))
                or 'nothing: every parameter decays'}


class FrozenCount(NamedTuple):
    """The card's 'backbone frozen' and 'trained parameters' rows, counted by
    tests/test_engine_recipes.py on the config's own model built on the meta device: no backbone
    parameter trains, every other one does."""

    def expect(self, named: list) -> Dict[str, object]:
        """``named``: (name, numel, requires_grad) of every parameter of the model."""
        total = sum(n for name, n, _ in named if name.startswith('backbone.'))
        parts = {}
        for name, n, _ in named:
            if not name.startswith('backbone.'):
                parts[name.split('.')[0]] = parts.get(name.split('.')[0], 0) + n
        return {'backbone frozen': f'0 of {total:,} parameters trained',
                'trained parameters': tuple(f'{part}: {n:,}' for part, n in parts.items())}


def protocol_optimizer(depth: int, ld: float = None) -> Dict[str, Pin]:
    """AdamW lr 6e-5, betas (0.9, 0.999), wd 0.01, no layer decay; _ld: lr 1e-4, wd 0.05,
    layer decay ``ld``."""
    lr, wd, rate, source = (6e-05, 0.01, 1.0, P_OPT) if ld is None else (0.0001, 0.05, ld, P_LD)
    return join(
        pin(source, 'optim_wrapper', type='OptimWrapper', constructor='ViT5OptimWrapperConstructor'),
        pin(source, 'optim_wrapper.optimizer', type='AdamW', lr=lr, betas=(0.9, 0.999), weight_decay=wd),
        pin(MAE_FINETUNE if rate == 0.75 else source, 'optim_wrapper.paramwise_cfg', layer_decay_rate=rate),
        pins(f'{P_OPT}: no weight decay on norms, biases, LayerScale gammas, cls/register tokens and pos_embed '
             '(and, as mmseg\'s Mask2Former configs, query/level embeddings)', {'weight decay': DecayRule(wd)}),
        pins(DERIVED, {'lr used': lr, 'lr by layer': lr_by_layer(lr, rate, depth, 'beit'), 'precision': 'float32',
                       'torch.compile': False}),
    )


def protocol_schedule(iters: int = 160000, interval: int = 16000, source: str = P_OPT) -> Dict[str, Pin]:
    """160k iterations, linear warm-up over 1500 (start factor 1e-6), poly power 1.0 to 0;
    evaluation and checkpoints every 16k, best mIoU kept."""
    return join(
        pin(source, 'train_cfg', type='IterBasedTrainLoop', max_iters=iters, val_interval=interval),
        pin(P_OPT, 'param_scheduler.0', type='LinearLR', start_factor=1e-06, by_epoch=False, begin=0, end=1500),
        pin(P_OPT, 'param_scheduler.1', type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=1500),
        pin(source, 'param_scheduler.1', end=iters),
        pin(source, 'default_hooks.checkpoint', type='CheckpointHook', by_epoch=False, interval=interval,
            save_best='mIoU'),
        pin(KEEP_CKPTS, 'default_hooks.checkpoint', max_keep_ckpts=3),
    )


def batch(per_gpu: int, gpus: int, source: str = f'{PROTOCOL} "Batch": 16 images per iteration (8 GPUs x 2)',
          micro: int = 1) -> Dict[str, Pin]:
    images = per_gpu * gpus * micro
    return join(
        pin(source, 'auto_scale_lr', enable=False, base_batch_size=images),
        pin(source, 'train_dataloader', batch_size=per_gpu),
        pins(DERIVED, {'GPUs': gpus, 'images per GPU': per_gpu, 'micro-batches per step': micro,
                       'images per iteration': images, 'lr scale': 1.0}),
    )


def ade20k_upernet(family: str, size: str, ld: float = None) -> Dict[str, Pin]:
    width, depth, _ = SIZES[size]
    drop_path = 0.2 if size == 'large' else 0.1
    return join(
        RUNTIME, NORMALISATION, ADE20K, backbone(family, size), upernet(width, depth, 512 if ld is None else 768),
        protocol_optimizer(depth, ld), protocol_schedule(), batch(2, 8),
        pin(f'{P_DATA}: 512x512 crops', 'model.data_preprocessor', size=(512, 512)),
        pin(f'{PROTOCOL} "Batch": drop path 0.1 (S, B), 0.2-0.3 (L)', 'model.backbone', drop_path_rate=drop_path),
    )


def amp(dtype: str) -> Dict[str, Pin]:
    source = f'{PROTOCOL} "Batch": mixed precision (AMP) available on GPU'
    if dtype == 'float16':
        return join(pin(source, 'optim_wrapper', type='AmpOptimWrapper', dtype='float16', loss_scale='dynamic'),
                    pins(DERIVED, {'precision': 'float16 autocast, loss scale dynamic'}))
    return join(pin(source, 'optim_wrapper', type='AmpOptimWrapper', dtype='bfloat16'),
                pins(DERIVED, {'precision': 'bfloat16 autocast'}))


EXPECTED: Dict[str, Dict[str, Pin]] = {}
for _family in ('vit5', 'deit3'):
    _sizes = {'base': f'{_family}_upernet_ade20k.py', 'small': f'{_family}/{_family}-small_upernet_ade20k.py',
              'large': f'{_family}/{_family}-large_upernet_ade20k.py'}
    for _size, _path in _sizes.items():
        EXPECTED[_path] = ade20k_upernet(_family, _size)
        # _ld: 0.65 for S and B (the protocol's B value), 0.75 for L (MAE's ViT-L fine-tuning, MAE_FINETUNE)
        EXPECTED[f'{_family}/{_family}-{_size}_upernet_ade20k_ld.py'] = ade20k_upernet(
            _family, _size, ld=0.75 if _size == 'large' else 0.65)
    for _dtype, _tag in (('bfloat16', 'bf16'), ('float16', 'fp16')):
        EXPECTED[f'{_family}/{_family}-base_upernet_ade20k_amp-{_tag}.py'] = join(ade20k_upernet(_family, 'base'),
                                                                                   amp(_dtype))


# DINOv2 / DINOv3 in the same protocol, tapped where their own dense heads tap
DINOV_TAPS = {
    'dinov2': ({12: (2, 5, 8, 11), 24: (4, 11, 17, 23)}, 'facebookresearch/dinov2 dinov2/hub/depthers.py out_index'),
    'dinov3': ({12: (2, 5, 8, 11), 24: (4, 11, 17, 23)},
               'facebookresearch/dinov3 dinov3/eval/segmentation/models/__init__.py _get_backbone_out_indices '
               'FOUR_EVEN_INTERVALS: i * (n // 4) - 1, and [4, 11, 17, 23] for 24 blocks'),
}
for _family, (_taps, _source) in DINOV_TAPS.items():
    for _size in ('small', 'base', 'large'):
        EXPECTED[f'{_family}/{_family}-{_size}_upernet_ade20k.py'] = join(
            ade20k_upernet(_family, _size), pin(_source, 'model.backbone', out_indices=_taps[SIZES[_size][1]]))


# --- ablations: one switch each (arXiv 2602.08071; the configs name the paper's score) ---
ABLATION_SOURCE = f'{ARCH} ablation axes (pretrain the variant on ImageNet-1k: docs/reproduce.md)'
ABLATIONS = {
    'gemma3-style': dict(mlp_type='geglu', sandwich_norm=True, linear_bias=False, layer_scale_init=0),
    'layernorm': dict(norm_type='layernorm'),
    'llama-style': dict(mlp_type='swiglu', linear_bias=False, layer_scale_init=0, qk_norm=False),
    'no-layerscale': dict(layer_scale_init=0),
    'no-qk-norm': dict(qk_norm=False),
    'no-registers': dict(num_registers=0),
    'no-rope': dict(use_rope=False),
    'qkv-bias': dict(qkv_bias=True),
    'register-no-rope': dict(register_rope=False),
    'swiglu_no-layerscale': dict(mlp_type='swiglu', layer_scale_init=0),
    'swiglu': dict(mlp_type='swiglu'),
}
for _variant, _switches in ABLATIONS.items():
    EXPECTED[f'ablations/vit5-base_{_variant}_upernet_ade20k.py'] = join(
        ade20k_upernet('vit5', 'base'), pin(ABLATION_SOURCE, 'model.backbone', **_switches),
        pin(ABLATION_SOURCE, 'model.backbone.init_cfg',
            checkpoint=f'checkpoints/ablations/vit5-base_{_variant}_in1k.pth'))


# --- other decode heads: mmseg's own settings for each, on the ViT-5-B taps -----------------
def _flat(prefix: str, value) -> Dict[str, object]:
    """A config value as the card's keys: dicts and lists of dicts by key and index, lists as
    tuples, a long list of numbers as the card writes it ('1.0 x 150, 0.1')."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            out.update(_flat(f'{prefix}.{key}', item))
        return out
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], dict):
        out = {}
        for i, item in enumerate(value):
            out.update(_flat(f'{prefix}.{i}', item))
        return out
    if isinstance(value, (list, tuple)) and len(value) > 8:
        runs = [[v, sum(1 for _ in group)] for v, group in itertools.groupby(value)]
        return {prefix: ', '.join(f'{v!r} x {n}' if n > 1 else repr(v) for v, n in runs)}
    return {prefix: tuple(value) if isinstance(value, (list, tuple)) else value}


def mmseg_config(name: str):
    """An mmseg 1.2.2 config of the installed release (its .mim copy), as data."""
    from pathlib import Path

    import mmseg
    from mmengine.config import Config
    return Config.fromfile(str(Path(mmseg.__file__).parent / '.mim' / 'configs' / name))


def mmseg_part(name: str, part: str, drop=()) -> Dict[str, Pin]:
    """``model.<part>`` of an mmseg config, value by value, naming it as the source."""
    values = _flat(f'model.{part}', mmseg_config(name).model[part])
    return {k: (v, f'{MMSEG} configs/{name}') for k, v in values.items() if not k.startswith(drop)}


def without(block: Dict[str, Pin], *prefixes: str) -> Dict[str, Pin]:
    return {k: v for k, v in block.items() if not k.startswith(prefixes)}


VIT_TAPS = 'the ViT-5-B taps of the entry config: 768 channels (Feature2Pyramid levels 0-3 where a pyramid is used)'
HEADS_BASE = ade20k_upernet('vit5', 'base')
NO_NECK = pins('heads that read raw 1/16 taps (the config\'s comment)', {'model.neck': None})
NO_AUX = pins('mmseg\'s config of this head has no auxiliary head', {'model.auxiliary_head': None})
ONE_TAP = pin('one dense map: the last block\'s tap (the config\'s comment)', 'model.backbone', out_indices=(11,))
_ADE = f'{P_DATA}: 150 classes'


def head_config(mmseg_name: str, ours: Dict[str, Pin], parts=('decode_head',), keep_neck=True,
                keep_aux=False) -> Dict[str, Pin]:
    block = without(HEADS_BASE, 'model.decode_head', *(() if keep_aux else ('model.auxiliary_head',)),
                    *(() if keep_neck else ('model.neck',)))
    for part in parts:
        block.update(mmseg_part(mmseg_name, part))
    return join(block, ours)


EXPECTED['heads/vit5_deeplabv3plus_ade20k.py'] = head_config(
    '_base_/models/deeplabv3plus_r50-d8.py',
    join(pin(VIT_TAPS, 'model.decode_head', in_channels=768, in_index=2, c1_in_channels=768),
         pin('output stride 16 of the ViT taps (the config\'s comment): DeepLabV3+\'s OS-16 rates', 'model.decode_head',
             dilations=(1, 6, 12, 18)),
         pin(_ADE, 'model.decode_head', num_classes=150)),
    keep_aux=True)
EXPECTED['heads/vit5_dpt_ade20k.py'] = head_config(
    '_base_/models/dpt_vit-b16.py',
    join(NO_NECK, NO_AUX, pin(f'{MMSEG} configs/_base_/models/dpt_vit-b16.py backbone', 'model.backbone',
                              out_indices=(2, 5, 8, 11), output_cls_token=True)),
    keep_neck=False)
EXPECTED['heads/vit5_fcn_ade20k.py'] = head_config(
    '_base_/models/fcn_r50-d8.py',
    join(NO_NECK, NO_AUX, ONE_TAP, pin(VIT_TAPS, 'model.decode_head', in_channels=768, in_index=0),
         pin(_ADE, 'model.decode_head', num_classes=150)),
    keep_neck=False)
EXPECTED['heads/vit5_pspnet_ade20k.py'] = head_config(
    '_base_/models/pspnet_r50-d8.py',
    join(NO_NECK, NO_AUX, ONE_TAP, pin(VIT_TAPS, 'model.decode_head', in_channels=768, in_index=0),
         pin(_ADE, 'model.decode_head', num_classes=150)),
    keep_neck=False)
EXPECTED['heads/vit5_segformer_ade20k.py'] = head_config(
    '_base_/models/segformer_mit-b0.py',
    join(NO_AUX, pin(VIT_TAPS, 'model.decode_head', in_channels=(768,) * 4),
         pin(_ADE, 'model.decode_head', num_classes=150)))
EXPECTED['heads/vit5_segmenter_ade20k.py'] = head_config(
    'segmenter/segmenter_vit-b_mask_8xb1-160k_ade20k-512x512.py',
    join(NO_NECK, NO_AUX, ONE_TAP,
         pin(f'{MMSEG} configs/segmenter/: the last block\'s normalised tokens', 'model.backbone', final_norm=True)),
    keep_neck=False)
EXPECTED['heads/vit5_setr-mla_ade20k.py'] = join(
    head_config('_base_/models/setr_mla.py', pin(_ADE, 'model.decode_head', num_classes=150),
                parts=('decode_head', 'auxiliary_head', 'neck'), keep_neck=False),
    pin(VIT_TAPS, 'model.neck', in_channels=(768,) * 4),
    {f'model.auxiliary_head.{i}.num_classes': (150, _ADE) for i in range(4)})
EXPECTED['heads/vit5_setr-pup_ade20k.py'] = join(
    head_config('_base_/models/setr_pup.py', join(NO_NECK, pin(_ADE, 'model.decode_head', num_classes=150),
                                                  pin(VIT_TAPS, 'model.decode_head', in_channels=768)),
                parts=('decode_head', 'auxiliary_head'), keep_neck=False),
    {f'model.auxiliary_head.{i}.{k}': (v, _ADE if k == 'num_classes' else VIT_TAPS)
     for i in range(3) for k, v in (('num_classes', 150), ('in_channels', 768))})
EXPECTED['heads/vit5_mask2former_ade20k.py'] = join(
    head_config('mask2former/mask2former_r50_8xb2-160k_ade20k-512x512.py',
                join(NO_AUX, pin(VIT_TAPS, 'model.decode_head', in_channels=(768,) * 4)),
                parts=('decode_head',)),
    pin(f'{MMSEG} configs/mask2former/mask2former_r50_8xb2-160k_ade20k-512x512.py data_preprocessor',
        'model.data_preprocessor.test_cfg', size_divisor=32))


# --- EoMT on ADE20K: EoMT's recipe (its ADE20K ViT-L yaml, its code's defaults) ---------------
EOMT_ADE_EPOCH = 20210 // 16  # EoMT's datasets/ade20k_semantic.py: batch_size 16, drop_last=True: 1263
EOMT_ITERS = 31 * EOMT_ADE_EPOCH  # the yaml's max_epochs 31: 39153
EOMT_WINDOWS = {
    # the yaml's attn_mask_annealing_start_steps / end_steps: consecutive sixths, the first block first
    'large': ((6520, 13040, 19560, 26080), (13040, 19560, 26080, 32600), EOMT_YAML),
    # EoMT's COCO S/B recipe in twelfths of this schedule: 2 of 12 each, 1-twelfth gaps, the last ending at 10/12
    'base': tuple(tuple(round(EOMT_ITERS * t / 12) for t in ts) for ts in ((2, 5, 8), (4, 7, 10))) + (EOMT_COCO_S,),
}
EOMT_WINDOWS['small'] = EOMT_WINDOWS['base']


def eomt_train_pipeline() -> Dict[str, Pin]:
    p = 'train_dataloader.dataset.pipeline'
    return join(
        checked_loading(f'{p}.0', 150, True, P_DATA),
        pin(f'{EOMT_TRANSFORMS}: max_brightness_delta 32, max_contrast_factor 0.5, saturation_factor 0.5, '
            'max_hue_delta 18', f'{p}.1', type='EoMTColorJitter', brightness_delta=32, contrast=0.5, saturation=0.5,
            hue_delta=18),
        pin(f'{EOMT_TRANSFORMS}: RandomHorizontalFlip (p 0.5)', f'{p}.2', type='RandomFlip', prob=0.5),
        pin(MMSEG_DEFAULT, f'{p}.2', direction='horizontal', swap_seg_labels=None),
        pin(f'{EOMT_ADE}: img_size (512, 512), scale_range (0.5, 2.0); {EOMT_TRANSFORMS}: ScaleJitter, RandomCrop',
            f'{p}.3', type='ScaleJitterCrop', crop_size=(512, 512), scale_range=(0.5, 2.0)),
        pin(f'{EOMT_TRANSFORMS}: pads the image with 0, the target with "no mask"; redraws empty crops',
            f'{p}.3', img_pad_val=0, seg_pad_val=255, ignore_index=255, max_draws=100),
        pin(P_DATA, f'{p}.4', type='PackSegInputs'),
        pins(DERIVED, {'scale rule': 'ScaleJitterCrop: the image fitted into (512, 512) x s, s uniform in [0.5, 2.0]: '
                                     'its long side 512 s; padded and cropped to (512, 512)'}),
    )


def eomt_head(width: int, blocks: int, blocks_source: str) -> Dict[str, Pin]:
    cls = f'{EOMT_SEMANTIC}: class_coefficient 2.0, no_object_coefficient 0.1'
    mask = f'{EOMT_SEMANTIC}: mask_coefficient 5.0'
    dice = f'{EOMT_SEMANTIC}: dice_coefficient 5.0'
    points = f'{EOMT_SEMANTIC}: num_points 12544, oversample_ratio 3.0, importance_sample_ratio 0.75'
    head = 'model.decode_head'
    return join(
        pin(f'{EOMT_NOTES}: no neck, no decoder', 'model', type='EoMTEncoderDecoder', pretrained=None),
        pin(f'{EOMT_NOTES}: every prediction through the backbone\'s final norm', 'model.backbone', final_norm=True),
        pin(f'{EOMT_NET}: the encoder as timm builds it (no drop path); no taps', 'model.backbone', drop_path_rate=0.0,
            out_indices=-1),
        pin(f'{EOMT_YAML}: num_q 100', head, type='EoMTHead', num_queries=100),
        pin(blocks_source, head, num_blocks=blocks),
        pin(f'{EOMT_NOTES}: queries of the backbone\'s width, masks at 4 px of patch 16', head, in_channels=width,
            patch_size=16, align_corners=False),
        pin(f'{EOMT_ADE}: 150 classes, ignore 255', head, num_classes=150, ignore_index=255),
        pin(cls, f'{head}.loss_decode.0', type='CrossEntropyLoss', loss_name='loss_cls_ce', loss_weight=2.0,
            class_weight='1.0 x 150, 0.1'),
        pin(mask, f'{head}.loss_decode.1', type='CrossEntropyLoss', use_sigmoid=True, loss_name='loss_mask_ce',
            loss_weight=5.0),
        pin(dice, f'{head}.loss_decode.2', type='DiceLoss', ignore_index=None, naive_dice=True, eps=1,
            loss_name='loss_mask_dice', loss_weight=5.0),
        pin(points, f'{head}.train_cfg', num_points=12544, oversample_ratio=3.0, importance_sample_ratio=0.75),
        pin(f'{EOMT_NOTES}: Hungarian matching per image', f'{head}.train_cfg.assigner', type='HungarianAssigner'),
        pin(cls, f'{head}.train_cfg.assigner.match_costs.0', type='ClassificationCost', weight=2.0),
        pin(mask, f'{head}.train_cfg.assigner.match_costs.1', type='CrossEntropyLossCost', weight=5.0,
            use_sigmoid=True),
        pin(dice, f'{head}.train_cfg.assigner.match_costs.2', type='DiceCost', weight=5.0, pred_act=True, eps=1.0),
        pin(f'{EOMT_NOTES}: 512 windows along the long side of a short-side-512 image (stride: mmseg\'s 2/3 of the '
            'window)', 'model.test_cfg', mode='slide', crop_size=(512, 512), stride=(341, 341)),
    )


def eomt_optimisation(depth: int, size: str) -> Dict[str, Pin]:
    starts, ends, windows_source = EOMT_WINDOWS[size]
    lr = (f'{EOMT_SEMANTIC}: lr 1e-4, llrd 0.8, weight_decay 0.05 (every parameter), poly_power 0.9, '
          'warmup_steps [500, 1000]')
    return join(
        pin(f'{EOMT_MAIN}: precision 16-mixed; bfloat16 here (docs/eomt.md lists it)', 'optim_wrapper',
            type='AmpOptimWrapper', dtype='bfloat16'),
        pin(lr, 'optim_wrapper', constructor='ViT5OptimWrapperConstructor'),
        pin(lr, 'optim_wrapper.optimizer', type='AdamW', lr=0.0001, weight_decay=0.05),
        pin('torch.optim.AdamW defaults, as EoMT builds it', 'optim_wrapper.optimizer', betas=(0.9, 0.999)),
        pin(lr, 'optim_wrapper.paramwise_cfg', layer_decay_rate=0.8, layer_numbering='eomt', decay_all=True),
        pin(f'{EOMT_MAIN}: gradient_clip_val 0.01, algorithm norm', 'optim_wrapper.clip_grad', max_norm=0.01,
            norm_type=2),
        pin(f'{EOMT_YAML}: max_epochs 31, of 1263 iterations ({EOMT_ADE}: 20210 // 16, drop_last)', 'train_cfg',
            type='IterBasedTrainLoop', max_iters=EOMT_ITERS),
        pin(f'{EOMT_NOTES}: upstream validates mid-training; here every 4000 iterations', 'train_cfg',
            val_interval=4000),
        pin(lr, 'param_scheduler.0', type='TwoStageWarmupPolyLR', warmup_new=500, warmup_backbone=1000, power=0.9,
            by_epoch=False, begin=0, end=EOMT_ITERS),
        pin(f'{EOMT_NOTES}: every 4000 iterations, best mIoU kept', 'default_hooks.checkpoint', type='CheckpointHook',
            by_epoch=False, interval=4000, save_best='mIoU'),
        pin(KEEP_CKPTS, 'default_hooks.checkpoint', max_keep_ckpts=3),
        pin(windows_source, 'custom_hooks.3', type='EoMTMaskAnnealingHook', starts=starts, ends=ends),
        pins(windows_source, {'mask annealing windows': tuple(f'block {i}: {s}-{e}'
                                                              for i, (s, e) in enumerate(zip(starts, ends)))}),
        pins(f'{EOMT_SEMANTIC}: poly_power 0.9 (the annealing ramp too)', {'mask annealing power': 0.9}),
        pins(f'{lr}; training/lightning_module.py: block i at llrd ** (depth - 1 - i), the rest at lr',
             {'lr by layer': lr_by_layer(0.0001, 0.8, depth, 'eomt'), 'lr used': 0.0001,
              'weight decay': DecayRule(0.05, decay_all=True)}),
        pins(DERIVED, {'precision': 'bfloat16 autocast', 'torch.compile': False}),
    )


EOMT_DINOV3_YAML = f'{EOMT} configs/dinov3/ade20k/semantic/eomt_large_512.yaml'
EOMT_DINOV3_ITERS = 16 * EOMT_ADE_EPOCH  # the yaml's max_epochs 16: 20208


def eomt_dinov3_optimisation(depth: int, size: str) -> Dict[str, Pin]:
    """EoMT's DINOv3 ADE20K yaml over the DINOv2 recipe: lr 2e-4, llrd 1.0 (with lr_mult 0.1 never
    applied, every parameter at the lr), warm-up 2000 / 3000, 16 epochs, its windows."""
    lr = f'{EOMT_DINOV3_YAML}: lr 2e-4, llrd 1.0, warmup_steps [2000, 3000] (lr_mult never applied: docs/eomt.md)'
    if size == 'large':
        starts, ends, windows = (0, 6520, 9780, 13040), (3000, 9780, 13040, 16300), EOMT_DINOV3_YAML
    else:
        starts, ends = (0, 9780, 13040), (3000, 13040, 16300)
        windows = f'{EOMT_DINOV3_YAML}: block 0 as every DINOv3 recipe of EoMT, then its last two (docs/eomt.md)'
    return join(
        eomt_optimisation(depth, size),
        pin(lr, 'optim_wrapper.optimizer', lr=0.0002),
        pin(lr, 'optim_wrapper.paramwise_cfg', layer_decay_rate=1.0),
        pin(f'{EOMT_DINOV3_YAML}: max_epochs 16', 'train_cfg', max_iters=EOMT_DINOV3_ITERS),
        pin(lr, 'param_scheduler.0', warmup_new=2000, warmup_backbone=3000, end=EOMT_DINOV3_ITERS),
        pin(windows, 'custom_hooks.3', starts=starts, ends=ends),
        pins(windows, {'mask annealing windows': tuple(f'block {i}: {s}-{e}'
                                                       for i, (s, e) in enumerate(zip(starts, ends)))}),
        pins(lr, {'lr by layer': lr_by_layer(0.0002, 1.0, depth, 'eomt'), 'lr used': 0.0002}),
    )


def ade20k_eomt(family: str, size: str) -> Dict[str, Pin]:
    width, depth, _ = SIZES[size]
    blocks, source = (4, f'{EOMT_NET}: num_blocks 4 (the ADE20K ViT-L recipe)') if size == 'large' else (
        3, f'{EOMT_COCO_S}: num_blocks 3')
    optimisation = eomt_dinov3_optimisation if family == 'dinov3' else eomt_optimisation
    block = join(
        RUNTIME, NORMALISATION, without(ADE20K, 'train_dataloader.dataset.pipeline', 'scale rule',
                                        'model.auxiliary_head', 'model.test_cfg'),
        eomt_train_pipeline(), backbone(family, size), eomt_head(width, blocks, source), optimisation(depth, size),
        batch(2, 8, f'{EOMT_ADE}: batch_size 16'),
        pin(f'{EOMT_ADE}: img_size (512, 512)', 'model.data_preprocessor', size=(512, 512)),
        pin(f'{EOMT} training/lightning_module.py window_imgs_semantic: the short side to img_size, PIL bilinear',
            'val_dataloader.dataset.pipeline.1', backend='pillow'),
    )
    if family == 'dinov2':
        block.update(pin(f'{EOMT} models/vit.py: timm.create_model(name, img_size, patch_size=16)', 'model.backbone',
                         patch_size=16, img_size=512))
    return block


for _family in ('vit5', 'deit3', 'dinov2', 'dinov3'):
    for _size in ('small', 'base', 'large'):
        EXPECTED[f'eomt/{_family}-{_size}_eomt_ade20k.py'] = ade20k_eomt(_family, _size)


# --- EoMT on COCO panoptic and instance, in mmdet: EoMT's COCO yamls and code -----------------
EOMT_PANOPTIC = f'{EOMT} training/mask_classification_panoptic.py defaults'
EOMT_COCO = f'{EOMT} datasets/coco_panoptic.py'
EOMT_COCO_INSTANCE = f'{EOMT} datasets/coco_instance.py'
EOMT_COCO_EPOCH = 7391  # the COCO yamls' annealing steps count 7391 iterations an epoch (14782 = 2 epochs)
# EoMT's instance dataset keeps the images with an annotation (datasets/dataset.py lines 126-130): COCO 2017
# train's 117266, on 4 GPUs x 4 (README) padded to 4 x 29317, each rank's last batch dropped
# (datasets/coco_instance.py line 89): 29317 // 4
EOMT_INSTANCE_EPOCH = 7329
EOMT_DATASET = f'{EOMT} datasets/dataset.py lines 126-130'
MMDET = 'mmdet 3.3.0'
MMDET_RUNTIME = f'{MMDET} configs/_base_/default_runtime.py'
MMDET_COCO_PAN = f'{MMDET} configs/_base_/datasets/coco_panoptic.py'
MMDET_COCO_INS = f'{MMDET} configs/_base_/datasets/coco_instance.py'
MMDET_DEFAULT = f'{MMDET} transform defaults'
SIZES['giant'] = (1536, 40, 24)


def eomt_coco_yaml(family: str, size: str, task: str) -> str:
    name = f'eomt_{size}_640' + ('_2x' if size in ('small', 'base') else '')
    return f'{EOMT} configs/{"dinov3" if family == "dinov3" else "dinov2"}/coco/{task}/{name}.yaml'


COCO_RUNTIME = join(
    pin(RUNNER, runner_type='ViT5Runner'),
    pin(MMDET_RUNTIME, 'default_hooks.timer', type='IterTimerHook'),
    pin(MMDET_RUNTIME, 'default_hooks.logger', type='LoggerHook', interval=50),
    pin(MMSEG_SCHEDULE + ': iteration-based logging, as the semantic configs', 'default_hooks.logger',
        log_metric_by_epoch=False),
    pin(MMDET_RUNTIME, 'default_hooks.param_scheduler', type='ParamSchedulerHook'),
    pin(MMDET_RUNTIME, 'default_hooks.sampler_seed', type='DistSamplerSeedHook'),
    pin(MMDET_RUNTIME, 'default_hooks.visualization', type='DetVisualizationHook'),
    pin(OURS, 'custom_hooks.0', type='NonFiniteLossHook', action='stop'),
    pin(OURS, 'custom_hooks.1', type='RandomStateHook'),
    pin(MMSEG_RUNTIME, 'env_cfg', cudnn_benchmark=True),
    pin(MMDET_RUNTIME, 'env_cfg.mp_cfg', mp_start_method='fork', opencv_num_threads=0),
    pin(MMDET_RUNTIME, 'env_cfg.dist_cfg', backend='nccl'),
    pin(MMDET_RUNTIME, 'log_processor', type='LogProcessor', window_size=50),
    pin(MMSEG_RUNTIME, 'log_processor', by_epoch=False),
    pin(MMSEG_SCHEDULE, 'val_cfg', type='ValLoop'),
    pin(MMSEG_SCHEDULE, 'test_cfg', type='TestLoop'),
    pins(MMDET_COCO_PAN, {'test_dataloader': 'the same as val_dataloader',
                          'test_evaluator': 'the same as val_evaluator'}),
)


def coco_data(task: str, side: int = 640, root: str = 'data/coco/') -> Dict[str, Pin]:
    """mmdet's COCO dataset and metric with EoMT's training augmentation and evaluation input."""
    panoptic = task == 'panoptic'
    source, eomt = (MMDET_COCO_PAN, EOMT_COCO) if panoptic else (MMDET_COCO_INS, EOMT_COCO_INSTANCE)
    dataset = 'CocoPanopticDataset' if panoptic else 'CocoDataset'
    kind = 'panoptic' if panoptic else 'instances'
    size = (side, side)
    train, val = 'train_dataloader.dataset.pipeline', 'val_dataloader.dataset.pipeline'
    jitter = f'{EOMT_TRANSFORMS}: ScaleJitter(img_size, scale_range (0.1, 2.0)), pad with 0, RandomCrop(img_size)'
    epoch = EOMT_COCO_EPOCH if panoptic else EOMT_INSTANCE_EPOCH
    out = join(
        pin(f'{eomt}: batch_size 16 (8 GPUs x 2 here)', 'train_dataloader', batch_size=2),
        pin(source, 'train_dataloader', num_workers=4, persistent_workers=True),
        pin(f'{OURS}; iteration-based as the semantic configs', 'train_dataloader', batch_sampler=None),
        pin(f'{MMSEG_ADE}: an infinite sampler for iteration-based training', 'train_dataloader.sampler',
            type='InfiniteSampler', shuffle=True),
        pin(source, 'train_dataloader.dataset', data_root=root, backend_args=None),
        pin(source, 'train_dataloader.dataset', ann_file=f'annotations/{kind}_train2017.json'),
        pin(source, 'val_dataloader', batch_size=1, num_workers=2, persistent_workers=True, drop_last=False),
        pin(source, 'val_dataloader.sampler', type='DefaultSampler', shuffle=False),
        pin(source, 'val_dataloader.dataset', type=dataset, data_root=root, test_mode=True, backend_args=None),
        pin(source, 'val_dataloader.dataset', ann_file=f'annotations/{kind}_val2017.json'),
        load_image(f'{train}.0'),
        pin(f'{EOMT_TRANSFORMS}: RandomHorizontalFlip (p 0.5)', f'{train}.2', type='RandomFlip', prob=0.5),
        pin(MMDET_DEFAULT, f'{train}.2', direction='horizontal', swap_seg_labels=None),
        pin(jitter, f'{train}.3', type='RandomResize', scale=size, ratio_range=(0.1, 2.0), keep_ratio=True),
        pin(MMDET_DEFAULT, f'{train}.3', resize_type='Resize'),
        pin(jitter, f'{train}.4', type='Pad', size=size),
        pin(MMDET_DEFAULT, f'{train}.4', size_divisor=None, pad_to_square=False, padding_mode='constant'),
        pin(jitter, f'{train}.5', type='RandomCrop', crop_size=size, crop_type='absolute', recompute_bbox=True,
            allow_negative_crop=True),
        pin(MMDET_DEFAULT, f'{train}.5', bbox_clip_border=True),
        pin(f'{EOMT_TRANSFORMS}: masks the crop emptied are dropped', f'{train}.6', type='FilterAnnotations',
            min_gt_bbox_wh=(1e-05, 1e-05), by_mask=True),
        pin(MMDET_DEFAULT, f'{train}.6', min_gt_mask_area=1, by_box=True),
        pin(MMDET_DEFAULT, f'{train}.1', box_type='hbox'),
        pin(MMDET_DEFAULT, f'{val}.2', box_type='hbox'),
        pin(source, f'{train}.7', type='PackDetInputs'),
        load_image(f'{val}.0'),
        pin(f'{EOMT} training/lightning_module.py resize_and_pad_imgs_instance_panoptic: the long side to img_size, '
            'PIL bilinear', f'{val}.1', type='Resize', scale=size, keep_ratio=True, backend='pillow'),
        pin(MMDET_DEFAULT, f'{val}.1', scale_factor=None, clip_object_border=True, interpolation='bilinear'),
        pin(source, f'{val}.3', type='PackDetInputs',
            meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
        pins(DERIVED, {'scale rule': f'RandomResize: the image fitted into {size} x r, r uniform in [0.1, 2.0]: its '
                                     f'short side {side} r unless its long side would pass {side} r'}),
        pin(f'{EOMT_MAIN}: the zoo\'s evaluation at the end of training; the yamls\' check_val_every_n_epoch 2',
            'train_cfg', val_interval=2 * epoch),
    )
    if panoptic:
        out.update(join(
            pin(f'{EOMT_DATASET}: every image with a segment, thing or stuff (mmdet\'s filter_empty_gt keeps those '
                'with a non-crowd thing; no filter keeps those without a segment too)', 'train_dataloader.dataset',
                type='EoMTCocoPanopticDataset'),
            pin(source, 'train_dataloader.dataset.data_prefix', img='train2017/',
                seg='annotations/panoptic_train2017/'),
            pin(source, 'val_dataloader.dataset.data_prefix', img='val2017/', seg='annotations/panoptic_val2017/'),
            pin(source, f'{train}.1', type='LoadPanopticAnnotations', with_bbox=True, with_mask=True, with_seg=True),
            pin(f'{EOMT_TRANSFORMS}: padded targets: no mask', f'{train}.4.pad_val', img=0, seg=255),
            pin(f'{EOMT_TRANSFORMS}: a crop of stuff only is a target too', f'{train}.6', keep_empty=False),
            pin(source, f'{val}.2', type='LoadPanopticAnnotations'),
            pin(MMDET_DEFAULT, f'{val}.2', with_bbox=True, with_mask=True, with_seg=True),
            {f'{prefix}.{k}': (v, MMDET_DEFAULT) for prefix in (f'{train}.1', f'{val}.2')
             for k, v in (('with_label', True), ('imdecode_backend', 'cv2'))},
            pin(source, 'val_evaluator', type='CocoPanopticMetric', ann_file=f'{root}annotations/panoptic_val2017.json',
                seg_prefix=f'{root}annotations/panoptic_val2017/', backend_args=None),
        ))
    else:
        out.update(join(
            pin(source, 'train_dataloader.dataset', type=dataset),
            pin(f'{EOMT_DATASET}: every image with an annotation, crowd ones too; mmdet\'s filter_empty_gt keeps '
                'those (CocoDataset.filter_data: images in cat_img_map)', 'train_dataloader.dataset.filter_cfg',
                filter_empty_gt=True, min_size=0),
            pin(source, 'train_dataloader.dataset.data_prefix', img='train2017/'),
            pin(source, 'val_dataloader.dataset.data_prefix', img='val2017/'),
            pin(source, f'{train}.1', type='LoadAnnotations', with_bbox=True, with_mask=True),
            pin(f'{EOMT_TRANSFORMS}: the image padded with 0', f'{train}.4.pad_val', img=0),
            pin(f'{EOMT_TRANSFORMS}: a crop without an instance is drawn again', f'{train}.6', keep_empty=True),
            {f'{prefix}.{k}': (v, MMDET_DEFAULT) for prefix in (f'{train}.1', f'{val}.2')
             for k, v in (('poly2mask', True), ('reduce_zero_label', False), ('ignore_index', 255))},
            pin(source, f'{val}.2', type='LoadAnnotations', with_bbox=True, with_mask=True),
            pin(source, 'val_evaluator', type='CocoMetric', ann_file=f'{root}annotations/instances_val2017.json',
                format_only=False, backend_args=None),
            pin(f'{EOMT_COCO_INSTANCE}; the zoo reports pycocotools\' mask AP', 'val_evaluator', metric='segm'),
        ))
    return out


def coco_eomt(family: str, size: str, task: str) -> Dict[str, Pin]:
    width, depth, _ = SIZES[size]
    yaml = eomt_coco_yaml(family, size, task)
    panoptic = task == 'panoptic'
    things, stuff = (80, 53) if panoptic else (80, 0)
    classes = things + stuff
    blocks = {'small': 3, 'base': 3, 'large': 4, 'giant': 5}[size]
    epochs = 24 if size in ('small', 'base') else 12
    epoch = EOMT_COCO_EPOCH if panoptic else EOMT_INSTANCE_EPOCH
    iters = epochs * epoch
    dinov3 = family == 'dinov3'
    lr, (new, old) = (0.0002, (2000, 3000)) if dinov3 else (0.0001, (500, 1000))
    lr_source = (f'{yaml}: lr 2e-4, warmup_steps [2000, 3000], llrd_l2_enabled False (the masked blocks at the lr); '
                 f'{EOMT_PANOPTIC}: llrd 0.8') if dinov3 else \
        f'{EOMT_PANOPTIC}: lr 1e-4, llrd 0.8, weight_decay 0.05 (every parameter), warmup_steps [500, 1000]'
    windows = {  # each yaml's attn_mask_annealing_start_steps / end_steps
        ('dinov2', 3): ((29564, 73910, 118256), (59128, 103474, 147820)),
        ('dinov3', 3): ((0, 73910, 118256), (3000, 103474, 147820)),
        ('dinov2', 4): ((14782, 29564, 44346, 59128), (29564, 44346, 59128, 73910)),
        ('dinov3', 4): ((0, 29564, 44346, 59128), (3000, 44346, 59128, 73910)),
        ('dinov2', 5): ((14782, 25869, 36955, 48042, 59128), (29564, 40651, 51737, 62824, 73910)),
    }
    starts, ends = windows['dinov3' if dinov3 and panoptic else 'dinov2', blocks]
    cls = f'{EOMT_PANOPTIC}: class_coefficient 2.0, no_object_coefficient 0.1'
    head = 'model.decode_head'
    network = eomt_head(width, blocks, f'{yaml}: num_blocks {blocks}')
    block = join(
        COCO_RUNTIME, coco_data(task), backbone(family, size),
        without(network, 'model.type', 'model.pretrained', 'model.test_cfg', f'{head}.train_cfg', f'{head}.num_classes',
                f'{head}.loss_decode.0.class_weight', f'{head}.num_queries'),
        {k.replace(f'{head}.train_cfg', 'model.train_cfg'): v for k, v in network.items()
         if k.startswith(f'{head}.train_cfg')},
        pin(f'{EOMT_NOTES}: no decoder; {MMDET}\'s MaskFormer around it', 'model', type='EoMT',
            num_things_classes=things, num_stuff_classes=stuff),
        pin(f'{yaml}: num_q 200', head, num_queries=200),
        pin(f'{eomt_coco_yaml("dinov2", "small", "panoptic") if panoptic else yaml}: '
            f'{"stuff_classes 80..132 of 133" if panoptic else "80 classes"}', head, num_classes=classes),
        pin(cls, f'{head}.loss_decode.0', class_weight=f'1.0 x {classes}, 0.1'),
        pin(f'{EOMT_COCO}: the ImageNet mean/std of models/vit.py; {EOMT} lightning_module.py pads with 0 before '
            'normalising', 'model.data_preprocessor', type='EoMTDetDataPreprocessor', pad_size=(640, 640),
            mean=(123.675, 116.28, 103.53), std=(58.395, 57.12, 57.375), bgr_to_rgb=True),
        pin(f'{EOMT_TRANSFORMS}: targets padded with "no mask"', 'model.data_preprocessor', pad_mask=True,
            mask_pad_value=0, pad_seg=True, seg_pad_value=255),
        pin(f'{MMDET}: MaskFormerFusionHead is EoMT\'s post-processing '
            f'({EOMT} training/mask_classification_panoptic.py)',
            'model.panoptic_fusion_head', type='MaskFormerFusionHead', loss_panoptic=None, init_cfg=None),
        pin(f'{EOMT_PANOPTIC}: mask_thresh 0.8, overlap_thresh 0.8; {EOMT} mask_classification_instance.py: '
            'eval_top_k_instances 100', 'model.test_cfg', semantic_on=False, object_mask_thr=0.8, iou_thr=0.8,
            filter_low_score=True, max_per_image=100),
        pin(f'{EOMT} training/mask_classification_{task}.py eval_step', 'model.test_cfg', panoptic_on=panoptic,
            instance_on=not panoptic),
        pin(f'{EOMT_MAIN}: precision 16-mixed; bfloat16 here (docs/eomt.md lists it)', 'optim_wrapper',
            type='AmpOptimWrapper', dtype='bfloat16'),
        pin(lr_source, 'optim_wrapper', constructor='ViT5OptimWrapperConstructor'),
        pin(lr_source, 'optim_wrapper.optimizer', type='AdamW', lr=lr, weight_decay=0.05),
        pin('torch.optim.AdamW defaults, as EoMT builds it', 'optim_wrapper.optimizer', betas=(0.9, 0.999)),
        pin(lr_source, 'optim_wrapper.paramwise_cfg', layer_decay_rate=0.8, layer_numbering='eomt', decay_all=True),
        pin(f'{EOMT_MAIN}: gradient_clip_val 0.01, algorithm norm', 'optim_wrapper.clip_grad', max_norm=0.01,
            norm_type=2),
        pin(f'{yaml}: max_epochs {epochs} of {epoch} iterations', 'train_cfg', type='IterBasedTrainLoop',
            max_iters=iters),
        pin(lr_source, 'param_scheduler.0', type='TwoStageWarmupPolyLR', warmup_new=new, warmup_backbone=old,
            power=0.9, by_epoch=False, begin=0),
        pin(f'{yaml}: max_epochs {epochs}', 'param_scheduler.0', end=iters),
        pin(f'{EOMT_NOTES}: a checkpoint with each evaluation', 'default_hooks.checkpoint', type='CheckpointHook',
            by_epoch=False, interval=2 * epoch),
        pin(KEEP_CKPTS, 'default_hooks.checkpoint', max_keep_ckpts=3),
        pin(yaml, 'custom_hooks.2', type='EoMTMaskAnnealingHook', starts=starts, ends=ends),
        pins(yaml, {'mask annealing windows': tuple(f'block {i}: {s}-{e}'
                                                    for i, (s, e) in enumerate(zip(starts, ends)))}),
        pins(f'{EOMT_PANOPTIC}: poly_power 0.9 (the annealing ramp too)', {'mask annealing power': 0.9}),
        pins(f'{lr_source}; training/lightning_module.py: block i at llrd ** (depth - 1 - i), the rest at lr',
             {'lr by layer': lr_by_layer(lr, 0.8, depth, 'eomt', blocks if dinov3 else 0), 'lr used': lr,
              'weight decay': DecayRule(0.05, decay_all=True)}),
        pins(DERIVED, {'precision': 'bfloat16 autocast', 'torch.compile': False}),
        batch(2, 8, f'{EOMT_COCO}: batch_size 16'),
    )
    if dinov3:
        block.update(pin(lr_source, 'optim_wrapper.paramwise_cfg', full_rate_last_blocks=True))
    if family == 'dinov2':
        block.update(pin(f'{EOMT} models/vit.py: timm.create_model(name, img_size, patch_size=16)', 'model.backbone',
                         patch_size=16, img_size=640))
    if size == 'giant':
        block.update(pin(f'{DINOV2_HUB}: vit_giant2, ffn_layer swiglufused', 'model.backbone', mlp_type='swiglu'))
    return block


for _family in ('vit5', 'deit3', 'dinov2', 'dinov3'):
    for _size in ('small', 'base', 'large', 'giant'):
        if _size != 'giant' or _family == 'dinov2':
            EXPECTED[f'eomt/{_family}-{_size}_eomt_coco-panoptic-640.py'] = coco_eomt(_family, _size, 'panoptic')
for _family in ('dinov2', 'dinov3'):
    EXPECTED[f'eomt/{_family}-large_eomt_coco-instance-640.py'] = coco_eomt(_family, 'large', 'instance')


# --- the rest of EoMT's zoo (issue #45; docs/eomt_zoo.md) ---------------------------------------
EOMT_ZOO = 'docs/eomt_zoo.md: the zoo\'s DINOv3 1280 models are 1280 models (their yamls never set img_size)'


def coco_eomt_1280(family: str, size: str, task: str) -> Dict[str, Pin]:
    """The 640 model at EoMT's 1280: the yaml's img_size (DINOv2), the zoo's (DINOv3)."""
    yaml = f'{EOMT} configs/{family}/coco/{task}/eomt_{size}_1280.yaml'
    source = f'{yaml}: img_size [1280, 1280]' if family == 'dinov2' else EOMT_ZOO
    out = join(coco_eomt(family, size, task), coco_data(task, 1280),
               pin(source, 'model.data_preprocessor', pad_size=(1280, 1280)))
    if family == 'dinov2':
        out.update(pin(f'{yaml}: timm.create_model(name, img_size=1280, patch_size=16)', 'model.backbone',
                       img_size=1280))
    return out


for _family, _size, _task in (('dinov2', 'large', 'panoptic'), ('dinov2', 'giant', 'panoptic'),
                              ('dinov3', 'large', 'panoptic'), ('dinov2', 'large', 'instance'),
                              ('dinov3', 'large', 'instance')):
    EXPECTED[f'eomt/{_family}-{_size}_eomt_coco-{_task}-1280.py'] = coco_eomt_1280(_family, _size, _task)

EOMT_ADE_PAN = f'{EOMT} datasets/ade20k_panoptic.py'
MMDET_ADE_PAN = f'{MMDET} configs/_base_/datasets/ade20k_panoptic.py'
ADE_EPOCH = 1263   # 20210 images // 16: EoMT's loader drops the last incomplete batch


def shifted(block: Dict[str, Pin], prefix: str, at: int) -> Dict[str, Pin]:
    """``block`` with the pipeline steps under ``prefix`` from index ``at`` on moved one later."""
    out = {}
    for key, value in block.items():
        match = re.match(rf'^{re.escape(prefix)}\.(\d+)(.*)$', key)
        if match and int(match.group(1)) >= at:
            key = f'{prefix}.{int(match.group(1)) + 1}{match.group(2)}'
        out[key] = value
    return out


def ade_panoptic_eomt(size: str, side: int) -> Dict[str, Pin]:
    """The COCO panoptic model on mmdet's ADE20K panoptic dataset, EoMT's ADE20K panoptic yaml's schedule."""
    yaml = f'{EOMT} configs/dinov2/ade20k/panoptic/eomt_{size}_{side}.yaml'
    root, train = 'data/ade/ADEChallengeData2016/', 'train_dataloader.dataset.pipeline'
    coco = coco_eomt_1280('dinov2', size, 'panoptic') if side == 1280 else coco_eomt('dinov2', size, 'panoptic')
    coco = {k: v for k, v in coco.items() if not k.startswith('custom_hooks.2') and k != 'mask annealing windows'}
    blocks = {'large': 4, 'giant': 5}[size]
    starts, ends = {4: ((6520, 13040, 19560, 26080), (13040, 19560, 26080, 32600)),
                    5: ((6520, 11410, 16300, 21190, 26080), (13040, 17930, 22820, 27710, 32600))}[blocks]
    iters = 31 * ADE_EPOCH
    return join(
        shifted(coco, train, 2),
        pin(f'{EOMT_ADE_PAN}: color_jitter_enabled True; {EOMT_TRANSFORMS}: ColorJitter (brightness 32/255, '
            'contrast 0.5, saturation 0.5, hue 18 degrees)', f'{train}.2', type='mmseg.EoMTColorJitter',
            brightness_delta=32, contrast=0.5, saturation=0.5, hue_delta=18),
        pin(f'{yaml}: stuff_classes (50 of 150); {MMDET}: things first', 'model', num_things_classes=100,
            num_stuff_classes=50),
        pin(f'{EOMT_ADE_PAN}: num_classes 150', 'model.decode_head', num_classes=150),
        pin(f'{EOMT_PANOPTIC}: class_coefficient 2.0, no_object_coefficient 0.1', 'model.decode_head.loss_decode.0',
            class_weight='1.0 x 150, 0.1'),
        pin(MMDET_ADE_PAN, 'train_dataloader.dataset', type='ADE20KPanopticDataset', data_root=root,
            ann_file='ade20k_panoptic_train.json'),
        pin(MMDET_ADE_PAN, 'train_dataloader.dataset.data_prefix', img='images/training/',
            seg='ade20k_panoptic_train/'),
        pin(MMDET_ADE_PAN, 'val_dataloader.dataset', type='ADE20KPanopticDataset', data_root=root,
            ann_file='ade20k_panoptic_val.json'),
        pin(MMDET_ADE_PAN, 'val_dataloader.dataset.data_prefix', img='images/validation/', seg='ade20k_panoptic_val/'),
        pin(MMDET_ADE_PAN, 'val_evaluator', ann_file=f'{root}ade20k_panoptic_val.json',
            seg_prefix=f'{root}ade20k_panoptic_val/'),
        pin(f'{yaml}: max_epochs 31 of {ADE_EPOCH} iterations', 'train_cfg', max_iters=iters),
        pin(f'{yaml}: max_epochs 31', 'param_scheduler.0', end=iters),
        pin(f'{EOMT_MAIN}: an evaluation every 4 epochs here (the yamls evaluate at the end)', 'train_cfg',
            val_interval=4 * ADE_EPOCH),
        pin(f'{EOMT_NOTES}: a checkpoint with each evaluation', 'default_hooks.checkpoint', interval=4 * ADE_EPOCH),
        pin(yaml, 'custom_hooks.2', type='EoMTMaskAnnealingHook', starts=starts, ends=ends),
        pins(yaml, {'mask annealing windows': tuple(f'block {i}: {s}-{e}' for i, (s, e) in enumerate(zip(starts, ends)))}),
    )


for _size in ('large', 'giant'):
    for _side in (640, 1280):
        EXPECTED[f'eomt/dinov2-{_size}_eomt_ade20k-panoptic-{_side}.py'] = ade_panoptic_eomt(_size, _side)

EOMT_CITY_YAML = f'{EOMT} configs/dinov2/cityscapes/semantic/eomt_large_1024.yaml'
EOMT_CITY = f'{EOMT} datasets/cityscapes_semantic.py'
MMSEG_CITY = f'{MMSEG} configs/_base_/datasets/cityscapes.py'
# 4 GPUs x 4 (EoMT's README): Lightning's DistributedSampler pads 2975 images to 4 x 744, each rank's loader
# drops its last incomplete batch (datasets/cityscapes_semantic.py line 89): 744 // 4; the yaml's windows are
# multiples of 3317 = 107 x 186 / 6
CITY_EPOCH = 186


def cityscapes_eomt() -> Dict[str, Pin]:
    """EoMT's ADE20K DINOv2-L model on Cityscapes at 1024, its yaml's schedule and windows."""
    train, val = 'train_dataloader.dataset.pipeline', 'val_dataloader.dataset.pipeline'
    crop, iters = (1024, 1024), 107 * CITY_EPOCH
    starts, ends = (3317, 6634, 9951, 13268), (6634, 9951, 13268, 16585)
    return join(
        EXPECTED['eomt/dinov2-large_eomt_ade20k.py'],
        pin(MMSEG_CITY, 'train_dataloader.dataset', type='CityscapesDataset', data_root='data/cityscapes/'),
        pin(MMSEG_CITY, 'train_dataloader.dataset.data_prefix', img_path='leftImg8bit/train',
            seg_map_path='gtFine/train'),
        pin(MMSEG_CITY, 'val_dataloader.dataset', type='CityscapesDataset', data_root='data/cityscapes/'),
        pin(MMSEG_CITY, 'val_dataloader.dataset.data_prefix', img_path='leftImg8bit/val', seg_map_path='gtFine/val'),
        pin(f'{EOMT_CITY}: num_classes 19 (train ids), ignore 255', 'model.decode_head', num_classes=19),
        pin(f'{EOMT_SEMANTIC}: class_coefficient 2.0, no_object_coefficient 0.1', 'model.decode_head.loss_decode.0',
            class_weight='1.0 x 19, 0.1'),
        pin(f'{OURS}: per-sample checks over 19 classes', f'{train}.0', num_classes=19),
        pin(f'{OURS}: per-sample checks over 19 classes', f'{val}.3', num_classes=19),
        pin(f'{MMSEG_CITY}: labelTrainIds as they are', f'{train}.0.transforms.1', reduce_zero_label=None),
        pin(f'{MMSEG_CITY}: labelTrainIds as they are', f'{val}.2', reduce_zero_label=None),
        pin(f'{EOMT_CITY}: img_size (1024, 1024), scale_range (0.5, 2.0); {EOMT_TRANSFORMS}: ScaleJitter, RandomCrop',
            f'{train}.3', crop_size=crop),
        pins(DERIVED, {'scale rule': 'ScaleJitterCrop: the image fitted into (1024, 1024) x s, s uniform in '
                                     '[0.5, 2.0]: its long side 1024 s; padded and cropped to (1024, 1024)'}),
        pin(f'{MMSEG_CITY}: the short side at 1024, as EoMT\'s evaluation', f'{val}.1', scale=(2048, 1024)),
        pin(f'{EOMT_CITY}: img_size (1024, 1024)', 'model.data_preprocessor', size=crop),
        pin(f'{EOMT} models/vit.py: timm.create_model(name, img_size=1024, patch_size=16)', 'model.backbone',
            img_size=1024),
        pin(f'{EOMT} training/lightning_module.py window_imgs_semantic: ceil(long / 1024) windows spread evenly; '
            'on 1024 x L, L <= 2048 (every Cityscapes photo), crop and stride 1024 (docs/eomt_zoo.md)',
            'model.test_cfg', crop_size=crop, stride=crop),
        pin(f'{EOMT_CITY_YAML}: max_epochs 107, of {CITY_EPOCH} iterations (ceil(2975 / 4) // 4, drop_last)',
            'train_cfg',
            max_iters=iters),
        pin(f'{EOMT_CITY_YAML}: max_epochs 107', 'param_scheduler.0', end=iters),
        pin(EOMT_CITY_YAML, 'custom_hooks.3', starts=starts, ends=ends),
        pins(EOMT_CITY_YAML, {'mask annealing windows': tuple(f'block {i}: {s}-{e}'
                                                              for i, (s, e) in enumerate(zip(starts, ends)))}),
    )


EXPECTED['eomt/dinov2-large_eomt_cityscapes-1024.py'] = cityscapes_eomt()

# --- UperNet on mmseg's 80k datasets: the protocol's model and optimiser, mmseg's data ----------
def dataset_80k(name: str, family: str, size: str) -> Dict[str, Pin]:
    width, depth, _ = SIZES[size]
    mm = f'{MMSEG} configs/_base_/datasets/{DATASETS[name]["file"]}'
    d = DATASETS[name]
    block = join(
        RUNTIME, NORMALISATION, without(ADE20K, 'train_dataloader', 'val_dataloader', 'scale rule'),
        backbone(family, size), upernet(width, depth), protocol_optimizer(depth),
        protocol_schedule(80000, 8000, f'{MMSEG_80K}: 80k iterations, evaluation and checkpoints every 8000'),
        loaders(d['dataset'], d['root'], d['prefixes'], d['per_gpu'], mm),
        mmseg_train_pipeline(d['classes'], d['reduce'], d['scale'], d['crop'], mm),
        test_pipeline('val_dataloader.dataset.pipeline', d['classes'], d['reduce'], d['scale'], mm),
        batch(d['per_gpu'], 8, d['batch_source']),
        pin(mm, 'model.data_preprocessor', size=d['crop']),
        pin(f'{mm}: {d["classes"]} classes', 'model.decode_head', num_classes=d['classes']),
        pin(f'{mm}: {d["classes"]} classes', 'model.auxiliary_head', num_classes=d['classes']),
        pin(f'{PROTOCOL} "Batch": drop path 0.1 (S, B), 0.2-0.3 (L)', 'model.backbone',
            drop_path_rate=0.2 if size == 'large' else 0.1),
        d.get('test', pin(f'{MMSEG} COCO-Stuff 164k configs: whole-image test', 'model.test_cfg', mode='whole')),
    )
    for split in ('train', 'val'):
        if d.get('ann_files'):
            block.update(pin(mm, f'{split}_dataloader.dataset', ann_file=d['ann_files'][split]))
    return block


DATASETS = {
    'cityscapes': dict(
        file='cityscapes.py', dataset='CityscapesDataset', root='data/cityscapes/', classes=19, reduce=False,
        prefixes={'train': ('leftImg8bit/train', 'gtFine/train'), 'val': ('leftImg8bit/val', 'gtFine/val')},
        scale=(2048, 1024), crop=(512, 1024), per_gpu=1,
        batch_source=f'{MMSEG} upernet Cityscapes 80k configs: 8 images per iteration (4 GPUs x 2; here 8 x 1)',
        test=pin('vit5seg: windows of the 512x1024 training crop over the 1024x2048 frames, stride 2/3 of the '
                 'window (mmseg\'s Pascal Context configs\' ratio; its upernet Cityscapes configs test whole)',
                 'model.test_cfg',
                 mode='slide', crop_size=(512, 1024), stride=(341, 682))),
    'pascal_context_59': dict(
        file='pascal_context_59.py', dataset='PascalContextDataset59', root='data/VOCdevkit/VOC2010/', classes=59,
        reduce=True, prefixes={'train': ('JPEGImages', 'SegmentationClassContext'),
                               'val': ('JPEGImages', 'SegmentationClassContext')},
        ann_files={'train': 'ImageSets/SegmentationContext/train.txt',
                   'val': 'ImageSets/SegmentationContext/val.txt'},
        scale=(520, 520), crop=(480, 480), per_gpu=2,
        batch_source=f'{MMSEG} Pascal Context 59 80k configs: 16 images per iteration (4 GPUs x 4; here 8 x 2)',
        test=pin(f'{MMSEG} configs/pspnet/pspnet_r50-d8_4xb4-80k_pascal-context-59-480x480.py', 'model.test_cfg',
                 mode='slide', crop_size=(480, 480), stride=(320, 320))),
    'coco_stuff164k': dict(
        file='coco-stuff164k.py', dataset='COCOStuffDataset', root='data/coco_stuff164k', classes=171, reduce=False,
        prefixes={'train': ('images/train2017', 'annotations/train2017'),
                  'val': ('images/val2017', 'annotations/val2017')},
        scale=(2048, 512), crop=(512, 512), per_gpu=2,
        batch_source=f'{MMSEG} COCO-Stuff 164k 80k configs: 16 images per iteration (4 GPUs x 4; here 8 x 2)'),
}
for _name, _folder in (('cityscapes', 'cityscapes'), ('pascal_context_59', 'pascal_context'),
                       ('coco_stuff164k', 'coco_stuff')):
    for _family in ('vit5', 'deit3'):
        for _size in ('small', 'base', 'large'):
            EXPECTED[f'{_folder}/{_family}-{_size}_upernet_{_name}.py'] = dataset_80k(_name, _family, _size)


# --- PMT: a frozen DINOv3 read by a plain mask decoder (tue-mps/pmt), EoMT's data and evaluation ----------
PMT = 'tue-mps/pmt'
PMT_NET = f'{PMT} image/models/pmt.py, pmd.py: lateral_projection mlp, residual_projection, lateral_bn'
PMT_ROPE = (f'{PMT} image/models/pmt.py: the DINOv3 encoder\'s rope_embeddings, PMT\'s own '
            'DINOv3ViTRopePositionEmbedding (models/layers.py, rescale 2.0 in training) otherwise')
PMT_SCHEDULE = f'{PMT} image/training/warmup_cosine_schedule.py'
PMT_WINDOWS = dict(ade20k=((0, 5384, 7403, 9422, 11442, 13461), (3000, 8749, 10769, 12788, 14807, 16826)),
                   coco=((0, 23651, 32520, 41389, 50258, 59128), (3000, 38433, 47302, 56171, 65040, 73910)))
PMT_INDICES = {'small': (2, 5, 8, 11), 'base': (2, 5, 8, 11), 'large': (5, 11, 17, 23)}


def pmt_decoder_defaults() -> Dict[str, Pin]:
    return join(pin(PMT_NET, 'model.decoder', lateral_projection='mlp', residual_projection=True),
                pin(f'{PMT_NET} (SyncBatchNorm)', 'model.decoder.norm_cfg', type='SyncBN', requires_grad=True),
                pin(PMT_ROPE, 'model.decoder', rope='auto', rope_train_rescale=2.0))


def pmt(yaml: str, size: str, iters: int, windows: str, hook: int) -> Dict[str, Pin]:
    """PMT's recipe over its EoMT twin's: the encoder frozen, the decoder, the schedule, the windows."""
    width, _, heads = SIZES[size]
    starts, ends = PMT_WINDOWS[windows]
    return join(
        pmt_decoder_defaults(),
        pin(f'{yaml}: frozen_encoder True', 'model.backbone', frozen=True),
        pin(f'{yaml}: num_blocks 6 (the head anneals one mask each)', 'model.decode_head', num_blocks=6),
        pin(f'{yaml}: num_blocks, hidden_dim, interaction_indices; the encoder\'s heads', 'model.decoder',
            type='PMTDecoder', embed_dims=width, num_heads=heads, num_blocks=6, hidden_dims=width,
            interaction_indices=PMT_INDICES[size]),
        pin(f'{yaml}: lr 2e-4', 'optim_wrapper.optimizer', lr=0.0002),
        pin(f'{yaml}: warmup_steps 6000, min_lr 1e-9; {PMT_SCHEDULE}', 'param_scheduler.0', type='WarmupCosineLR',
            warmup_iters=6000, min_lr=1e-09, by_epoch=False, begin=0, end=iters),
        pin(f'{yaml}: attn_mask_annealing_start_steps / end_steps', f'custom_hooks.{hook}',
            type='EoMTMaskAnnealingHook', starts=starts, ends=ends),
        pins(f'{yaml}: attn_mask_annealing_start_steps / end_steps',
             {'mask annealing windows': tuple(f'block {i}: {s}-{e}' for i, (s, e) in enumerate(zip(starts, ends)))}),
        pins(f'{PMT} image/training/lightning_module.py: AdamW over the trained parameters (the encoder frozen)',
             {'backbone frozen': FrozenCount(), 'lr by layer': ('head and neck 0.0002',), 'lr used': 0.0002}),
    )


PMT_ADE_YAML = f'{PMT} image/configs/ade20k/semantic/pmt_l_512.yaml'
PMT_EVAL = (f'{PMT} image/training/lightning_module.py window_imgs_semantic: PIL bilinear to the short side, '
            'ceil(long / 512) windows spread evenly (mmseg\'s stride 512 places the same where two suffice)')
EXPECTED['pmt/dinov3-large_pmt_ade20k-512.py'] = join(
    without(EXPECTED['eomt/dinov3-large_eomt_ade20k.py'], 'param_scheduler.0.'),
    pmt(PMT_ADE_YAML, 'large', EOMT_DINOV3_ITERS, 'ade20k', 3),
    pin(PMT_EVAL, 'model.test_cfg', stride=(512, 512)))
for _size in ('small', 'base', 'large'):
    _yaml = f'{PMT} image/configs/coco/panoptic/pmt_{_size[0]}_640.yaml'
    EXPECTED[f'pmt/dinov3-{_size}_pmt_coco-panoptic-640.py'] = join(
        without(EXPECTED[f'eomt/dinov3-{_size}_eomt_coco-panoptic-640.py'], 'param_scheduler.0.'),
        pmt(_yaml, _size, 12 * EOMT_COCO_EPOCH, 'coco', 2),
        pin(f'{_yaml}: max_epochs 12', 'train_cfg', max_iters=12 * EOMT_COCO_EPOCH))
for _task, _side in itertools.product(('panoptic', 'instance'), (640, 1280)):
    if (_task, _side) == ('panoptic', 640):
        continue
    _yaml = f'{PMT} image/configs/coco/{_task}/pmt_l_{_side}.yaml'
    _epoch = EOMT_COCO_EPOCH if _task == 'panoptic' else EOMT_INSTANCE_EPOCH
    EXPECTED[f'pmt/dinov3-large_pmt_coco-{_task}-{_side}.py'] = join(
        without(EXPECTED[f'eomt/dinov3-large_eomt_coco-{_task}-{_side}.py'], 'param_scheduler.0.'),
        pmt(_yaml, 'large', 12 * _epoch, 'coco', 2),
        pin(f'{_yaml}: max_epochs 12', 'train_cfg', max_iters=12 * _epoch))


# the ViT-5 and DeiT-III twins: PMT's recipes with the backbone swapped (its own RoPE tables for the decoder)
def pmt_twin(parent: Dict[str, Pin], family: str, size: str) -> Dict[str, Pin]:
    width, _, heads = SIZES[size]
    source = f'{PMT} image/configs/coco/panoptic/pmt_{size[0]}_640.yaml: the decoder at the encoder\'s width, its taps'
    return join(parent, backbone(family, size), pin(f'{PMT} frozen_encoder True', 'model.backbone', frozen=True),
                pin(source, 'model.decode_head', in_channels=width),
                pin(source, 'model.decoder', embed_dims=width, num_heads=heads, hidden_dims=width,
                    interaction_indices=PMT_INDICES[size]))


for _family, _size in itertools.product(('vit5', 'deit3'), ('small', 'base', 'large')):
    EXPECTED[f'pmt/{_family}-{_size}_pmt_ade20k-512.py'] = pmt_twin(EXPECTED['pmt/dinov3-large_pmt_ade20k-512.py'],
                                                                     _family, _size)
    EXPECTED[f'pmt/{_family}-{_size}_pmt_coco-panoptic-640.py'] = pmt_twin(
        EXPECTED[f'pmt/dinov3-{_size}_pmt_coco-panoptic-640.py'], _family, _size)


# --- Meta's linear probe of frozen features on ADE20K ---------------------------------------
LINEAR = 'facebookresearch/dinov3 dinov3/eval/segmentation/configs/config-ade20k-linear-training.yaml'
LINEAR_HEAD = 'facebookresearch/dinov3 dinov3/eval/segmentation/models/heads/linear_head.py LinearHead'
LINEAR_TRANSFORMS = 'facebookresearch/dinov3 dinov3/eval/segmentation/transforms.py'
LINEAR_TRAIN = 'facebookresearch/dinov3 dinov3/eval/segmentation/train.py: one AdamW group of the trained parameters'
LINEAR_LOOP = ('facebookresearch/dinov3 dinov3/eval/segmentation/train.py:140: `if global_step > 0: scheduler.step()`, '
               'iteration t at the lr of t - 1')
LINEAR_PIL = (f'{LINEAR_TRANSFORMS}:186 CustomResize: torchvision\'s Resize of a PIL image (PIL\'s bilinear, '
              'antialiased; nearest for labels)')
LINEAR_PHOTOMETRIC = (f'{LINEAR_TRANSFORMS}:431 and PhotoMetricDistortion\'s defaults (:40-43): brightness 32, '
                      'contrast and saturation 0.5-1.5, hue +-0.5 of the wheel')


def linear_data() -> Dict[str, Pin]:
    p = 'train_dataloader.dataset.pipeline'
    short_side = f'{LINEAR_TRANSFORMS} FixedSideResize: the short side only (a long side that never binds)'
    return join(
        without(ADE20K, f'{p}.', 'val_dataloader.dataset.pipeline.', 'model.test_cfg', 'model.auxiliary_head',
                'scale rule'),
        checked_loading(f'{p}.0', 150, True, LINEAR),
        pin(short_side, f'{p}.1', type='RandomResize', scale=(65536, 512), keep_ratio=True),
        pin(f'{LINEAR}: random_img_size_ratio_range', f'{p}.1', ratio_range=(0.5, 2.0)),
        pin(MMSEG_DEFAULT, f'{p}.1', resize_type='Resize'),
        pin(f'{LINEAR}: crop_size', f'{p}.2', type='RandomCrop', crop_size=(512, 512)),
        pin(f'{LINEAR_TRANSFORMS} RandomCropWithLabel(cat_max_ratio=0.75)', f'{p}.2', cat_max_ratio=0.75),
        pin(MMSEG_DEFAULT, f'{p}.2', ignore_index=255),
        pin(LINEAR_PIL, f'{p}.1', backend='pillow'),
        pin(f'{LINEAR}: flip_prob', f'{p}.3', type='RandomFlip', prob=0.5),
        pin(MMSEG_DEFAULT, f'{p}.3', direction='horizontal', swap_seg_labels=None),
        pin(LINEAR_PHOTOMETRIC, f'{p}.4', type='DINOv3PhotoMetricDistortion', brightness_delta=32,
            contrast_range=(0.5, 1.5), saturation_range=(0.5, 1.5), hue_range=(-0.5, 0.5)),
        pin(LINEAR, f'{p}.5', type='PackSegInputs'),
        pins(DERIVED, {'scale rule': 'RandomResize: the image fitted into (65536, 512) x r, r uniform in [0.5, 2.0]: '
                                     'its short side 512 r unless its long side would pass 65536 r'}),
        test_pipeline('val_dataloader.dataset.pipeline', 150, True, (65536, 512), f'{short_side}, eval img_size'),
        pin(LINEAR_PIL, 'val_dataloader.dataset.pipeline.1', backend='pillow'),
        pin(f'{LINEAR}: eval mode slide, crop_size 512, stride 341', 'model.test_cfg', mode='slide',
            crop_size=(512, 512), stride=(341, 341)),
    )


def ade20k_linear(family: str, size: str) -> Dict[str, Pin]:
    width = SIZES[size][0]
    return join(
        RUNTIME, NORMALISATION, linear_data(), backbone(family, size),
        pin(MMSEG_VIT_UPERNET, 'model', type='EncoderDecoder', pretrained=None),
        pin(f'{LINEAR}: backbone_out_layers LAST, use_backbone_norm, use_cls_token False', 'model.backbone',
            out_indices=-1, final_norm=True, frozen=True),
        pin('ViT5 defaults: no stochastic depth (a frozen encoder runs in eval mode)', 'model.backbone',
            drop_path_rate=0.0),
        pin(f'{LINEAR_HEAD}: BatchNorm and a 1x1 conv over the tap, Dropout2d(0.1)', 'model.decode_head',
            type='LinearProbeHead', in_channels=width, dropout_ratio=0.1, align_corners=False),
        pin(f'{LINEAR_HEAD}: SyncBatchNorm (use_batchnorm)', 'model.decode_head.norm_cfg', type='SyncBN',
            requires_grad=True),
        pin(f'{LINEAR}: celoss_weight 1.0, diceloss_weight 0.0', 'model.decode_head.loss_decode',
            type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0),
        pin(LINEAR_TRAIN, 'optim_wrapper', type='OptimWrapper', constructor='ViT5OptimWrapperConstructor'),
        pin(LINEAR, 'optim_wrapper.optimizer', type='AdamW', lr=0.001, betas=(0.9, 0.999), weight_decay=0.001),
        pin(LINEAR_TRAIN, 'optim_wrapper.paramwise_cfg', layer_decay_rate=1.0, decay_all=True),
        pins(LINEAR_TRAIN, {'weight decay': DecayRule(0.001, decay_all=True), 'backbone frozen': FrozenCount()}),
        pins(DERIVED, {'lr used': 0.001, 'lr by layer': ('head and neck 0.001',), 'precision': 'float32',
                       'torch.compile': False}),
        pin(f'{LINEAR}: total_iter', 'train_cfg', type='IterBasedTrainLoop', max_iters=40000),
        pin(f'{LINEAR}: eval_interval', 'train_cfg', val_interval=5000),
        pin(f'{LINEAR}: scheduler WarmupOneCycleLR', 'param_scheduler.0', type='WarmupOneCycleLR', warmup_iters=1500,
            warmup_ratio=1e-06, final_div_factor=float('inf'), anneal_strategy='cos', by_epoch=False, begin=0,
            end=40000),
        pin(LINEAR_LOOP, 'param_scheduler.0', lag=1),
        pin(f'{LINEAR}: eval_interval, metric_to_save mIoU', 'default_hooks.checkpoint', type='CheckpointHook',
            by_epoch=False, interval=5000, save_best='mIoU'),
        pin(KEEP_CKPTS, 'default_hooks.checkpoint', max_keep_ckpts=3),
        batch(2, 8, source=f'{LINEAR}: bs 2, n_gpus 8'),
        pin(f'{LINEAR}: crop_size', 'model.data_preprocessor', size=(512, 512)),
    )


for _family in ('vit5', 'deit3', 'dinov2', 'dinov3'):
    for _size in ('small', 'base', 'large'):
        EXPECTED[f'linear/{_family}-{_size}_linear_ade20k.py'] = ade20k_linear(_family, _size)


# --- the tiny twins: each real recipe shrunk for 2 CPU cores, trained from scratch ----------
def tiny_backbone(arch: str) -> Dict[str, Pin]:
    return join(pin(TINY, 'model.backbone', arch=arch, embed_dims=64, num_layers=4, num_heads=2),
                pins(TINY, {'model.backbone.init_cfg': None}))


def tiny_run(scale, crop, lr_block: Dict[str, Pin]) -> Dict[str, Pin]:
    """What every tiny twin shares: 8 images on one process, 300 iterations, one worker."""
    return join(
        lr_block,
        pin(TINY, 'train_dataloader', batch_size=8, num_workers=1, persistent_workers=False),
        pin(TINY, 'val_dataloader', num_workers=1, persistent_workers=False),
        pin(TINY, 'auto_scale_lr', base_batch_size=8),
        pins(TINY, {'GPUs': 1, 'images per GPU': 8, 'images per iteration': 8}),
        pin(TINY, 'train_cfg', max_iters=300, val_interval=300),
        pin(TINY, 'default_hooks.logger', interval=10),
        pin(TINY, 'default_hooks.checkpoint', interval=100, save_best=None, max_keep_ckpts=2),
        pin(TINY, 'model.data_preprocessor', size=crop),
        pin(TINY, 'train_dataloader.dataset.pipeline.1', scale=scale, ratio_range=(0.75, 1.5)),
        pin(TINY, 'train_dataloader.dataset.pipeline.2', crop_size=crop),
        pin(TINY, 'val_dataloader.dataset.pipeline.1', scale=scale),
        pins(DERIVED, {'scale rule': f'RandomResize: the image fitted into {scale} x r, r uniform in [0.75, 1.5]: its '
                                     f'short side {scale[1]} r unless its long side would pass {scale[0]} r'}),
    )


def tiny_upernet(parent: Dict[str, Pin], root: str, scale, crop, arch='vit5-small') -> Dict[str, Pin]:
    lr = join(pin(TINY, 'optim_wrapper.optimizer', lr=0.001),
              pins(DERIVED, {'lr used': 0.001, 'lr by layer': lr_by_layer(0.001, 1.0, 4, 'beit')}),
              pin(TINY, 'param_scheduler.0', start_factor=0.001, end=20),
              pin(TINY, 'param_scheduler.1', begin=20, end=300))
    return join(
        without(parent, 'model.backbone.init_cfg'), tiny_backbone(arch), tiny_run(scale, crop, lr),
        pin(TINY, 'model.backbone', out_indices=(0, 1, 2, 3), drop_path_rate=0.0),
        pin(TINY, 'model.neck', embed_dim=64), pin(TINY, 'model.decode_head', in_channels=(64,) * 4, channels=32),
        pin(TINY, 'model.auxiliary_head', in_channels=64, channels=16),
        {f'model.{part}.norm_cfg.type': ('BN', f'{TINY}: SyncBN needs GPUs')
         for part in ('neck', 'decode_head', 'auxiliary_head')},
        pin(TINY, 'train_dataloader.dataset', data_root=root), pin(TINY, 'val_dataloader.dataset', data_root=root),
    )


_SYNTHETIC_ADE = 'data/synthetic_ade20k/ADEChallengeData2016'
EXPECTED['tiny/vit5_upernet_synthetic.py'] = tiny_upernet(EXPECTED['vit5_upernet_ade20k.py'], _SYNTHETIC_ADE,
                                                          (160, 128), (96, 96))
EXPECTED['tiny/deit3_upernet_synthetic.py'] = join(
    tiny_upernet(EXPECTED['deit3_upernet_ade20k.py'], _SYNTHETIC_ADE, (160, 128), (96, 96), arch='deit3-small'))
EXPECTED['tiny/vit5_upernet_synthetic_cityscapes.py'] = join(
    tiny_upernet(EXPECTED['cityscapes/vit5-base_upernet_cityscapes.py'], 'data/synthetic/cityscapes', (256, 128),
                 (64, 128)),
    pin(TINY, 'model.test_cfg', crop_size=(64, 128), stride=(43, 86)))
EXPECTED['tiny/vit5_upernet_synthetic_coco_stuff.py'] = tiny_upernet(
    EXPECTED['coco_stuff/vit5-base_upernet_coco_stuff164k.py'], 'data/synthetic/coco_stuff164k', (160, 128), (96, 96))
EXPECTED['tiny/vit5_upernet_synthetic_pascal_context.py'] = join(
    tiny_upernet(EXPECTED['pascal_context/vit5-base_upernet_pascal_context_59.py'], 'data/synthetic/VOCdevkit/VOC2010',
                 (160, 160), (96, 96)),
    pin(TINY, 'model.test_cfg', crop_size=(96, 96), stride=(64, 64)))

# the EoMT twin: the tiny UperNet's data and budget, EoMT's model and losses, a from-scratch optimiser
_TINY_EOMT_LR = join(
    pin(f'{TINY}: float32 on CPU, from scratch a larger lr and a looser clip', 'optim_wrapper', type='OptimWrapper'),
    pin(TINY, 'optim_wrapper.optimizer', lr=0.001), pin(TINY, 'optim_wrapper.clip_grad', max_norm=1.0),
    pin(TINY, 'param_scheduler.0', warmup_new=10, warmup_backbone=10, end=300),
    pins(DERIVED, {'lr used': 0.001, 'lr by layer': lr_by_layer(0.001, 0.8, 4, 'eomt'), 'precision': 'float32'}))
EXPECTED['tiny/vit5_eomt_synthetic.py'] = join(
    without(EXPECTED['eomt/vit5-base_eomt_ade20k.py'], 'train_dataloader.dataset.pipeline', 'model.backbone.init_cfg',
            'optim_wrapper.dtype', 'model.test_cfg', 'val_dataloader.dataset.pipeline.1.backend'),
    {k: v for k, v in EXPECTED['tiny/vit5_upernet_synthetic.py'].items()
     if k.startswith('train_dataloader.dataset.pipeline')},
    tiny_backbone('vit5-small'), tiny_run((160, 128), (96, 96), _TINY_EOMT_LR),
    pin(TINY, 'model.decode_head', in_channels=64, num_queries=16, num_blocks=2),
    pin(f'{TINY}: 24x24 mask maps (12544 points would be 20 a pixel)', 'model.decode_head.train_cfg', num_points=1024),
    pin(TINY, 'model.test_cfg', mode='whole'),
    pin(f'{TINY}: mmseg\'s default resize (the twin\'s figures are measured with it)', 'val_dataloader.dataset.pipeline.1',
        backend='cv2'),
    pin(f'{TINY}: consecutive sixths of 300 iterations', 'custom_hooks.3', starts=(50, 100), ends=(100, 150)),
    pins(f'{TINY}: consecutive sixths of 300 iterations', {'mask annealing windows': ('block 0: 50-100',
                                                                                      'block 1: 100-150')}),
    pin(TINY, 'train_dataloader.dataset', data_root=_SYNTHETIC_ADE), pin(TINY, 'val_dataloader.dataset',
                                                                         data_root=_SYNTHETIC_ADE))

# the PMT twin: the EoMT twin's data, head and windows, its encoder frozen and read by a 2-block plain mask decoder
EXPECTED['tiny/vit5_pmt_synthetic.py'] = join(
    without(EXPECTED['tiny/vit5_eomt_synthetic.py'], 'param_scheduler.0.'), pmt_decoder_defaults(),
    pin(f'{TINY}: PMT\'s frozen encoder', 'model.backbone', frozen=True),
    pin(TINY, 'model.decode_head', num_blocks=2),
    pin(f'{TINY}: every block of the 4 read, 2 decoder blocks of the width', 'model.decoder', type='PMTDecoder',
        embed_dims=64, num_heads=2, num_blocks=2, hidden_dims=64, interaction_indices=(0, 1, 2, 3)),
    pin(f'{TINY}: SyncBN needs GPUs', 'model.decoder.norm_cfg', type='BN'),
    pin(f'{TINY}: only the decoder and the head learn: a larger lr', 'optim_wrapper.optimizer', lr=0.002),
    pin(f'{TINY}: PMT\'s schedule over 300 iterations', 'param_scheduler.0', type='WarmupCosineLR', warmup_iters=20,
        min_lr=1e-09, by_epoch=False, begin=0, end=300),
    pins(DERIVED, {'lr used': 0.002, 'lr by layer': ('head and neck 0.002',), 'backbone frozen': FrozenCount()}))

# the COCO panoptic twin: EoMT's mmdet model and losses at 128 on the synthetic COCO scenes, the tiny budget
_SYNTHETIC_COCO = 'data/synthetic/coco/'
_TINY_COCO = f'{TINY}; scenes of 128 x 171 (tools/make_synthetic_data.py coco_panoptic)'
EXPECTED['tiny/vit5_eomt_coco_panoptic_synthetic.py'] = join(
    without(EXPECTED['eomt/vit5-base_eomt_coco-panoptic-640.py'], 'model.backbone.init_cfg', 'optim_wrapper.dtype'),
    coco_data('panoptic', 128, _SYNTHETIC_COCO),
    tiny_backbone('vit5-small'), _TINY_EOMT_LR,
    pin(f'{TINY}: 2e-3 learns the scenes in 200 iterations of 4 (PQ 52-53 over seeds 0-1)', 'optim_wrapper.optimizer',
        lr=0.002),
    pin(TINY, 'param_scheduler.0', end=200),
    pins(DERIVED, {'lr used': 0.002, 'lr by layer': lr_by_layer(0.002, 0.8, 4, 'eomt')}),
    pin(TINY, 'train_dataloader', batch_size=4, persistent_workers=False),
    pin(f'{TINY}: in the main process (a worker would restart every 8 batches)', 'train_dataloader', num_workers=0),
    pin(TINY, 'val_dataloader', num_workers=0, persistent_workers=False),
    pin(TINY, 'auto_scale_lr', base_batch_size=4),
    pins(TINY, {'GPUs': 1, 'images per GPU': 4, 'images per iteration': 4}),
    pin(TINY, 'train_cfg', max_iters=200, val_interval=200),
    pin(TINY, 'default_hooks.logger', interval=10),
    pin(TINY, 'default_hooks.checkpoint', interval=100, max_keep_ckpts=2),
    pin(_TINY_COCO, 'model.data_preprocessor', pad_size=(128, 128)),
    pin(TINY, 'train_dataloader.dataset.pipeline.3', ratio_range=(0.75, 1.5)),
    pins(DERIVED, {'scale rule': 'RandomResize: the image fitted into (128, 128) x r, r uniform in [0.75, 1.5]: its '
                                 'short side 128 r unless its long side would pass 128 r'}),
    pin(TINY, 'model.decode_head', in_channels=64, num_queries=24, num_blocks=2),
    pin(f'{TINY}: 32x32 mask maps (12544 points would be 12 a pixel)', 'model.train_cfg', num_points=1024),
    pin(f'{TINY}: consecutive sixths of 200 iterations', 'custom_hooks.2', starts=(33, 67), ends=(67, 100)),
    pins(f'{TINY}: consecutive sixths of 200 iterations', {'mask annealing windows': ('block 0: 33-67',
                                                                                      'block 1: 67-100')}),
    pin(TINY, 'train_dataloader.dataset', data_root=_SYNTHETIC_COCO),
    pin(TINY, 'val_dataloader.dataset', data_root=_SYNTHETIC_COCO))

# the PMT panoptic twin: the EoMT panoptic twin's data, head, windows and lr, its encoder frozen and read by PMT
EXPECTED['tiny/vit5_pmt_coco_panoptic_synthetic.py'] = join(
    without(EXPECTED['tiny/vit5_eomt_coco_panoptic_synthetic.py'], 'param_scheduler.0.'), pmt_decoder_defaults(),
    pin(f'{TINY}: PMT\'s frozen encoder', 'model.backbone', frozen=True),
    pin(f'{TINY}: every block of the 4 read, 2 decoder blocks of the width', 'model.decoder', type='PMTDecoder',
        embed_dims=64, num_heads=2, num_blocks=2, hidden_dims=64, interaction_indices=(0, 1, 2, 3)),
    pin(f'{TINY}: SyncBN needs GPUs', 'model.decoder.norm_cfg', type='BN'),
    pin(f'{TINY}: PMT\'s schedule over 200 iterations', 'param_scheduler.0', type='WarmupCosineLR', warmup_iters=20,
        min_lr=1e-09, by_epoch=False, begin=0, end=200),
    pins(DERIVED, {'lr by layer': ('head and neck 0.002',), 'backbone frozen': FrozenCount()}))

# the COCO instance twin: the panoptic twin's network and budget on the same scenes' instances
EXPECTED['tiny/vit5_eomt_coco_instance_synthetic.py'] = join(
    {k: v for k, v in EXPECTED['tiny/vit5_eomt_coco_panoptic_synthetic.py'].items()
     if not k.startswith(('train_dataloader.dataset', 'val_dataloader.dataset', 'val_evaluator'))},
    {k: v for k, v in coco_data('instance', 128, _SYNTHETIC_COCO).items()
     if k.startswith(('train_dataloader.dataset', 'val_dataloader.dataset', 'val_evaluator'))},
    pin(TINY, 'train_dataloader.dataset.pipeline.3', ratio_range=(0.75, 1.5)),
    pin(f'{EOMT_COCO_INSTANCE}: 80 classes', 'model', num_things_classes=80, num_stuff_classes=0),
    pin(f'{EOMT_COCO_INSTANCE}: 80 classes', 'model.decode_head', num_classes=80),
    pin(f'{EOMT_PANOPTIC}: class_coefficient 2.0, no_object_coefficient 0.1', 'model.decode_head.loss_decode.0',
        class_weight='1.0 x 80, 0.1'),
    pin(f'{EOMT} training/mask_classification_instance.py eval_step', 'model.test_cfg', panoptic_on=False,
        instance_on=True),
    pin(TINY, 'train_dataloader.dataset', data_root=_SYNTHETIC_COCO),
    pin(TINY, 'val_dataloader.dataset', data_root=_SYNTHETIC_COCO))

# the VidEoMT twin: the COCO instance twin's network and optimiser with VidEoMT's decoder, online on 3-frame clips
VIDEOMT = 'tue-mps/videomt'
VIDEOMT_YTVIS = f'{VIDEOMT} configs/ytvis19/Base_R50.yaml'
MMDET_YTVIS = f'{MMDET} configs/_base_/datasets/youtube_vis.py'
_TRACK_PACK_KEYS = ('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor', 'flip', 'flip_direction',
                    'frame_id', 'video_id', 'video_length', 'ori_video_length', 'instances')
_SYNTHETIC_YTVIS = 'data/synthetic/youtube_vis_2019/'


def _broadcast(prefix: str, share: bool, transforms: dict) -> Dict[str, Pin]:
    """mmcv's TransformBroadcaster at ``prefix`` over mmdet's frame transforms ``transforms`` (index -> pins)."""
    return join(
        pin(MMDET_YTVIS, prefix, type='TransformBroadcaster'),
        pin(f'{MMDET_YTVIS}: one flip and size a clip' if share else MMDET_DEFAULT, prefix, share_random_params=share),
        pin(MMDET_DEFAULT, prefix, mapping=None, remapping=None, auto_remap=None, allow_nonexist_keys=False),
        *transforms.values())


def _load_frame(prefix: str) -> Dict[str, Pin]:
    return join(pin(MMDET_YTVIS, prefix, type='LoadImageFromFile'),
                pin(MMCV_LOAD, prefix, to_float32=False, color_type='color', imdecode_backend='cv2',
                    ignore_empty=False))


def _resize_frame(prefix: str) -> Dict[str, Pin]:
    return join(pin(MMDET_YTVIS, prefix, type='Resize', keep_ratio=True),
                pin(f'{TINY}: frames of 128', prefix, scale=(128, 128)),
                pin(MMDET_DEFAULT, prefix, scale_factor=None, clip_object_border=True, backend='cv2',
                    interpolation='bilinear'))


EXPECTED['tiny/vit5_videomt_synthetic.py'] = join(
    without(EXPECTED['tiny/vit5_eomt_coco_instance_synthetic.py'], 'model.data_preprocessor', 'model.panoptic_fusion',
            'model.test_cfg', 'model.num_', 'custom_hooks.2', 'mask annealing', 'train_dataloader.dataset',
            'val_dataloader.dataset', 'val_evaluator', 'default_hooks.visualization', 'model.type',
            'model.decode_head.num_classes', 'model.decode_head.loss_decode.0.class_weight',
            'train_dataloader.batch_sampler', 'scale rule'),
    pin(f'{VIDEOMT} videomt/videomt.py videomt_online', 'model', type='VideoMaskClassifier'),
    pin(f'{VIDEOMT} videomt/modeling/backbone/videomt.py query_updater: Linear(C, C)', 'model.decoder',
        type='VidEoMTDecoder', embed_dims=64),
    pin(f'{VIDEOMT} configs/ytvis19/videomt/*/videomt_online_*.yaml NUM_CLASSES', 'model.decode_head',
        num_classes=40),
    pin(f'{VIDEOMT_YTVIS}: CLASS_WEIGHT 2.0, NO_OBJECT_WEIGHT 0.1', 'model.decode_head.loss_decode.0',
        class_weight='1.0 x 40, 0.1'),
    pin(f'{VIDEOMT_YTVIS} TEST.TASK vis, MAX_NUM 10', 'model.test_cfg', task='instance', max_per_video=10),
    pin(f'{MMDET_YTVIS}: mmdet\'s video preprocessor', 'model.data_preprocessor', type='TrackDataPreprocessor'),
    pin(f'{VIDEOMT} configs/ytvis19/videomt/*/videomt_online_*.yaml SIZE_DIVISIBILITY 32',
        'model.data_preprocessor', pad_size_divisor=32),
    pin(f'{VIDEOMT} configs/ytvis19/videomt/*/videomt_online_*.yaml PIXEL_MEAN, PIXEL_STD (RGB, 0-255)',
        'model.data_preprocessor', mean=(123.675, 116.28, 103.53), std=(58.395, 57.12, 57.375), bgr_to_rgb=True),
    pins(f'{TINY}: 2 clips of 3 frames a step', {'images per GPU': 2, 'images per iteration': 2,
                                                'max_iters counts': '400 optimizer steps of 2 images (1 '
                                                                    'micro-batch(es) each)'}),
    pin(TINY, 'train_dataloader', batch_size=2),
    pin(TINY, 'auto_scale_lr', base_batch_size=2),
    pin(f'{TINY}: 400 steps of 2 clips (AP 0.28 on the synthetic val clips, docs/video.md)', 'train_cfg',
        max_iters=400, val_interval=400),
    pin(TINY, 'param_scheduler.0', end=400),
    pins(DERIVED, {'schedulers in optimizer steps': ('TwoStageWarmupPolyLR lr steps 0-400 warmup_new=10 '
                                                     'warmup_backbone=10 power=0.9',),
                   'mask annealing': 'none: the masks stay on (no EoMTMaskAnnealingHook)'}),
    pin(f'{VIDEOMT} videomt/modeling/backbone/videomt.py segmenter: no attention mask, so nothing anneals',
        'custom_hooks.0', type='NonFiniteLossHook'),
    pin(MMDET_YTVIS, 'train_dataloader.batch_sampler', type='TrackAspectRatioBatchSampler'),
    pin(MMDET_YTVIS, 'train_dataloader.dataset', type='YouTubeVISDataset', dataset_version='2019',
        ann_file='annotations/youtube_vis_2019_train.json'),
    pin(MMDET_YTVIS, 'train_dataloader.dataset.data_prefix', img_path='train/JPEGImages'),
    pin(MMDET_YTVIS, 'val_dataloader.dataset', type='YouTubeVISDataset', dataset_version='2019',
        ann_file='annotations/youtube_vis_2019_valid.json', test_mode=True),
    pin(MMDET_YTVIS, 'val_dataloader.dataset.data_prefix', img_path='valid/JPEGImages'),
    pin(MMDET_YTVIS, 'val_dataloader.sampler', round_up=False),
    pin(TINY, 'train_dataloader.dataset', data_root=_SYNTHETIC_YTVIS),
    pin(TINY, 'val_dataloader.dataset', data_root=_SYNTHETIC_YTVIS),
    # clips of 3 frames in a row (VidEoMT: SAMPLING_FRAME_NUM 5 within SAMPLING_FRAME_RANGE 2)
    pin(f'{TINY}: 3 frames in a row', 'train_dataloader.dataset.pipeline.0', type='UniformRefFrameSample',
        num_ref_imgs=2, frame_range=1),
    pin(MMDET_YTVIS, 'train_dataloader.dataset.pipeline.0', filter_key_img=True),
    pin(MMDET_DEFAULT, 'train_dataloader.dataset.pipeline.0', collect_video_keys=('video_id', 'video_length')),
    _broadcast('train_dataloader.dataset.pipeline.1', True, {
        0: _load_frame('train_dataloader.dataset.pipeline.1.transforms.0'),
        1: pin(MMDET_YTVIS, 'train_dataloader.dataset.pipeline.1.transforms.1', type='LoadTrackAnnotations',
               with_mask=True),
        2: _resize_frame('train_dataloader.dataset.pipeline.1.transforms.2'),
        3: join(pin(f'{VIDEOMT_YTVIS} RANDOM_FLIP flip_by_clip', 'train_dataloader.dataset.pipeline.1.transforms.3',
                    type='RandomFlip', prob=0.5),
                pin(MMDET_DEFAULT, 'train_dataloader.dataset.pipeline.1.transforms.3', direction='horizontal',
                    swap_seg_labels=None))}),
    pin(MMDET_YTVIS, 'train_dataloader.dataset.pipeline.2', type='PackTrackInputs'),
    pin(MMDET_DEFAULT, 'train_dataloader.dataset.pipeline.2', default_meta_keys=_TRACK_PACK_KEYS),
    _broadcast('val_dataloader.dataset.pipeline.0', False, {
        0: _load_frame('val_dataloader.dataset.pipeline.0.transforms.0'),
        1: _resize_frame('val_dataloader.dataset.pipeline.0.transforms.1'),
        2: pin(MMDET_YTVIS, 'val_dataloader.dataset.pipeline.0.transforms.2', type='LoadTrackAnnotations',
               with_mask=True)}),
    pin(MMDET_YTVIS, 'val_dataloader.dataset.pipeline.1', type='PackTrackInputs'),
    pin(MMDET_DEFAULT, 'val_dataloader.dataset.pipeline.1', default_meta_keys=_TRACK_PACK_KEYS),
    pin(f'{MMDET} configs/mask2former_vis/mask2former_r50_8xb2-8e_youtubevis2019.py', 'val_evaluator',
        type='YouTubeVISMetric', metric='youtube_vis_ap'),
    pin(f'{MMDET} YouTubeVISMetric defaults', 'val_evaluator', format_only=False),
    pin(TINY, 'val_evaluator', outfile_prefix='work_dirs/vit5_videomt_synthetic/results'),
    pin(f'{MMDET} configs/mask2former_vis: the video visualizer, not drawing', 'default_hooks.visualization',
        type='TrackVisualizationHook', draw=False))

# the DINOv2 / DINOv3 twins: the ViT-5 twins with the family's switches
EXPECTED['tiny/dinov3_eomt_synthetic.py'] = join(EXPECTED['tiny/vit5_eomt_synthetic.py'], dinov3_switches(),
                                                 pin(TINY, 'model.backbone', arch='dinov3-small'))
EXPECTED['tiny/dinov2_upernet_synthetic.py'] = join(
    EXPECTED['tiny/vit5_upernet_synthetic.py'], dinov2_switches(),
    pin(f'{TINY}: 7 patches of 14', 'model.backbone', arch='dinov2-small-reg4', img_size=98))


# --- what the trainer builds from the values above (the card reads it from the built objects) ---
def scheduler_arguments(kind: str) -> Dict[str, object]:
    """The numeric arguments of the scheduler class ``kind`` and their defaults, in the order its
    classes declare them (the mixin first): the factors the card lists for it."""
    import inspect

    import vit5seg  # noqa: F401  (registers TwoStageWarmupPolyLR)
    from mmengine.registry import PARAM_SCHEDULERS
    place = ('self', 'optimizer', 'param_name', 'begin', 'end', 'last_step', 'by_epoch', 'verbose', 'epoch_length')
    out = {}
    for klass in PARAM_SCHEDULERS.get(kind).__mro__:
        if '__init__' not in vars(klass):
            continue
        for name, param in inspect.signature(klass.__init__).parameters.items():
            if name in place or name in out or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            if isinstance(param.default, (int, float)) and not isinstance(param.default, bool):
                out[name] = param.default
    return out


def run_pins(entry: Dict[str, Pin]) -> Dict[str, Pin]:
    """The train loop, what max_iters counts and each scheduler's span in optimizer steps, from
    the entry's own pins: the accumulating loop wherever a step has several micro-batches."""
    value = {k: v for k, (v, _) in entry.items()}
    images, micro = value['images per iteration'], value['micro-batches per step']
    steps = []
    for i in itertools.count():
        if f'param_scheduler.{i}.type' not in value:
            break
        begin, end = value.get(f'param_scheduler.{i}.begin', 0), value[f'param_scheduler.{i}.end']
        kind = value[f'param_scheduler.{i}.type']
        factors = ''.join(f' {name}={value.get(f"param_scheduler.{i}.{name}", default)!r}'
                          for name, default in scheduler_arguments(kind).items())
        steps.append(f'{kind} lr steps {begin}-{end}{factors}')
    return pins(DERIVED, {
        'train loop': 'AccumulatingIterBasedTrainLoop' if micro > 1 else value['train_cfg.type'],
        'max_iters counts': f'{value["train_cfg.max_iters"]} optimizer steps of {images} images ({micro} '
                            f'micro-batch(es) each)',
        'schedulers in optimizer steps': tuple(steps),
    })


for _name, _entry in EXPECTED.items():
    _entry.update(run_pins(_entry))
