"""The video datasets in mmdet (vit5seg/datasets/vspw.py, vipseg.py): their synthetic clips read back through
mmdet's video test pipeline, each frame's labels against the PNGs
and json read here (PIL, json) with the datasets' label rules applied by hand. VSPW: 0 ("others") and 255 not
scored, class k+1 -> k. VIPSeg: mmdet's panoptic encoding, classes things first, a thing's instance numbering
its tube from 1 in its video, void K."""
import json
import shutil

import numpy as np
import pytest
from mmengine.registry import DefaultScope
from PIL import Image

OFFSET = 1000   # mmdet's INSTANCE_OFFSET


# each dataset's test split as VidEoMT tests it (tue-mps/videomt configs/{VSPW,VIPSeg}/Base_R50_720p.yaml: whole
# clips), its labels loaded after any resize so that they stay at the frame's size, and its metric
LABELS = {'vspw': dict(type='LoadAnnotations', with_bbox=False, with_seg=True, reduce_zero_label=True),
          'vipseg': dict(type='LoadVideoPanopticAnnotations')}
VIDEO_DATASETS = {
    'vspw': dict(type='VSPWDataset', ann_file='val.txt', data_prefix=dict(img_path='data'), test_mode=True),
    'vipseg': dict(type='VIPSegDataset', ann_file='panoptic_gt_VIPSeg_val.json', test_mode=True,
                   data_prefix=dict(img_path='images', seg_map_path='panomasksRGB'))}
METRICS = {'vspw': dict(type='VideoSemanticMetric'), 'vipseg': dict(type='VideoPanopticMetric')}


def video_pipeline(name, resize=None):
    frame = [dict(type='LoadImageFromFile'), *([resize] if resize else []), LABELS[name]]
    return [dict(type='TransformBroadcaster', transforms=frame), dict(type='PackVideoSegInputs')]


def _dataset(name, root, **changes):
    from mmdet.registry import DATASETS
    cfg = dict(VIDEO_DATASETS[name], data_root=str(root), pipeline=video_pipeline(name))
    cfg.update(changes)
    with DefaultScope.overwrite_default_scope('mmdet'):
        return DATASETS.build(cfg)


def _synthetic(tmp_path_factory, name, seed):
    from vit5seg.datasets import make_synthetic_data
    return make_synthetic_data(name, tmp_path_factory.mktemp(name), num_train=1, num_val=2, size=40, seed=seed)


@pytest.fixture(scope='module')
def vspw_root(tmp_path_factory):
    return _synthetic(tmp_path_factory, 'vspw', 3)


@pytest.fixture(scope='module')
def vipseg_root(tmp_path_factory):
    return _synthetic(tmp_path_factory, 'vipseg', 5)


def test_vspw_clips_load_whole_with_each_frames_labels_as_vspw_scores_them(vspw_root):
    dataset = _dataset('vspw', vspw_root)
    assert len(dataset) == 2 and len(dataset.metainfo['classes']) == 124
    assert dataset.metainfo['classes'][60] == 'person'
    names = (vspw_root / 'val.txt').read_text().split()
    for v, name in enumerate(names):
        packed = dataset[v]
        frames = packed['data_samples'].video_data_samples
        masks = sorted((vspw_root / 'data' / name / 'mask').glob('*.png'))
        assert len(frames) == len(masks) == 10 and packed['inputs'].shape[0] == 10
        for t, (frame, mask) in enumerate(zip(frames, masks)):
            raw = np.array(Image.open(mask)).astype(np.int64)
            want = np.where((raw == 0) | (raw == 255), 255, raw - 1)
            got = frame.gt_sem_seg.sem_seg[0].numpy()
            assert got.shape == raw.shape and np.array_equal(got, want), (name, t)
            assert frame.frame_id == t and frame.video_id == v and frame.ori_video_length == 10
            assert frame.img_path.endswith(f'{name}/origin/{mask.stem}.jpg')
        labels = np.unique(np.concatenate([f.gt_sem_seg.sem_seg.flatten().numpy() for f in frames]))
        assert 255 in labels and 0 in labels and len(labels) >= 3     # wall, a shape or more, the unscored border


def test_a_missing_vspw_split_or_mask_is_one_error_naming_it(vspw_root, tmp_path):
    with pytest.raises(FileNotFoundError, match=r'VSPW: no split file .*test\.txt'):
        _dataset('vspw', vspw_root, ann_file='test.txt')
    copy = tmp_path / 'VSPW_480p'
    shutil.copytree(vspw_root, copy)
    name = (copy / 'val.txt').read_text().split()[1]
    (copy / 'data' / name / 'mask' / '00000004.png').unlink()
    with pytest.raises(FileNotFoundError, match=f'VSPW: video {name} frame 00000004.jpg has no mask'):
        _dataset('vspw', copy)


def test_vipseg_clips_load_whole_with_tubes_in_mmdets_panoptic_encoding(vipseg_root):
    dataset = _dataset('vipseg', vipseg_root)
    meta = dataset.metainfo
    assert len(dataset) == 2 and len(meta['classes']) == 124 and len(meta['thing_classes']) == 58
    assert list(meta['classes']) == list(meta['thing_classes']) + list(meta['stuff_classes'])
    info = json.loads((vipseg_root / 'panoptic_gt_VIPSeg_val.json').read_text())
    names = [c['name'] for c in sorted(info['categories'], key=lambda c: (not c['isthing'], c['id']))]
    assert names == list(meta['classes'])
    for v, (video, annotation) in enumerate(zip(info['videos'], info['annotations'])):
        frames = dataset[v]['data_samples'].video_data_samples
        assert len(frames) == len(video['images']) == 10
        tubes = {}
        for t, (frame, ann) in enumerate(zip(frames, annotation['annotations'])):
            mask = vipseg_root / 'panomasksRGB' / video['video_id'] / ann['file_name']
            rgb = np.array(Image.open(mask)).astype(np.int64)
            ids = rgb[..., 0] + 256 * rgb[..., 1] + 65536 * rgb[..., 2]
            want = np.full(ids.shape, 124)
            for segment in ann['segments_info']:
                label = names.index(info['categories'][segment['category_id']]['name'])
                thing = info['categories'][segment['category_id']]['isthing']
                instance = tubes.setdefault(segment['id'], len(tubes) + 1) if thing else 0
                want[ids == segment['id']] = label + instance * OFFSET
            got = frame.gt_panoptic_seg.sem_seg[0].numpy()
            assert np.array_equal(got, want), (v, t)
            assert frame.frame_id == t and frame.ori_video_length == 10
        assert len(tubes) >= 2   # shapes tracked over the clip


def test_a_missing_vipseg_json_a_frame_count_or_a_stray_segment_is_one_error(vipseg_root, tmp_path):
    with pytest.raises(FileNotFoundError, match=r'VIPSeg: no annotation file .*panoptic_gt_VIPSeg_test\.json'):
        _dataset('vipseg', vipseg_root, ann_file='panoptic_gt_VIPSeg_test.json')
    copy = tmp_path / 'VIPSeg_720P'
    shutil.copytree(vipseg_root, copy)
    path = copy / 'panoptic_gt_VIPSeg_val.json'
    info = json.loads(path.read_text())
    info['annotations'][1]['annotations'].pop()
    path.write_text(json.dumps(info))
    with pytest.raises(ValueError, match='VIPSeg: video val0001 in panoptic_gt_VIPSeg_val.json has 10 images but 9'):
        _dataset('vipseg', copy)
    info['annotations'][1]['annotations'].append(dict(info['annotations'][1]['annotations'][-1]))
    info['annotations'][0]['annotations'][3]['segments_info'].pop()
    path.write_text(json.dumps(info))
    with pytest.raises(ValueError, match=r'00000003\.png: segment id \d+ is in the mask but not in its segments_info'):
        _dataset('vipseg', copy)[0]
