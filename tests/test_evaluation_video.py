"""The video metrics (vit5seg/evaluation) against references written here from their definitions, on
generated videos: tubes that move, switch identity, go missing and appear from nowhere, with void pixels
and label noise. The metrics stream (a few frames held); the references stack whole windows and compare
masks one tube pair at a time. Both metrics equal VidEoMT's own scripts (utils/eval_*_vspw.py) on such
videos to 1.4e-14: the throwaway comparison's figures are in docs/video.md."""
import numpy as np
import pytest
import torch
from mmdet.structures import DetDataSample, TrackDataSample
from mmengine.evaluator import Evaluator
from mmengine.registry import DefaultScope
from mmengine.structures import PixelData

from vit5seg.evaluation import VideoMetricError

OFFSET = 1000                       # mmdet's INSTANCE_OFFSET
K, THINGS = 6, (0, 1, 2)            # classes 0-2 things, 3-5 stuff; K is void
CLASSES = [f'class{i}' for i in range(K)]
META = dict(classes=CLASSES, thing_classes=CLASSES[:3], stuff_classes=CLASSES[3:])


def _video(rng, frames, h=20, w=28):
    """(ground-truth panoptic maps, predicted ones), mmdet's encoding, void = K."""
    edge = int(rng.integers(5, 15))
    tubes = [(int(rng.integers(3)), i + 1, rng.uniform(0, w - 8), rng.uniform(0, h - 8), rng.uniform(-1.5, 1.5),
              rng.uniform(-1, 1), int(rng.integers(4, 9))) for i in range(int(rng.integers(2, 5)))]
    switch = int(rng.integers(1, frames))
    gts, preds = [], []
    for t in range(frames):
        gt = np.full((h, w), 3, np.int64)
        gt[edge + int(2 * np.sin(t / 3)):] = 4
        gt[:, edge + t % 5:][gt[:, edge + t % 5:] == 4] = 5
        for k, instance, x, y, vx, vy, size in tubes:
            x0, y0 = max(int(x + vx * t), 0), max(int(y + vy * t), 0)
            gt[y0:y0 + size, x0:x0 + size] = k + instance * OFFSET
        gt[rng.random((h, w)) < 0.03] = K
        if t % 3 == 1:
            gt[-4:, -5:] = K                              # an unlabelled corner
        pred = gt.copy()
        first = tubes[0][0] + tubes[0][1] * OFFSET
        if t >= switch:                                   # the first tube changes identity
            pred[pred == first] = tubes[0][0] + 50 * OFFSET
        if rng.random() < 0.3:
            pred = np.roll(pred, int(rng.integers(-2, 3)), axis=1)
        noise = rng.random((h, w)) < 0.08
        pred[noise] = rng.choice([3, 4, 5, K, 1 + 7 * OFFSET], size=int(noise.sum()))
        if t % 4 == 0:
            pred[:4, :6] = 2 + 9 * OFFSET                 # a thing that is not there
        if t % 3 == 1:
            pred[-4:, -4:] = 1 + 11 * OFFSET              # a thing on void: no false positive
        gts.append(gt)
        preds.append(pred)
    return gts, preds


@pytest.fixture(scope='module')
def videos():
    rng = np.random.default_rng(7)
    return [_video(rng, frames) for frames in (5, 9, 12, 18, 21)]


def _semantic(pan, void):
    label = pan % OFFSET
    return np.where(label >= K, void, label)


def _frames(video_id, gts, preds, field):
    samples = []
    for t, (gt, pred) in enumerate(zip(gts, preds)):
        sample = DetDataSample(metainfo=dict(video_id=video_id, frame_id=t, ori_video_length=len(gts)))
        if field == 'sem_seg':
            sample.gt_sem_seg = PixelData(sem_seg=torch.from_numpy(_semantic(gt, 255))[None])
            sample.pred_sem_seg = PixelData(sem_seg=torch.from_numpy(_semantic(pred, 3))[None])
        else:
            sample.gt_panoptic_seg = PixelData(sem_seg=torch.from_numpy(gt)[None])
            sample.pred_panoptic_seg = PixelData(sem_seg=torch.from_numpy(pred)[None])
        samples.append(sample)
    return samples


def _evaluator(metric_type, **kwargs):
    with DefaultScope.overwrite_default_scope('mmdet'):
        evaluator = Evaluator(dict(type=metric_type, **kwargs))
    evaluator.dataset_meta = META
    return evaluator


def _evaluate(metric_type, videos, field, one_frame_a_call=False, **kwargs):
    """Through mmengine's Evaluator, as mmengine's test loop calls it: a clip a call or a frame a call."""
    evaluator = _evaluator(metric_type, **kwargs)
    for v, (gts, preds) in enumerate(videos):
        frames = _frames(v, gts, preds, field)
        calls = [[f] for f in frames] if one_frame_a_call else [frames]
        for call in calls:
            evaluator.process([TrackDataSample(video_data_samples=call)], {})
    return evaluator.evaluate(len(videos))


# ---- video semantic: mIoU and VC ---------------------------------------------------------------

def _reference_semantic(videos, lengths=(8, 16)):
    gt_all = np.concatenate([_semantic(g, 255).ravel() for gts, _ in videos for g in gts])
    pred_all = np.concatenate([_semantic(p, 3).ravel() for _, preds in videos for p in preds])
    ious = []
    for c in range(K):
        gt_c, pred_c = (gt_all == c), (pred_all == c) & (gt_all != 255)
        if gt_c.any():                    # only classes with ground truth
            ious.append((gt_c & pred_c).sum() / (gt_c | pred_c).sum())
    result = {'vss/mIoU': 100 * np.mean(ious)}
    for n in lengths:
        scores = []
        for gts, preds in videos:
            gt, pred = np.stack([_semantic(g, 255) for g in gts]), np.stack([_semantic(p, 3) for p in preds])
            for start in range(len(gts) - n):     # the window ending on the last frame is not one
                gt_same = (gt[start:start + n] == gt[start]).all(0)
                pred_same = (pred[start:start + n] == pred[start]).all(0)
                if gt_same.any():
                    scores.append((gt_same & pred_same).sum() / gt_same.sum())
        result[f'vss/VC{n}'] = 100 * np.mean(scores)
    return result


@pytest.mark.parametrize('one_frame_a_call', [False, True], ids=['clip', 'frame-by-frame'])
def test_video_semantic_metric_equals_the_definition(videos, one_frame_a_call):
    got = _evaluate('VideoSemanticMetric', videos, 'sem_seg', one_frame_a_call)
    want = _reference_semantic(videos)
    assert got.keys() == want.keys()
    for key in want:
        assert got[key] == pytest.approx(want[key], abs=1e-9), key
    assert 0 < want['vss/VC16'] < want['vss/VC8'] < 100   # the noise makes long windows less consistent


def test_vc_lengths_are_windows_of_two_frames_or_more(videos):
    got = _evaluate('VideoSemanticMetric', videos, 'sem_seg', vc_lengths=(2, 4))
    assert got['vss/VC2'] == pytest.approx(_reference_semantic(videos, (2,))['vss/VC2'], abs=1e-9)
    with pytest.raises(ValueError, match=r'vc_lengths=\(1, 8\)'):
        _evaluate('VideoSemanticMetric', videos, 'sem_seg', vc_lengths=(1, 8))


# ---- video panoptic: VPQ and STQ ---------------------------------------------------------------

def _reference_vpq(videos, n):
    """PQ of tubes cut to every window of n frames (per class: IoU sum, TP, FP, FN)."""
    stats = np.zeros((K, 4))
    for gts, preds in videos:
        for start in range(len(gts) - n + 1):
            gt, pred = np.stack(gts[start:start + n]), np.stack(preds[start:start + n])
            gt_void, pred_void = gt % OFFSET >= K, pred % OFFSET >= K
            gt_ids = [i for i in np.unique(gt[~gt_void])]
            pred_ids = [i for i in np.unique(pred[~pred_void])]
            matched = set()
            for g in gt_ids:
                hit = None
                for p in pred_ids:
                    if g % OFFSET != p % OFFSET:
                        continue
                    inter = ((gt == g) & (pred == p)).sum()
                    union = ((gt == g) | ((pred == p) & ~gt_void)).sum()
                    if inter / union > 0.5:
                        hit = p, inter / union
                if hit:
                    matched.add(hit[0])
                    stats[g % OFFSET, :2] += (hit[1], 1)
                else:
                    stats[g % OFFSET, 3] += 1
            for p in set(pred_ids) - matched:
                if ((pred == p) & gt_void).sum() <= 0.5 * (pred == p).sum():
                    stats[p % OFFSET, 2] += 1
    return stats


def _pq(stats, classes):
    iou, tp, fp, fn = stats[list(classes)].T
    seen = tp + fp + fn > 0
    return 100 * np.mean(iou[seen] / (tp + fp / 2 + fn / 2)[seen])


def _reference_stq(videos):
    """STEP's STQ (Weber et al. 2021): sqrt(AQ x SQ)."""
    association, tubes = 0.0, 0
    for gts, preds in videos:
        gt, pred = np.stack(gts), np.stack(preds)
        gt_thing, pred_thing = np.isin(gt % OFFSET, THINGS) & (gt % OFFSET < K), np.isin(pred % OFFSET, THINGS)
        for g in np.unique(gt[gt_thing]):
            tube = gt == g
            tubes += 1
            for p in np.unique(pred[pred_thing]):
                guess = (pred == p) & pred_thing
                tpa = (tube & guess).sum()
                association += tpa * tpa / (tube | guess).sum() / tube.sum()
    gt_sem = np.concatenate([_semantic(g, K).ravel() for gts, _ in videos for g in gts])
    pred_sem = np.concatenate([_semantic(p, K).ravel() for _, preds in videos for p in preds])
    labelled = gt_sem < K
    ious = []
    for c in range(K + 1):            # deeplab2 counts void among the predictions' classes
        inter = ((gt_sem == c) & (pred_sem == c) & labelled).sum()
        union = (((gt_sem == c) | (pred_sem == c)) & labelled).sum()
        if union:
            ious.append(inter / union)
    aq, sq = association / tubes, np.mean(ious)
    return {'vps/STQ': 100 * np.sqrt(aq * sq), 'vps/AQ': 100 * aq, 'vps/SQ': 100 * sq}


def test_video_panoptic_metric_equals_the_definition(videos):
    got = _evaluate('VideoPanopticMetric', videos, 'panoptic')
    want = _reference_stq(videos)
    for n in (1, 2, 4, 6, 8):
        stats = _reference_vpq(videos, n)
        want.update({f'vps/VPQ{n}': _pq(stats, range(K)), f'vps/VPQ{n}_thing': _pq(stats, THINGS),
                     f'vps/VPQ{n}_stuff': _pq(stats, range(3, K))})
    for suffix in ('', '_thing', '_stuff'):
        want[f'vps/VPQ{suffix}'] = np.mean([want[f'vps/VPQ{n}{suffix}'] for n in (1, 2, 4, 6, 8)])
    assert got.keys() == want.keys()
    for key in want:
        assert got[key] == pytest.approx(want[key], abs=1e-9), key
    # the identity switch costs long windows: VPQ falls with the window
    assert want['vps/VPQ8_thing'] < want['vps/VPQ1_thing']
    streamed = _evaluate('VideoPanopticMetric', videos, 'panoptic', one_frame_a_call=True)
    assert streamed == pytest.approx(got, abs=1e-12)


# ---- bad input: one message each -----------------------------------------------------------------

def test_bad_labels_and_frame_orders_are_one_error_each(videos):
    gts, preds = videos[0]
    frames = _frames(0, gts, preds, 'sem_seg')
    frames[2].gt_sem_seg.sem_seg[0, 0, 0] = 9
    with pytest.raises(VideoMetricError, match=r'video 0 frame 2: label 9 is neither a class \(0\.\.5\) nor '
                                               'ignore_index 255'):
        _evaluator('VideoSemanticMetric').process([TrackDataSample(video_data_samples=frames)], {})
    frames = _frames(0, gts, preds, 'panoptic')
    frames[1].pred_panoptic_seg.sem_seg[0, 3, 3] = 10 + OFFSET
    with pytest.raises(VideoMetricError, match=r'video 0 frame 1: predicted id 1010 has label 10, neither a class'):
        _evaluator('VideoPanopticMetric').process([TrackDataSample(video_data_samples=frames)], {})

    evaluator = _evaluator('VideoSemanticMetric')
    frames = _frames(0, gts, preds, 'sem_seg')
    evaluator.process([TrackDataSample(video_data_samples=[frames[0]])], {})
    with pytest.raises(VideoMetricError, match='video 0: frame 2 came after frame 0'):
        evaluator.process([TrackDataSample(video_data_samples=[frames[2]])], {})
    evaluator = _evaluator('VideoSemanticMetric')
    evaluator.process([TrackDataSample(video_data_samples=[frames[0]])], {})
    with pytest.raises(VideoMetricError, match=r'videos ended before their last frame: 0 \(1 of 5 frames\)'):
        evaluator.evaluate(1)
    with pytest.raises(VideoMetricError, match='names no classes and thing_classes'):
        evaluator = _evaluator('VideoPanopticMetric')
        evaluator.dataset_meta = dict(classes=CLASSES)
        evaluator.process([TrackDataSample(video_data_samples=_frames(0, gts, preds, 'panoptic'))], {})
