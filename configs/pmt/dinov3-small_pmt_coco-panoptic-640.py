# PMT's COCO panoptic DINOv3-S model (tue-mps/pmt image/configs/coco/panoptic/pmt_s_640.yaml, 45.3 PQ).
_base_ = ['./dinov3-base_pmt_coco-panoptic-640.py']
model = dict(
    backbone=dict(arch='dinov3-small',
                  init_cfg=dict(checkpoint='checkpoints/dinov3_vits16_pretrain_lvd1689m-08c60483.pth')),
    decode_head=dict(in_channels=384),
    decoder=dict(embed_dims=384, num_heads=6, hidden_dims=384))  # the yaml
