# PMT's COCO panoptic DINOv3-L model (tue-mps/pmt image/configs/coco/panoptic/pmt_l_640.yaml, 56.1 PQ).
_base_ = ['./dinov3-base_pmt_coco-panoptic-640.py']
model = dict(
    backbone=dict(arch='dinov3-large',
                  init_cfg=dict(checkpoint='checkpoints/dinov3_vitl16_pretrain_lvd1689m-8aa4cbdd.pth')),
    decode_head=dict(in_channels=1024),
    decoder=dict(embed_dims=1024, num_heads=16, hidden_dims=1024, interaction_indices=(5, 11, 17, 23)))  # the yaml
