# EoMT's COCO panoptic DINOv3-L model at 1280 (coco_panoptic_eomt_large_1280_dinov3, 58.9 PQ): the 640 model
# (dinov3-large_eomt_coco-panoptic-640.py) at 1280. Its yaml (configs/dinov3/coco/panoptic/eomt_large_1280.yaml)
# equals the 640 one but for the run's name and never sets the data's img_size, which falls back to 640; the zoo's
# 1280 input, FPS (33 vs 137 at 640) and PQ (58.9 vs 56.8) are the 1280 model's, so the size follows the zoo
# (docs/eomt_zoo.md). DINOv3 has no position grid: the same weights run at either size.
_base_ = ['./dinov3-large_eomt_coco-panoptic-640.py']
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
