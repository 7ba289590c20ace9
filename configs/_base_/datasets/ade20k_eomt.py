# ADE20K with EoMT's training augmentation (tue-mps/eomt datasets/transforms.py): its colour jitter,
# flip, the long side jittered to 512 x [0.5, 2.0], padded and cropped to 512, a crop without a
# labelled pixel drawn again (no cat_max_ratio). Validation and test: mmseg's ADE20K, resized as EoMT resizes (below).
_base_ = ['./ade20k.py']
train_pipeline = [
    dict(type='CheckedLoading', num_classes=150, skip_corrupt=False, transforms=[
        dict(type='LoadImageFromFile'),
        dict(type='LoadAnnotations', reduce_zero_label=True),  # 0 = "other" -> ignore (255)
    ]),
    dict(type='EoMTColorJitter', brightness_delta=32, contrast=0.5, saturation=0.5, hue_delta=18),
    dict(type='RandomFlip', prob=0.5),
    dict(type='ScaleJitterCrop', crop_size=(512, 512), scale_range=(0.5, 2.0)),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
# EoMT's evaluation resize (training/lightning_module.py window_imgs_semantic): the short side to 512 with
# PIL's bilinear (antialiased where it shrinks), as transformers' EomtImageProcessor also resizes
test_pipeline = [{**step, 'backend': 'pillow'} if step['type'] == 'Resize' else step for step in _base_.test_pipeline]
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
