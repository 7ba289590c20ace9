"""VIPSeg (Miao et al., "Large-scale Video Panoptic Segmentation in the Wild", CVPR 2022) for video panoptic
segmentation in mmdet, laid out as VidEoMT reads it (tue-mps/videomt ``videomt/data_video/datasets/vps.py``,
after its ``datasets/utils/vipseg_change2_720p.py``):

- ``images/<video>/<frame>.jpg`` and ``panomasksRGB/<video>/<frame>.png`` (a segment's id as R + 256 G +
  256^2 B, 0 void);
- ``panoptic_gt_VIPSeg_{train,val,test}.json`` (``ann_file``): ``videos`` with their ``images``, ``annotations``
  a video each with a ``segments_info`` a frame (``id``, ``category_id``, ``iscrowd``), ``categories``.

A segment's id is the same on every frame of its video: a tube. VIPSeg's 124 categories are VSPW's
(:mod:`.vspw`), things and stuff interleaved; here they are ordered things first, as mmdet's panoptic datasets
and models take them (``num_things_classes``), each keeping its VSPW order within its kind.
:class:`LoadVideoPanopticAnnotations` reads a frame's mask into mmdet's panoptic encoding (``label + instance
* INSTANCE_OFFSET``, void ``K``; a thing's instance numbers its tube in its video from 1, stuff's is 0), the
labels :class:`vit5seg.evaluation.VideoPanopticMetric` scores; a crowd segment is void there.
"""
import json
from pathlib import Path

import mmcv
import numpy as np
from mmcv.transforms import BaseTransform
from mmdet.datasets import BaseVideoDataset
from mmdet.evaluation.functional import INSTANCE_OFFSET
from mmdet.registry import DATASETS, TRANSFORMS

from .vspw import VSPW_CLASSES, VSPW_PALETTE

# VIPSeg's categories 0..123 (vps.py), 1 where a thing
_IS_THING = ('00101000101000000000000000000000000000000101101111111011100011'
             '11110000001010111100111111111110011101111000111100001111100011')
VIPSEG_THINGS = tuple(i for i, t in enumerate(_IS_THING) if t == '1')
VIPSEG_STUFF = tuple(i for i, t in enumerate(_IS_THING) if t == '0')
VIPSEG_ORDER = VIPSEG_THINGS + VIPSEG_STUFF   # label -> VIPSeg category id


@DATASETS.register_module()
class VIPSegDataset(BaseVideoDataset):
    """VIPSeg's videos (module docstring) as mmdet's video datasets give them: one item a video, its frames in
    the json's order; ``data_prefix``: ``img_path`` the images, ``seg_map_path`` the RGB panoptic masks."""
    METAINFO = dict(classes=tuple(VSPW_CLASSES[i] for i in VIPSEG_ORDER),
                    thing_classes=tuple(VSPW_CLASSES[i] for i in VIPSEG_THINGS),
                    stuff_classes=tuple(VSPW_CLASSES[i] for i in VIPSEG_STUFF),
                    palette=tuple(VSPW_PALETTE[i] for i in VIPSEG_ORDER))

    def __init__(self, *args, data_prefix: dict = dict(img_path='images', seg_map_path='panomasksRGB'), **kwargs):
        super().__init__(*args, data_prefix=data_prefix, **kwargs)

    def load_data_list(self) -> list:
        path = Path(self.ann_file)
        if not path.is_file():
            raise FileNotFoundError(f'VIPSeg: no annotation file {path} (panoptic_gt_VIPSeg_{{train,val,test}}.json)')
        info = json.loads(path.read_text())
        label_of = {category: label for label, category in enumerate(VIPSEG_ORDER)}
        per_video = {a['video_id']: a['annotations'] for a in info.get('annotations', [])}
        images, masks = Path(self.data_prefix['img_path']), Path(self.data_prefix['seg_map_path'])
        videos, img_id = [], 0
        for index, video in enumerate(info['videos']):
            name, frames = video['video_id'], video['images']
            annotations = per_video.get(name)
            if annotations is not None and len(annotations) != len(frames):
                raise ValueError(f'VIPSeg: video {name} in {path.name} has {len(frames)} images but '
                                 f'{len(annotations)} annotated frames')
            tubes, out = {}, []   # a thing's tube id -> its instance in this video, from 1
            for frame_id, image in enumerate(frames):
                frame = dict(img_path=str(images / name / (Path(image['file_name']).stem + '.jpg')),
                             img_id=img_id, frame_id=frame_id, video_name=name, instances=[])
                if annotations is not None:
                    segments = []
                    for segment in annotations[frame_id]['segments_info']:
                        label = label_of[segment['category_id']]
                        instance = 0
                        if label < len(VIPSEG_THINGS):
                            instance = tubes.setdefault(segment['id'], len(tubes) + 1)
                        segments.append(dict(id=segment['id'], label=label, instance=instance,
                                             iscrowd=segment.get('iscrowd', 0)))
                    frame.update(seg_map_path=str(masks / name / annotations[frame_id]['file_name']),
                                 segments_info=segments)
                out.append(frame)
                img_id += 1
            videos.append(dict(video_id=index, images=out, video_length=len(out)))
        return videos

    def filter_data(self) -> list:
        return self.data_list


@TRANSFORMS.register_module()
class LoadVideoPanopticAnnotations(BaseTransform):
    """A frame's RGB panoptic mask and its ``segments_info`` (:class:`VIPSegDataset`) -> ``gt_panoptic_map``
    (H, W) in mmdet's panoptic encoding, void ``num_classes`` (mmdet's ``LoadPanopticAnnotations`` gives
    masks and a semantic map, not the ids a video metric follows across frames)."""

    def __init__(self, num_classes: int = len(VIPSEG_ORDER)):
        self.num_classes = num_classes

    def transform(self, results: dict) -> dict:
        if results.get('seg_map_path') is None:
            return results
        rgb = mmcv.imread(results['seg_map_path'], flag='color', channel_order='rgb').astype(np.int64)
        ids = rgb[..., 0] + 256 * rgb[..., 1] + 256 * 256 * rgb[..., 2]
        panoptic = np.full(ids.shape, self.num_classes, np.int64)
        known = {0}
        for segment in results['segments_info']:
            known.add(segment['id'])
            if not segment['iscrowd']:
                panoptic[ids == segment['id']] = segment['label'] + segment['instance'] * INSTANCE_OFFSET
        stray = np.setdiff1d(np.unique(ids), list(known))
        if stray.size:
            raise ValueError(f"{results['seg_map_path']}: segment id {int(stray[0])} is in the mask but not in "
                             f'its segments_info')
        results['gt_panoptic_map'] = panoptic
        return results
