"""Parameters and FLOPs of a segmentor config at a given input size.

Counted by PyTorch's ``torch.utils.flop_counter.FlopCounterMode`` and reported as
multiply-accumulates, the "FLOPs" of mmseg, mmcv and fvcore tables. Two figures:
``gflops`` with the attention matmuls (QK^T and AV; PyTorch's counter has no formula
for the CPU fused-attention kernel, so one is registered here) and
``gflops_no_attn`` without them, the convention of mmcv's module-based counter behind
published tables (it gives DeiT-III's 1283 GFLOPs for ViT-B UperNet at 512x2048).
"""
from typing import Optional, Sequence

import torch
from mmengine.config import Config, ConfigDict
from mmseg.structures import SegDataSample
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

from ..models.builder import build_segmentor

aten = torch.ops.aten
_SDPA_OPS = [aten._scaled_dot_product_flash_attention_for_cpu, aten._scaled_dot_product_efficient_attention,
             aten._scaled_dot_product_flash_attention, aten._scaled_dot_product_cudnn_attention]


def _sdpa_flops(query_shape, key_shape, value_shape, *args, **kwargs):
    return sdpa_flop_count(query_shape, key_shape, value_shape)


def _no_flops(*args, **kwargs):
    return 0


def count_gmacs(fn, *args, attention: bool = True) -> float:
    """Multiply-accumulates (1e9) of ``fn(*args)``: matmuls and convolutions, and the
    fused attention unless ``attention=False``."""
    formula = _sdpa_flops if attention else _no_flops
    with torch.no_grad(), FlopCounterMode(display=False, custom_mapping={op: formula for op in _SDPA_OPS}) as c:
        fn(*args)
    return c.get_total_flops() / 2 / 1e9


def model_complexity(config, shape: Sequence[int] = (512, 512), cfg_options: Optional[dict] = None) -> dict:
    """``{'params', 'gflops', 'gflops_no_attn'}`` of the whole segmentor (params with the
    auxiliary heads; GMACs of one whole-image inference of a ``shape`` image, auxiliary heads
    not run)."""
    cfg = config if isinstance(config, Config) else Config.fromfile(str(config))
    model = build_segmentor(cfg, cfg_options=cfg_options).eval()  # shapes only: no checkpoint needed
    # one whole-image pass at ``shape``, whatever the config's test mode: a slide count would
    # depend on the windows (and its overlap check reads values, which fake tensors have not)
    model.test_cfg = ConfigDict(mode='whole')
    h, w = shape
    sample = SegDataSample(metainfo=dict(img_shape=(h, w), ori_shape=(h, w), pad_shape=(h, w)))
    # Counting needs shapes, not values: fake tensors (CPU devices, no data) dispatch to the
    # same kernels as a real run at no arithmetic cost (ViT-B at 512x2048: 1 s, not 45 s).
    with FakeTensorMode(allow_non_fake_inputs=True):
        inputs = torch.zeros(1, 3, h, w)
        gflops = count_gmacs(model.predict, inputs, [sample])
        gflops_no_attn = count_gmacs(model.predict, inputs, [sample], attention=False)
    return dict(params=sum(p.numel() for p in model.parameters()), gflops=gflops, gflops_no_attn=gflops_no_attn)
