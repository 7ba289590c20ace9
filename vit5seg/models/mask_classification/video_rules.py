"""VidEoMT's clip predictions (tue-mps/videomt ``videomt/videomt.py``: ``inference_video_vis``, ``_vps``,
``_vss``) from a clip's mean class logits (Q, K + 1) and each frame's mask logits at the decoder's resolution
(Q, h, w), which cover ``padded_size`` of the input; each frame's masks go bilinear to the padded input, lose
the padding, and go bilinear to the frame's original size (``rescale``). The instance rule thresholds the
logits; the semantic and panoptic rules take the sigmoid before the second resize, as VidEoMT does.
"""
from typing import List, Sequence

import torch
import torch.nn.functional as F
from mmdet.structures.mask import mask2bbox
from mmengine.structures import InstanceData

from .postprocess import pair_probabilities, panoptic_fusion, top_query_classes


def _frame_masks(mask_logits: torch.Tensor, padded_size, meta: dict, rescale: bool, sigmoid: bool) -> torch.Tensor:
    """(N, h, w) mask logits -> (N, H, W) on the frame: logits, or probabilities when ``sigmoid``."""
    masks = F.interpolate(mask_logits[None], size=tuple(padded_size), mode='bilinear', align_corners=False)
    h, w = meta['img_shape'][:2]
    masks = masks[..., :h, :w]   # the padding cut off
    if sigmoid:
        masks = masks.sigmoid()
    if rescale:
        masks = F.interpolate(masks, size=tuple(meta['ori_shape'][:2]), mode='bilinear', align_corners=False)
    return masks[0]


def video_instances(class_logits: torch.Tensor, mask_logits: Sequence[torch.Tensor], padded_size,
                    frame_metas: List[dict], max_per_video: int, rescale: bool = True) -> List[InstanceData]:
    """``inference_video_vis``: the clip's top ``max_per_video`` (query, class) pairs by softmax probability
    (no-object left out), each pair's mask logit > 0 on every frame -> one ``InstanceData`` a frame. Only the
    kept queries' masks are resized."""
    Q, K = class_logits.shape[0], class_logits.shape[1] - 1
    scores, queries, labels = top_query_classes(class_logits, min(max_per_video, Q * K))
    out = []
    for masks, meta in zip(mask_logits, frame_metas):
        binary = _frame_masks(masks[queries], padded_size, meta, rescale, sigmoid=False) > 0
        out.append(InstanceData(masks=binary, bboxes=mask2bbox(binary), labels=labels, scores=scores,
                                instances_id=torch.arange(len(queries)), query_ids=queries))
    return out


def video_semantic(class_logits: torch.Tensor, mask_logits: Sequence[torch.Tensor], padded_size,
                   frame_metas: List[dict], rescale: bool = True) -> List[torch.Tensor]:
    """``inference_video_vss``: each pixel's class maximises the sum over queries of the class's
    probability (no-object left out) times the query's mask probability -> a (H, W) label map a frame."""
    probabilities = pair_probabilities(class_logits)                                   # (Q, K)
    return [torch.einsum('qc,qhw->chw', probabilities,
                         _frame_masks(masks, padded_size, meta, rescale, sigmoid=True)).max(0)[1]
            for masks, meta in zip(mask_logits, frame_metas)]


def video_panoptic(class_logits: torch.Tensor, mask_logits: Sequence[torch.Tensor], padded_size,
                   frame_metas: List[dict], num_things: int, object_mask_thr: float, overlap_thr: float,
                   rescale: bool = True) -> List[torch.Tensor]:
    """``inference_video_vps``: the panoptic rule of one image (mmdet's, :func:`.postprocess.panoptic_fusion`)
    on the clip's frames at once: a query is kept by its clip score, each pixel of each frame goes to the
    kept query of the highest score x mask probability, and a query's segment is kept by its areas over the
    whole clip. -> a (H, W) map a frame in mmdet's encoding (``label + instance * INSTANCE_OFFSET``, void
    ``K``); a thing's instance is the same on every frame. VidEoMT numbers its segments 1, 2, ... in query
    order, things and stuff alike, with 0 void: the same segments, numbered otherwise."""
    K = class_logits.shape[1] - 1
    scores, labels = class_logits.softmax(-1).max(-1)
    kept = ((labels != K) & (scores > object_mask_thr)).nonzero()[:, 0]   # only these can win a pixel
    sizes = {tuple(meta['ori_shape'][:2]) if rescale else tuple(meta['img_shape'][:2]) for meta in frame_metas}
    if len(sizes) != 1:
        raise ValueError(f'a clip\'s frames share one size for its panoptic prediction; got {sorted(sizes)}')
    (h, w), T = sizes.pop(), len(frame_metas)
    if not len(kept):
        return [torch.full((h, w), K, dtype=torch.long) for _ in range(T)]
    masks = torch.stack([_frame_masks(m[kept], padded_size, meta, rescale, sigmoid=True)
                         for m, meta in zip(mask_logits, frame_metas)], 1)           # (N, T, H, W)
    panoptic = panoptic_fusion(class_logits[kept], masks.flatten(1, 2), num_things, object_mask_thr, overlap_thr)[0]
    return list(panoptic.view(T, h, w))


__all__ = ['video_instances', 'video_panoptic', 'video_semantic']
