# Cityscapes with EoMT's training augmentation (tue-mps/eomt datasets/cityscapes_semantic.py, transforms.py): its
# colour jitter, flip, the long side jittered to 1024 x [0.5, 2.0], padded and cropped to 1024x1024. Validation and
# test: cityscapes.py's (the short side at 1024: the 1024x2048 photos as they are).
_base_ = ['./cityscapes.py']
train_pipeline = [
    dict(type='CheckedLoading', num_classes=19, skip_corrupt=False, transforms=[
        dict(type='LoadImageFromFile'), dict(type='LoadAnnotations')]),
    dict(type='EoMTColorJitter', brightness_delta=32, contrast=0.5, saturation=0.5, hue_delta=18),
    dict(type='RandomFlip', prob=0.5),
    dict(type='ScaleJitterCrop', crop_size=(1024, 1024), scale_range=(0.5, 2.0)),
    dict(type='PackSegInputs'),
]
# per GPU: 8 GPUs x 2 = EoMT's batch of 16
train_dataloader = dict(batch_size=2, dataset=dict(pipeline=train_pipeline))
# EoMT's evaluation resize (training/lightning_module.py window_imgs_semantic): PIL's bilinear, the identity on
# Cityscapes' 1024x2048 photos
test_pipeline = [{**step, 'backend': 'pillow'} if step['type'] == 'Resize' else step for step in _base_.test_pipeline]
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
