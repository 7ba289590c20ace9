# ViT-5-Base + Feature2Pyramid + UperNet on ADE20K, 512x512, 160k iterations, 8 GPUs x 2.
# Pretrained weights: the authors' ImageNet-1k file, downloaded once into $TORCH_HOME/hub/checkpoints;
# a local copy: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    './_base_/models/upernet_vit5.py', './_base_/datasets/ade20k.py',
    './_base_/default_runtime.py', './_base_/schedules/adamw_160k.py',
]
crop_size = (512, 512)
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(
        arch='vit5-base',
        init_cfg=dict(type='Pretrained',
                      checkpoint='https://huggingface.co/FengWang3211/ViT-5/resolve/main/vit5_base_patch16_224.pth')))
