"""Speed and memory of whole segmentors, measured in one process: ViT-5 + UperNet's train
step, whole and slide inference (float32, bf16, ONNX Runtime), EoMT's beside it on the same
backbone, and their peak memory."""
import contextlib
import statistics
from pathlib import Path
from typing import Callable, Optional

import torch

from ..models.backbones.vit5 import resolve_arch
from ..models.builder import build_segmentor
from ..paths import config_path
from ..utils.amp import AMP_DTYPES
from ..utils.memory import peak_rss_mb, probe_peak_mb
from ..utils.timing import quartiles, sync_device, time_interleaved
from .backbone import DINOV3_PEERS, backbone_taps

# issue #17's, with --segmentor (ViT-5-S + UperNet, 512x512, CPU)
# and #26's: a bf16 train step on a CPU with bf16 instructions (AMX or AVX512-BF16)
# and #27's: EoMT against UperNet with the same backbone
SEGMENTOR_TARGETS = {'bf16_whole_speedup': ('>=', 2.0), 'onnxruntime_vs_pytorch': ('>=', 1.0),
                     'amp_train_speedup': ('>=', 1.2), 'eomt_whole_speedup': ('>=', 3.0),
                     'eomt_train_speedup': ('>=', 2.0)}


def scene_labels(crop: int, device, classes: int = 150, per_image: int = 16) -> torch.Tensor:
    """(1, crop, crop) labels of a scene: an 8 x 8 grid of regions taking ``per_image`` of
    the ``classes``. Mask-classification losses (EoMT, Mask2Former) build one target mask
    per class present, so per-pixel noise over all 150 classes would time a case no
    dataset has; per-pixel losses cost the same either way."""
    present = torch.randperm(classes)[:per_image]
    cells = present[torch.randint(0, per_image, (1, 8, 8))]
    side = -(-crop // 8)
    return cells.repeat_interleave(side, 1).repeat_interleave(side, 2)[:, :crop, :crop].contiguous().to(device)


class SegmentorSteps:
    """Timed steps of an mmseg segmentor on random data: ``train(amp)`` (one AdamW step on
    ``batch`` random crop x crop images with :func:`scene_labels`; under autocast with ``amp``,
    fp16 with a grad scaler), ``whole(autocast)`` (predict that batch) and
    ``slide(autocast)`` (sliding-window prediction of one ``slide_shape`` image,
    ``window`` squares at a 2/3 stride). Shared by the benchmark and the self-check."""

    def __init__(self, model, crop: int, batch: int, device, slide_shape=(512, 2048), window: int = 512):
        from mmengine.structures import PixelData
        from mmseg.structures import SegDataSample
        self.model, self.window = model, window
        # the trained parameters only, as the Runner's constructors (a frozen encoder has none)
        self.optim = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
        self.inputs = torch.randn(batch, 3, crop, crop, device=device)
        self.samples = []
        for _ in range(batch):
            s = SegDataSample(metainfo=dict(img_shape=(crop, crop), ori_shape=(crop, crop), pad_shape=(crop, crop)))
            s.gt_sem_seg = PixelData(data=scene_labels(crop, device))
            self.samples.append(s)
        self.big = torch.randn(1, 3, *slide_shape, device=device)
        self.big_meta = [SegDataSample(metainfo=dict(img_shape=tuple(slide_shape), ori_shape=tuple(slide_shape),
                                                     pad_shape=tuple(slide_shape)))]
        self.scalers = {}

    def train(self, amp: Optional[torch.dtype] = None) -> Callable[[], None]:
        kind = self.inputs.device.type
        if amp == torch.float16 and kind != 'cuda':
            raise ValueError('fp16 autocast train steps need a CUDA GPU (use bf16 on CPU)')
        # fp16 gradients underflow without loss scaling; one scaler per dtype so its scale carries over
        scaler = self.scalers.setdefault(amp, torch.amp.GradScaler(kind, enabled=amp == torch.float16))

        def step():
            self.model.train()
            with torch.autocast(kind, dtype=amp or torch.float32, enabled=amp is not None):
                losses = self.model(self.inputs, self.samples, mode='loss')
            self.optim.zero_grad()
            scaler.scale(sum(v for k, v in losses.items() if 'loss' in k)).backward()
            scaler.step(self.optim)
            scaler.update()
        return step

    def _predict(self, test_cfg: dict, inputs, metas, autocast):
        from mmengine.config import ConfigDict

        def run():
            self.model.eval()
            self.model.test_cfg = ConfigDict(test_cfg)
            with torch.no_grad(), autocast():
                self.model.predict(inputs, metas)
        return run

    def whole(self, autocast=contextlib.nullcontext):
        return self._predict(dict(mode='whole'), self.inputs, self.samples, autocast)

    def slide(self, autocast=contextlib.nullcontext):
        w = self.window
        return self._predict(dict(mode='slide', crop_size=(w, w), stride=(w * 2 // 3, w * 2 // 3)),
                             self.big, self.big_meta, autocast)


def upernet_model_cfg(arch):
    """The entry config's UperNet model dict with this backbone (taps, widths adapted)."""
    from mmengine.config import Config
    cfg = Config.fromfile(str(config_path('vit5_upernet_ade20k.py')))
    width, depth = resolve_arch(arch)['embed_dims'], resolve_arch(arch)['num_layers']
    cfg.model.backbone.update(arch=arch, out_indices=backbone_taps(depth))
    cfg.model.neck.embed_dim = cfg.model.auxiliary_head.in_channels = width
    cfg.model.decode_head.in_channels = [width] * 4
    return cfg.model


# EoMT's best published backbone, timed beside a ViT-5 of its size (issue #39); the anchor of its
# zoo: DINOv3-L EoMT at 512, 137 images/s compiled on one H100 (tue-mps/eomt model_zoo/dinov3.md).
EOMT_DINOV3_L_H100_IMAGES_S = 137


def eomt_model_cfg(arch):
    """The EoMT config's model dict with this backbone (width and masked blocks adapted:
    3 for 12 blocks as EoMT's S/B recipes, 4 for deeper backbones as its ViT-L)."""
    from mmengine.config import Config
    cfg = Config.fromfile(str(config_path('eomt/vit5-base_eomt_ade20k.py')))
    width, depth = resolve_arch(arch)['embed_dims'], resolve_arch(arch)['num_layers']
    cfg.model.backbone.arch = arch
    cfg.model.decode_head.update(in_channels=width, num_blocks=3 if depth <= 12 else 4)
    return cfg.model


def segmentor_peak_mb(model_cfg, crop: int, batch: int, device, amp: Optional[str] = None) -> float:
    """Peak memory of a whole segmentor's training, in MB: its weights, gradients, AdamW
    state and the activations of a step (two steps, so the optimizer state exists). CUDA:
    max allocated above what was allocated before the model was built; CPU: the growth of
    peak RSS in a fresh subprocess."""
    if torch.device(device).type == 'cuda':
        sync_device(device)
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        steps = SegmentorSteps(build_segmentor(model_cfg, device), crop, batch, device, slide_shape=(crop, crop),
                               window=crop)
        step = steps.train(AMP_DTYPES.get(amp))
        step()
        step()
        sync_device(device)
        peak = torch.cuda.max_memory_allocated() - base
        del steps, step
        torch.cuda.empty_cache()
        return peak / 2 ** 20
    import pickle
    code = ('import sys, pickle, json; import vit5seg; from vit5seg.benchmark.segmentor import _cpu_segmentor_memory_probe; '
            'print(json.dumps(_cpu_segmentor_memory_probe(*pickle.loads(sys.stdin.buffer.read()))))')
    return probe_peak_mb(code, stdin=pickle.dumps((dict(model_cfg), crop, batch, amp)))


def _cpu_segmentor_memory_probe(model_cfg, crop, batch, amp) -> float:
    from mmseg.models import EncoderDecoder  # noqa: F401  (imports outside the measurement)
    before = peak_rss_mb()
    steps = SegmentorSteps(build_segmentor(model_cfg, 'cpu'), crop, batch, 'cpu', slide_shape=(crop, crop),
                           window=crop)
    step = steps.train(AMP_DTYPES.get(amp))
    step()
    step()
    return peak_rss_mb() - before


def segmentor_timings(arch, crop, batch, device, warmup, repeats, slide_shape=(512, 2048), amp=None,
                      memory=True, dinov3_peer=None) -> dict:
    """The entry config's UperNet with this backbone: one train step in float32 (and under
    ``amp`` autocast); sliding-window inference of one 2048x512 image and whole-image
    inference of one crop, in float32 and under bf16 autocast; whole-image inference with
    ONNX Runtime (CPU, with the deploy extra); EoMT's train step and whole-image inference
    with the same backbone beside them, and EoMT on ``dinov3_peer`` (default: the DINOv3 of
    a ViT-5 preset's size, ``DINOV3_PEERS``). All interleaved in one process; then the peak
    memory of the train steps (``memory``)."""
    from mmengine.config import ConfigDict
    model_cfg = upernet_model_cfg(arch)
    model = build_segmentor(model_cfg, device)
    # the protocol's window, whatever the training crop of the benchmark
    timed = SegmentorSteps(model, crop, batch, device, slide_shape, window=min(512, *slide_shape))
    kind = torch.device(device).type
    bf16 = torch.autocast(kind, dtype=torch.bfloat16)

    eomt_cfg = eomt_model_cfg(arch)
    eomt = build_segmentor(eomt_cfg, device)
    eomt_timed = SegmentorSteps(eomt, crop, batch, device, slide_shape=(crop, crop), window=crop)
    dinov3_peer = dinov3_peer or (DINOV3_PEERS.get(arch) if isinstance(arch, str) else None)
    dinov3_eomt = None if dinov3_peer is None else build_segmentor(eomt_model_cfg(dinov3_peer), device)

    # whole-image inference of one raw (BGR, 0-255) image, as the ONNX graph computes it
    from ..deploy.export import OnnxSegmentor
    image = torch.rand(1, 3, crop, crop, device=device) * 255

    def whole(autocast=contextlib.nullcontext, segmentor=model):
        whole_model = OnnxSegmentor(segmentor).eval()

        def run():
            segmentor.eval()
            segmentor.test_cfg = ConfigDict(mode='whole')
            with torch.no_grad(), autocast():
                return whole_model(image)
        return run

    def eomt_train(prob: float):
        # EoMT's train step costs most while every mask is on (P = 1, the first sixth of the
        # schedule) and least once all are annealed away (P = 0, the last sixth)
        step = eomt_timed.train()

        def run():
            eomt.decoder.mask_probs = [prob] * len(eomt.decoder.mask_probs)
            step()
        return run

    steps = {'train': timed.train(), 'slide': timed.slide(), 'slide_bf16': timed.slide(lambda: bf16),
             'whole': whole(), 'whole_bf16': whole(lambda: bf16),
             'eomt_train': eomt_train(1.0), 'eomt_train_p0': eomt_train(0.0), 'eomt_whole': whole(segmentor=eomt)}
    if dinov3_eomt is not None:  # inference, as EoMT's zoo reports it
        steps['eomt_dinov3_whole'] = whole(segmentor=dinov3_eomt)
    if amp:
        steps['train_amp'] = timed.train(AMP_DTYPES[amp])
    session = _onnx_session(model, crop) if kind == 'cpu' else None
    if session is not None:
        array = image.cpu().numpy()
        steps['whole_onnxruntime'] = lambda: session.run(array)
    times = time_interleaved(steps, device, warmup, repeats)
    med = {k: statistics.median(v) for k, v in times.items()}
    labels_fp32, labels_bf16 = whole()()[1], whole(lambda: bf16)()[1]
    result = dict(segmentor_train_step_s=med['train'], slide_inference_2048x512_s=med['slide'],
                  slide_bf16_s=med['slide_bf16'], bf16_slide_speedup=med['slide'] / med['slide_bf16'],
                  whole_images_s=1 / med['whole'], whole_bf16_images_s=1 / med['whole_bf16'],
                  bf16_whole_speedup=med['whole'] / med['whole_bf16'],
                  bf16_label_agreement=(labels_fp32 == labels_bf16).float().mean().item(),
                  eomt_train_step_s=med['eomt_train'], eomt_train_step_p0_s=med['eomt_train_p0'],
                  eomt_whole_images_s=1 / med['eomt_whole'],
                  eomt_train_speedup=med['train'] / med['eomt_train'],
                  eomt_train_p0_speedup=med['train'] / med['eomt_train_p0'],
                  eomt_whole_speedup=med['whole'] / med['eomt_whole'])
    for key, (num, den) in {'eomt_train_speedup': ('train', 'eomt_train'),
                            'eomt_train_p0_speedup': ('train', 'eomt_train_p0'),
                            'eomt_whole_speedup': ('whole', 'eomt_whole')}.items():
        result[f'{key}_quartiles'] = quartiles([a / b for a, b in zip(times[num], times[den])])
    if dinov3_eomt is not None:
        result.update(eomt_dinov3_whole_images_s=1 / med['eomt_dinov3_whole'],
                      eomt_vs_dinov3_whole=med['eomt_dinov3_whole'] / med['eomt_whole'],
                      eomt_dinov3_arch=dinov3_peer)
        result['eomt_vs_dinov3_whole_quartiles'] = quartiles([a / b for a, b in zip(times['eomt_dinov3_whole'],
                                                                                    times['eomt_whole'])])
    if amp:
        result.update(segmentor_train_step_amp_s=med['train_amp'], amp_train_speedup=med['train'] / med['train_amp'],
                      amp_train_speedup_quartiles=quartiles([a / b for a, b in zip(times['train'],
                                                                                   times['train_amp'])]))
    if session is not None:
        result.update(whole_onnxruntime_images_s=1 / med['whole_onnxruntime'],
                      onnxruntime_vs_pytorch=med['whole'] / med['whole_onnxruntime'])
    if memory:
        del timed, steps, model, eomt, eomt_timed, dinov3_eomt
        result['segmentor_peak_mb'] = segmentor_peak_mb(model_cfg, crop, batch, device)
        result['eomt_peak_mb'] = segmentor_peak_mb(eomt_cfg, crop, batch, device)
        if amp:
            result['segmentor_peak_amp_mb'] = segmentor_peak_mb(model_cfg, crop, batch, device, amp)
    return result


def _onnx_session(model, crop: int):
    """The segmentor exported at crop x crop and opened with ONNX Runtime on the CPU (as
    many threads as torch), or None without the deploy extra."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return None
    import tempfile

    from ..deploy import OnnxSession
    from ..deploy.export import export_onnx
    path = Path(tempfile.mkdtemp()) / 'segmentor.onnx'
    export_onnx(model, path, shape=(crop, crop))
    return OnnxSession(path, threads=torch.get_num_threads())


