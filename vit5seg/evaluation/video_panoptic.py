"""Video panoptic segmentation scored as VIPSeg's benchmark and VidEoMT score it: VPQ and STQ, in
percent.

Each frame carries ``gt_panoptic_seg`` and ``pred_panoptic_seg`` in mmdet's panoptic encoding
(``label + instance * INSTANCE_OFFSET``; the label K = ``len(classes)`` is void, and so is 255 in a
label map): a segment is the same id on every frame it covers, a tube. The classes are ``dataset_meta``'s,
``thing_classes`` among them, as mmdet's panoptic datasets name them.

- VPQ (tue-mps/videomt ``utils/eval_vpq_vspw.py``, DVIS++'s): for each window length n in 1, 2, 4, 6, 8 and
  each window of n consecutive frames (starts 0..T-n), tubes are cut to the window and matched as PQ
  matches segments (same class, IoU > 0.5 with the prediction's void pixels out of the union; an
  unmatched prediction more than half on void is no false positive). The counts of every window of every
  video make one PQ per n, averaged over the classes with any count (things, stuff, all); VPQ is the mean
  of the five.
- STQ (``utils/eval_stq_vspw.py`` on deeplab2's ``segmentation_and_tracking_quality.py``; Weber et al.,
  STEP, arXiv 2102.11859): the geometric mean of the association quality AQ (each ground-truth thing tube's
  IoU-weighted overlap with every predicted thing tube, summed over a video, averaged over all ground-truth
  tubes) and SQ, the semantic IoU over every frame (void ground truth left out; classes with any union
  count, void prediction among them, as deeplab2 counts them). VidEoMT's script numbers each video's
  segments from 0 in the order its json lists them, and STQ reads a thing numbered 0 as a crowd and leaves
  it out; here no tube is a crowd, so the two agree where a video's first listed segment is stuff.
"""
from collections import Counter, deque

import numpy as np
from mmdet.evaluation.functional import INSTANCE_OFFSET
from mmdet.registry import METRICS

from .video_frames import FrameByFrameMetric, VideoMetricError, pixel_map

VPQ_WINDOWS = (1, 2, 4, 6, 8)   # eval_vpq_vspw.py main(): nframes in [1, 2, 4, 6, 8]
VOID = -1
_PACK = 2 ** 31   # ids are below it: a label under INSTANCE_OFFSET plus an instance x INSTANCE_OFFSET


def _segments(ids: np.ndarray, num_classes: int, where: str, what: str, ignore_index: int) -> np.ndarray:
    labels = ids % INSTANCE_OFFSET
    bad = (labels > num_classes) & (labels != ignore_index) | (ids < 0) | (ids >= _PACK - 1)
    if bad.any():
        raise VideoMetricError(f'{where}: {what} id {int(ids[bad][0])} has label {int(labels[bad][0])}, neither '
                               f'a class (0..{num_classes - 1}) nor void ({num_classes} or {ignore_index})')
    return np.where(labels >= num_classes, VOID, ids)


class _VideoPanopticStats:
    def __init__(self, num_classes: int, things, ignore_index: int):
        self.num_classes, self.ignore_index = num_classes, ignore_index
        self.is_thing = np.zeros(num_classes + 1, bool)
        self.is_thing[list(things)] = True
        self.pq = {n: np.zeros((num_classes, 4)) for n in VPQ_WINDOWS}   # per class: IoU sum, TP, FP, FN
        self._recent = deque(maxlen=max(VPQ_WINDOWS))
        self.semantic = np.zeros((num_classes + 1,) * 2, np.int64)       # void is row and column K
        self.gt_tubes, self.pred_tubes, self.tube_overlaps = Counter(), Counter(), Counter()
        self._shape = None

    def _label(self, ids: np.ndarray) -> np.ndarray:
        return np.where(ids == VOID, self.num_classes, ids % INSTANCE_OFFSET)

    def add(self, frame) -> None:
        where = f'video {frame.video_id} frame {frame.frame_id}'
        gt_map, pred_map = pixel_map(frame, 'gt_panoptic_seg'), pixel_map(frame, 'pred_panoptic_seg')
        if gt_map.shape != pred_map.shape:
            raise VideoMetricError(f'{where}: prediction {pred_map.shape} and label {gt_map.shape} differ in size')
        if self._shape not in (None, gt_map.shape):
            raise VideoMetricError(f'{where}: size {gt_map.shape}, the frame before {self._shape}')
        self._shape = gt_map.shape
        gt = _segments(gt_map.ravel(), self.num_classes, where, 'label', self.ignore_index)
        pred = _segments(pred_map.ravel(), self.num_classes, where, 'predicted', self.ignore_index)
        overlaps = _pair_counts(gt, pred)
        self._recent.append(overlaps)
        for n in VPQ_WINDOWS:
            if len(self._recent) >= n:
                self._match_window(n, sum(list(self._recent)[-n:], Counter()))
        self._add_stq(gt, pred)

    def _match_window(self, n: int, overlaps: Counter) -> None:
        """PQ's matching of the tubes cut to one window (eval_vpq_vspw.py vpq_compute_single_core)."""
        gt_area, pred_area = Counter(), Counter()
        for (g, p), c in overlaps.items():
            gt_area[g] += c
            pred_area[p] += c
        stats = self.pq[n]
        matched_gt, matched_pred = set(), set()
        for (g, p), c in overlaps.items():
            if g == VOID or p == VOID or g % INSTANCE_OFFSET != p % INSTANCE_OFFSET:
                continue
            iou = c / (gt_area[g] + pred_area[p] - c - overlaps.get((VOID, p), 0))
            if iou > 0.5:
                stats[g % INSTANCE_OFFSET, :2] += (iou, 1)
                matched_gt.add(g)
                matched_pred.add(p)
        for g in gt_area.keys() - matched_gt - {VOID}:
            stats[g % INSTANCE_OFFSET, 3] += 1
        for p in pred_area.keys() - matched_pred - {VOID}:
            if overlaps.get((VOID, p), 0) / pred_area[p] <= 0.5:
                stats[p % INSTANCE_OFFSET, 2] += 1

    def _add_stq(self, gt: np.ndarray, pred: np.ndarray) -> None:
        gt_label, pred_label = self._label(gt), self._label(pred)
        k = self.num_classes + 1
        self.semantic += np.bincount(gt_label * k + pred_label, minlength=k * k).reshape(k, k)
        gt_thing, pred_thing = self.is_thing[gt_label], self.is_thing[pred_label]
        self.gt_tubes.update(_counts(gt[gt_thing]))
        self.pred_tubes.update(_counts(pred[pred_thing]))
        both = gt_thing & pred_thing
        self.tube_overlaps.update(_pair_counts(gt[both], pred[both]))

    def finish(self):
        # a video's association: sum over its ground-truth tubes of their IoU-weighted overlaps (STEP eq. 3)
        association = sum(c * c / (self.gt_tubes[g] + self.pred_tubes[p] - c) / self.gt_tubes[g]
                          for (g, p), c in self.tube_overlaps.items())
        semantic = self.semantic.copy()
        semantic[-1] = 0   # void ground truth is not scored
        return dict(pq=self.pq, association=association, tubes=len(self.gt_tubes), semantic=semantic)


def _pair_counts(gt: np.ndarray, pred: np.ndarray) -> Counter:
    """{(gt id, predicted id): pixels}, both ids (void -1 included) packed in one int64 for one np.unique."""
    keys, counts = np.unique((gt + 1) * _PACK + (pred + 1), return_counts=True)
    return Counter({(int(k // _PACK) - 1, int(k % _PACK) - 1): int(c) for k, c in zip(keys, counts)})


def _counts(values: np.ndarray) -> Counter:
    ids, counts = np.unique(values, return_counts=True)
    return Counter(dict(zip(ids.tolist(), counts.tolist())))


def _pq(stats: np.ndarray, classes: np.ndarray) -> float:
    iou, tp, fp, fn = stats[classes].T
    counted = tp + fp + fn > 0
    if not counted.any():
        return float('nan')
    return 100 * float((iou[counted] / (tp + 0.5 * fp + 0.5 * fn)[counted]).mean())


@METRICS.register_module()
class VideoPanopticMetric(FrameByFrameMetric):
    """VPQ (per window length and their mean; things, stuff) and STQ (with AQ and SQ), in percent.

    Args:
        ignore_index: a label that is void besides K (255, as mmseg's and VIPSeg's).
    """
    default_prefix = 'vps'

    def __init__(self, ignore_index: int = 255, **kwargs):
        super().__init__(**kwargs)
        self.ignore_index = ignore_index

    def new_video(self):
        meta = self.dataset_meta or {}
        if 'classes' not in meta or 'thing_classes' not in meta:
            raise VideoMetricError('VideoPanopticMetric: its dataset_meta names no classes and thing_classes')
        classes = list(meta['classes'])
        missing = [c for c in meta['thing_classes'] if c not in classes]
        if missing:
            raise VideoMetricError(f'VideoPanopticMetric: thing_classes {missing} are not among the classes')
        return _VideoPanopticStats(len(classes), [classes.index(c) for c in meta['thing_classes']],
                                   self.ignore_index)

    def compute_metrics(self, results) -> dict:
        num_classes = results[0]['semantic'].shape[0] - 1
        things = np.array([c in self.dataset_meta['thing_classes'] for c in self.dataset_meta['classes']])
        groups = {'': np.arange(num_classes), '_thing': np.flatnonzero(things), '_stuff': np.flatnonzero(~things)}
        metrics = {}
        for n in VPQ_WINDOWS:
            stats = sum(r['pq'][n] for r in results)
            for suffix, classes in groups.items():
                metrics[f'VPQ{n}{suffix}'] = _pq(stats, classes)
        for suffix in groups:
            metrics[f'VPQ{suffix}'] = float(np.mean([metrics[f'VPQ{n}{suffix}'] for n in VPQ_WINDOWS]))
        tubes = sum(r['tubes'] for r in results)
        aq = sum(r['association'] for r in results) / max(tubes, 1e-15)
        semantic = sum(r['semantic'] for r in results)
        hit = np.diag(semantic)
        union = semantic.sum(0) + semantic.sum(1) - hit
        scored = union > 0
        sq = float((hit[scored] / union[scored]).sum() / scored.sum()) if scored.any() else float('nan')
        metrics.update(STQ=100 * float(np.sqrt(aq * sq)), AQ=100 * float(aq), SQ=100 * sq)
        return metrics
