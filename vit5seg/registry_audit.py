"""Which mmseg / mmdet parts run on a ViT-5 backbone without compiled mmcv ops, on CPU
and on the branch a GPU takes.

Each case builds a real segmentor (from our head configs, or from mmseg's own model
configs with the backbone swapped for a tiny ViT-5 and, for heads made for a CNN
pyramid, a Feature2Pyramid neck) and runs a train step (forward + backward) and a
whole-image prediction twice: on CPU, and under :func:`simulated_cuda`, where the
input is a tensor that says ``is_cuda`` so the library takes its CUDA branch. The
verdict is ``works``, ``works through a pure-PyTorch fallback`` (a stand-in from
:mod:`vit5seg.compat` ran) or ``needs compiled op X`` (with the module that calls it).
``tests/test_registry_audit.py`` runs every case and checks docs/gpus.md shows the table.
"""
import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

import torch

from . import compat, ops
from .models.builder import TINY_SIZE as SIZE
from .models.builder import TINY_WIDTH, build_tiny, tiny_backbone, tiny_segmentor
from .paths import config_path
from .utils.cuda_simulation import CudaLikeTensor, simulated_cuda

NUM_CLASSES = 8


def _mmseg_config(name: str) -> Path:
    import mmseg
    return Path(mmseg.__file__).parent / '.mim' / 'configs' / name


def _set_key(obj, key, value):
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == key:
                obj[k] = value
            else:
                _set_key(v, key, value)
    elif isinstance(obj, list):
        for v in obj:
            _set_key(v, key, value)


def _find_key(obj, key):
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        obj = list(obj.values())
    if isinstance(obj, list):
        for value in obj:
            found = _find_key(value, key)
            if found is not None:
                return found
    return None


def _fit_class_weights(obj, num_classes: int) -> None:
    """Per-class loss weights sized for the dataset's ``num_classes`` are resized to
    NUM_CLASSES, keeping any entries past them (MaskFormer's 'no object' weight)."""
    if isinstance(obj, dict):
        weights = obj.get('class_weight')
        if isinstance(weights, (list, tuple)):
            obj['class_weight'] = [1.0] * NUM_CLASSES + list(weights[num_classes:])
        for value in obj.values():
            _fit_class_weights(value, num_classes)
    elif isinstance(obj, list):
        for value in obj:
            _fit_class_weights(value, num_classes)


def _take_taps(head: dict, width: int) -> None:
    """A head reading the backbone directly gets ``width`` channels per input."""
    channels = head.get('in_channels')
    if isinstance(channels, (list, tuple)):
        head['in_channels'] = [width] * len(channels)
    elif channels is not None:
        head['in_channels'] = width


def mmseg_segmentor(config: str, decode_head: Optional[dict] = None,
                    auxiliary_head: Optional[dict] = None) -> torch.nn.Module:
    """The model of one of mmseg's configs on a tiny ViT-5. Heads made for a dilated
    ResNet (``-d8``: every map at 1/8) take the 1/16 taps as they are; other CNN heads
    get a Feature2Pyramid (1/4 .. 1/32, as our UperNet); a neck of the config takes the taps."""
    from mmengine.config import Config
    cfg = Config.fromfile(str(_mmseg_config(config))).model.to_dict()
    ours = Config.fromfile(str(config_path('vit5_upernet_ade20k.py'))).model.to_dict()
    neck = cfg.get('neck')
    num_taps = len(neck['in_channels']) if neck and 'in_channels' in neck else 4
    cfg.update(pretrained=None, data_preprocessor=ours['data_preprocessor'],
               backbone=tiny_backbone(ours['backbone'], num_taps))
    cfg.pop('init_cfg', None)
    for key, override in (('decode_head', decode_head), ('auxiliary_head', auxiliary_head)):
        if override:
            cfg[key] = {**cfg[key], **override}
    if neck:
        if neck['type'] == 'Feature2Pyramid':
            neck['embed_dim'] = TINY_WIDTH
        else:
            neck['in_channels'] = type(neck['in_channels'])([TINY_WIDTH] * num_taps)
    else:
        if '-d8' not in config:
            cfg['neck'] = dict(type='Feature2Pyramid', embed_dim=TINY_WIDTH, rescales=[4, 2, 1, 0.5])
        heads = cfg['decode_head'] if isinstance(cfg['decode_head'], list) else [cfg['decode_head']]
        for head in heads + [h for h in [cfg.get('auxiliary_head')] if h]:
            for h in (head if isinstance(head, list) else [head]):
                _take_taps(h, TINY_WIDTH)
                if 'kernel_generate_head' in h:  # K-Net wraps the head that reads the taps
                    _take_taps(h['kernel_generate_head'], TINY_WIDTH)
    _fit_class_weights(cfg, _find_key(cfg, 'num_classes'))
    _set_key(cfg, 'num_classes', NUM_CLASSES)
    return build_tiny(cfg)


@dataclass
class Case:
    kind: str          # 'head', 'neck' or 'loss'
    name: str          # the registry name
    build: callable    # -> segmentor
    source: str        # the config it comes from


def _ours(head: str):
    path = config_path(f'heads/vit5_{head}_ade20k.py')
    return lambda: tiny_segmentor(path), f'configs/heads/{path.name}'


def _mm(config: str, **kwargs):
    return lambda: mmseg_segmentor(config, **kwargs), f'mmseg {config}'


def _loss(loss: dict):
    def build():
        model = tiny_segmentor(config_path('heads/vit5_fcn_ade20k.py'))
        from mmseg.registry import MODELS
        model.decode_head.loss_decode = MODELS.build(loss)
        return model
    return build, 'configs/heads/vit5_fcn_ade20k.py + ' + loss['type']


HEAD_CASES = {
    'UPerHead': (lambda: tiny_segmentor(config_path('vit5_upernet_ade20k.py')), 'configs/vit5_upernet_ade20k.py'),
    'FCNHead': _ours('fcn'), 'PSPHead': _ours('pspnet'), 'DepthwiseSeparableASPPHead': _ours('deeplabv3plus'),
    'SegformerHead': _ours('segformer'), 'SegmenterMaskTransformerHead': _ours('segmenter'),
    'SETRUPHead': _ours('setr-pup'), 'SETRMLAHead': _ours('setr-mla'), 'DPTHead': _ours('dpt'),
    'Mask2FormerHead': _ours('mask2former'),
    'QueryHead': (lambda: tiny_segmentor(config_path('eomt/vit5-base_eomt_ade20k.py')),
                  'configs/eomt/vit5-base_eomt_ade20k.py'),
    'ANNHead': _mm('_base_/models/ann_r50-d8.py'), 'APCHead': _mm('_base_/models/apcnet_r50-d8.py'),
    'ASPPHead': _mm('_base_/models/deeplabv3_r50-d8.py'), 'CCHead': _mm('_base_/models/ccnet_r50-d8.py'),
    'DAHead': _mm('_base_/models/danet_r50-d8.py'), 'DMHead': _mm('_base_/models/dmnet_r50-d8.py'),
    'DNLHead': _mm('_base_/models/dnl_r50-d8.py'), 'EMAHead': _mm('_base_/models/emanet_r50-d8.py'),
    'EncHead': _mm('_base_/models/encnet_r50-d8.py'), 'FPNHead': _mm('_base_/models/fpn_r50.py'),
    'GCHead': _mm('_base_/models/gcnet_r50-d8.py'), 'ISAHead': _mm('_base_/models/isanet_r50-d8.py'),
    'NLHead': _mm('_base_/models/nonlocal_r50-d8.py'), 'OCRHead': _mm('_base_/models/ocrnet_r50-d8.py'),
    'PSAHead': _mm('_base_/models/psanet_r50-d8.py'), 'PointHead': _mm('_base_/models/pointrend_r50.py'),
    'DepthwiseSeparableFCNHead': _mm('_base_/models/fcn_r50-d8.py',
                                     decode_head=dict(type='DepthwiseSeparableFCNHead', concat_input=False)),
    'LightHamHead': _mm('segnext/segnext_mscan-t_1xb16-adamw-160k_ade20k-512x512.py'),
    'IterativeDecodeHead': _mm('knet/knet-s3_r50-d8_fcn_8xb2-adamw-80k_ade20k-512x512.py'),
    'MaskFormerHead': _mm('maskformer/maskformer_r50-d32_8xb2-160k_ade20k-512x512.py'),
}
NECK_CASES = {
    'Feature2Pyramid': HEAD_CASES['UPerHead'], 'MLANeck': _ours('setr-mla'),
    'MultiLevelNeck': _mm('_base_/models/upernet_vit-b16_ln_mln.py'),
    'FPN': _mm('_base_/models/fpn_r50.py'),
    # JPU passes its second input through to the auxiliary head
    'JPU': _mm('_base_/models/fastfcn_r50-d32_jpu_psp.py', auxiliary_head=dict(in_channels=TINY_WIDTH)),
}
LOSS_CASES = {
    'CrossEntropyLoss': _loss(dict(type='CrossEntropyLoss')),
    'FocalLoss': _loss(dict(type='FocalLoss', use_sigmoid=True)),
    'DiceLoss': _loss(dict(type='DiceLoss')),
    'LovaszLoss': _loss(dict(type='LovaszLoss', reduction='none')),
    'TverskyLoss': _loss(dict(type='TverskyLoss')),
    'HuasdorffDisstanceLoss': _loss(dict(type='HuasdorffDisstanceLoss')),
}
# Registered, but not something to put on a ViT-5: each belongs to one backbone or task.
NOT_APPLICABLE = {
    'DDRHead': ('head', "DDRNet's two-branch head (takes DDRNet's pair of outputs)"),
    'PIDHead': ('head', "PIDNet's head (takes PIDNet's three branches)"),
    'STDCHead': ('head', "STDC's detail head (trains on STDC's boundary targets)"),
    'SideAdapterCLIPHead': ('head', "SAN's head (needs a CLIP image encoder and text embeddings)"),
    'VPDDepthHead': ('head', 'depth estimation (VPD)'),
    'LRASPPHead': ('head', "MobileNetV3's head: its fixed 49x49 pooling window needs 392 px crops at 1/8"),
    'KernelUpdateHead': ('head', "K-Net's kernel update stage (inside IterativeDecodeHead, audited there)"),
    'KernelUpdator': ('head', "K-Net's kernel updater (inside IterativeDecodeHead, audited there)"),
    'ICNeck': ('neck', "ICNet's cascade neck (takes ICNet's three-resolution branches)"),
    'SiLogLoss': ('loss', 'depth estimation loss'),
    'OhemCrossEntropy': ('loss', "DDRNet's loss: its forward takes no `weight`, which every decode head passes"),
    'BoundaryLoss': ('loss', "PIDNet's boundary loss: its forward takes no `weight`, which every decode head passes"),
}


def cases() -> List[Case]:
    out = []
    for kind, table in (('head', HEAD_CASES), ('neck', NECK_CASES), ('loss', LOSS_CASES)):
        for name, (build, source) in table.items():
            out.append(Case(kind, name, build, source))
    return out


@dataclass
class Result:
    kind: str
    name: str
    source: str
    cpu: str                      # 'ok' or the error
    cuda_branch: str              # 'ok' or the error
    fallbacks: List[str] = field(default_factory=list)
    missing_op: Optional[str] = None
    seconds: float = 0.

    @property
    def verdict(self) -> str:
        if self.missing_op:
            return f'needs compiled op `{self.missing_op}`'
        if self.cpu != 'ok' or self.cuda_branch != 'ok':
            return 'fails: ' + (self.cpu if self.cpu != 'ok' else self.cuda_branch)
        if self.fallbacks:
            return 'works through a pure-PyTorch fallback (' + ', '.join(f'`{f}`' for f in self.fallbacks) + ')'
        return 'works'


def synthetic_batch(n: int, hw, classes: int, seed: int = 0):
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample
    gen = torch.Generator().manual_seed(seed)
    inputs, samples = [], []
    for _ in range(n):
        inputs.append(torch.randint(0, 256, (3, *hw), dtype=torch.uint8, generator=gen))
        cells = torch.randint(0, classes, (1, hw[0] // 16 + 1, hw[1] // 16 + 1), generator=gen)
        label = cells.repeat_interleave(16, 1).repeat_interleave(16, 2)[:, :hw[0], :hw[1]].clone()
        label[:, :4] = 255  # some ignored pixels
        sample = SegDataSample(gt_sem_seg=PixelData(data=label))
        sample.set_metainfo(dict(img_shape=tuple(hw), ori_shape=tuple(hw), pad_shape=tuple(hw)))
        samples.append(sample)
    return dict(inputs=inputs, data_samples=samples)


def train_and_predict(model, cuda_like: bool = False, device='cpu', train: bool = True) -> None:
    """One forward + backward of the training loss and one prediction (the model's
    ``test_cfg``) of a non-square image."""
    def place(t):
        t = t.to(device)
        return t.as_subclass(CudaLikeTensor) if cuda_like else t
    if train:
        model.train()
        data = model.data_preprocessor(synthetic_batch(2, (SIZE, SIZE), NUM_CLASSES), training=True)
        samples = [s.to(device) for s in data['data_samples']]
        losses = model(place(data['inputs']), samples, mode='loss')
        loss = sum(v for k, v in losses.items() if 'loss' in k)
        if not torch.isfinite(loss):
            raise FloatingPointError(f'loss is {loss.item()}')
        loss.backward()
    model.eval()
    data = model.data_preprocessor(synthetic_batch(1, (SIZE, SIZE + 16), NUM_CLASSES, seed=1), training=False)
    with torch.no_grad():
        pred = model(place(data['inputs']), [s.to(device) for s in data['data_samples']], mode='predict')
    if tuple(pred[0].pred_sem_seg.data.shape) != (1, SIZE, SIZE + 16):
        raise AssertionError(f'prediction has shape {tuple(pred[0].pred_sem_seg.data.shape)}')


def _one_line(error: BaseException) -> str:
    return f'{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ""}'[:160]


def run_case(case: Case) -> Result:
    start = time.perf_counter()
    result = Result(case.kind, case.name, case.source, cpu='ok', cuda_branch='ok')
    for attr, cuda_like in (('cpu', False), ('cuda_branch', True)):
        before = dict(ops.FALLBACK_CALLS)
        try:
            torch.manual_seed(0)
            model = case.build()
            with simulated_cuda() if cuda_like else contextlib.nullcontext():
                train_and_predict(model, cuda_like)
        except compat.MissingMmcvOp as error:
            result.missing_op = f'{error.op}` in `{error.module}'
            setattr(result, attr, _one_line(error))
        except Exception as error:  # the table reports it
            setattr(result, attr, _one_line(error))
        used = [op for op, n in ops.FALLBACK_CALLS.items() if n > before.get(op, 0)]
        result.fallbacks += [op for op in used if cuda_like and op not in result.fallbacks]
    result.seconds = time.perf_counter() - start
    return result


def audit(names: Optional[List[str]] = None) -> List[Result]:
    return [run_case(c) for c in cases() if names is None or c.name in names]


def markdown_table(results: List[Result]) -> str:
    rows = ['| kind | module | built from | on GPUs with mmcv-lite |', '|---|---|---|---|']
    rows += [f'| {r.kind} | `{r.name}` | {r.source} | {r.verdict} |' for r in results]
    rows += [f'| {kind} | `{name}` | - | not applicable: {why} |' for name, (kind, why) in NOT_APPLICABLE.items()]
    return '\n'.join(rows) + '\n'


def summary(results: List[Result]) -> Dict[str, int]:
    counts: Dict[str, int] = {}
    for r in results:
        key = r.verdict.split(' (')[0].split(' `')[0].split(':')[0]
        counts[key] = counts.get(key, 0) + 1
    return counts
