# Meta's linear probe of a frozen ViT-5-Base on ADE20K (facebookresearch/dinov3 dinov3/eval/segmentation/configs/
# config-ade20k-linear-training.yaml), from the authors' ImageNet-1k weights.
_base_ = [
    '../_base_/models/linear_vit5.py', '../_base_/datasets/ade20k_linear.py',
    '../_base_/default_runtime.py', '../_base_/schedules/linear_adamw_40k.py',
]
model = dict(
    data_preprocessor=dict(size=(512, 512)),
    backbone=dict(
        arch='vit5-base',
        init_cfg=dict(type='Pretrained',
                      checkpoint='https://huggingface.co/FengWang3211/ViT-5/resolve/main/vit5_base_patch16_224.pth')))
