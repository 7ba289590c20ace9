# PMT's COCO panoptic DINOv3-L model at 1280 (tue-mps/pmt image/configs/coco/panoptic/pmt_l_1280.yaml, 58.1 PQ):
# the 640 model's recipe with the data's img_size 1280.
_base_ = ['./dinov3-large_pmt_coco-panoptic-640.py']
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
