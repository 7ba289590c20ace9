# ViT-5-Base + Feature2Pyramid + UperNet on Pascal Context (59 classes): 480x480 crops, 80k
# iterations, 8 GPUs x 2, sliding-window test (480 windows, stride 320: mmseg's Context configs).
_base_ = [
    '../_base_/models/upernet_vit5.py', '../_base_/datasets/pascal_context_59.py',
    '../_base_/default_runtime.py', '../_base_/schedules/adamw_80k.py',
]
crop_size = (480, 480)
num_classes = 59
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(
        arch='vit5-base',
        init_cfg=dict(type='Pretrained',
                      checkpoint='https://huggingface.co/FengWang3211/ViT-5/resolve/main/vit5_base_patch16_224.pth')),
    decode_head=dict(num_classes=num_classes),
    auxiliary_head=dict(num_classes=num_classes),
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(320, 320)))
