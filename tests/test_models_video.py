"""Video instance segmentation in mmdet (issue #60): transformers' VidEoMT with random weights, converted and
built by mmdet's ``init_track_model``, predicts a clip as VidEoMT's own inference does on transformers' logits
(``reference_clip`` below, written from tue-mps/videomt ``videomt/videomt.py``: ``videomt_online.post_processing``
averages each query's class logits over the frames, ``inference_video_vis`` keeps the top (query, class) pairs
and each pair's mask on every frame), with one identity per pair across the frames."""
import contextlib
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config

from conftest import REPO, run_script
from test_models_videomt import CLASSES, CONVERT, DIM, FRAMES, SIDE, hf_videomt, videomt_config

transformers = pytest.importorskip('transformers')

TOP = 10                                   # VidEoMT's TEST.MAX_NUM on YouTube-VIS (configs/ytvis19/Base_R50.yaml)
IMG_SHAPE, ORI_SHAPE = (72, 96), (150, 200)   # a frame resized into the padded input, and its size on disk
THINGS = 12                                # the panoptic task's things: classes 0-11


def video_config() -> Config:
    """The tiny VidEoMT of test_models_videomt as mmdet's video model, padding as VidEoMT does (0 after
    normalising, to a multiple of 32)."""
    image = videomt_config().model
    return Config(dict(default_scope='mmdet', model=dict(
        type='VideoMaskClassifier', backbone=image.backbone, decode_head=image.decode_head, decoder=image.decoder,
        test_cfg=dict(max_per_video=TOP),
        data_preprocessor=dict(type='TrackDataPreprocessor', mean=[123.675, 116.28, 103.53],
                               std=[58.395, 57.12, 57.375], bgr_to_rgb=True, pad_size_divisor=32))))


def reference_clip(class_logits, mask_logits, top: int):
    """VidEoMT's clip prediction on every frame's logits, (T, Q, K + 1) and (T, Q, h, w), written from its
    definition: {(query, class): (score, masks (T, H, W))}."""
    mean = class_logits.mean(0)                                   # post_processing: averaged over the frames
    scores = F.softmax(mean, dim=-1)[:, :-1]
    K = scores.shape[1]
    top_scores, index = scores.flatten().topk(top, sorted=False)
    masks = mask_logits.transpose(0, 1)[index // K]                # (top, T, h, w), as pred_masks[topk_indices]
    masks = F.interpolate(masks, size=(SIDE, SIDE), mode='bilinear', align_corners=False)   # first_resize_size
    masks = masks[:, :, :IMG_SHAPE[0], :IMG_SHAPE[1]]
    masks = F.interpolate(masks, size=ORI_SHAPE, mode='bilinear', align_corners=False) > 0
    return {(int(i) // K, int(i) % K): (float(s), m) for i, s, m in zip(index, top_scores, masks)}


def clip_samples(frames: int):
    from mmdet.structures import DetDataSample, TrackDataSample
    video = TrackDataSample()
    video.video_data_samples = [DetDataSample(metainfo=dict(img_shape=IMG_SHAPE, ori_shape=ORI_SHAPE, frame_id=t,
                                                            batch_input_shape=(SIDE, SIDE))) for t in range(frames)]
    return [video]


def track_model(cfg, checkpoint=None):
    """mmdet's ``init_track_model`` in mmdet's scope (it builds in whichever scope is current)."""
    from mmdet.apis import init_track_model
    from mmengine.registry import DefaultScope
    with DefaultScope.overwrite_default_scope('mmdet'):
        return init_track_model(cfg, None if checkpoint is None else str(checkpoint), device='cpu').eval()


@pytest.fixture(scope='module')
def converted(tmp_path_factory):
    folder = tmp_path_factory.mktemp('videomt')
    torch.manual_seed(0)   # a module fixture is built before the autouse seed: the same weights on every run
    model = hf_videomt()
    model.save_pretrained(folder / 'hf')
    done = run_script(CONVERT, folder / 'hf', folder / 'converted.pth')
    assert done.returncode == 0, done.stderr
    return model, folder / 'converted.pth'


def test_a_clip_is_predicted_as_videomt_predicts_it_with_one_identity_per_pair(converted):
    model, checkpoint = converted
    ours = track_model(video_config(), checkpoint)
    clip = torch.randn(1, FRAMES, 3, SIDE, SIDE, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        theirs = model(pixel_values_videos=clip)
        (result,) = ours.predict(clip, clip_samples(FRAMES))
    expected = reference_clip(theirs.class_queries_logits, theirs.masks_queries_logits, TOP)
    frames = [sample.pred_track_instances for sample in result.video_data_samples]
    assert len(frames) == FRAMES
    first = frames[0]
    pairs = list(zip(first.query_ids.tolist(), first.labels.tolist()))
    assert set(pairs) == set(expected), (pairs, sorted(expected))
    for t, instances in enumerate(frames):
        # the same identities, with the same query, class and score, on every frame
        assert torch.equal(instances.instances_id, first.instances_id)
        assert len(set(instances.instances_id.tolist())) == TOP
        assert torch.equal(instances.query_ids, first.query_ids) and torch.equal(instances.labels, first.labels)
        assert torch.equal(instances.scores, first.scores)
        assert instances.masks.shape == (TOP, *ORI_SHAPE)
        for j, pair in enumerate(pairs):
            score, masks = expected[pair]
            assert abs(float(instances.scores[j]) - score) < 1e-5, (t, pair)   # the issue asks 5e-3 of VidEoMT's code
            assert (instances.masks[j] == masks[t]).float().mean() >= 0.999, (t, pair)
    assert any(frames[0].masks[j].any() for j in range(TOP)), 'every mask is empty: the check would be void'


def _frame_probabilities(mask_logits):
    """(T, Q, h, w) mask logits -> (Q, T, H, W) probabilities as VidEoMT's vps and vss rules make them: bilinear to
    the padded input, the padding cut off, the sigmoid, bilinear to the original size."""
    masks = F.interpolate(mask_logits.transpose(0, 1), size=(SIDE, SIDE), mode='bilinear', align_corners=False)
    masks = masks[:, :, :IMG_SHAPE[0], :IMG_SHAPE[1]].sigmoid()
    return F.interpolate(masks, size=ORI_SHAPE, mode='bilinear', align_corners=False)


def reference_semantic(class_logits, mask_logits):
    """VidEoMT's inference_video_vss, written from its definition: (T, H, W) labels."""
    probabilities = F.softmax(class_logits.mean(0), dim=-1)[:, :-1]
    return torch.einsum('qc,qthw->cthw', probabilities, _frame_probabilities(mask_logits)).max(0)[1]


def reference_panoptic(class_logits, mask_logits, things, object_mask_thr, overlap_thr):
    """VidEoMT's inference_video_vps, written from its definition: (T, H, W) segment ids (0 void) and
    {id: class}."""
    scores, labels = F.softmax(class_logits.mean(0), dim=-1).max(-1)
    keep = (labels != CLASSES) & (scores > object_mask_thr)
    masks = _frame_probabilities(mask_logits)[keep]
    winner = (scores[keep].view(-1, 1, 1, 1) * masks).argmax(0)
    panoptic, classes, stuff_ids = torch.zeros(winner.shape, dtype=torch.long), {}, {}
    for k, label in enumerate(labels[keep].tolist()):
        area, original = (winner == k).sum().item(), (masks[k] >= 0.5).sum().item()
        mask = (winner == k) & (masks[k] >= 0.5)
        if not (area > 0 and original > 0 and mask.any()) or area / original < overlap_thr:
            continue
        if label >= things and label in stuff_ids:      # stuff of one class is one segment
            panoptic[mask] = stuff_ids[label]
            continue
        segment = len(classes) + 1
        if label >= things:
            stuff_ids[label] = segment
        panoptic[mask] = segment
        classes[segment] = label
    return panoptic, classes


def _video_task_config(**test_cfg):
    cfg = video_config()
    cfg.model.test_cfg.update(test_cfg)
    if test_cfg.get('task') == 'panoptic':
        cfg.model.num_things_classes = THINGS
    return cfg


def _clip_and_logits(model):
    clip = torch.randn(1, FRAMES, 3, SIDE, SIDE, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        theirs = model(pixel_values_videos=clip)
    return clip, theirs.class_queries_logits, theirs.masks_queries_logits


def _scored_by(metric, result, gt_field, pred_field, **kwargs):
    """``metric`` (vit5seg.evaluation) on ``result`` with its own predictions as the ground truth."""
    from mmengine.evaluator import Evaluator
    from mmengine.registry import DefaultScope
    with DefaultScope.overwrite_default_scope('mmdet'):
        evaluator = Evaluator(dict(type=metric, **kwargs))
    names = [f'class{i}' for i in range(CLASSES)]
    evaluator.dataset_meta = dict(classes=names, thing_classes=names[:THINGS], stuff_classes=names[THINGS:])
    for sample in result.video_data_samples:
        sample.set_metainfo(dict(video_id=0, ori_video_length=FRAMES))
        setattr(sample, gt_field, getattr(sample, pred_field).clone())
    evaluator.process([result], {})
    return evaluator.evaluate(1)


def test_the_semantic_task_predicts_a_clip_as_videomts_vss_rule_and_streams_it(converted):
    model, checkpoint = converted
    ours = track_model(_video_task_config(task='semantic'), checkpoint)
    clip, class_logits, mask_logits = _clip_and_logits(model)
    with torch.no_grad():
        (result,) = ours.predict(clip, clip_samples(FRAMES))
    expected = reference_semantic(class_logits, mask_logits)
    labels = torch.stack([s.pred_sem_seg.sem_seg[0] for s in result.video_data_samples])
    assert labels.shape == (FRAMES, *ORI_SHAPE)
    assert (labels == expected).float().mean() >= 0.999
    assert len(expected.unique()) > 3, 'one class everywhere: the check would be void'
    scores = _scored_by('VideoSemanticMetric', result, 'gt_sem_seg', 'pred_sem_seg', vc_lengths=(2,))
    assert scores == {'vss/mIoU': 100.0, 'vss/VC2': 100.0}
    # one frame a call: the last frame sees the whole clip's mean, so it is the clip's last frame
    samples = clip_samples(FRAMES)
    with torch.no_grad():
        for t in range(FRAMES):
            one = samples[0].video_data_samples[t]
            one.set_metainfo(dict(ori_video_length=FRAMES))
            from mmdet.structures import TrackDataSample
            (streamed,) = ours.predict(clip[:, t:t + 1], [TrackDataSample(video_data_samples=[one])])
    assert torch.equal(streamed.video_data_samples[0].pred_sem_seg.sem_seg[0], labels[-1])


def test_the_panoptic_task_predicts_a_clip_as_videomts_vps_rule(converted):
    from mmdet.evaluation.functional import INSTANCE_OFFSET
    model, checkpoint = converted
    # random weights score every class low and spread every mask: VIPSeg's 0.8 thresholds would keep no segment
    cfg = _video_task_config(task='panoptic', object_mask_thr=0.02, overlap_thr=0.05)
    ours = track_model(cfg, checkpoint)
    clip, class_logits, mask_logits = _clip_and_logits(model)
    with torch.no_grad():
        (result,) = ours.predict(clip, clip_samples(FRAMES))
    expected, classes = reference_panoptic(class_logits, mask_logits, THINGS, 0.02, 0.05)
    ids = torch.stack([s.pred_panoptic_seg.sem_seg[0] for s in result.video_data_samples])
    assert ids.shape == (FRAMES, *ORI_SHAPE)
    # the same segments on every frame (the same pixels but where a mask probability is within float noise of
    # 0.5, the same class), numbered as mmdet numbers them: each of VidEoMT's segments is mostly one of ours
    pairs, counts = torch.unique(torch.stack([expected.flatten(), ids.flatten()]), dim=1, return_counts=True)
    theirs_to_ours = {}
    for (theirs, ours_id), count in sorted(zip(pairs.T.tolist(), counts.tolist()), key=lambda x: x[1]):
        theirs_to_ours[theirs] = ours_id                              # the largest overlap last
    assert len(set(theirs_to_ours.values())) == len(theirs_to_ours), pairs.T.tolist()
    agree = sum(c for (t, o), c in zip(pairs.T.tolist(), counts.tolist()) if theirs_to_ours[t] == o)
    assert agree / expected.numel() >= 0.999, (agree, expected.numel())
    assert theirs_to_ours.pop(0, CLASSES) == CLASSES                  # void is void
    for segment, ours_id in theirs_to_ours.items():
        assert ours_id % INSTANCE_OFFSET == classes[segment]
        assert (ours_id >= INSTANCE_OFFSET) == (classes[segment] < THINGS)   # a thing has an instance
    kinds = {label < THINGS for label in classes.values()}
    assert len(classes) >= 3 and kinds == {True, False}, classes
    scores = _scored_by('VideoPanopticMetric', result, 'gt_panoptic_seg', 'pred_panoptic_seg')
    assert scores['vps/VPQ1'] == scores['vps/VPQ4'] == scores['vps/STQ'] == 100.0
    assert np.isnan(scores['vps/VPQ6'])                               # a 4-frame clip has no 6-frame window


def test_a_video_task_is_one_of_three_and_panoptic_takes_whole_clips(converted):
    with pytest.raises(ValueError, match=r"test_cfg.task='depth': a video model predicts one of \('instance'"):
        track_model(_video_task_config(task='depth'))
    cfg = _video_task_config(task='panoptic')
    cfg.model.num_things_classes = None
    with pytest.raises(ValueError, match='the panoptic task needs num_things_classes'):
        track_model(cfg)
    ours = track_model(_video_task_config(task='panoptic'), converted[1])
    samples = clip_samples(1)
    samples[0].video_data_samples[0].set_metainfo(dict(ori_video_length=FRAMES))
    with pytest.raises(ValueError, match='areas over the whole clip'):
        ours.predict(torch.zeros(1, 1, 3, SIDE, SIDE), samples)


def test_a_decoder_that_carries_nothing_and_a_batch_of_clips_to_predict_are_refused(converted):
    cfg = video_config()
    cfg.model.decoder = dict(type='EoMTDecoder')
    with pytest.raises(ValueError, match='EoMTDecoder carries nothing from one frame to the next'):
        track_model(cfg)
    cfg = video_config()
    cfg.model.test_cfg.max_per_video = 0
    with pytest.raises(ValueError, match='test_cfg.max_per_video must be a positive int'):
        track_model(cfg)
    ours = track_model(video_config(), converted[1])
    with pytest.raises(ValueError, match=r'one clip at a time, \(1, T, C, H, W\).*got \(2, 3, 3, 96, 96\) and 2'):
        ours.predict(torch.zeros(2, 3, 3, SIDE, SIDE), clip_samples(3) * 2)
    assert ours.num_classes == CLASSES and ours.decoder.query_updater.in_features == DIM


def _mmdet_converter():
    """mmdet's own YouTube-VIS -> CocoVID converter (tools/dataset_converters/youtubevis2coco.py, shipped in
    the package's .mim folder), as a module."""
    import importlib.util

    import mmdet
    path = Path(mmdet.__file__).parent / '.mim' / 'tools' / 'dataset_converters' / 'youtubevis2coco.py'
    spec = importlib.util.spec_from_file_location('youtubevis2coco', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_synthetic_clips_are_youtube_vis_as_mmdets_converter_reads_it(tmp_path):
    from vit5seg.datasets import make_synthetic_data
    root = make_synthetic_data('ytvis', tmp_path, num_train=3, num_val=1, size=48)
    # the converter ends by printing each class's object count, and stops at the first class of the 40 that
    # has none (KeyError); the file is written before
    with contextlib.suppress(KeyError):
        _mmdet_converter().convert_vis(str(root), str(tmp_path / 'mmdet'), '2019', 'train')
    theirs = json.loads((tmp_path / 'mmdet' / 'youtube_vis_2019_train.json').read_text())
    ours = json.loads((root / 'annotations' / 'youtube_vis_2019_train.json').read_text())
    assert ours == theirs
    official = json.loads((root / 'train.json').read_text())
    # identities: each object keeps one id over its clip, and some leave the frame or are hidden for a while
    assert all(len(a['segmentations']) == 5 for a in official['annotations'])
    assert any(None in a['segmentations'] for a in official['annotations'])
    assert len({a['instance_id'] for a in ours['annotations']}) == len(official['annotations'])


_VIDEO_CONFIG = """
_base_ = ['mmdet::_base_/datasets/youtube_vis.py', 'mmdet::_base_/default_runtime.py']
custom_imports = dict(imports=['vit5seg'], allow_failed_imports=False)
model = {model!r}
test_pipeline = [
    dict(type='TransformBroadcaster', transforms=[
        dict(type='LoadImageFromFile'), dict(type='Resize', scale=({side}, {side}), keep_ratio=True),
        dict(type='LoadTrackAnnotations', with_mask=True)]),
    dict(type='PackTrackInputs')]
test_dataloader = dict(num_workers=0, persistent_workers=False, dataset=dict(
    data_root={root!r}, ann_file='annotations/youtube_vis_2019_valid.json',
    data_prefix=dict(img_path='valid/JPEGImages'),
    pipeline=test_pipeline))
train_dataloader = val_dataloader = val_evaluator = None   # a model that predicts only
test_evaluator = dict(type='YouTubeVISMetric', metric='youtube_vis_ap', outfile_prefix={out!r})
test_cfg = dict(type='TestLoop')
default_hooks = dict(visualization=dict(type='TrackVisualizationHook', draw=False))
visualizer = dict(type='TrackLocalVisualizer', vis_backends=[dict(type='LocalVisBackend')], name='visualizer')
"""


def write_video_config(folder: Path, data_root, **test_cfg) -> Path:
    """The tiny video model's config (its ``test_cfg`` updated), reading a YouTube-VIS-layout folder, as a file."""
    config = folder / f'video{"_" + test_cfg["task"] if "task" in test_cfg else ""}.py'
    model = _video_task_config(**test_cfg).model.to_dict()
    config.write_text(_VIDEO_CONFIG.format(model=model, side=SIDE, root=str(data_root), out=str(folder / 'results')))
    return config


def test_tools_test_scores_a_video_config_with_mmdets_youtube_vis_metric(converted, tmp_path):
    """tools/test.py on a video config: mmdet's YouTubeVISDataset whole clips, the model online over each,
    mmdet's YouTubeVISMetric on its predictions; every identity has a mask on every frame of its clip."""
    from vit5seg.datasets import make_synthetic_data
    root = make_synthetic_data('ytvis', tmp_path, num_train=1, num_val=2, size=54)
    config = write_video_config(tmp_path, root)
    done = run_script(REPO / 'tools' / 'test.py', config, converted[1], '--work-dir', tmp_path / 'work')
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r'youtube_vis/segm_mAP: \d', done.stdout + done.stderr), (done.stdout + done.stderr)[-3000:]
    # the same run as YouTube-VIS's server takes it (format_only: the predictions' json and its zip)
    done = run_script(REPO / 'tools' / 'test.py', config, converted[1], '--work-dir', tmp_path / 'work',
                      '--cfg-options', 'test_evaluator.format_only=True')
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / 'results.submission_file.zip').is_file()
    results = json.loads((tmp_path / 'results.json').read_text())
    assert len(results) == 2 * TOP and {r['video_id'] for r in results} == {1, 2}
    assert all(len(r['segmentations']) == 5 and all(s is not None for s in r['segmentations']) for r in results)


_VIDEO_DATASET_CONFIG = """
_base_ = ['mmdet::_base_/default_runtime.py']
custom_imports = dict(imports=['vit5seg'], allow_failed_imports=False)
model = {model!r}
test_dataloader = dict(batch_size=1, num_workers=0, persistent_workers=False, drop_last=False,
                       sampler=dict(type='DefaultSampler', shuffle=False, round_up=False), dataset={dataset!r})
test_evaluator = {metric!r}
train_dataloader = val_dataloader = val_evaluator = None
test_cfg = dict(type='TestLoop')
default_hooks = dict(visualization=dict(type='TrackVisualizationHook', draw=False))
visualizer = dict(type='TrackLocalVisualizer', vis_backends=[dict(type='LocalVisBackend')], name='visualizer')
"""


def _run_video_dataset_config(tmp_path, dataset, **task):
    """tools/test.py on ``dataset``'s synthetic twin (test_datasets_video's test split, each frame resized to the
    model's input) with a random 124-class model of ``task`` (the converted release has 40 classes) -> its log."""
    from test_datasets_video import METRICS, VIDEO_DATASETS, video_pipeline
    from vit5seg.datasets import make_synthetic_data
    root = make_synthetic_data(dataset, tmp_path, num_train=1, num_val=2, size=54)
    cfg = _video_task_config(**task)
    cfg.model.decode_head.num_classes = 124
    if task['task'] == 'panoptic':
        cfg.model.num_things_classes = 58      # VIPSeg's things, first
    torch.manual_seed(0)
    torch.save({'state_dict': track_model(cfg).state_dict()}, tmp_path / 'random.pth')
    resize = dict(type='Resize', scale=(SIDE, SIDE), keep_ratio=True)
    data = dict(VIDEO_DATASETS[dataset], data_root=str(root), pipeline=video_pipeline(dataset, resize))
    config = tmp_path / f'{dataset}.py'
    config.write_text(_VIDEO_DATASET_CONFIG.format(model=cfg.model.to_dict(), dataset=data, metric=METRICS[dataset]))
    done = run_script(REPO / 'tools' / 'test.py', config, tmp_path / 'random.pth', '--work-dir', tmp_path / 'work')
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    return log


def test_tools_test_scores_a_vspw_config_with_its_miou_and_video_consistency(converted, tmp_path):
    """tools/test.py on VSPW: VSPWDataset's whole clips, the semantic task, and VideoSemanticMetric on the labels
    mmdet's LoadAnnotations reads (VSPW's 0 not scored)."""
    log = _run_video_dataset_config(tmp_path, 'vspw', task='semantic')
    figures = dict(re.findall(r'vss/(mIoU|VC8|VC16): (\S+)', log))
    assert set(figures) == {'mIoU', 'VC8', 'VC16'}, log[-3000:]
    assert 0 <= float(figures['mIoU']) <= 100 and 0 < float(figures['VC8']) <= 100
    assert figures['VC16'] == 'nan'                     # 10-frame clips have no 16-frame window


def test_tools_test_scores_a_vipseg_config_with_its_vpq_and_stq(converted, tmp_path):
    """tools/test.py on VIPSeg: VIPSegDataset's whole clips, the panoptic task, and VideoPanopticMetric on the
    tubes LoadVideoPanopticAnnotations reads."""
    log = _run_video_dataset_config(tmp_path, 'vipseg', task='panoptic', object_mask_thr=0.02, overlap_thr=0.05)
    figures = dict(re.findall(r'vps/(VPQ|VPQ8|VPQ_thing|STQ|AQ|SQ): (\S+)', log))
    assert set(figures) == {'VPQ', 'VPQ8', 'VPQ_thing', 'STQ', 'AQ', 'SQ'}, log[-3000:]
    assert all(0 <= float(v) <= 100 for v in figures.values()), figures


def mmdet_inputs(model, frames) -> torch.Tensor:
    """(T, 3, H, W): the inputs mmdet's ``inference_mot`` makes of BGR frames (the config's test pipeline, the
    model's preprocessor), for transformers' model."""
    from mmdet.apis.inference import build_test_pipeline
    from mmengine.dataset import default_collate
    pipeline = build_test_pipeline(model.cfg)
    packed = [default_collate([pipeline(dict(img=[img.astype(np.float32)], frame_id=[t], ori_shape=[img.shape[:2]],
                                             img_id=[t + 1], ori_video_length=[len(frames)]))])
              for t, img in enumerate(frames)]
    return torch.cat([model.data_preprocessor(data, False)['inputs'][0] for data in packed])


def test_inference_mot_streams_a_video_frame_by_frame_with_videomts_rule_on_the_frames_so_far(converted, tmp_path):
    """mmdet's ``inference_mot``, one frame a call: each frame's pairs, scores and masks are VidEoMT's clip
    prediction on the frames seen so far (``reference_clip``, on transformers' logits of the frames mmdet's
    pipeline and preprocessor make), a pair keeps one id, the last frame's pairs are the clip's, and what the
    model keeps between calls does not grow."""
    from mmdet.apis import inference_mot
    from mmengine.registry import DefaultScope
    model, checkpoint = converted
    ours = track_model(str(write_video_config(tmp_path, tmp_path)), checkpoint)
    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 256, (*ORI_SHAPE, 3), dtype=np.uint8) for _ in range(FRAMES + 2)]
    with DefaultScope.overwrite_default_scope('mmdet'), torch.no_grad():
        theirs = model(pixel_values_videos=mmdet_inputs(ours, frames)[None])
        kept, seen = [], []
        for t, img in enumerate(frames):
            instances = inference_mot(ours, img, t, len(frames)).video_data_samples[0].pred_track_instances
            kept.append(sum(v.numel() for v in ours._stream.values() if isinstance(v, torch.Tensor)))
            expected = reference_clip(theirs.class_queries_logits[:t + 1], theirs.masks_queries_logits[:t + 1], TOP)
            pairs = list(zip(instances.query_ids.tolist(), instances.labels.tolist()))
            assert set(pairs) == set(expected), (t, pairs, sorted(expected))
            assert instances.instances_id.tolist() == [q * CLASSES + k for q, k in pairs]
            for j, pair in enumerate(pairs):
                score, masks = expected[pair]
                assert abs(float(instances.scores[j]) - score) < 1e-5, (t, pair)
                assert (instances.masks[j] == masks[t]).float().mean() >= 0.999, (t, pair)
            seen.append(set(pairs))
        assert set(pairs) == set(reference_clip(theirs.class_queries_logits, theirs.masks_queries_logits, TOP))
        assert seen[-2] & seen[-1], 'the last two frames share no pair: the ids across frames would be untested'
        assert len(set(kept)) == 1, kept   # the state and one running sum, whatever the length
        with pytest.raises(ValueError, match=f'in order from frame_id 0: got frame_id 2 where frame {len(frames)} '
                                             f'comes next'):
            inference_mot(ours, frames[2], 2, len(frames))


def _write_mp4(path: Path, frames) -> None:
    import cv2
    video = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*'mp4v'), 10.0, frames[0].shape[1::-1])
    assert video.isOpened(), 'this OpenCV has no mp4v encoder'
    for frame in frames:
        video.write(frame)
    video.release()


def _read_video(path: Path) -> list:
    import cv2
    cap, frames = cv2.VideoCapture(str(path)), []
    ok, frame = cap.read()
    while ok:
        frames.append(frame)
        ok, frame = cap.read()
    cap.release()
    return frames


def test_infer_streams_an_mp4_into_an_overlay_video_and_youtube_vis_results(converted, tmp_path):
    """tools/infer.py CONFIG CKPT clip.mp4: the overlay video (as many frames, the same size) and YouTube-VIS's
    results json, whose masks and clip scores are VidEoMT's rule on the decoded frames (``reference_clip`` on
    transformers' logits); an image beside it is skipped with its reason; flags for images are refused."""
    from mmengine.registry import DefaultScope
    from pycocotools import mask as mask_utils
    model, checkpoint = converted
    config = write_video_config(tmp_path, tmp_path)
    x = np.arange(ORI_SHAPE[1])[None, :, None]
    _write_mp4(tmp_path / 'clip.mp4', [np.broadcast_to((x * 3 + 40 * t) % 256, (*ORI_SHAPE, 3)).astype(np.uint8)
                                       for t in range(FRAMES + 2)])
    frames = _read_video(tmp_path / 'clip.mp4')   # what the tool reads, after the codec
    (tmp_path / 'photo.jpg').write_bytes(b'not read')
    done = run_script(REPO / 'tools' / 'infer.py', config, checkpoint, tmp_path / 'clip.mp4', tmp_path / 'photo.jpg',
                      '--out-dir', tmp_path / 'out', '--no-progress')
    assert done.returncode == 0, done.stderr[-3000:]
    assert 'photo.jpg: a video model takes videos, not images' in done.stdout and '1 done, 1 skipped' in done.stdout
    drawn = _read_video(tmp_path / 'out' / 'videos' / 'clip.mp4')
    assert len(drawn) == len(frames) and drawn[0].shape == frames[0].shape
    assert json.loads((tmp_path / 'out' / 'videos.json').read_text()) == [
        dict(id=1, file_name='clip', length=len(frames), height=ORI_SHAPE[0], width=ORI_SHAPE[1])]
    results = json.loads((tmp_path / 'out' / 'results.json').read_text())
    assert all(r['video_id'] == 1 and len(r['segmentations']) == len(frames) for r in results)
    ours = track_model(str(config), checkpoint)
    with DefaultScope.overwrite_default_scope('mmdet'), torch.no_grad():
        theirs = model(pixel_values_videos=mmdet_inputs(ours, frames)[None])
    clip = reference_clip(theirs.class_queries_logits, theirs.masks_queries_logits, TOP)
    for t in range(len(frames)):
        expected = reference_clip(theirs.class_queries_logits[:t + 1], theirs.masks_queries_logits[:t + 1], TOP)
        shown = [r for r in results if r['segmentations'][t] is not None]
        assert sorted(r['category_id'] for r in shown) == sorted(k + 1 for _, k in expected), t
    last = {(r['category_id'], round(r['score'], 5)): r['segmentations'][-1] for r in results
            if r['segmentations'][-1] is not None}
    assert len(last) == TOP
    for (query, label), (score, masks) in clip.items():   # the last frame's identities: the clip's pairs
        rle = last[(label + 1, round(score, 5))]
        assert (mask_utils.decode(rle).astype(bool) == masks[-1].numpy()).mean() >= 0.999
    refused = run_script(REPO / 'tools' / 'infer.py', config, checkpoint, tmp_path / 'clip.mp4', '--out-dir',
                         tmp_path / 'other', '--mode', 'slide')
    assert refused.returncode == 2 and 'is a video config' in refused.stderr and '--mode slide' in refused.stderr


def test_infer_streams_an_mp4_of_the_semantic_task_into_vspw_pngs_and_refuses_the_panoptic_one(converted, tmp_path):
    """The semantic task: the overlay video and each frame's class ids as a palette PNG (VSPW's prediction
    format), each frame VidEoMT's vss rule on the frames so far (``reference_semantic`` on transformers'
    logits). The panoptic task reads whole clips' areas: one error, nothing written."""
    from mmengine.registry import DefaultScope
    from PIL import Image
    model, checkpoint = converted
    config = write_video_config(tmp_path, tmp_path, task='semantic')
    x = np.arange(ORI_SHAPE[1])[None, :, None]
    _write_mp4(tmp_path / 'clip.mp4', [np.broadcast_to((x * 3 + 40 * t) % 256, (*ORI_SHAPE, 3)).astype(np.uint8)
                                       for t in range(FRAMES)])
    frames = _read_video(tmp_path / 'clip.mp4')
    done = run_script(REPO / 'tools' / 'infer.py', config, checkpoint, tmp_path / 'clip.mp4', '--out-dir',
                      tmp_path / 'out', '--no-progress')
    assert done.returncode == 0, done.stderr[-3000:]
    assert "vss/ in VSPW's prediction format" in done.stdout
    assert len(_read_video(tmp_path / 'out' / 'videos' / 'clip.mp4')) == len(frames)
    pngs = sorted((tmp_path / 'out' / 'vss' / 'clip').glob('*.png'))
    assert [p.name for p in pngs] == [f'{t:08d}.png' for t in range(len(frames))]
    ours = track_model(str(config), checkpoint)
    with DefaultScope.overwrite_default_scope('mmdet'), torch.no_grad():
        theirs = model(pixel_values_videos=mmdet_inputs(ours, frames)[None])
    for t, png in enumerate(pngs):
        expected = reference_semantic(theirs.class_queries_logits[:t + 1], theirs.masks_queries_logits[:t + 1])[t]
        assert (np.array(Image.open(png)) == expected.numpy()).mean() >= 0.999, t
    config = write_video_config(tmp_path, tmp_path, task='panoptic')
    refused = run_script(REPO / 'tools' / 'infer.py', config, checkpoint, tmp_path / 'clip.mp4', '--out-dir',
                         tmp_path / 'panoptic', '--no-progress')
    assert refused.returncode == 1 and 'score whole clips with tools/test.py' in refused.stderr, refused.stderr
    assert not (tmp_path / 'panoptic' / 'videos' / 'clip.mp4').exists()


def test_a_video_whose_frames_change_size_is_one_error_and_leaves_no_video(converted, tmp_path, monkeypatch):
    """A container whose third frame comes at another size (OpenCV decodes it as it is)."""
    import cv2
    opened = cv2.VideoCapture

    class ResizingCapture:
        def __init__(self, path):
            self.capture, self.read_frames = opened(path), 0

        def read(self):
            ok, frame = self.capture.read()
            self.read_frames += 1
            return ok, (cv2.resize(frame, (120, 80)) if ok and self.read_frames == 3 else frame)

        def __getattr__(self, name):   # isOpened, get, release
            return getattr(self.capture, name)

    clip = tmp_path / 'clip.mp4'
    _write_mp4(clip, [np.zeros((*ORI_SHAPE, 3), np.uint8)] * 4)
    monkeypatch.setattr(cv2, 'VideoCapture', ResizingCapture)
    done = run_script(REPO / 'tools' / 'infer.py', write_video_config(tmp_path, tmp_path), converted[1], clip,
                      '--out-dir', tmp_path / 'out', '--no-progress')
    assert done.returncode == 1 and done.stderr.count('\n') == 1, done.stderr[-3000:]
    assert f'error: {clip}: frame 2 is 120x80, the frames before it 200x150: a video keeps one size' in done.stderr
    assert not (tmp_path / 'out' / 'videos' / 'clip.mp4').exists() and not (tmp_path / 'out' / 'results.json').exists()


def test_an_image_release_for_a_video_model_and_a_video_release_for_an_image_decoder_are_one_error(converted,
                                                                                                   tmp_path):
    """The tensors fit both ways (VidEoMT is EoMT plus its query updater), so each would load without a word."""
    from test_models_transformers_eomt import hf_model
    from vit5seg.apis import init_model
    from vit5seg.engine.checkpoint_io import CheckpointFitError
    hf_model('eomt', num_labels=CLASSES, queries=200).save_pretrained(tmp_path / 'eomt')
    assert run_script(CONVERT, tmp_path / 'eomt', tmp_path / 'image.pth').returncode == 0
    config = write_video_config(tmp_path, tmp_path)
    clip = tmp_path / 'clip.mp4'
    _write_mp4(clip, [np.zeros((*ORI_SHAPE, 3), np.uint8)] * 2)
    done = run_script(REPO / 'tools' / 'infer.py', config, tmp_path / 'image.pth', clip, '--out-dir', tmp_path / 'out')
    assert done.returncode == 1 and done.stderr.count('\n') == 1, done.stderr[-3000:]
    assert ('the checkpoint is an EoMT release (a task of no known kind) for images, and VideoMaskClassifier is a '
            'video model' in done.stderr), done.stderr
    assert not (tmp_path / 'out').exists()
    image = videomt_config()
    image.model.decoder = dict(type='EoMTDecoder')
    with pytest.raises(CheckpointFitError, match=r"a VidEoMT release \(video instance\) for video, and EoMT "
                                                 r"decodes with EoMTDecoder, which carries nothing"):
        init_model(image, str(converted[1]), device='cpu')
    with pytest.raises(CheckpointFitError, match='for video, and EncoderDecoder has no query decoder'):
        init_model(str(REPO / 'configs' / 'tiny' / 'vit5_upernet_synthetic.py'), str(converted[1]), device='cpu')
    init_model(videomt_config(), str(converted[1]), device='cpu')   # VidEoMT's decoder on images: it fits


def test_export_refuses_a_video_config_in_one_line(converted, tmp_path):
    config = write_video_config(tmp_path, tmp_path)
    done = run_script(REPO / 'tools' / 'export_onnx.py', config, converted[1], '--out', tmp_path / 'x.onnx')
    assert done.returncode == 1 and 'the ONNX export of one online step' in done.stderr, done.stderr[-2000:]
    assert done.stderr.count('\n') == 1 and not (tmp_path / 'x.onnx').exists()
