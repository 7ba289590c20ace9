_base_ = ['../vit5/vit5-small_upernet_ade20k.py']
model = dict(backbone=dict(arch='deit3-small',
                           init_cfg=dict(type='Pretrained', checkpoint='checkpoints/deit_3_small_224_1k.pth')))
