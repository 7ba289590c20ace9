# One frozen DINOv3-L, one forward pass per image, three of PMT's releases: ADE20K semantic, COCO panoptic and COCO
# instance, each with its own checkpoint (their encoder tensors are Meta's, the same in all three). Inference only:
# tools/infer.py this config CHECKPOINT_FOLDER PHOTO --out-dir OUT writes every task's outputs (docs/pmt.md).
tasks = dict(
    semantic=dict(config='pmt/dinov3-large_pmt_ade20k-512.py', checkpoint='ade20k_semantic_pmt_large_512_dinov3.pth'),
    panoptic=dict(config='pmt/dinov3-large_pmt_coco-panoptic-640.py',
                  checkpoint='coco_panoptic_pmt_large_640_dinov3.pth'),
    instance=dict(config='pmt/dinov3-large_pmt_coco-instance-640.py',
                  checkpoint='coco_instance_pmt_large_640_dinov3.pth'),
)
# every head reads the panoptic model's input (the long side at 640, padded to 640 x 640); the semantic one whole
input_task = 'panoptic'
