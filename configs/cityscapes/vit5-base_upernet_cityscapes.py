# ViT-5-Base + Feature2Pyramid + UperNet on Cityscapes: 512x1024 crops, 80k iterations, 8 GPUs x 1,
# sliding-window test over the 1024x2048 frames. The 32x64-token crops are where resolution
# robustness matters: pos_embed is resized and RoPE squeezed per axis from the 14x14 pretraining grid.
_base_ = [
    '../_base_/models/upernet_vit5.py', '../_base_/datasets/cityscapes.py',
    '../_base_/default_runtime.py', '../_base_/schedules/adamw_80k.py',
]
crop_size = (512, 1024)
num_classes = 19
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(
        arch='vit5-base',
        init_cfg=dict(type='Pretrained',
                      checkpoint='https://huggingface.co/FengWang3211/ViT-5/resolve/main/vit5_base_patch16_224.pth')),
    decode_head=dict(num_classes=num_classes),
    auxiliary_head=dict(num_classes=num_classes),
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(341, 682)))  # the crop's windows, stride 2/3 (mmseg's UperNet Cityscapes configs test whole)
auto_scale_lr = dict(base_batch_size=8)
