# What VidEoMT's video tests share (tue-mps/videomt configs/{VSPW,VIPSeg}/Base_R50_720p.yaml): whole clips, one a
# step, each frame at short side 720 with the long side at most detectron2's default 1333. A dataset file names
# its dataset, its label loader (after the resize: labels stay at the frame's size, where predictions are
# scored) and its metric.
frame_resize = dict(type='Resize', scale=(1333, 720), keep_ratio=True)
val_dataloader = dict(
    batch_size=1,
    num_workers=2,
    persistent_workers=True,
    drop_last=False,
    sampler=dict(type='DefaultSampler', shuffle=False, round_up=False),
    dataset=dict(test_mode=True))
test_dataloader = val_dataloader
