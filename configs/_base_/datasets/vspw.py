# VSPW for video semantic segmentation, in mmdet's scope (its video datasets, loops and samplers), as VidEoMT
# tests it (tue-mps/videomt configs/VSPW/Base_R50_720p.yaml): whole clips, short side 720, long side at most
# detectron2's default 1333; mIoU and VC8/VC16 as its utils/eval_{miou,vc}_vspw.py. A config joins it to
# mmdet's runtime (mmdet::_base_/default_runtime.py: mmdet's scope) and a video model in its test_cfg's 'semantic'
dataset_type = 'VSPWDataset'
data_root = 'data/VSPW_480p/'

test_pipeline = [
    dict(type='TransformBroadcaster', transforms=[
        dict(type='LoadImageFromFile'),
        dict(type='Resize', scale=(1333, 720), keep_ratio=True),
        # after the resize: the labels stay at the frame's size, where the predictions are scored
        dict(type='LoadAnnotations', with_bbox=False, with_seg=True, reduce_zero_label=True)]),
    dict(type='PackVideoSegInputs')]
val_dataloader = dict(
    batch_size=1,
    num_workers=2,
    persistent_workers=True,
    drop_last=False,
    sampler=dict(type='DefaultSampler', shuffle=False, round_up=False),
    dataset=dict(type=dataset_type, data_root=data_root, ann_file='val.txt', data_prefix=dict(img_path='data'),
                 test_mode=True, pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='VideoSemanticMetric', vc_lengths=(8, 16))
test_evaluator = val_evaluator
