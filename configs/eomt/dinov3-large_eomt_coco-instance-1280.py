# EoMT's COCO instance DINOv3-L model at 1280 (coco_instance_eomt_large_1280_dinov3, 49.9 mask AP): the 640 model
# (dinov3-large_eomt_coco-instance-640.py) at 1280. Its yaml never sets the data's img_size (640 by default); the
# zoo's 1280 input, FPS and AP are the 1280 model's, as for the panoptic twin (dinov3-large_eomt_coco-panoptic-1280.py).
_base_ = ['./dinov3-large_eomt_coco-instance-640.py']
image_size = (1280, 1280)
model = dict(data_preprocessor=dict(pad_size=image_size))
# the 640 model's pipelines with every size in them the input side
train_pipeline = [{**step, **{key: image_size for key in ('scale', 'size', 'crop_size') if key in step}}
                  for step in _base_.train_pipeline]
test_pipeline = [{**step, **{key: image_size for key in ('scale', 'size', 'crop_size') if key in step}}
                 for step in _base_.test_pipeline]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
