# ViT-5-Base + Feature2Pyramid + UperNet on COCO-Stuff 164k (171 classes): 512x512 crops,
# 80k iterations, 8 GPUs x 2, whole-image test (mmseg's COCO-Stuff 164k configs).
_base_ = [
    '../_base_/models/upernet_vit5.py', '../_base_/datasets/coco_stuff164k.py',
    '../_base_/default_runtime.py', '../_base_/schedules/adamw_80k.py',
]
crop_size = (512, 512)
num_classes = 171
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(
        arch='vit5-base',
        init_cfg=dict(type='Pretrained',
                      checkpoint='https://huggingface.co/FengWang3211/ViT-5/resolve/main/vit5_base_patch16_224.pth')),
    decode_head=dict(num_classes=num_classes),
    auxiliary_head=dict(num_classes=num_classes))
