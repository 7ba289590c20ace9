# EoMT's ADE20K panoptic DINOv2-L model at 1280 (configs/dinov2/ade20k/panoptic/eomt_large_1280.yaml, 51.7 PQ):
# the 640 model (dinov2-large_eomt_ade20k-panoptic-640.py) with the yaml's img_size [1280, 1280].
_base_ = ['./dinov2-large_eomt_ade20k-panoptic-640.py']
image_size = (1280, 1280)
model = dict(data_preprocessor=dict(pad_size=image_size), backbone=dict(img_size=1280))
# the 640 model's pipelines with every size in them the input side
train_pipeline = [{**step, **{key: image_size for key in ('scale', 'size', 'crop_size') if key in step}}
                  for step in _base_.train_pipeline]
test_pipeline = [{**step, **{key: image_size for key in ('scale', 'size', 'crop_size') if key in step}}
                 for step in _base_.test_pipeline]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
