# VSPW for video semantic segmentation, in mmdet's scope, as VidEoMT tests it (configs/VSPW/Base_R50_720p.yaml);
# mIoU and VC8/VC16 as its utils/eval_{miou,vc}_vspw.py. A config joins it to mmdet's runtime
# (mmdet::_base_/default_runtime.py) and a video model whose test_cfg's task is 'semantic'
_base_ = ['./video_clips.py']
test_pipeline = [
    dict(type='TransformBroadcaster', transforms=[
        dict(type='LoadImageFromFile'), {{_base_.frame_resize}},
        dict(type='LoadAnnotations', with_bbox=False, with_seg=True, reduce_zero_label=True)]),
    dict(type='PackVideoSegInputs')]
val_dataloader = dict(dataset=dict(type='VSPWDataset', data_root='data/VSPW_480p/', ann_file='val.txt',
                                   data_prefix=dict(img_path='data'), pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='VideoSemanticMetric', vc_lengths=(8, 16))
test_evaluator = val_evaluator
