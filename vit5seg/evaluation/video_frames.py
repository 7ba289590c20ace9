"""What the video metrics share: each video's frames fed in order to a per-video accumulator, whether
the model hands over a whole clip (``tools/test.py`` on a video dataset) or one frame a call (mmdet's
``inference_mot`` and the streaming test mode), so that a metric holds a few frames at a time, not the
video.

mmdet's ``BaseVideoMetric.process`` routes a call whose samples are the whole video to
``process_video`` and any other to ``process_image``; both end here, and a video's statistics join
``self.results`` (gathered across ranks by mmdet) when its last frame is in.
"""
from typing import Callable, Dict

import numpy as np
from mmdet.evaluation.metrics.base_video_metric import BaseVideoMetric


class VideoMetricError(ValueError):
    """A prediction or a label a video metric cannot score (one line: the video, the frame, the value)."""


def pixel_map(frame, field: str) -> np.ndarray:
    """``frame.<field>.sem_seg`` (a DetDataSample's PixelData) as an (H, W) int64 array."""
    data = getattr(frame, field, None)
    if data is None or 'sem_seg' not in data:
        raise VideoMetricError(f'video {frame.video_id} frame {frame.frame_id}: the sample has no {field}.sem_seg')
    values = data.sem_seg
    values = values.cpu().numpy() if hasattr(values, 'cpu') else np.asarray(values)
    return values.reshape(values.shape[-2:]).astype(np.int64)


class FrameByFrameMetric(BaseVideoMetric):
    """A video metric fed one frame at a time: ``new_video()`` gives an accumulator with
    ``add(frame)`` and ``finish()`` (the video's statistics, which ``compute_metrics`` receives)."""

    new_video: Callable

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._open: Dict = {}   # video id -> (accumulator, frames seen, its length)

    def process_video(self, data_samples) -> None:
        for frame in data_samples:
            self._add(frame, len(data_samples))

    def process_image(self, data_samples, ori_video_len: int) -> None:
        for frame in data_samples:
            self._add(frame, ori_video_len)

    def _add(self, frame, video_length: int) -> None:
        video = frame.video_id
        if video not in self._open:
            if frame.frame_id != 0:
                raise VideoMetricError(f'video {video}: its first frame in is frame {frame.frame_id}, not 0')
            self._open[video] = [self.new_video(), 0, video_length]
        entry = self._open[video]
        if frame.frame_id != entry[1]:
            raise VideoMetricError(f'video {video}: frame {frame.frame_id} came after frame {entry[1] - 1}; '
                                   'a video metric reads the frames in order')
        entry[0].add(frame)
        entry[1] += 1
        if entry[1] == entry[2]:
            self.results.append(entry[0].finish())
            del self._open[video]

    def evaluate(self, size: int = 1) -> dict:
        if self._open:
            unfinished = ', '.join(f'{v} ({n} of {length} frames)' for v, (_, n, length) in self._open.items())
            self._open.clear()
            raise VideoMetricError(f'{type(self).__name__}: videos ended before their last frame: {unfinished}')
        return super().evaluate(size)
