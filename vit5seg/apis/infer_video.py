"""What ``tools/infer.py`` does with a video config (:class:`VideoMaskClassifier`): each video streamed
through mmdet's ``inference_mot``, one frame a call, so memory stays flat whatever its length.

The instance task writes ``videos/<name>.mp4``, the video with each identity's mask drawn in a colour of its
own on every frame where it is kept (mmdet's ``'random'`` palette indexed by the identity, as its tracking
visualizer colours ids); ``results.json`` in YouTube-VIS's results format (one entry per identity:
``video_id``, ``category_id`` = class + 1, ``score``, one RLE or null per frame); ``videos.json``,
YouTube-VIS's ``videos`` (id, file name, frames, size). An identity's score is its (query, class)
pair's probability over the whole video (the mean class logits of all its frames, VidEoMT's clip
score); its mask is null on the frames where the pair was not among the frame's kept ones.

The semantic task writes ``videos/<name>.mp4`` with each pixel in its class's colour (the dataset's
palette) and ``vss/<name>/<frame>.png``, each frame's class ids as a palette PNG: VSPW's prediction format
(VidEoMT's ``videomt/data_video/vss_eval.py``), which its ``utils/eval_*_vspw.py`` read. The panoptic task
keeps a segment by its areas over the whole clip, so it is scored on whole clips (``tools/test.py``) and
refused here.
"""
import json
from pathlib import Path
from typing import List

import cv2
import numpy as np
from tqdm import tqdm

from ..utils.image import mask_rle, overlay, save_label_png
from .infer_det import _draw


def identity_colours(count: int) -> np.ndarray:
    """(count, 3) BGR colours, one per identity: mmdet's seeded random palette."""
    from mmdet.visualization.palette import get_palette
    return np.asarray(get_palette('random', count), np.uint8)


class _OverlayVideo:
    """``videos/<name>.mp4`` under ``out_dir``, one video at a time (:meth:`start`, frames, :meth:`end` or
    :meth:`abandon`, which leaves no half-written file)."""

    def __init__(self, out_dir, meta: dict, opacity: float = 0.5):
        self.out_dir, self.meta, self.opacity = Path(out_dir), meta, opacity
        (self.out_dir / 'videos').mkdir(parents=True, exist_ok=True)

    def start(self, name: str, fps: float, size) -> None:
        h, w = size
        self.name, self.size, self.frames = name, (h, w), 0
        self.path = path = self.out_dir / 'videos' / f'{name}.mp4'
        self.video = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*'mp4v'), fps, (w, h))
        if not self.video.isOpened():
            raise OSError(f'{path}: OpenCV cannot write an mp4 video here (no mp4v encoder)')

    def abandon(self) -> None:
        self.video.release()
        self.path.unlink(missing_ok=True)


class SemanticVideoWriter(_OverlayVideo):
    """The semantic task's files (module docstring)."""
    written = 'videos/, vss/ in VSPW\'s prediction format'

    def __init__(self, out_dir, meta: dict, opacity: float = 0.5):
        super().__init__(out_dir, meta, opacity)
        from mmdet.visualization.palette import get_palette
        # the dataset's colours; a checkpoint that names only its classes gets mmdet's seeded random palette
        self.palette = np.asarray(meta.get('palette') or get_palette('random', len(meta['classes'])), np.uint8)

    def add(self, img: np.ndarray, sample) -> None:
        label = sample.pred_sem_seg.sem_seg[0].cpu().numpy()
        folder = self.out_dir / 'vss' / self.name
        folder.mkdir(parents=True, exist_ok=True)
        save_label_png(folder / f'{self.frames:08d}.png', label, self.palette)
        self.video.write(overlay(img, label, self.palette, self.opacity))
        self.frames += 1

    def end(self, model) -> None:
        self.video.release()

    def close(self) -> None:
        pass


class VideoResultWriter(_OverlayVideo):
    """The instance task's files (module docstring): :meth:`add` draws and writes a frame's identities, :meth:`end`
    keeps the video's entries for ``results.json``; :meth:`close` writes the JSON files."""
    written = 'videos/, results.json in YouTube-VIS\'s format, videos.json'

    def __init__(self, out_dir, meta: dict, num_identities: int, opacity: float = 0.5):
        super().__init__(out_dir, meta, opacity)
        self.colours = identity_colours(num_identities)
        self.results, self.videos = [], []

    def start(self, name: str, fps: float, size) -> None:
        super().start(name, fps, size)
        self.tracks = {}

    def add(self, img: np.ndarray, sample) -> None:
        instances = sample.pred_track_instances
        view = img.copy()
        classes = self.meta['classes']
        for i in instances.scores.argsort().tolist():   # the most likely drawn last, on top
            identity, mask = int(instances.instances_id[i]), instances.masks[i].cpu().numpy().astype(bool)
            track = self.tracks.setdefault(identity, dict(label=int(instances.labels[i]), masks={}))
            track['masks'][self.frames] = mask_rle(mask)
            if mask.any():
                colour = tuple(int(c) for c in self.colours[identity])
                _draw(view, mask, colour, f'{identity} {classes[track["label"]]}', self.opacity)
        self.video.write(view)
        self.frames += 1

    def end(self, model) -> None:
        """The video is over: each (query, class) pair's probability over all its frames (Q, K) scores it."""
        self.video.release()
        scores = model.stream_scores()
        video_id = len(self.videos) + 1
        h, w = self.size
        self.videos.append(dict(id=video_id, file_name=self.name, length=self.frames, height=h, width=w))
        K = scores.shape[1]
        for identity, track in sorted(self.tracks.items()):
            self.results.append(dict(video_id=video_id, category_id=track['label'] + 1,
                                     score=float(scores[identity // K, identity % K]),
                                     segmentations=[track['masks'].get(t) for t in range(self.frames)]))

    def close(self) -> None:
        (self.out_dir / 'results.json').write_text(json.dumps(self.results))
        (self.out_dir / 'videos.json').write_text(json.dumps(self.videos))


def run_video_inference(model, sources: List, out_dir, opacity: float, summary, progress: bool = True):
    """Each video of ``sources`` (infer.Source) streamed through the model (module docstring); an image is
    skipped with its reason in ``summary``."""
    from mmdet.apis import inference_mot
    from mmengine.registry import DefaultScope
    task = model.test_cfg['task']
    if task == 'panoptic':
        raise ValueError('the panoptic video task keeps a segment by its areas over the whole clip (VidEoMT\'s '
                         'inference_video_vps), so it does not stream one frame a call: score whole clips with '
                         'tools/test.py')
    if task == 'semantic':
        writer = SemanticVideoWriter(out_dir, model.dataset_meta, opacity)
    else:
        writer = VideoResultWriter(out_dir, model.dataset_meta, model.decode_head.num_queries * model.num_classes,
                                   opacity)
    for src in sources:
        if not src.is_video:
            summary.skipped.append((str(src.path), 'a video model takes videos, not images'))
            continue
        cap = cv2.VideoCapture(str(src.path))
        count = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
        ok, frame = cap.read()
        if not cap.isOpened() or not ok:
            cap.release()
            summary.skipped.append((str(src.path), 'unreadable video'))
            continue
        writer.start(src.path.stem, cap.get(cv2.CAP_PROP_FPS) or 25.0, frame.shape[:2])
        bar = tqdm(total=count, unit='frame', disable=not progress, dynamic_ncols=True, desc=src.path.name)
        t = 0
        try:
            with DefaultScope.overwrite_default_scope('mmdet'):
                while ok:
                    if frame.shape[:2] != writer.size:
                        raise ValueError(f'{src.path}: frame {t} is {frame.shape[1]}x{frame.shape[0]}, the frames '
                                         f'before it {writer.size[1]}x{writer.size[0]}: a video keeps one size')
                    # ori_video_length > 1 says "one frame a call" to the model, whatever the container counts
                    result = inference_mot(model, frame, t, max(count, t + 2))
                    writer.add(frame, result.video_data_samples[0])
                    t += 1
                    bar.update(1)
                    ok, frame = cap.read()
        except BaseException:
            writer.abandon()   # no half-written video left behind
            raise
        finally:
            cap.release()
            bar.close()
        writer.end(model)
        summary.done += 1
    writer.close()
    summary.written = writer.written
    return summary
