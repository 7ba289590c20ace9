"""Video semantic segmentation scored as VSPW's benchmark and VidEoMT score it: mIoU and video
consistency (VC8, VC16), in percent.

Each frame carries ``gt_sem_seg`` and ``pred_sem_seg`` (labels 0..K-1; ``ignore_index`` where a pixel
has no label: VSPW's 0 and 255, which mmseg's ``reduce_zero_label`` makes 255). The rules are those of
tue-mps/videomt ``utils/eval_miou_vspw.py`` and ``utils/eval_vc_vspw.py`` (DVIS++'s), which gave the
published figures:

- mIoU: one confusion matrix over every labelled pixel of every frame; a class's IoU counts only where
  the class has ground-truth pixels (a class only predicted adds nothing, unlike mmseg's ``IoUMetric``).
- VC_n: for each window of n frames, the share of the pixels whose label stays the same over the window
  whose prediction stays the same too (whether or not it is right); windows start at frames 0..T-n-1
  (``range(len - clip_num)``: the window that ends on the last frame is not one), a video of n frames or
  fewer has none, and VC_n is the mean over every window of every video. VidEoMT's script does not reset
  its list between 8 and 16 (``total_acc``), so the VC16 it prints pools VC8's windows with VC16's; here
  VC16 is VC16's windows alone (VC8 is the same in both).
"""
from collections import deque

import numpy as np
from mmdet.registry import METRICS

from .video_frames import FrameByFrameMetric, VideoMetricError, pixel_map


class _VideoSemanticStats:
    def __init__(self, num_classes: int, ignore_index: int, lengths):
        self.num_classes, self.ignore_index, self.lengths = num_classes, ignore_index, tuple(lengths)
        self.confusion = np.zeros((num_classes, num_classes), np.int64)
        self.window_scores = {n: [] for n in self.lengths}
        self._recent = deque(maxlen=max(self.lengths) + 1)

    def add(self, frame) -> None:
        gt, pred = pixel_map(frame, 'gt_sem_seg'), pixel_map(frame, 'pred_sem_seg')
        where = f'video {frame.video_id} frame {frame.frame_id}'
        if gt.shape != pred.shape:
            raise VideoMetricError(f'{where}: prediction {pred.shape} and label {gt.shape} differ in size')
        if self._recent and self._recent[-1][0].shape != gt.shape:
            raise VideoMetricError(f'{where}: size {gt.shape}, the frame before {self._recent[-1][0].shape}')
        bad_gt = (gt != self.ignore_index) & ((gt < 0) | (gt >= self.num_classes))
        if bad_gt.any():
            raise VideoMetricError(f'{where}: label {int(gt[bad_gt][0])} is neither a class (0..'
                                   f'{self.num_classes - 1}) nor ignore_index {self.ignore_index}')
        bad_pred = (pred < 0) | (pred >= self.num_classes)
        if bad_pred.any():
            raise VideoMetricError(f'{where}: predicted {int(pred[bad_pred][0])}, '
                                   f'not a class (0..{self.num_classes - 1})')
        labelled = gt != self.ignore_index
        self.confusion += np.bincount(gt[labelled] * self.num_classes + pred[labelled],
                                      minlength=self.num_classes ** 2).reshape(self.num_classes, self.num_classes)
        self._recent.append((gt, pred))
        # a window of n frames counts once a frame follows it: this frame ends the ones that start n frames back
        for n in self.lengths:
            if len(self._recent) > n:
                window = list(self._recent)[-n - 1:-1]
                self.window_scores[n].append(_consistency(window))

    def finish(self):
        return self.confusion, self.window_scores


def _consistency(window) -> float:
    (gt0, pred0), rest = window[0], window[1:]
    gt_same = np.logical_and.reduce([gt == gt0 for gt, _ in rest])
    pred_same = np.logical_and.reduce([pred == pred0 for _, pred in rest])
    kept = gt_same.sum()
    return float((gt_same & pred_same).sum() / kept) if kept else float('nan')


@METRICS.register_module()
class VideoSemanticMetric(FrameByFrameMetric):
    """mIoU and VC_n (``vc_lengths``, VSPW's 8 and 16) of video semantic segmentation, in percent.

    Args:
        ignore_index: the label of unlabelled pixels (255, as mmseg's).
        vc_lengths: the window lengths of video consistency.
    """
    default_prefix = 'vss'

    def __init__(self, ignore_index: int = 255, vc_lengths=(8, 16), **kwargs):
        super().__init__(**kwargs)
        if not vc_lengths or any(int(n) != n or n < 2 for n in vc_lengths):
            raise ValueError(f'vc_lengths={vc_lengths!r}: each window is a whole number of frames, at least 2')
        self.ignore_index, self.vc_lengths = ignore_index, tuple(int(n) for n in vc_lengths)

    def new_video(self):
        if not self.dataset_meta or 'classes' not in self.dataset_meta:
            raise VideoMetricError('VideoSemanticMetric: its dataset_meta names no classes')
        return _VideoSemanticStats(len(self.dataset_meta['classes']), self.ignore_index, self.vc_lengths)

    def compute_metrics(self, results) -> dict:
        confusion = sum(c for c, _ in results)
        hit, gt_pixels = np.diag(confusion), confusion.sum(1)
        present = gt_pixels > 0
        union = gt_pixels + confusion.sum(0) - hit
        metrics = {'mIoU': 100 * float((hit[present] / union[present]).mean()) if present.any() else float('nan')}
        for n in self.vc_lengths:
            scores = np.array([s for _, windows in results for s in windows[n]])
            kept = scores[~np.isnan(scores)]
            metrics[f'VC{n}'] = 100 * float(kept.mean()) if kept.size else float('nan')
        return metrics
