"""VSPW (Miao et al., "VSPW: A Large-scale Dataset for Video Scene Parsing in the Wild", CVPR 2021) for video
semantic segmentation in mmdet, laid out as VidEoMT reads it (tue-mps/videomt
``videomt/data_video/datasets/vss.py``):

- ``data/<video>/origin/<frame>.jpg`` and ``data/<video>/mask/<frame>.png``, frames in file-name order;
- ``train.txt``, ``val.txt``, ``test.txt``: a video name a line (``ann_file``, as mmseg's split files).

A mask holds 0 (VSPW's "others", not scored), the classes as 1..124 and 255 (void): mmdet's
``LoadAnnotations(with_seg=True, reduce_zero_label=True)`` makes them 255 and 0..123, the labels
:class:`vit5seg.evaluation.VideoSemanticMetric` scores. The 124 classes and their colours are VSPW's, in its
order (``vss.py`` ``get_metadata``). mmdet's ``PackTrackInputs`` packs no label maps: :class:`PackVideoSegInputs`
adds each frame's as its ``gt_sem_seg``.
"""
from pathlib import Path

import torch
from mmdet.datasets import BaseVideoDataset
from mmdet.datasets.transforms import PackTrackInputs
from mmdet.registry import DATASETS, TRANSFORMS
from mmengine.structures import PixelData

VSPW_CLASSES = (
    'wall', 'ceiling', 'door', 'stair', 'ladder', 'escalator', 'Playground_slide', 'handrail_or_fence', 'window',
    'rail', 'goal', 'pillar', 'pole', 'floor', 'ground', 'grass', 'sand', 'athletic_field', 'road', 'path',
    'crosswalk', 'building', 'house', 'bridge', 'tower', 'windmill', 'well_or_well_lid', 'other_construction',
    'sky', 'mountain', 'stone', 'wood', 'ice', 'snowfield', 'grandstand', 'sea', 'river', 'lake', 'waterfall',
    'water', 'billboard_or_Bulletin_Board', 'sculpture', 'pipeline', 'flag', 'parasol_or_umbrella',
    'cushion_or_carpet', 'tent', 'roadblock', 'car', 'bus', 'truck', 'bicycle', 'motorcycle', 'wheeled_machine',
    'ship_or_boat', 'raft', 'airplane', 'tyre', 'traffic_light', 'lamp', 'person', 'cat', 'dog', 'horse', 'cattle',
    'other_animal', 'tree', 'flower', 'other_plant', 'toy', 'ball_net', 'backboard', 'skateboard', 'bat', 'ball',
    'cupboard_or_showcase_or_storage_rack', 'box', 'traveling_case_or_trolley_case', 'basket', 'bag_or_package',
    'trash_can', 'cage', 'plate', 'tub_or_bowl_or_pot', 'bottle_or_cup', 'barrel', 'fishbowl', 'bed', 'pillow',
    'table_or_desk', 'chair_or_seat', 'bench', 'sofa', 'shelf', 'bathtub', 'gun', 'commode', 'roaster',
    'other_machine', 'refrigerator', 'washing_machine', 'Microwave_oven', 'fan', 'curtain', 'textiles', 'clothes',
    'painting_or_poster', 'mirror', 'flower_pot_or_vase', 'clock', 'book', 'tool', 'blackboard', 'tissue',
    'screen_or_television', 'computer', 'printer', 'Mobile_phone', 'keyboard', 'other_electronic_product', 'fruit',
    'food', 'instrument', 'train')
VSPW_PALETTE = (
    (120, 120, 120), (180, 120, 120), (6, 230, 230), (80, 50, 50), (4, 200, 3), (120, 120, 80), (140, 140, 140),
    (204, 5, 255), (230, 230, 230), (4, 250, 7), (224, 5, 255), (235, 255, 7), (150, 5, 61), (120, 120, 70), (8,
    255, 51), (255, 6, 82), (143, 255, 140), (204, 255, 4), (255, 51, 7), (204, 70, 3), (0, 102, 200), (61, 230,
    250), (255, 6, 51), (11, 102, 255), (255, 7, 71), (255, 9, 224), (9, 7, 230), (220, 220, 220), (255, 9, 92),
    (112, 9, 255), (8, 255, 214), (7, 255, 224), (255, 184, 6), (10, 255, 71), (255, 41, 10), (7, 255, 255), (224,
    255, 8), (102, 8, 255), (255, 61, 6), (255, 194, 7), (255, 122, 8), (0, 255, 20), (255, 8, 41), (255, 5, 153),
    (6, 51, 255), (235, 12, 255), (160, 150, 20), (0, 163, 255), (140, 140, 140), (250, 10, 15), (20, 255, 0), (31,
    255, 0), (255, 31, 0), (255, 224, 0), (153, 255, 0), (0, 0, 255), (255, 71, 0), (0, 235, 255), (0, 173, 255),
    (31, 0, 255), (11, 200, 200), (255, 82, 0), (0, 255, 245), (0, 61, 255), (0, 255, 112), (0, 255, 133), (255, 0,
    0), (255, 163, 0), (255, 102, 0), (194, 255, 0), (0, 143, 255), (51, 255, 0), (0, 82, 255), (0, 255, 41), (0,
    255, 173), (10, 0, 255), (173, 255, 0), (0, 255, 153), (255, 92, 0), (255, 0, 255), (255, 0, 245), (255, 0,
    102), (255, 173, 0), (255, 0, 20), (255, 184, 184), (0, 31, 255), (0, 255, 61), (0, 71, 255), (255, 0, 204), (0,
    255, 194), (0, 255, 82), (0, 10, 255), (0, 112, 255), (51, 0, 255), (0, 194, 255), (0, 122, 255), (0, 255, 163),
    (255, 153, 0), (0, 255, 10), (255, 112, 0), (143, 255, 0), (82, 0, 255), (163, 255, 0), (255, 235, 0), (8, 184,
    170), (133, 0, 255), (0, 255, 92), (184, 0, 255), (255, 0, 31), (0, 184, 255), (0, 214, 255), (255, 0, 112),
    (92, 255, 0), (0, 224, 255), (112, 224, 255), (70, 184, 160), (163, 0, 255), (153, 0, 255), (71, 255, 0), (255,
    0, 163), (255, 204, 0), (255, 0, 143), (0, 255, 235), (133, 255, 0))


@DATASETS.register_module()
class VSPWDataset(BaseVideoDataset):
    """VSPW's videos (module docstring) as mmdet's video datasets give them: one item a video, its frames
    in order, ``ann_file`` the split's list of video names, ``data_prefix.img_path`` the ``data`` folder."""
    METAINFO = dict(classes=VSPW_CLASSES, palette=VSPW_PALETTE)

    def __init__(self, *args, data_prefix: dict = dict(img_path='data'), **kwargs):
        super().__init__(*args, data_prefix=data_prefix, **kwargs)

    def load_data_list(self) -> list:
        split, data = Path(self.ann_file), Path(self.data_prefix['img_path'])
        if not split.is_file():
            raise FileNotFoundError(f'VSPW: no split file {split} (a video name a line: train.txt, val.txt, test.txt '
                                    f'beside data/)')
        names = [line.strip() for line in split.read_text().splitlines() if line.strip()]
        videos, img_id = [], 0
        for video_id, name in enumerate(names):
            frames = sorted((data / name / 'origin').glob('*.jpg'))
            if not frames:
                raise FileNotFoundError(f'VSPW: video {name} of {split.name} has no frames in {data / name / "origin"}')
            images = []
            for frame_id, frame in enumerate(frames):
                mask = data / name / 'mask' / f'{frame.stem}.png'
                if not mask.is_file() and (data / name / 'mask').is_dir():
                    raise FileNotFoundError(f'VSPW: video {name} frame {frame.name} has no mask {mask}')
                images.append(dict(img_path=str(frame), seg_map_path=str(mask) if mask.is_file() else None,
                                   img_id=img_id, frame_id=frame_id, video_name=name, instances=[]))
                img_id += 1
            videos.append(dict(video_id=video_id, images=images, video_length=len(images)))
        return videos

    def filter_data(self) -> list:
        return self.data_list   # every frame is scored, labelled or not


@TRANSFORMS.register_module()
class PackVideoSegInputs(PackTrackInputs):
    """mmdet's ``PackTrackInputs`` with each frame's label map: ``gt_seg_map`` as its ``gt_sem_seg`` (mmdet packs
    it for images, ``PackDetInputs``, but not for videos) and ``gt_panoptic_map`` (:mod:`.vipseg`) as its
    ``gt_panoptic_seg``."""
    FIELDS = {'gt_seg_map': 'gt_sem_seg', 'gt_panoptic_map': 'gt_panoptic_seg'}

    def transform(self, results: dict) -> dict:
        packed = super().transform(results)
        for key, field in self.FIELDS.items():
            for sample, seg in zip(packed['data_samples'].video_data_samples, results.get(key) or []):
                setattr(sample, field, PixelData(sem_seg=torch.from_numpy(seg[None].astype('int64'))))
        return packed
