"""Segment images, folders, globs and videos; write label maps and colour overlays
(``tools/infer.py``)."""
import argparse
import glob
import os.path as osp
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

import cv2
import numpy as np
from tqdm import tqdm

from .. import paths
from ..errors import ToolError
from ..hf_hub import is_hub_id
from ..utils.config_kinds import is_all_tasks_config, is_detection_config, photo_pipeline, task_of
from ..utils.image import IMAGE_EXTS, draw_legend, overlay, save_label_png

VIDEO_EXTS = ('.mp4', '.avi', '.mov', '.mkv', '.webm')


@dataclass
class Source:
    """One input: an image file, or a video whose frames are read one by one."""
    path: Path
    is_video: bool = False


@dataclass
class InferenceReport:
    done: int = 0
    skipped: List[Tuple[str, str]] = field(default_factory=list)
    written: str = ''   # what a video run wrote besides, in words

    def line(self) -> str:
        return f'summary: {self.done} done, {len(self.skipped)} skipped'


def collect_sources(inputs: List[str]) -> Tuple[List[Source], List[Tuple[str, str]]]:
    """Expand each input (image, folder, glob, video); inputs that match nothing are returned as skipped."""
    sources, missing = [], []
    for item in inputs:
        if any(c in item for c in '*?['):
            paths = sorted(Path(p) for p in glob.glob(item, recursive=True))
            found = [p for p in paths if p.suffix.lower() in IMAGE_EXTS + VIDEO_EXTS]
        elif osp.isdir(item):
            found = sorted(p for p in Path(item).iterdir() if p.suffix.lower() in IMAGE_EXTS + VIDEO_EXTS)
        elif osp.isfile(item):
            found = [Path(item)]
        else:
            missing.append((item, 'no such file or folder'))
            continue
        if not found:
            missing.append((item, 'matches no image or video'))
        sources += [Source(p, p.suffix.lower() in VIDEO_EXTS) for p in found]
    return sources, missing


def count_frames(sources: List[Source]) -> int:
    total = 0
    for src in sources:
        if src.is_video:
            cap = cv2.VideoCapture(str(src.path))
            total += max(int(cap.get(cv2.CAP_PROP_FRAME_COUNT)), 0)
            cap.release()
        else:
            total += 1
    return total


def iter_frames(sources: List[Source], summary: InferenceReport) -> Iterator[Tuple[str, np.ndarray]]:
    """(output name, BGR image) for every readable image and video frame."""
    used = set()
    for src in sources:
        stem = src.path.stem
        while stem in used:  # same file name in two folders
            stem = f'{stem}_{len(used)}'
        used.add(stem)
        if not src.is_video:
            img = cv2.imread(str(src.path), cv2.IMREAD_COLOR)  # grey and RGBA become 3-channel BGR
            if img is None:
                summary.skipped.append((str(src.path), 'unreadable or corrupt image'))
                continue
            yield stem, img
            continue
        cap = cv2.VideoCapture(str(src.path))
        if not cap.isOpened():
            summary.skipped.append((str(src.path), 'unreadable video'))
            continue
        index = 0
        while True:
            ok, frame = cap.read()
            if not ok:
                break
            yield f'{stem}_{index:06d}', frame
            index += 1
        cap.release()
        if index == 0:
            summary.skipped.append((str(src.path), 'video without readable frames'))


def inference_test_cfg(mode: str, crop: Optional[Tuple[int, int]] = None, stride: Optional[Tuple[int, int]] = None):
    """A segmentor's ``test_cfg``: whole image, or sliding windows of ``crop`` (default 512x512)
    every ``stride`` (default 2/3 of the crop)."""
    from mmengine.config import ConfigDict
    if mode == 'slide':
        crop = crop or (512, 512)
        return ConfigDict(mode='slide', crop_size=tuple(crop),
                          stride=tuple(stride or (crop[0] * 2 // 3, crop[1] * 2 // 3)))
    return ConfigDict(mode='whole')


def configure_model(model, mode: str, crop: Optional[Tuple[int, int]], stride: Optional[Tuple[int, int]],
                    scale: Optional[Tuple[int, int]]):
    """Whole-image or sliding-window inference and the test-time resize (a panoptic or instance
    model: its own input size; its test pipeline holds no annotation loading already)."""
    if is_detection_config(model.cfg):
        if mode != 'whole' or crop or stride or scale:
            raise ValueError('--mode, --crop, --stride and --scale are for semantic models: a panoptic or instance '
                             'model sees its own input size (its config\'s Resize and pad_size)')
        return model
    model.test_cfg = inference_test_cfg(mode, crop, stride)
    if scale is not None:
        for step in model.cfg.test_pipeline:
            if step['type'] == 'Resize':
                step['scale'] = tuple(scale)
    model.cfg.test_pipeline = photo_pipeline(model.cfg.test_pipeline)
    return model


def _infer_batches(model, inputs: List[str], batch_size: int, progress: bool, handle) -> InferenceReport:
    """Every readable image and video frame of ``inputs`` through the model in batches;
    ``handle(name, image, result)`` writes each result."""
    from .inference import inference_model
    summary = InferenceReport()
    sources, missing = collect_sources(inputs)
    summary.skipped += missing
    bar = tqdm(total=count_frames(sources), unit='img', disable=not progress, dynamic_ncols=True)
    batch = []

    def flush():
        results = inference_model(model, [img for _, img in batch])
        for (name, img), result in zip(batch, results if isinstance(results, list) else [results]):
            handle(name, img, result)
            summary.done += 1
        bar.update(len(batch))
        batch.clear()

    for name, img in iter_frames(sources, summary):
        batch.append((name, img))
        if len(batch) == batch_size:
            flush()
    if batch:
        flush()
    bar.close()
    return summary


def run_inference(model, inputs: List[str], out_dir, batch_size: int = 1, opacity: float = 0.5,
                  side_by_side: bool = False, legend: bool = False, progress: bool = True) -> InferenceReport:
    """Label maps and overlays of a semantic model; a panoptic or instance model's files
    (apis/infer_det.py)."""
    from mmseg.datasets import ADE20KDataset

    out_dir = Path(out_dir)
    (out_dir / 'overlays').mkdir(parents=True, exist_ok=True)

    def save_overlay(name, img, view, label=None):
        """The overlay beside the input (``side_by_side``), the legend under both (``legend``)."""
        if side_by_side:
            view = np.concatenate([img, view], axis=1)
        if label is not None:
            view = draw_legend(view, label, classes, palette)
        cv2.imwrite(str(out_dir / 'overlays' / f'{name}.jpg'), view)

    if is_detection_config(model.cfg):
        from .infer_det import DetectionWriter
        writer = DetectionWriter(out_dir, model.dataset_meta, opacity)
        summary = _infer_batches(model, inputs, batch_size, progress,
                                 lambda name, img, result: save_overlay(name, img, writer.add(name, img, result)))
        writer.close()
        return summary
    (out_dir / 'masks').mkdir(parents=True, exist_ok=True)
    meta = getattr(model, 'dataset_meta', None) or ADE20KDataset.METAINFO
    classes, palette = meta['classes'], np.asarray(meta['palette'], np.uint8)

    def handle(name, img, result):
        label = result.pred_sem_seg.data[0].cpu().numpy().astype(np.uint8)
        save_label_png(out_dir / 'masks' / f'{name}.png', label, palette)
        save_overlay(name, img, overlay(img, label, palette, opacity), label if legend else None)

    return _infer_batches(model, inputs, batch_size, progress, handle)


def run_all_tasks_inference(model, inputs: List[str], out_dir, opacity: float = 0.5,
                            progress: bool = True) -> InferenceReport:
    """Every task of an all-tasks model (:mod:`.all_tasks`) per image, one encoder pass each: a semantic task's
    ``OUT/<task>/masks`` and ``overlays``, a panoptic or instance task's files as its own model writes them
    (``OUT/<task>/``, apis/infer_det.py)."""
    from .infer_det import DetectionWriter
    out_dir = Path(out_dir)
    writers, summary = {}, InferenceReport()
    for task, single in model.models.items():
        (out_dir / task / 'overlays').mkdir(parents=True, exist_ok=True)
        if is_detection_config(single.cfg):
            writers[task] = DetectionWriter(out_dir / task, single.dataset_meta, opacity)
        else:
            (out_dir / task / 'masks').mkdir(parents=True, exist_ok=True)
    sources, missing = collect_sources(inputs)
    summary.skipped += missing
    bar = tqdm(total=count_frames(sources), unit='img', disable=not progress, dynamic_ncols=True)
    for name, img in iter_frames(sources, summary):
        for task, result in model.predict(img).items():
            if task in writers:
                view = writers[task].add(name, img, result)
            else:
                palette = np.asarray(model.models[task].dataset_meta['palette'], np.uint8)
                label = result.pred_sem_seg.data[0].cpu().numpy().astype(np.uint8)
                save_label_png(out_dir / task / 'masks' / f'{name}.png', label, palette)
                view = overlay(img, label, palette, opacity)
            cv2.imwrite(str(out_dir / task / 'overlays' / f'{name}.jpg'), view)
        summary.done += 1
        bar.update(1)
    bar.close()
    for writer in writers.values():
        writer.close()
    return summary


def _photo_flags_given(args) -> List[str]:
    """The flags given that only a single-image model's inference takes (sliding windows, the resize, batches,
    autocast, the overlay's layout)."""
    return [flag for flag, value in (('--mode slide', args.mode == 'slide'), ('--crop', args.crop),
                                     ('--stride', args.stride), ('--scale', args.scale), ('--amp', args.amp),
                                     ('--batch-size', args.batch_size != 1), ('--side-by-side', args.side_by_side),
                                     ('--legend', args.legend)) if value]


def _all_tasks_main(args, parser):
    """tools/infer.py with an all-tasks config: CHECKPOINT is the folder of its tasks' checkpoints."""
    from .all_tasks import init_all_tasks
    given = ['--sha256'] * bool(args.sha256) + _photo_flags_given(args)
    if given:
        parser.error(f'{args.config} is an all-tasks config (one encoder pass, every head on the input task\'s '
                     f'input): {", ".join(given)} cannot apply to it')
    model = init_all_tasks(args.config, args.checkpoint, device=args.device)
    summary = run_all_tasks_inference(model, args.inputs, args.out_dir, args.opacity, progress=not args.no_progress)
    for path, why in summary.skipped:
        print(f'skipped {path}: {why}')
    print(f'{summary.line()} -> {args.out_dir} ({", ".join(model.models)}: one encoder pass per image)')
    return summary


def _video_main(args, parser):
    """tools/infer.py with a video config: each video streamed through the model (apis/infer_video.py)."""
    from .inference import init_model
    from .infer_video import run_video_inference
    given = _photo_flags_given(args)
    if given:
        parser.error(f'{args.config} is a video config (one frame a call, its own input size): '
                     f'{", ".join(given)} cannot apply to it')
    model = init_model(args.config, args.checkpoint, device=args.device, sha256=args.sha256)
    sources, missing = collect_sources(args.inputs)
    summary = InferenceReport(skipped=missing)
    try:
        run_video_inference(model, sources, args.out_dir, args.opacity, summary, progress=not args.no_progress)
    except (ValueError, OSError) as e:
        parser.exit(1, f'error: {e}\n')
    for path, why in summary.skipped:
        print(f'skipped {path}: {why}')
    print(f'{summary.line()} -> {args.out_dir} ({summary.written})')
    return summary


def release_config(src: str) -> str:
    """The shipped config the release (or transformers' EoMT) at Hub id ``src`` fits: its converted meta's,
    read through mmengine's loader (which converts it once, vit5seg.engine.checkpoint_io)."""
    from mmengine.runner.checkpoint import CheckpointLoader
    meta = CheckpointLoader.load_checkpoint(src, map_location='cpu').get('meta') or {}
    config = (meta.get('release') or {}).get('config')
    if config and paths.config_path(config.removeprefix('configs/')).is_file():
        return str(paths.config_path(config.removeprefix('configs/')))
    what = (f'its release fits {config}, which this project does not ship' if config else
            'it is no release of the tables (a backbone, or a model trained here), or of no known kind')
    raise ToolError(f'{src}: {what}; give a config first: tools/infer.py CONFIG {src} IMAGES')


def main(argv=None):
    from ..utils.amp import add_amp_arguments
    parser = argparse.ArgumentParser(description='Segment images, folders, globs or videos with a trained config.')
    parser.add_argument('config', help='config file; or, alone, a Hugging Face Hub id of a release '
                                       '(hf://OWNER/NAME[@REVISION][/FILE]), whose config the release table gives')
    parser.add_argument('checkpoint', help='checkpoint file, http(s) URL (downloaded once into the torch hub cache) or '
                                           'Hub id (hf://..., through the Hugging Face cache; a release or '
                                           'transformers\' EoMT is converted once); for an all-tasks config '
                                           '(configs/pmt/*_all-tasks.py), the folder of its tasks\' checkpoints')
    parser.add_argument('--sha256', help='expected sha256 of the checkpoint (or a prefix of 8+ hex digits)')
    parser.add_argument('inputs', nargs='*', help='images, folders, glob patterns (quoted) or videos')
    parser.add_argument('--out-dir', required=True,
                        help='writes OUT_DIR/masks/<name>.png and OUT_DIR/overlays/<name>.jpg; for a panoptic model '
                             'OUT_DIR/panoptic/<name>.png and panoptic.json (COCO\'s panoptic format), for an '
                             'instance model instances.json (COCO\'s results format); for a video model '
                             'OUT_DIR/videos/<name>.mp4, results.json (YouTube-VIS\'s results format) and videos.json')
    parser.add_argument('--device', default=None, help='e.g. cuda:0 or cpu (default: cuda:0 if available)')
    parser.add_argument('--batch-size', type=int, default=1, help='images per forward pass')
    parser.add_argument('--mode', choices=['whole', 'slide'], default='whole', help='whole image or sliding window')
    parser.add_argument('--crop', type=int, nargs=2, metavar=('H', 'W'), help='sliding-window crop (default 512 512)')
    parser.add_argument('--stride', type=int, nargs=2, metavar=('H', 'W'), help='sliding-window stride (default 2/3 crop)')
    parser.add_argument('--scale', type=int, nargs=2, metavar=('LONG', 'SHORT'),
                        help="test-time resize, as the config's Resize scale (e.g. 2048 512)")
    parser.add_argument('--opacity', type=float, default=0.5, help='overlay opacity in [0, 1] (default 0.5)')
    parser.add_argument('--side-by-side', action='store_true', help='input and overlay next to each other')
    parser.add_argument('--legend', action='store_true', help='add a legend of the classes present')
    parser.add_argument('--no-progress', action='store_true', help='no progress bar')
    add_amp_arguments(parser)
    args = parser.parse_args(argv)
    if is_hub_id(args.config):   # `infer.py hf://ID photo.jpg`: the release's own config
        args.inputs, args.checkpoint = [args.checkpoint, *args.inputs], args.config
        try:
            args.config = release_config(args.checkpoint)
        except (ToolError, OSError) as e:
            parser.exit(1, f'error: {e}\n')
    if not args.inputs:
        parser.error('give at least one image, folder, glob or video')
    if not 0 <= args.opacity <= 1:
        parser.error(f'--opacity must be in [0, 1], got {args.opacity}')
    if args.batch_size < 1:
        parser.error(f'--batch-size must be >= 1, got {args.batch_size}')
    from mmengine.config import Config

    cfg = Config.fromfile(args.config)
    if is_all_tasks_config(cfg):
        return _all_tasks_main(args, parser)
    if task_of(cfg) == 'video-instance':
        return _video_main(args, parser)
    from .inference import init_model
    model = init_model(args.config, args.checkpoint, device=args.device, sha256=args.sha256,
                       amp=args.amp_dtype if args.amp else None)
    try:
        model = configure_model(model, args.mode, args.crop, args.stride, args.scale)
    except ValueError as e:
        parser.error(str(e))
    summary = run_inference(model, args.inputs, args.out_dir, args.batch_size, args.opacity, args.side_by_side,
                            args.legend, progress=not args.no_progress)
    for path, why in summary.skipped:
        print(f'skipped {path}: {why}')
    print(f'{summary.line()} -> {args.out_dir}')
    return summary
