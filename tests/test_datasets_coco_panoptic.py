"""COCO panoptic training data as EoMT keeps it (issue #51): every image with a segment, thing or
stuff (tue-mps/eomt datasets/dataset.py: an image is skipped only where its annotation names no
segment). mmdet's ``filter_empty_gt`` kept only images with a non-crowd thing."""
import copy
import json

import pytest
from mmengine.config import Config

from conftest import REPO
from vit5seg.datasets import make_synthetic_data

pytest.importorskip('panopticapi')


def test_training_keeps_every_image_with_a_segment_as_eomt_does(tmp_path):
    from mmdet.registry import DATASETS
    from mmengine.registry import DefaultScope
    root = make_synthetic_data('coco_panoptic', tmp_path, num_train=6, num_val=2, size=48)
    ann_file = root / 'annotations' / 'panoptic_train2017.json'
    ann = json.loads(ann_file.read_text())
    things = {c['id'] for c in ann['categories'] if c['isthing']}
    stuff_only, empty = ann['annotations'][1], ann['annotations'][3]
    stuff_only['segments_info'] = [s for s in stuff_only['segments_info'] if s['category_id'] not in things]
    empty['segments_info'] = []
    assert stuff_only['segments_info']
    ann_file.write_text(json.dumps(ann))
    # what EoMT keeps, from the definition: the images whose annotation names a segment
    by_image = {a['image_id']: a['segments_info'] for a in ann['annotations']}
    eomt = sorted(i['file_name'] for i in ann['images'] if by_image.get(i['id']))
    cfg = Config.fromfile(str(REPO / 'configs' / 'tiny' / 'vit5_eomt_coco_panoptic_synthetic.py'))
    dataset_cfg = copy.deepcopy(cfg.train_dataloader.dataset)
    dataset_cfg.update(data_root=f'{root}/')
    with DefaultScope.overwrite_default_scope('mmdet'):
        kept = DATASETS.build(dataset_cfg)
        names = sorted(kept.get_data_info(i)['img_path'].rsplit('/', 1)[-1] for i in range(len(kept)))
        assert type(kept).__name__ == 'EoMTCocoPanopticDataset' and names == eomt and len(names) == 5
        # mmdet's own filter: the stuff-only image goes too
        dataset_cfg.update(type='CocoPanopticDataset', filter_cfg=dict(filter_empty_gt=True, min_size=0))
        assert len(DATASETS.build(dataset_cfg)) == 4
        val = copy.deepcopy(cfg.val_dataloader.dataset)
        val.update(data_root=f'{root}/')
        assert len(DATASETS.build(val)) == 2   # evaluation keeps every image
