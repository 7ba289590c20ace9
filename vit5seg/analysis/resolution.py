"""Accuracy and features at test resolutions other than the training one.

``sweep`` evaluates segmentors (config + checkpoint) on their test set at several test
scales, whole-image and sliding-window, under each position policy: how the RoPE
positions are placed at a new grid (``rope_ref_grid``: the authors' squeeze into the
pretraining grid, integer positions, or a chosen grid) and how pos_embed is resized
(``interpolate_mode``). ``feature_similarity`` is the dataset-free check of the same
claim on a backbone alone.
"""
import copy
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F

from ..utils.image import IMAGE_EXTS, read_rgb

RopeGrid = Union[str, int]  # 'authors' | 'integer' | grid side
CSV_FIELDS = ('model', 'size', 'mode', 'mIoU', 'mAcc', 'aAcc', 'rope_ref_grid', 'pos_embed', 'scale',
              'train_crop', 'config', 'checkpoint')
FEATURE_FIELDS = ('model', 'size', 'rope_ref_grid', 'pos_embed', 'cls_cos', 'patch_cos', 'unrelated_cls_cos',
                  'unrelated_patch_cos', 'images')


@dataclass(frozen=True)
class Policy:
    """Where positions go at a grid the model was not trained on."""
    rope_ref_grid: RopeGrid = 'authors'
    pos_embed: str = 'bicubic'

    def backbone_options(self, has_rope: bool) -> dict:
        options = dict(interpolate_mode=self.pos_embed)
        if has_rope:
            options['rope_ref_grid'] = {'authors': None, 'integer': 'integer'}.get(self.rope_ref_grid,
                                                                                self.rope_ref_grid)
        return options

    def label(self) -> str:
        return f'rope={self.rope_ref_grid}, pos={self.pos_embed}'


def parse_rope_grid(text: str) -> RopeGrid:
    if text in ('authors', 'integer'):
        return text
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise ValueError(f"rope_ref_grid must be 'authors', 'integer' or a positive grid side, got {text!r}")


def policies(rope_grids: Sequence[RopeGrid], pos_modes: Sequence[str], has_rope: bool) -> List[Policy]:
    """Every combination; a backbone without RoPE gets one policy per pos_embed mode."""
    grids = list(rope_grids) if has_rope else ['n/a']
    return [Policy(g, m) for g, m in itertools.product(grids, pos_modes)]


def uses_rope(backbone_cfg: dict) -> bool:
    """Whether a backbone config builds a ViT5 with RoPE (built on the meta device: no memory)."""
    from mmseg.registry import MODELS
    if backbone_cfg.get('type') != 'ViT5':
        return False
    with torch.device('meta'):
        return MODELS.build(dict(copy.deepcopy(backbone_cfg), init_cfg=None)).rope is not None


def _test_scale(cfg) -> Tuple[int, int]:
    for step in cfg.test_pipeline:
        if step['type'] == 'Resize':
            return tuple(step['scale'])
    raise ValueError('the config\'s test_pipeline has no Resize step to change the test scale')


def scale_for(size: int, config_scale: Tuple[int, int]) -> Tuple[int, int]:
    """Resize scale for short side ``size``, the long side capped in the config's proportion
    (ADE20K's (2048, 512): short side 512, long side at most 2048)."""
    long, short = max(config_scale), min(config_scale)
    return (round(size * long / short), size)


def _with_test_scale(cfg, scale):
    """A copy of the test dataloader config whose Resize uses ``scale``."""
    loader = copy.deepcopy(cfg.test_dataloader)
    pipeline = loader.dataset.get('pipeline', cfg.test_pipeline)
    loader.dataset.pipeline = [dict(s, scale=scale) if s['type'] == 'Resize' else s for s in copy.deepcopy(pipeline)]
    return loader


def _train_crop(cfg) -> Tuple[int, int]:
    size = cfg.model.data_preprocessor.get('size') or cfg.get('crop_size')
    if size is None:
        raise ValueError('cannot tell the training crop (model.data_preprocessor.size) for slide mode')
    return tuple(size)


def evaluate(model, loader_cfg, evaluator_cfg, bar=None) -> Dict[str, float]:
    """mIoU / mAcc / aAcc of ``model`` on a test dataloader config (mmseg's IoUMetric)."""
    from mmengine.evaluator import Evaluator
    from mmengine.runner import Runner
    loader = Runner.build_dataloader(loader_cfg)
    evaluator = Evaluator(copy.deepcopy(evaluator_cfg))
    evaluator.dataset_meta = loader.dataset.metainfo
    with torch.no_grad():
        for batch in loader:
            evaluator.process(data_samples=model.test_step(batch), data_batch=batch)
            if bar is not None:
                bar.update(1)
    metrics = evaluator.evaluate(len(loader.dataset))
    return {k: float(metrics[k]) for k in ('mIoU', 'mAcc', 'aAcc')}


@dataclass
class SweepRun:
    config: str
    checkpoint: str
    name: Optional[str] = None


def sweep(runs: Sequence[SweepRun], sizes: Sequence[int], modes: Sequence[str] = ('whole', 'slide'),
          rope_grids: Sequence[RopeGrid] = ('authors',), pos_modes: Sequence[str] = ('bicubic',),
          device: Optional[str] = None, stride: Optional[Tuple[int, int]] = None,
          progress: bool = True, amp: Optional[str] = None) -> List[dict]:
    """One row per (run, policy, size, mode), in that order. ``amp``: 'bf16' or 'fp16'
    autocast inference (:mod:`vit5seg.utils.amp`)."""
    from mmengine.config import Config
    from mmengine.logging import MMLogger
    from mmseg.utils import register_all_modules
    from tqdm import tqdm

    from ..apis.infer import inference_test_cfg
    from ..apis.inference import init_model

    register_all_modules(init_default_scope=True)
    for mode in modes:
        if mode not in ('whole', 'slide'):
            raise ValueError(f"mode must be 'whole' or 'slide', got {mode!r}")
    # IoUMetric prints a per-class table per evaluation; the progress bar says enough.
    MMLogger.get_instance('vit5seg-sweep', log_level='WARNING')
    plans = []
    for run in runs:
        cfg = Config.fromfile(run.config)
        run_policies = policies(rope_grids, pos_modes, uses_rope(cfg.model.backbone))
        name = run.name or model_label(run.config)
        plans += [(run, cfg, p, name if len(run_policies) == 1 else f'{name} [{p.label()}]') for p in run_policies]
    batches = {}
    for run, cfg, _, _ in plans:
        if run.config not in batches:
            from mmseg.registry import DATASETS

            from ..datasets.checks import check_dataset_config
            dataset_cfg = copy.deepcopy(cfg.test_dataloader.dataset)
            num_images = check_dataset_config(dataset_cfg, f'{run.config}: test_dataloader.dataset')
            if num_images is None:  # not a folder dataset the check knows: count what it lists
                num_images = len(DATASETS.build(dataset_cfg))
            batch_size = cfg.test_dataloader.get('batch_size', 1)
            batches[run.config] = -(-num_images // batch_size)
    total = sum(batches[run.config] for run, *_ in plans) * len(sizes) * len(modes)
    bar = tqdm(total=total, unit='batch', disable=not progress, dynamic_ncols=True, desc='sweep')
    rows = []
    for run, cfg, policy, name in plans:
        options = {f'model.backbone.{k}': v for k, v in
                   policy.backbone_options(policy.rope_ref_grid != 'n/a').items()}
        model = init_model(copy.deepcopy(cfg), run.checkpoint, device=device, cfg_options=options, amp=amp)
        config_scale = _test_scale(cfg)
        crop = _train_crop(cfg)
        for size, mode in itertools.product(sizes, modes):
            scale = scale_for(size, config_scale)
            model.test_cfg = inference_test_cfg(mode, crop, stride)
            bar.set_postfix_str(f'{name} {mode} {size}')
            metrics = evaluate(model, _with_test_scale(cfg, scale), cfg.test_evaluator, bar)
            rows.append(dict(model=name, size=size, mode=mode, **{k: round(v, 2) for k, v in metrics.items()},
                             rope_ref_grid=policy.rope_ref_grid, pos_embed=policy.pos_embed,
                             scale=f'{scale[0]}x{scale[1]}', train_crop=f'{crop[0]}x{crop[1]}',
                             config=run.config, checkpoint=run.checkpoint))
    bar.close()
    return rows


def plot_sweep(rows: List[dict], path) -> None:
    """mIoU vs test short side, one line per model, one panel per mode; dashed: training crop."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    modes = list(dict.fromkeys(r['mode'] for r in rows))
    fig, axes = plt.subplots(1, len(modes), figsize=(5.5 * len(modes), 4), squeeze=False)
    for ax, mode in zip(axes[0], modes):
        for name in dict.fromkeys(r['model'] for r in rows):
            points = sorted((r['size'], r['mIoU']) for r in rows if r['model'] == name and r['mode'] == mode)
            ax.plot(*zip(*points), marker='o', label=name)
        for crop in dict.fromkeys(r['train_crop'] for r in rows):
            ax.axvline(min(int(v) for v in crop.split('x')), color='grey', linestyle='--', linewidth=1,
                       label=f'training crop {crop}')
        ax.set(title=f'{mode} inference', xlabel='test short side (px)', ylabel='mIoU')
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---- backbone only: does the representation survive a larger input? ----

def load_images(folder, limit: int) -> List[torch.Tensor]:
    """RGB float images (3, H, W) in [0, 255] from a folder."""
    paths = sorted(p for p in Path(folder).iterdir() if p.suffix.lower() in IMAGE_EXTS)
    images = []
    for p in paths[:limit]:
        img = read_rgb(p)
        if img is None:
            raise ValueError(f'{p}: not a readable image')
        images.append(img)
    if len(images) < 2:
        raise ValueError(f'{folder}: need at least 2 images (found {len(images)}); the unrelated-image '
                         'baseline compares different images')
    return images


IMAGENET_MEAN = torch.tensor([123.675, 116.28, 103.53]).view(3, 1, 1)
IMAGENET_STD = torch.tensor([58.395, 57.12, 57.375]).view(3, 1, 1)


def _features(backbone, images: List[torch.Tensor], size: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """(cls (B, C), patch map pooled to the pretraining grid (B, C, h0, w0)) at a size x size input."""
    batch = torch.stack([F.interpolate(img[None], size=(size, size), mode='bicubic', align_corners=False,
                                       antialias=True)[0] for img in images])
    batch = ((batch.clamp(0, 255) - IMAGENET_MEAN) / IMAGENET_STD).to(next(backbone.parameters()).device)
    tokens = backbone.forward_features(batch)                       # (B, 1 + h*w + R, C)
    grid = -(-size // backbone.patch_size)  # the patch embedding pads to whole patches
    patches = tokens[:, 1:1 + grid * grid].transpose(1, 2).reshape(len(images), -1, grid, grid)
    # average the finer map onto the pretraining grid so each position covers the same image area
    return tokens[:, 0].float().cpu(), F.adaptive_avg_pool2d(patches.float(), backbone.patch_grid).cpu()


def _cos(a: torch.Tensor, b: torch.Tensor) -> float:
    return F.cosine_similarity(a, b, dim=1).mean().item()


def feature_similarity(backbone, images: List[torch.Tensor], sizes: Sequence[int]) -> List[dict]:
    """Cosine similarity of the features at each size to the same images at the pretraining size.

    ``cls_cos``: cls token after the final norm; ``patch_cos``: patch tokens, the larger map
    average-pooled onto the pretraining grid, per position. ``unrelated_*``: the same at the
    pretraining size between different images (each image and the next): the level that
    means "no more alike than two different pictures", so a drop is read against it.
    """
    ref_size = backbone.img_size[0]
    backbone.eval()
    with torch.no_grad():
        ref_cls, ref_patch = _features(backbone, images, ref_size)
        rolled = [torch.roll(t, 1, dims=0) for t in (ref_cls, ref_patch)]
        unrelated = dict(unrelated_cls_cos=_cos(ref_cls, rolled[0]), unrelated_patch_cos=_cos(ref_patch, rolled[1]))
        rows = []
        for size in sizes:
            cls, patch = _features(backbone, images, size)
            rows.append(dict(size=size, cls_cos=_cos(ref_cls, cls), patch_cos=_cos(ref_patch, patch), **unrelated,
                             images=len(images)))
    return rows


def model_label(spec: str) -> str:
    """A short name for a model in tables and pictures: a config file's stem, or the arch."""
    return Path(spec).stem if spec.endswith('.py') else spec


def backbone_config(spec: str) -> dict:
    """The backbone config of a preset name (``vit5-base``) or of a config file's
    ``model.backbone``, without its pretrained weights."""
    from mmengine.config import Config

    from ..models.backbones.vit5 import ARCH_PRESETS
    if spec in ARCH_PRESETS:
        backbone_cfg = dict(type='ViT5', arch=spec)
    elif Path(spec).is_file():
        backbone_cfg = Config.fromfile(spec).model.backbone.to_dict()
    else:
        raise ValueError(f'{spec!r} is neither an arch preset ({", ".join(sorted(ARCH_PRESETS))}) nor a config file')
    backbone_cfg.pop('init_cfg', None)
    backbone_cfg.pop('pretrained', None)
    return backbone_cfg


def build_backbone(backbone_cfg: dict, checkpoint: Optional[str], policy: Policy, device: Optional[str] = None,
                   allow_unsafe: bool = False):
    """The backbone of ``backbone_cfg`` under ``policy``, with ``checkpoint`` loaded
    (authors' file, DeiT-III or a trained segmentor's backbone)."""
    from mmseg.registry import MODELS
    backbone = MODELS.build(dict(backbone_cfg, **policy.backbone_options(uses_rope(backbone_cfg))))
    if checkpoint:
        from ..models.checkpoint import load_pretrained
        load_pretrained(backbone, checkpoint, allow_unsafe=allow_unsafe)
    device = device or ('cuda' if torch.cuda.is_available() else 'cpu')
    return backbone.to(device).eval()


def plot_features(rows: List[dict], path) -> None:
    """Patch and cls similarity vs input size, one line per model; dotted: unrelated-image level."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, key in zip(axes, ('patch_cos', 'cls_cos')):
        for i, name in enumerate(dict.fromkeys(r['model'] for r in rows)):
            mine = sorted((r for r in rows if r['model'] == name), key=lambda r: r['size'])
            line, = ax.plot([r['size'] for r in mine], [r[key] for r in mine], marker='o', label=name)
            ax.axhline(mine[0][f'unrelated_{key}'], color=line.get_color(), linestyle=':', linewidth=1)
        ax.set(title=f'{key.replace("_cos", "")} features vs the pretraining size (dotted: unrelated images)',
               xlabel='input side (px)', ylabel='cosine similarity')
        ax.title.set_fontsize(9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
