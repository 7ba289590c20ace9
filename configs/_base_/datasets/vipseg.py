# VIPSeg for video panoptic segmentation, in mmdet's scope, as VidEoMT tests it (configs/VIPSeg/Base_R50_720p.yaml);
# VPQ and STQ as its utils/eval_{vpq,stq}_vspw.py. A config joins it to mmdet's runtime
# (mmdet::_base_/default_runtime.py) and a video model whose test_cfg's task is 'panoptic', num_things_classes 58
_base_ = ['./video_clips.py']
test_pipeline = [
    dict(type='TransformBroadcaster', transforms=[
        dict(type='LoadImageFromFile'), {{_base_.frame_resize}}, dict(type='LoadVideoPanopticAnnotations')]),
    dict(type='PackVideoSegInputs')]
val_dataloader = dict(dataset=dict(type='VIPSegDataset', data_root='data/VIPSeg/VIPSeg_720P/',
                                   ann_file='panoptic_gt_VIPSeg_val.json',
                                   data_prefix=dict(img_path='images', seg_map_path='panomasksRGB'),
                                   pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='VideoPanopticMetric')
test_evaluator = val_evaluator
