# The DINOv2 twin of vit5_upernet_synthetic.py: the same narrow 4-block UperNet from scratch, DINOv2's
# switches (4 registers, patch 14, its position resize); pretrained at 98 = 7 patches of 14.
_base_ = ['./vit5_upernet_synthetic.py']
model = dict(backbone=dict(arch='dinov2-small-reg4', img_size=98))
