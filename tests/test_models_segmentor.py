"""ViT5 inside real mmseg segmentors built from the repo's config."""
import torch
from mmengine.config import Config
from mmengine.model.utils import revert_sync_batchnorm
from mmengine.structures import PixelData
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample
from mmseg.utils import register_all_modules

from conftest import REPO

CONFIG = REPO / 'configs' / '_base_' / 'models' / 'upernet_vit5.py'
TINY_SEGMENTOR = {
    'model.backbone.arch': 'vit5-small', 'model.backbone.embed_dims': 32, 'model.backbone.num_layers': 4,
    'model.backbone.num_heads': 2, 'model.backbone.out_indices': (0, 1, 2, 3),
    'model.data_preprocessor.size': (64, 96),  # the crop size, set by the dataset configs
    'model.neck.embed_dim': 32, 'model.decode_head.in_channels': [32] * 4, 'model.decode_head.channels': 16,
    'model.decode_head.num_classes': 5, 'model.auxiliary_head.in_channels': 32,
    'model.auxiliary_head.channels': 8, 'model.auxiliary_head.num_classes': 5,
}


def _batch(n=2, hw=(64, 96), classes=5):
    inputs = [torch.randint(0, 256, (3, *hw), dtype=torch.uint8) for _ in range(n)]
    samples = []
    for _ in range(n):
        s = SegDataSample()
        # blocky labels (one class per 16x16 cell) that a few steps can start to fit
        cells = torch.randint(0, classes, (1, hw[0] // 16 + 1, hw[1] // 16 + 1))
        label = cells.repeat_interleave(16, 1).repeat_interleave(16, 2)[:, :hw[0], :hw[1]].clone()
        label[:, :8] = 255  # ignore index
        s.gt_sem_seg = PixelData(data=label)
        s.set_metainfo(dict(img_shape=hw, ori_shape=hw, pad_shape=hw))
        samples.append(s)
    return dict(inputs=inputs, data_samples=samples)


def test_upernet_trains_loss_decreases_and_gradients_reach_backbone():
    register_all_modules(init_default_scope=True)
    cfg = Config.fromfile(str(CONFIG))
    cfg.merge_from_dict(TINY_SEGMENTOR)
    model = revert_sync_batchnorm(MODELS.build(cfg.model))
    model.init_weights()
    model.train()
    optim = torch.optim.AdamW(model.parameters(), lr=1e-2)
    data = model.data_preprocessor(_batch(), training=True)
    losses = []
    for step in range(10):
        loss_dict = model(**data, mode='loss')
        loss = sum(v for k, v in loss_dict.items() if 'loss' in k)
        optim.zero_grad()
        loss.backward()
        if step == 0:
            assert model.backbone.blocks[0].attn.qkv.weight.grad.abs().sum() > 0
            assert model.backbone.pos_embed.grad.abs().sum() > 0
        optim.step()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < 0.9 * losses[0], losses

    model.eval()
    with torch.no_grad():
        pred = model(**model.data_preprocessor(_batch(1, (70, 50)), training=False), mode='predict')
    assert pred[0].seg_logits.data.shape == (5, 70, 50)
