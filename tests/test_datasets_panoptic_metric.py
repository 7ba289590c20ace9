"""mmdet's CocoPanopticMetric (panopticapi's rules, through panopticapi-lite) against PQ written
here from its definition (Kirillov et al., "Panoptic Segmentation", CVPR 2019, sec. 4 and the
COCO panoptic rules): per class, TP = pairs of a ground-truth and a predicted segment of that
class with IoU > 0.5, IoU taken with the predicted segment's void pixels left out of the union;
PQ = sum of TP IoUs / (TP + FP/2 + FN/2); a crowd region counts in no TP or FN, and an unmatched
prediction is no FP when more than half of it lies on void or on a crowd region of its class;
classes that appear nowhere are left out of the means.
"""
import json

import numpy as np
import pytest
import torch

pytest.importorskip('panopticapi')
OFFSET = 1000   # mmdet's panoptic ids: class + instance x 1000


def reference_pq(gt_maps, gt_infos, pred_maps, things):
    """(PQ, PQ things, PQ stuff) in %, from the definition above. ``gt_maps``: segment ids (0 void)
    per image; ``gt_infos``: id -> (class, iscrowd); ``pred_maps``: one id per predicted segment,
    -1 void, with ``pred_classes`` id -> class given as the id's class (id % OFFSET)."""
    iou_sum, tp, fp, fn = {}, {}, {}, {}
    for gt, info, pred in zip(gt_maps, gt_infos, pred_maps):
        void = gt == 0
        pred_ids = [p for p in np.unique(pred) if p >= 0]
        matched_pred = set()
        for g, (c, crowd) in info.items():
            if crowd:
                continue
            gmask = gt == g
            for p in pred_ids:
                if p % OFFSET != c:
                    continue
                pmask = pred == p
                inter = (gmask & pmask).sum()
                union = (gmask | pmask).sum() - (pmask & void).sum()
                if inter / union > 0.5:
                    iou_sum[c] = iou_sum.get(c, 0) + inter / union
                    tp[c] = tp.get(c, 0) + 1
                    matched_pred.add(p)
                    break
            else:
                fn[c] = fn.get(c, 0) + 1
        for p in pred_ids:
            if p in matched_pred:
                continue
            c, pmask = p % OFFSET, pred == p
            crowd = np.zeros_like(void)
            for g, (gc, is_crowd) in info.items():
                if is_crowd and gc == c:
                    crowd |= gt == g
            if (pmask & (void | crowd)).sum() / pmask.sum() > 0.5:
                continue
            fp[c] = fp.get(c, 0) + 1

    def mean(classes):
        pq = [iou_sum.get(c, 0) / (tp.get(c, 0) + fp.get(c, 0) / 2 + fn.get(c, 0) / 2) for c in classes
              if tp.get(c, 0) + fp.get(c, 0) + fn.get(c, 0)]
        return 100 * float(np.mean(pq))

    seen = set(tp) | set(fp) | set(fn)
    return mean(seen), mean({c for c in seen if c in things}), mean({c for c in seen if c not in things})


def predictions(gt, info, rng, num_classes):
    """A prediction made from the ground truth with errors of every kind: a shift, a segment
    dropped to void, one relabelled, a stuff segment split, a spurious thing."""
    shift = int(rng.integers(1, 4))
    pred = np.full(gt.shape, -1, np.int64)
    ids = [g for g in info if g]
    dropped, relabelled = rng.choice(ids, 2, replace=False)
    for k, g in enumerate(ids):
        mask = np.roll(gt == g, shift, axis=1)
        if g == dropped:
            continue
        c = info[g][0] if g != relabelled else (info[g][0] + 1) % num_classes
        pred[mask] = c + OFFSET * (k + 1)
    stuff = [g for g in ids if info[g][0] >= 80 and g not in (dropped, relabelled)]
    if stuff:
        half = np.roll(gt == stuff[0], shift, axis=1)
        half[:, : gt.shape[1] // 2] = False
        pred[half] = info[stuff[0]][0] + OFFSET * 99
    y, x = rng.integers(5, gt.shape[0] - 12), rng.integers(5, gt.shape[1] - 12)
    pred[y:y + 8, x:x + 8] = int(rng.integers(80)) + OFFSET * 98
    return pred


def test_coco_panoptic_metric_is_pq_by_its_definition(tmp_path):
    import cv2
    from mmdet.datasets import CocoPanopticDataset
    from mmdet.evaluation.metrics import CocoPanopticMetric
    from vit5seg.datasets import make_synthetic_data
    root = make_synthetic_data('coco_panoptic', tmp_path, num_train=1, num_val=12, size=64, seed=3)
    ann = json.loads((root / 'annotations' / 'panoptic_val2017.json').read_text())
    cat_to_label = {c['id']: i for i, c in enumerate(ann['categories'])}
    meta = CocoPanopticDataset.METAINFO
    metric = CocoPanopticMetric(ann_file=str(root / 'annotations' / 'panoptic_val2017.json'),
                                seg_prefix=str(root / 'annotations' / 'panoptic_val2017'))
    metric.dataset_meta = meta
    rng = np.random.default_rng(0)
    gts, infos, preds, samples = [], [], [], []
    for image, entry in zip(ann['images'], ann['annotations']):
        rgb = cv2.imread(str(root / 'annotations' / 'panoptic_val2017' / entry['file_name']))[..., ::-1].astype(int)
        gt = rgb[..., 0] + 256 * rgb[..., 1] + 65536 * rgb[..., 2]
        info = {s['id']: (cat_to_label[s['category_id']], s['iscrowd']) for s in entry['segments_info']}
        pred = predictions(gt, info, rng, len(meta['classes']))
        gts.append(gt), infos.append(info), preds.append(pred)
        pan = np.where(pred < 0, len(meta['classes']), pred)   # mmdet's void: the number of classes
        samples.append(dict(img_id=image['id'], img_path=str(root / 'val2017' / image['file_name']),
                            ori_shape=gt.shape, pred_panoptic_seg=dict(sem_seg=torch.from_numpy(pan)[None])))
    assert any(crowd for info in infos for _, crowd in info.values())
    metric.process({}, samples)
    found = metric.evaluate(len(samples))
    pq, pq_th, pq_st = reference_pq(gts, infos, preds, things=set(range(80)))
    assert 5 < pq < 90   # errors of every kind (classes only predicted wrongly count 0), not a perfect prediction
    assert found['coco_panoptic/PQ'] == pytest.approx(pq, abs=1e-3)
    assert found['coco_panoptic/PQ_th'] == pytest.approx(pq_th, abs=1e-3)
    assert found['coco_panoptic/PQ_st'] == pytest.approx(pq_st, abs=1e-3)
