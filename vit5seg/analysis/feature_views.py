"""Pictures of what a backbone sees at several input sizes (``tools/visualize_features.py``).

Three views per model, image and size, from one pass through the blocks:
- PCA: patch features of a tap projected on 3 principal components fitted jointly over
  all sizes of one model and image, so a colour means the same thing at every size;
- attention: the last block's softmax attention from the cls token and from each
  register to the patches (mean over heads), only those rows, never the N x N matrix;
- token norms: the L2 norm of every patch token of a tap (the residual stream, before
  the final norm, which would equalise them), where high-norm "artifact" tokens show.
"""
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from ..utils.image import IMAGE_EXTS, read_rgb
from ..utils.tables import write_csv
from .resolution import IMAGENET_MEAN, IMAGENET_STD, Policy, backbone_config, build_backbone, model_label

VIEWS = ('pca', 'attention', 'norms')
NORM_FIELDS = ['model', 'size', 'tap', 'median_norm', 'max_norm', 'outlier_fraction']


@dataclass
class ModelEntry:
    name: str
    backbone: torch.nn.Module


def parse_model(text: str) -> Tuple[str, str]:
    """``CONFIG:CHECKPOINT`` or ``ARCH:WEIGHTS`` -> (spec, checkpoint); the checkpoint may be a URL."""
    spec, sep, checkpoint = text.partition(':')
    if not sep or not spec or not checkpoint:
        raise ValueError(f'{text!r}: give a model as CONFIG:CHECKPOINT or ARCH:WEIGHTS (e.g. '
                         f'vit5-base:vit5_base_patch16_224.pth)')
    return spec, checkpoint


def load_model(text: str, device: Optional[str] = None, allow_unsafe: bool = False, name: Optional[str] = None):
    """The backbone of a ``CONFIG:CHECKPOINT`` / ``ARCH:WEIGHTS`` spec, weights loaded, in eval mode."""
    spec, checkpoint = parse_model(text)
    backbone_cfg = backbone_config(spec)
    backbone_cfg.pop('compile', None)
    return ModelEntry(name or model_label(spec), build_backbone(backbone_cfg, checkpoint, Policy(), device, allow_unsafe))


def validate_sizes(sizes: Sequence[int], patch_size: int = 16) -> None:
    small = [s for s in sizes if s < patch_size]
    if small:
        raise ValueError(f'--sizes {small}: smaller than one {patch_size}x{patch_size} patch')


def _short_side_shape(h: int, w: int, size: int) -> Tuple[int, int]:
    scale = size / min(h, w)
    return max(size, round(h * scale)), max(size, round(w * scale))


def resize_short_side(image: torch.Tensor, size: int, patch_size: int = 16) -> torch.Tensor:
    """An RGB (3, H, W) image in [0, 255] resized so its short side is ``size`` (aspect kept)."""
    validate_sizes([size], patch_size)
    shape = _short_side_shape(*image.shape[-2:], size)
    return F.interpolate(image[None].float(), size=shape, mode='bicubic', align_corners=False,
                         antialias=True)[0].clamp(0, 255)


@dataclass
class Views:
    """One model, one image, one size."""
    grid: Tuple[int, int]
    taps: Dict[int, torch.Tensor] = field(default_factory=dict)  # tap -> (h, w, C) patch features
    attention: Optional[torch.Tensor] = None  # (1 + R, h, w): cls, then each register, to the patches
    row_sums: Optional[torch.Tensor] = None   # (1 + R,) of the full rows (all tokens): 1


def backbone_views(backbone, image: torch.Tensor, taps: Sequence[int], attention: bool = True) -> Views:
    """Patch features of ``taps`` (block indices) and the last block's cls/register attention
    for one normalised-on-the-fly RGB image (3, H, W) in [0, 255]."""
    device = next(backbone.parameters()).device
    x = ((image - IMAGENET_MEAN) / IMAGENET_STD)[None].to(device)
    depth = len(backbone.blocks)
    wanted = {t % depth for t in taps}
    with torch.no_grad():
        tokens, grid, rope = backbone.embed(x)                # (1, 1 + h*w + R, C)
        h, w = grid
        views = Views(grid)
        R = backbone.num_registers
        for i, block in enumerate(backbone.blocks):
            if attention and i == depth - 1:
                n = tokens.shape[1]
                queries = [0, *range(n - R, n)]
                rows = block.attn.attention_rows(block.norm1(tokens), queries, rope)[0]   # (heads, 1 + R, n)
                rows = rows.mean(0)
                views.row_sums = rows.sum(-1).cpu()
                views.attention = rows[:, 1:1 + h * w].reshape(-1, h, w).cpu()
            tokens = block(tokens, rope)
            if i in wanted:
                views.taps[i] = tokens[0, 1:1 + h * w].reshape(h, w, -1).float().cpu()
    return views


def pca_rgb(maps: List[torch.Tensor]) -> List[np.ndarray]:
    """(h_i, w_i, C) feature maps -> (h_i, w_i, 3) colours in [0, 1] on 3 principal
    components fitted over all maps together, each scaled by the same 1st-99th
    percentile range: equal features get equal colours in every map."""
    flat = torch.cat([m.reshape(-1, m.shape[-1]) for m in maps]).double()
    mean = flat.mean(0)
    centred = flat - mean
    _, _, vh = torch.linalg.svd(centred, full_matrices=False)
    basis = vh[:3].T                                             # (C, <=3)
    projected = centred @ basis
    # fix each component's sign (an SVD picks it freely): largest absolute loading positive
    signs = torch.sign(basis[basis.abs().argmax(0), torch.arange(basis.shape[1])])
    projected = projected * signs
    low, high = torch.quantile(projected, 0.01, dim=0), torch.quantile(projected, 0.99, dim=0)
    scaled = ((projected - low) / (high - low).clamp_min(1e-12)).clamp(0, 1)
    if scaled.shape[1] < 3:
        scaled = torch.cat([scaled, scaled.new_zeros(len(scaled), 3 - scaled.shape[1])], dim=1)
    out, start = [], 0
    for m in maps:
        n = m.shape[0] * m.shape[1]
        out.append(scaled[start:start + n].reshape(m.shape[0], m.shape[1], 3).float().numpy())
        start += n
    return out


def token_norms(features: torch.Tensor) -> torch.Tensor:
    """(h, w, C) -> (h, w) L2 norms."""
    return features.float().norm(dim=-1)


def norm_stats(norms: torch.Tensor, outlier_ratio: float) -> dict:
    """Median and max token norm, and the share of tokens above ``outlier_ratio`` x the median."""
    flat = norms.flatten().float()
    median = flat.median().item()
    return dict(median_norm=median, max_norm=flat.max().item(),
                outlier_fraction=(flat > outlier_ratio * median).float().mean().item())


def outlier_mask(norms: torch.Tensor, outlier_ratio: float) -> torch.Tensor:
    return norms > outlier_ratio * norms.flatten().median()


# ---- figures ----

def _plt():
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt


def _show_image(ax, image: torch.Tensor, title: str = ''):
    ax.imshow(image.permute(1, 2, 0).clamp(0, 255).byte().numpy())
    ax.set_title(title, fontsize=8)
    ax.axis('off')


def _save(fig, axes, title: str, path) -> List[List[str]]:
    """Write the figure; return its panel titles as rows x columns (what the tests read)."""
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    titles = [[ax.get_title() or ' '.join(t.get_text() for t in ax.texts) for ax in row] for row in axes]
    _plt().close(fig)
    return titles


def _panel_size(n_rows: int, n_cols: int) -> Tuple[float, float]:
    return 2.2 * n_cols, 2.2 * n_rows + 0.4


def plot_pca(image: torch.Tensor, rows: List[Tuple[str, List[Tuple[int, np.ndarray]]]], title: str,
             path) -> List[List[str]]:
    """Rows: (model, [(size, rgb map)]); columns: the input image, then each size."""
    plt = _plt()
    n_cols = 1 + max(len(maps) for _, maps in rows)
    fig, axes = plt.subplots(len(rows), n_cols, figsize=_panel_size(len(rows), n_cols), squeeze=False)
    for r, (model, maps) in enumerate(rows):
        _show_image(axes[r][0], image, f'{model}\ninput')
        for c, (size, rgb) in enumerate(maps, start=1):
            axes[r][c].imshow(rgb, interpolation='nearest')
            axes[r][c].set_title(f'{model}\n{size}px ({rgb.shape[0]}x{rgb.shape[1]} patches)', fontsize=8)
            axes[r][c].axis('off')
        for c in range(1 + len(maps), n_cols):
            axes[r][c].axis('off')
    return _save(fig, axes, title, path)


def plot_attention(rows: List[Tuple[str, int, torch.Tensor, torch.Tensor]], title: str, path) -> List[List[str]]:
    """Rows: (model, size, resized image, attention (1 + R, h, w)); columns: input, cls,
    register 0..R-1. A model without registers gets 'no registers' where they would be."""
    plt = _plt()
    max_regs = max(att.shape[0] - 1 for _, _, _, att in rows)
    n_cols = 2 + max_regs
    fig, axes = plt.subplots(len(rows), n_cols, figsize=_panel_size(len(rows), n_cols), squeeze=False)
    for r, (model, size, image, att) in enumerate(rows):
        _show_image(axes[r][0], image, f'{model}, {size}px')
        up = F.interpolate(att[None], size=image.shape[-2:], mode='bilinear', align_corners=False)[0]
        names = ['cls'] + [f'register {i}' for i in range(att.shape[0] - 1)]
        for c, (name, heat) in enumerate(zip(names, up), start=1):
            ax = axes[r][c]
            ax.imshow(image.permute(1, 2, 0).byte().numpy())
            ax.imshow(heat.numpy(), cmap='inferno', alpha=0.6)
            ax.set_title(f'{name} -> patches\n(sum {att[c - 1].sum():.2f})', fontsize=8)
            ax.axis('off')
        for c in range(1 + len(names), n_cols):
            axes[r][c].text(0.5, 0.5, 'no registers', ha='center', va='center', fontsize=9)
            axes[r][c].axis('off')
    return _save(fig, axes, title, path)


def plot_norms(rows: List[Tuple[str, List[Tuple[int, torch.Tensor]]]], outlier_ratio: float, title: str,
               path) -> List[List[str]]:
    """Per model two rows: the norm map at each size (outliers ringed) and its histogram."""
    plt = _plt()
    n_cols = max(len(maps) for _, maps in rows)
    fig, axes = plt.subplots(2 * len(rows), n_cols, figsize=_panel_size(2 * len(rows), n_cols), squeeze=False)
    for r, (model, maps) in enumerate(rows):
        for c, (size, norms) in enumerate(maps):
            ax = axes[2 * r][c]
            im = ax.imshow(norms.numpy(), cmap='viridis', interpolation='nearest')
            ys, xs = torch.nonzero(outlier_mask(norms, outlier_ratio), as_tuple=True)
            ax.scatter(xs.numpy(), ys.numpy(), s=30, facecolors='none', edgecolors='red', linewidths=1)
            ax.set_title(f'{model}, {size}px\ntoken norms', fontsize=8)
            ax.axis('off')
            fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
            hist = axes[2 * r + 1][c]
            hist.hist(norms.flatten().numpy(), bins=40, color='tab:blue')
            hist.axvline(outlier_ratio * norms.flatten().median().item(), color='red', linestyle='--', linewidth=1)
            hist.set_title(f'histogram (red: {outlier_ratio:g} x median)', fontsize=8)
            hist.tick_params(labelsize=6)
        for c in range(len(maps), n_cols):
            axes[2 * r][c].axis('off')
            axes[2 * r + 1][c].axis('off')
    return _save(fig, axes, title, path)


# ---- the whole tool ----

def collect_images(inputs: Sequence[str]) -> List[Path]:
    paths = []
    for item in inputs:
        p = Path(item)
        paths += sorted(q for q in p.iterdir() if q.suffix.lower() in IMAGE_EXTS) if p.is_dir() else [p]
    return paths


def check_taps(models: List[ModelEntry], taps: Sequence[int]) -> None:
    for m in models:
        depth = len(m.backbone.blocks)
        bad = [t for t in taps if not -depth <= t < depth]
        if bad:
            raise ValueError(f'--taps {bad} out of range for {m.name} ({depth} blocks: 0..{depth - 1} or -1..-{depth})')


@dataclass
class VisualizeResult:
    written: List[Path]
    skipped: List[Tuple[str, str]]        # (path, why)
    norm_rows: List[dict]                 # norms.csv
    notes: List[str]                      # e.g. a model without registers
    titles: Dict[str, List[List[str]]]    # figure file name -> panel titles, rows x columns


def _all_views(models: List[ModelEntry], image: torch.Tensor, sizes: Sequence[int], taps: Sequence[int],
               attention: bool):
    """Per model: (model, its tap indices, [(size, resized image, Views)])."""
    per_model = []
    for m in models:
        taps_abs = [t % len(m.backbone.blocks) for t in taps]
        results = []
        for size in sizes:
            resized = resize_short_side(image, size, m.backbone.patch_size)
            results.append((size, resized, backbone_views(m.backbone, resized, taps_abs, attention)))
        per_model.append((m, taps_abs, results))
    return per_model


def visualize(models: List[ModelEntry], images: Sequence[Path], sizes: Sequence[int], out, taps: Sequence[int] = (-1,),
              views: Sequence[str] = VIEWS, outlier_ratio: float = 3.0, progress: bool = True) -> VisualizeResult:
    """Write the figures and ``norms.csv`` into ``out``."""
    from tqdm import tqdm
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    check_taps(models, taps)
    validate_sizes(sizes, max(m.backbone.patch_size for m in models))
    if not images:
        raise ValueError('no images: the folders given hold no .jpg/.png/.bmp/.webp/.tif files')
    result = VisualizeResult([], [], [], [], {})
    result.notes = [f'{m.name}: no register tokens: attention shows the cls token only'
                    for m in models if m.backbone.num_registers == 0 and 'attention' in views]
    norm_samples: Dict[Tuple[str, int, int], List[torch.Tensor]] = {}

    def save(file: Path, titles: List[List[str]]):
        result.titles[file.name] = titles
        result.written.append(file)

    stems = set()
    for path in tqdm(images, unit='image', disable=not progress, dynamic_ncols=True):
        image = read_rgb(path)
        if image is None:
            result.skipped.append((str(path), 'not a readable image'))
            continue
        stem = path.stem if path.stem not in stems else f'{path.stem}_{len(stems)}'  # same name, two folders
        stems.add(stem)
        per_model = _all_views(models, image, sizes, taps, 'attention' in views)
        for t_pos, tap in enumerate(taps):
            if 'pca' in views:
                rows = [(m.name, list(zip(sizes, pca_rgb([v.taps[taps_abs[t_pos]] for _, _, v in results]))))
                        for m, taps_abs, results in per_model]
                file = out / f'pca_{stem}_tap{tap}.png'
                save(file, plot_pca(image, rows, f'{path.name}: PCA of tap {tap} (3 components fitted over all '
                                                 f'sizes, per model)', file))
            if 'norms' in views:
                rows = [(m.name, [(size, token_norms(v.taps[taps_abs[t_pos]])) for size, _, v in results])
                        for m, taps_abs, results in per_model]
                for name, maps in rows:
                    for size, norms in maps:
                        norm_samples.setdefault((name, size, tap), []).append(norms.flatten())
                file = out / f'norms_{stem}_tap{tap}.png'
                save(file, plot_norms(rows, outlier_ratio, f'{path.name}: patch token norms at tap {tap}', file))
        if 'attention' in views:
            rows = [(m.name, size, resized, v.attention) for m, _, results in per_model
                    for size, resized, v in results]
            file = out / f'attention_{stem}.png'
            save(file, plot_attention(rows, f'{path.name}: last block attention to the patches (mean over heads)',
                                      file))
    for (name, size, tap), samples in norm_samples.items():
        stats = norm_stats(torch.cat(samples), outlier_ratio)
        result.norm_rows.append(dict(model=name, size=size, tap=tap, **{k: round(v, 5) for k, v in stats.items()}))
    if result.norm_rows:
        write_csv(out / 'norms.csv', NORM_FIELDS, result.norm_rows)
        result.written.append(out / 'norms.csv')
    if not result.written and result.skipped:
        raise ValueError('no readable image among the inputs: ' + ', '.join(p for p, _ in result.skipped))
    return result


def grid_shape(image_shape: Tuple[int, int], size: int, patch_size: int = 16) -> Tuple[int, int]:
    """The patch grid of an image resized to short side ``size`` (the patch embedding pads)."""
    h, w = _short_side_shape(*image_shape, size)
    return math.ceil(h / patch_size), math.ceil(w / patch_size)


def main(argv=None):
    import argparse
    parser = argparse.ArgumentParser(
        description='PCA maps of patch features, cls/register attention and token-norm maps of one or more '
                    'backbones at several input sizes, side by side.',
        epilog='MODEL is CONFIG:CHECKPOINT (a segmentor config and checkpoint: its backbone is used) or '
               'ARCH:WEIGHTS (a preset such as vit5-base or deit3-base and a backbone checkpoint: the authors\' '
               'file, a DeiT-III, a converted file; a path or an http(s) URL).')
    parser.add_argument('models', nargs='+', metavar='MODEL', help='CONFIG:CHECKPOINT or ARCH:WEIGHTS')
    parser.add_argument('--images', nargs='+', required=True, help='image files or folders')
    parser.add_argument('--sizes', type=int, nargs='+', required=True,
                        help='short sides in pixels (aspect kept), e.g. 224 512 1024')
    parser.add_argument('--out', required=True, help='folder for the PNGs and norms.csv')
    parser.add_argument('--taps', type=int, nargs='+', default=[-1],
                        help='blocks whose output is shown by the PCA and norm views (default: -1, the last)')
    parser.add_argument('--views', nargs='+', choices=VIEWS, default=list(VIEWS), help='which views (default: all)')
    parser.add_argument('--names', nargs='+', help='a label per MODEL (default: its config\'s file name without .py, or ARCH)')
    parser.add_argument('--outlier-ratio', type=float, default=3.0,
                        help='a token is an outlier above this times the median norm (default 3)')
    parser.add_argument('--device', help='cuda:0, cpu, ... (default: first GPU if any)')
    parser.add_argument('--allow-unsafe', action='store_true', help='allow full unpickling of trusted checkpoints')
    parser.add_argument('--no-progress', action='store_true', help='no progress bar')
    args = parser.parse_args(argv)
    if args.names and len(args.names) != len(args.models):
        parser.error(f'--names has {len(args.names)} labels for {len(args.models)} models')
    if args.outlier_ratio <= 1:
        parser.error(f'--outlier-ratio must be above 1, got {args.outlier_ratio}')
    try:
        validate_sizes(args.sizes)  # before any weights are loaded
        models = [load_model(spec, args.device, args.allow_unsafe, name)
                  for spec, name in zip(args.models, args.names or [None] * len(args.models))]
        result = visualize(models, collect_images(args.images), args.sizes, args.out, args.taps, args.views,
                           args.outlier_ratio, progress=not args.no_progress)
    except ValueError as e:
        parser.exit(1, f'error: {e}\n')
    for path, why in result.skipped:
        print(f'skipped {path}: {why}')
    for note in result.notes:
        print(note)
    for r in result.norm_rows:
        print(f"{r['model']}  {r['size']:>5}px  tap {r['tap']:>3}  median norm {r['median_norm']:.3f}  "
              f"max {r['max_norm']:.3f}  outliers {100 * r['outlier_fraction']:.2f}%")
    print(f'wrote {len(result.written)} files to {args.out}')
    return result
