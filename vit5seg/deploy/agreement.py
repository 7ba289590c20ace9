"""How the ONNX graph of a panoptic or instance model is held to mmdet's own inference: its class and
mask logits within a bound everywhere, and its decisions (panoptic ids, the top instances) where no
threshold of mmdet's fusion rule lies within that bound of mmdet's values.

A twin trained on another CPU has other weights, and a segment whose class probability sits at
``object_mask_thr`` or whose kept share of its mask sits at ``iou_thr`` flips on any float noise: a
quarter of a photo can change id with every logit within 1e-5. Comparing ids alone cannot tell that
from a graph that computes something else; comparing logits can, and ids are compared where they are
decided (:func:`undecided_pixels`), so a graph that is wrong fails and a flip at a threshold does not.
"""
from typing import Tuple

import numpy as np
from scipy.special import expit, softmax

# The graph and mmdet see the same photo resized two ways (PIL on uint8, the graph's antialiased
# bilinear in floats rounded to whole levels): a level apart on a few pixels. Measured on the tiny
# panoptic twin (2-core AMD EPYC, 2026-12-06): 4e-7 of the largest logit at the traced size, 1.3e-3 at
# two others; padding with 20 instead of EoMT's raw 0 gives 5.9e-3 at the traced size, 7e-2 elsewhere.
LOGIT_TOLERANCE = 4e-3
DETECTION_PIXELS = 0.999


def undecided_pixels(class_logits: np.ndarray, mask_logits: np.ndarray, num_classes: int,
                     object_mask_thr: float, iou_thr: float, class_tolerance: float,
                     mask_tolerance: float) -> np.ndarray:
    """(H, W) bool: pixels whose panoptic id under mmdet's ``panoptic_postprocess`` could change if
    each of ``class_logits`` (Q, K + 1) moved by ``class_tolerance`` and each of ``mask_logits``
    (Q, H, W) by ``mask_tolerance`` (the differences measured between the two models).

    Bounds used: a softmax probability p moves by at most ~2 class_tolerance x p, a sigmoid by at
    most mask_tolerance / 4. A pixel is undecided where (a) a query whose keep decision (class probability
    against ``object_mask_thr``, or its best class against the next) is within that of flipping could
    win it, (b) the two best weighted mask probabilities are that close, or the winner's mask
    probability is that close to 0.5, or (c) it is a segment whose kept share of its mask (against
    ``iou_thr``) is within the share of its undecided pixels of the threshold."""
    probs = softmax(class_logits.astype(np.float64), axis=-1)
    order = np.sort(probs, -1)
    scores, labels = probs.max(-1), probs.argmax(-1)
    margin_s = 2.5 * class_tolerance * np.maximum(scores, 1e-12) + 1e-7   # e^(2t) - 1 <= 2.5 t for t <= 0.2
    # float32 as the logits are: (Q, H, W) at the photo's size is large (an L model's 200 queries at 480x640:
    # 250 MB each), so only the probabilities and their weighted copy are held
    masks = expit(mask_logits.astype(np.float32))
    keep = (labels != num_classes) & (scores > object_mask_thr)
    unsure_q = ((labels != num_classes) & (np.abs(scores - object_mask_thr) <= margin_s)) | \
        (order[:, -1] - order[:, -2] <= 2 * margin_s)
    margin_m = mask_tolerance / 4 + 1e-7
    margin_p = 2.5 * class_tolerance + margin_m                              # score x mask probability
    undecided = np.zeros(masks.shape[1:], bool)
    if keep.any():
        weighted = np.where(keep[:, None, None], scores[:, None, None].astype(np.float32) * masks, np.float32(-1))
        winner = weighted.argmax(0)
        best = np.take_along_axis(weighted, winner[None], 0)[0]
        np.put_along_axis(weighted, winner[None], -np.inf, 0)             # the runner-up: the best of the rest
        second = weighted.max(0)
        del weighted
        undecided |= (best - second <= margin_p) & (second > -1)
        undecided |= np.abs(np.take_along_axis(masks, winner[None], 0)[0] - 0.5) <= margin_m
    else:
        best, winner = np.full(masks.shape[1:], -1.0), np.zeros(masks.shape[1:], int)
    for q in np.flatnonzero(unsure_q):                                      # (a)
        undecided |= (object_mask_thr * masks[q] >= best - margin_p) | (winner == q) & keep[q]
    for q in np.flatnonzero(keep):                                          # (c)
        area, original = winner == q, masks[q] >= 0.5
        n = original.sum()
        if not area.any() or not n:
            continue
        loose = (undecided & (area | original)).sum()
        if abs(area.sum() / n - iou_thr) <= loose / n + 1e-6:
            undecided |= area
    return undecided


def same_segments(theirs: np.ndarray, ours: np.ndarray, where: np.ndarray) -> float:
    """The share of ``where``'s pixels on which two panoptic maps give the same segment: each of
    ``theirs``' ids is paired with the id of ``ours`` it shares most pixels with, one to one and of the
    same class (id % 1000), and a pixel agrees where its ids are so paired. mmdet numbers things in
    query order, so a segment made or not made at a threshold renumbers every later thing without
    moving a pixel: the pairing sees the same segments."""
    a, b = theirs[where].astype(np.int64), ours[where].astype(np.int64)
    if not a.size:
        return 1.0
    pairs, counts = np.unique(np.stack([a, b]), axis=1, return_counts=True)
    paired, taken = {}, set()
    for i in np.argsort(-counts, kind='stable'):                 # the largest overlaps first
        x, y = int(pairs[0, i]), int(pairs[1, i])
        if x not in paired and y not in taken and x % 1000 == y % 1000:
            paired[x] = y
            taken.add(y)
    mapped = np.array([paired.get(int(x), -1) for x in pairs[0]])
    return float(counts[mapped == pairs[1]].sum() / a.size)


def logit_differences(theirs: Tuple[np.ndarray, np.ndarray], ours: Tuple[np.ndarray, np.ndarray]
                      ) -> Tuple[float, float]:
    """The largest |difference| of the class logits and of the mask logits."""
    return tuple(float(np.abs(a.astype(np.float64) - b).max()) if a.size else 0.0 for a, b in zip(theirs, ours))


def relative(difference: float, logits: np.ndarray) -> float:
    """A difference over the largest |logit| of ``logits`` (at least 1): relative where logits are large,
    absolute where they are small; what :data:`LOGIT_TOLERANCE` bounds."""
    return difference / max(1.0, float(np.abs(logits).max()) if logits.size else 1.0)


__all__ = ['DETECTION_PIXELS', 'LOGIT_TOLERANCE', 'logit_differences', 'relative', 'same_segments', 'undecided_pixels']
