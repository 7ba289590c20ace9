# What the tiny twins (configs/tiny/) share: a narrow 4-block ViT-5 trained from scratch on CPU for
# 300 iterations of 8 images, whatever the dataset. One key, `tiny`, because mmengine refuses two bases
# that set the same key: a twin inherits its real config and this file, and takes its parts as _base_.tiny.X.
tiny = dict(
    width=64,
    norm_cfg=dict(type='BN', requires_grad=True),  # SyncBN needs GPUs
    backbone=dict(arch='vit5-small', embed_dims=64, num_layers=4, num_heads=2, init_cfg=None),
    upernet=dict(  # the UperNet twins' model besides the backbone above
        backbone=dict(out_indices=(0, 1, 2, 3), drop_path_rate=0.0),
        neck=dict(embed_dim=64, norm_cfg=dict(type='BN', requires_grad=True)),
        decode_head=dict(in_channels=[64] * 4, channels=32, norm_cfg=dict(type='BN', requires_grad=True)),
        auxiliary_head=dict(in_channels=64, channels=16, norm_cfg=dict(type='BN', requires_grad=True))),
    train_loader=dict(batch_size=8, num_workers=1, persistent_workers=False),
    test_loader=dict(num_workers=1, persistent_workers=False),
    auto_scale_lr=dict(base_batch_size=8),  # one process x 8: the images per iteration its lr was set for
    max_iters=300,
    upernet_lr=1e-3,  # from scratch: no pretrained backbone
    upernet_schedule=[
        dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0, end=20),
        dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=20, end=300),
    ],
    train_cfg=dict(max_iters=300, val_interval=300),
    default_hooks=dict(logger=dict(interval=10), checkpoint=dict(interval=100, save_best=None, max_keep_ckpts=2)),
)
