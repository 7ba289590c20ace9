"""A segmentor's whole-image inference as one ONNX graph (``tools/export_onnx.py``); a panoptic
or instance EoMT's photo-to-segments inference likewise (:mod:`vit5seg.deploy.detector`).

Input ``image``: float32 (N, 3, H, W), the image as cv2 reads it (BGR, 0-255); the data
preprocessor's channel order and mean/std are inside the graph. Outputs ``logits``
(N, num_classes, H, W) and ``labels`` (N, H, W) int64. With ``dynamic`` N, H and W are
free: the pos_embed resize and the RoPE tables are computed in the graph.

The graph is the network on the input as given. What the config does around it at test
time (its test ``Resize``, slide or whole mode, logits back to the photo's size) is stored
in the model's metadata (``vit5seg.inference``, JSON) for ``OnnxSession.predict``.
"""
import copy
import json
import re
import time
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn

from ..errors import ToolError
from ..utils.config_kinds import task_of
from .agreement import (DETECTION_PIXELS, LOGIT_TOLERANCE, logit_differences, relative, same_segments,
                        undecided_pixels)


class ExportError(RuntimeError, ToolError):
    """The ONNX exporter could not take the model; the message names the op and module."""


class OnnxSegmentor(nn.Module):
    """What ``EncoderDecoder.predict`` computes for one whole image, from raw BGR pixels."""

    def __init__(self, segmentor: nn.Module):
        super().__init__()
        self.segmentor = segmentor
        pre = segmentor.data_preprocessor
        self.bgr_to_rgb = bool(pre.channel_conversion)
        self.register_buffer('mean', pre.mean.detach().clone().float().view(1, 3, 1, 1))
        self.register_buffer('std', pre.std.detach().clone().float().view(1, 3, 1, 1))

    def forward(self, image: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        x = image.flip(1) if self.bgr_to_rgb else image     # (N, 3, H, W), RGB
        x = (x - self.mean) / self.std
        h, w = image.shape[2:]
        # one meta for the batch: the heads read only its sizes (equal for all images)
        metas = [dict(img_shape=(h, w), pad_shape=(h, w), ori_shape=(h, w))]
        logits = self.segmentor.decode_head.predict(self.segmentor.extract_feat(x), metas,
                                                    self.segmentor.test_cfg)
        return logits, logits.argmax(dim=1)


class AdaptiveAvgPool2dByMatmul(nn.Module):
    """``nn.AdaptiveAvgPool2d`` as two averaging matrices built from the input size.

    Written by hand because ONNX has no adaptive pooling: the exporter unrolls it into
    gathers whose indices are those of the example size, so a dynamic-size graph fails
    (or is wrong) at any other size. Bin i of n over a length L covers
    [floor(i L / n), ceil((i + 1) L / n)), exactly as torch's kernel; the sums differ
    from it only by float rounding.
    """

    def __init__(self, output_size):
        super().__init__()
        self.output_size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)

    @staticmethod
    def _bins(length, n: int, like: torch.Tensor) -> torch.Tensor:
        i = torch.arange(n, device=like.device).unsqueeze(1)               # (n, 1)
        start = torch.div(i * length, n, rounding_mode='floor')
        end = torch.div((i + 1) * length + n - 1, n, rounding_mode='floor')
        j = torch.arange(length, device=like.device).unsqueeze(0)         # (1, L)
        inside = ((j >= start) & (j < end)).to(like.dtype)
        return inside / (end - start).to(like.dtype)                      # (n, L), rows sum to 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out_h, out_w = (s if s is not None else x.shape[i + 2] for i, s in enumerate(self.output_size))
        rows = self._bins(x.shape[2], out_h, x)                           # (out_h, H)
        cols = self._bins(x.shape[3], out_w, x)                           # (out_w, W)
        return rows @ x @ cols.transpose(0, 1)                            # (N, C, out_h, out_w)


def make_pools_dynamic(model: nn.Module) -> int:
    """Replace every ``nn.AdaptiveAvgPool2d`` in ``model`` (in place); returns how many."""
    count = 0
    for parent in model.modules():
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.AdaptiveAvgPool2d):
                setattr(parent, name, AdaptiveAvgPool2dByMatmul(child.output_size))
                count += 1
    return count


def _locate(model: nn.Module, example: torch.Tensor, op: str) -> Optional[str]:
    """The module (dotted name and class) whose forward first calls aten ``op`` on ``example``."""
    from torch.utils._python_dispatch import TorchDispatchMode
    stack: List[str] = []
    found: List[str] = []
    names = {m: n for n, m in model.named_modules()}

    class Spy(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if not found and func.__name__.split('.')[0] == op and stack:
                found.append(stack[-1])
            return func(*args, **(kwargs or {}))

    def enter(module, args):
        stack.append(f'{names[module] or "(root)"} ({type(module).__name__})')

    def leave(module, args, output):
        stack.pop()  # returns None: the output stays the module's

    handles = []
    for module in model.modules():
        handles += [module.register_forward_pre_hook(enter), module.register_forward_hook(leave)]
    try:
        with torch.no_grad(), Spy():
            model(example)
    except Exception:  # noqa: BLE001  (the export error is what gets reported)
        pass
    finally:
        for handle in handles:
            handle.remove()
    return found[0] if found else None


def _explain(error: Exception, model: nn.Module, example: torch.Tensor) -> str:
    text = re.sub(r'\x1b\[[0-9;]*m', '', f'{type(error).__name__}: {error}')  # the exporter's colours
    match = re.search(r'aten[.:]+(\w+)', text)
    if match is None:
        return f'the ONNX exporter failed: {text.splitlines()[0][:300]}'
    op = match.group(1)
    where = _locate(model, example, op)
    return (f"the ONNX exporter cannot take op '{op}'" + (f' (called by {where})' if where else '') +
            f': {text.splitlines()[0][:300]}')


INFERENCE_KEY = 'vit5seg.inference'


def inference_settings(cfg) -> dict:
    """What an mmseg config does around the network at test time: the test pipeline's
    ``Resize`` (scale, keep_ratio and mmcv's backend, or None), ``test_cfg`` (mode, and crop/stride for
    slide) and the decode head's ``align_corners`` for the resize back."""
    pipeline = cfg.get('test_pipeline') or cfg.test_dataloader.dataset.pipeline
    resize = next((dict(scale=list(step['scale']), keep_ratio=bool(step.get('keep_ratio', False)),
                        backend=step.get('backend', 'cv2'))
                   for step in pipeline if step['type'] == 'Resize' and step.get('scale')), None)
    test_cfg = cfg.model.get('test_cfg') or {}
    mode = test_cfg.get('mode', 'whole')
    settings = dict(resize=resize, mode=mode, align_corners=bool(cfg.model.decode_head.get('align_corners', False)))
    if mode == 'slide':
        settings.update(crop_size=list(test_cfg['crop_size']), stride=list(test_cfg['stride']))
    return settings


# torch 2.7-2.9's exporters fail on the dynamic-shape graph (torch.export on 2.9, a
# broadcast baked in at the example size on 2.7 and 2.8); 2.10 is the first that exports it
# whole (docs/compatibility.md). Fixed-size exports work on every supported torch.
DYNAMIC_EXPORT_TORCH = (2, 10)


def dynamic_export_supported() -> bool:
    return tuple(int(v) for v in torch.__version__.split('+')[0].split('.')[:2]) >= DYNAMIC_EXPORT_TORCH


def _check_dynamic(dynamic: bool) -> None:
    if dynamic and not dynamic_export_supported():
        raise ExportError(f'--dynamic needs torch >= {".".join(map(str, DYNAMIC_EXPORT_TORCH))}, whose ONNX exporter '
                          f'takes the dynamic-shape graph; this is torch {torch.__version__}. Export at a fixed size '
                          '(leave out --dynamic) or upgrade torch')


def export_onnx(segmentor: nn.Module, out, shape: Tuple[int, int] = (512, 512), dynamic: bool = False,
                opset: Optional[int] = None, settings: Optional[dict] = None) -> Path:
    """Export ``segmentor`` (an mmseg EncoderDecoder on CPU, eval mode) to ``out``;
    ``settings`` (:func:`inference_settings`) go into the model's metadata."""
    _check_dynamic(dynamic)
    wrapper = OnnxSegmentor(segmentor).eval()
    if dynamic:
        make_pools_dynamic(wrapper)
    # batch 2: torch.export fixes a dimension whose example size is 1
    example = torch.rand(2 if dynamic else 1, 3, *shape) * 255
    dynamic_shapes = None
    if dynamic:
        patch = getattr(segmentor.backbone, 'patch_size', 16)
        dims = (torch.export.Dim('batch', min=1, max=1024), torch.export.Dim('height', min=patch, max=16384),
                torch.export.Dim('width', min=patch, max=16384))
        dynamic_shapes = ({0: dims[0], 2: dims[1], 3: dims[2]},)
    return _export(wrapper, example, out, dynamic_shapes, ['logits', 'labels'], opset, settings)


def _export(wrapper: nn.Module, example: torch.Tensor, out, dynamic_shapes, output_names: List[str],
            opset: Optional[int], settings: Optional[dict]) -> Path:
    """``wrapper`` (input ``image``) to ``out`` with torch's dynamo exporter; ``settings`` as JSON
    metadata; any exporter failure is one ExportError naming the op and the module."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        with torch.no_grad():
            program = torch.onnx.export(wrapper, (example,), dynamo=True, dynamic_shapes=dynamic_shapes,
                                        input_names=['image'], output_names=output_names,
                                        opset_version=opset, verbose=False)
    except Exception as error:  # torch.onnx raises several types; one message names the op
        raise ExportError(_explain(error, wrapper, example[:1])) from None
    if program is None:
        raise ExportError('the ONNX exporter returned no program')
    if settings is not None:
        program.model.metadata_props[INFERENCE_KEY] = json.dumps(settings)
    program.save(str(out))
    return out


def export_detector_onnx(detector: nn.Module, out, task: str, side: int, shape: Tuple[int, int],
                         dynamic: bool = False, opset: Optional[int] = None, settings: Optional[dict] = None) -> Path:
    """Export a panoptic or instance EoMT (mmdet's detector on CPU, eval mode), photo in
    (:mod:`vit5seg.deploy.detector`); ``shape``: the photo size of a fixed-size export, the
    example traced for a dynamic one (one photo at a time, H and W free)."""
    from .detector import OUTPUTS, OnnxDetector
    _check_dynamic(dynamic)
    wrapper = OnnxDetector(detector, side, task).eval()
    example = image_batch(generated_image(shape))
    dynamic_shapes = None
    if dynamic:
        dynamic_shapes = ({2: torch.export.Dim('height', min=16, max=16384),
                           3: torch.export.Dim('width', min=16, max=16384)},)
    return _export(wrapper, example, out, dynamic_shapes, OUTPUTS[task], opset, settings)


def image_batch(image: np.ndarray) -> torch.Tensor:
    """A (H, W, 3) BGR image as the graphs take it: float32 (1, 3, H, W), BGR 0-255."""
    return torch.from_numpy(image).permute(2, 0, 1)[None].float()


def generated_image(hw: Tuple[int, int], seed: int = 0) -> np.ndarray:
    """A (H, W, 3) uint8 BGR test image: smooth shapes and noise, not a constant."""
    rng = np.random.default_rng(seed)
    h, w = hw
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    base = np.stack([128 + 100 * np.sin(xx / (7 + c * 3) + yy / (11 + c)) for c in range(3)], axis=-1)
    return np.clip(base + rng.normal(0, 20, (h, w, 3)), 0, 255).astype(np.uint8)


def _whole_image_reference(segmentor: nn.Module):
    """mmseg's own ``inference_model`` on an image as the graph takes it: the config's test
    pipeline without its resize (the graph is given the image at its size), whole-image mode."""
    from mmengine.config import ConfigDict

    from ..apis.inference import inference_model
    cfg = copy.deepcopy(segmentor.cfg)
    cfg.test_pipeline = [dict(type='LoadImageFromNDArray'), dict(type='PackSegInputs')]

    def predict(image: np.ndarray):
        test_cfg, config = segmentor.test_cfg, segmentor.cfg
        segmentor.test_cfg, segmentor.cfg = ConfigDict(mode='whole'), cfg
        try:
            result = inference_model(segmentor, image)
        finally:
            segmentor.test_cfg, segmentor.cfg = test_cfg, config
        return result.seg_logits.data.numpy(), result.pred_sem_seg.data[0].numpy()
    return predict


def compare_with_mmseg(onnx_path, segmentor: nn.Module, sizes: Sequence[Tuple[int, int]],
                       repeats: int = 3, threads: Optional[int] = None) -> List[dict]:
    """ONNX Runtime against mmseg's own ``inference_model`` (its data preprocessor, predict and
    post-processing, not this package's graph wrapper) on a generated image per size: max |logit
    diff|, label agreement, median latencies of both (timed interleaved, as the benchmark does)."""
    from ..utils.timing import time_interleaved
    from .runtime import OnnxSession
    session = OnnxSession(onnx_path, threads=threads)
    mmseg_predict = _whole_image_reference(segmentor)
    rows = []
    for i, hw in enumerate(sizes):
        image = generated_image(hw, seed=i)
        array = image_batch(image).numpy()
        ref_logits, ref_labels = mmseg_predict(image)
        logits, labels = session.run(array)
        times = time_interleaved({'onnxruntime': lambda: session.run(array), 'mmseg': lambda: mmseg_predict(image)},
                                 'cpu', warmup=0, repeats=repeats)
        rows.append(dict(size=f'{hw[0]}x{hw[1]}', max_abs_diff=float(np.abs(logits[0] - ref_logits).max()),
                         label_agreement=float((labels[0] == ref_labels).mean()),
                         onnxruntime_s=float(np.median(times['onnxruntime'])),
                         mmseg_s=float(np.median(times['mmseg']))))
    return rows


# Bound of the instance check, set from measured float noise between the graph (ONNX Runtime) and
# mmdet: a flipped boundary pixel moves an instance's mean mask score (DINOv2-L instance release:
# masks >= 99.98% equal, scores 2.2e-4 apart). The logits' bound and the panoptic rule: .agreement
INSTANCE_SCORE_TOLERANCE = 5e-3


def mmdet_detection(detector: nn.Module, image: np.ndarray):
    """mmdet's own ``inference_detector`` on ``image`` (the config's test pipeline, PIL's resize, mmdet's
    fusion head), and the class and mask logits its fusion head was given (the masks cut to the
    resized image and resized to the photo by mmdet): (``DetDataSample``, (class (Q, K + 1), masks
    (Q, H, W)))."""
    from mmdet.apis import inference_detector
    head, given = detector.panoptic_fusion_head, []

    def capture(rule):
        def rule_seeing_its_input(mask_cls, mask_pred, *args, **kwargs):
            given.append((mask_cls.detach().float().cpu().numpy(), mask_pred.detach().float().cpu().numpy()))
            return rule(mask_cls, mask_pred, *args, **kwargs)
        return rule_seeing_its_input

    rules = ('panoptic_postprocess', 'instance_postprocess')
    for name in rules:   # an instance attribute over the method, for this call only
        setattr(head, name, capture(getattr(head, name)))
    try:
        with torch.no_grad():
            result = inference_detector(detector, image)
    finally:
        for name in rules:
            delattr(head, name)
    return result, given[0]


def detection_agreement(task: str, detector: nn.Module, image: np.ndarray, found: dict, top: int = 20) -> dict:
    """ONNX Runtime's outputs ``found`` (``OnnxSession.detect(image, logits=True)``) against mmdet's
    inference of ``image``: ``logits``, the largest class or mask logit difference relative to mmdet's
    largest (:func:`.agreement.relative`); panoptic: ``agreement``, the share of decided pixels
    (:func:`.agreement.undecided_pixels`) with the same segment, and ``decided``, their share of the
    photo; instance: ``agreement``, the share of mmdet's ``top`` best instances that ONNX Runtime
    gives too (same label, score within :data:`INSTANCE_SCORE_TOLERANCE`, the same mask on >= 99.9%
    of pixels), one to one."""
    reference, (ref_cls, ref_masks) = mmdet_detection(detector, image)
    class_diff, mask_diff = logit_differences((ref_cls, ref_masks), (found['class_logits'], found['mask_logits']))
    row = dict(logits=max(relative(class_diff, ref_cls), relative(mask_diff, ref_masks)))
    if task == 'panoptic':
        cfg = detector.test_cfg or {}
        # twice the measured difference: a decision that far from its threshold cannot flip on it
        undecided = undecided_pixels(ref_cls, ref_masks, detector.num_classes, cfg.get('object_mask_thr', 0.8),
                                     cfg.get('iou_thr', 0.8), 2 * class_diff, 2 * mask_diff)
        row.update(agreement=same_segments(reference.pred_panoptic_seg.sem_seg[0].numpy(), found['panoptic'],
                                           ~undecided), decided=float((~undecided).mean()))
        return row
    found_instances = reference.pred_instances
    theirs = [found_instances.masks.numpy(), found_instances.labels.numpy(), found_instances.scores.numpy()]
    masks, labels, scores = found['masks'], found['labels'], found['scores']
    unused = list(range(len(scores)))
    matched = 0
    for i in np.argsort(-theirs[2], kind='stable')[:top]:
        match = next((j for j in unused if labels[j] == theirs[1][i]
                      and abs(scores[j] - theirs[2][i]) <= INSTANCE_SCORE_TOLERANCE
                      and (masks[j] == theirs[0][i]).mean() >= DETECTION_PIXELS), None)
        if match is not None:
            unused.remove(match)
            matched += 1
    row['agreement'] = matched / min(top, len(theirs[2])) if len(theirs[2]) else 1.0
    return row


def compare_detector_with_mmdet(onnx_path, detector: nn.Module, sizes: Sequence[Tuple[int, int]], task: str,
                                repeats: int = 3, threads: Optional[int] = None) -> List[dict]:
    """ONNX Runtime against mmdet's own ``inference_detector`` on a generated photo per size:
    :func:`detection_agreement`, median latencies of both."""
    from mmdet.apis import inference_detector

    from ..utils.timing import time_interleaved
    from .runtime import OnnxSession
    session = OnnxSession(onnx_path, threads=threads)
    rows = []
    for i, hw in enumerate(sizes):
        image = generated_image(hw, seed=i)
        row = detection_agreement(task, detector, image, session.detect(image, logits=True))
        times = time_interleaved({'onnxruntime': lambda: session.detect(image),
                                  'mmdet': lambda: inference_detector(detector, image)}, 'cpu', warmup=0,
                                 repeats=repeats)
        rows.append(dict(size=f'{hw[0]}x{hw[1]}', **row, onnxruntime_s=float(np.median(times['onnxruntime'])),
                         mmdet_s=float(np.median(times['mmdet']))))
    return rows


def detection_failures(rows: List[dict], task: str) -> List[str]:
    """The sizes of ``rows`` (:func:`compare_detector_with_mmdet`) that break a bound."""
    need = DETECTION_PIXELS if task == 'panoptic' else 1.0
    return [r['size'] for r in rows if r['logits'] > LOGIT_TOLERANCE or r['agreement'] < need]


def load_model(config, checkpoint, sha256: Optional[str] = None) -> nn.Module:
    """The config's model on CPU in eval mode with ``checkpoint`` loaded strictly (a segmentor;
    for a panoptic or instance config mmdet's detector, named with its dataset's classes): a
    checkpoint that does not fit is one error listing what differs."""
    from ..apis.inference import init_model
    from ..models.checkpoint import check_fits, read_checkpoint
    model = init_model(str(config), None, device='cpu')
    obj = read_checkpoint(checkpoint, sha256=sha256)
    state = obj.get('state_dict', obj) if isinstance(obj, dict) else obj
    check_fits(model, state, source=str(checkpoint))
    model.load_state_dict(state)
    return model.eval()


def comparison_sizes(shape: Tuple[int, int], dynamic: bool) -> List[Tuple[int, int]]:
    """The export size, and with ``dynamic`` two more that are not multiples of the patch."""
    h, w = shape
    return [shape] + ([(h * 3 // 2 + 7, w * 3 // 4 + 5), (h // 2 + 3, w + 21)] if dynamic else [])


MAX_ABS_DIFF, MIN_AGREEMENT = 1e-3, 0.999


def main(argv=None) -> int:
    import argparse
    parser = argparse.ArgumentParser(description='Export a segmentor\'s whole-image inference to ONNX, then check '
                                                 'ONNX Runtime against PyTorch on generated images.')
    parser.add_argument('config', help='config file')
    parser.add_argument('checkpoint', help='checkpoint file or http(s) URL')
    parser.add_argument('--out', required=True, help='the .onnx file to write')
    size = parser.add_mutually_exclusive_group()
    size.add_argument('--shape', type=int, nargs=2, metavar=('H', 'W'),
                      help="input size of the graph (default: the config's crop_size, else 512 512)")
    size.add_argument('--dynamic', action='store_true', help='batch, height and width free')
    parser.add_argument('--example-shape', type=int, nargs=2, metavar=('H', 'W'),
                        help='with --dynamic: the size traced and checked first (default as --shape)')
    parser.add_argument('--opset', type=int, default=None, help='ONNX opset (default: the exporter\'s)')
    parser.add_argument('--sha256', help='expected sha256 of the checkpoint (or a prefix of 8+ hex digits)')
    parser.add_argument('--repeats', type=int, default=3, help='timed runs per size for the latencies')
    args = parser.parse_args(argv)

    from mmengine.config import Config
    cfg = Config.fromfile(args.config)
    task = task_of(cfg)
    if task == 'video-instance':
        raise ExportError(f'{args.config} is a video config: the ONNX export of one online step (a frame and '
                          f'the previous queries in) is not here yet')
    if task in ('panoptic', 'instance'):   # mmdet's panoptic or instance EoMT
        return export_detector_main(args, cfg)
    shape = tuple(args.shape or args.example_shape or cfg.get('crop_size') or (512, 512))
    model = load_model(args.config, args.checkpoint, args.sha256)
    start = time.perf_counter()
    out = export_onnx(model, args.out, shape=shape, dynamic=args.dynamic, opset=args.opset,
                      settings=inference_settings(cfg))
    print(f'exported {out} ({"dynamic N, H, W" if args.dynamic else f"1x3x{shape[0]}x{shape[1]}"}) '
          f'in {time.perf_counter() - start:.0f} s')
    rows = compare_with_mmseg(out, model, comparison_sizes(shape, args.dynamic), repeats=args.repeats,
                              threads=torch.get_num_threads())
    print('ONNX Runtime against mmseg\'s inference_model (whole image, at the size given):')
    print('| size | max abs diff | label agreement | onnxruntime s | mmseg s |')
    print('|---|---|---|---|---|')
    bad = []
    for r in rows:
        print(f"| {r['size']} | {r['max_abs_diff']:.2e} | {100 * r['label_agreement']:.3f}% | "
              f"{r['onnxruntime_s']:.4f} | {r['mmseg_s']:.4f} |")
        if r['max_abs_diff'] > MAX_ABS_DIFF or r['label_agreement'] < MIN_AGREEMENT:
            bad.append(r['size'])
    if bad:
        print(f'error: ONNX Runtime and mmseg\'s inference_model differ at {", ".join(bad)} (limits: max abs diff '
              f'{MAX_ABS_DIFF:g}, label agreement {100 * MIN_AGREEMENT:g}%)')
        return 1
    return 0


def export_detector_main(args, cfg) -> int:
    """``main`` for a panoptic or instance config: the photo-in graph, checked on generated photos."""
    task = task_of(cfg)
    side = int(cfg.model.data_preprocessor.pad_size[0])
    shape = tuple(args.shape or args.example_shape or (side * 3 // 4, side))
    model = load_model(args.config, args.checkpoint, args.sha256)
    if task == 'instance' and model.num_stuff_classes:
        raise ExportError(f'{args.config} has instance_on and {model.num_stuff_classes} stuff classes: the instance '
                          'graph keeps every class (an instance config has none); export it as panoptic')
    start = time.perf_counter()
    out = export_detector_onnx(model, args.out, task, side, shape, dynamic=args.dynamic, opset=args.opset,
                               settings=dict(task=task, side=side, classes=list(model.dataset_meta['classes'])))
    print(f'exported {out} ({task}, photo in: {"dynamic H, W" if args.dynamic else f"1x3x{shape[0]}x{shape[1]}"}) '
          f'in {time.perf_counter() - start:.0f} s')
    rows = compare_detector_with_mmdet(out, model, comparison_sizes(shape, args.dynamic), task,
                                       repeats=args.repeats, threads=torch.get_num_threads())
    if task == 'panoptic':
        what = 'decided pixels | of them, the same segment'
    else:
        what = (f'of mmdet\'s top 20 instances found (label, mask on {100 * DETECTION_PIXELS:g}% of pixels, score '
                f'within {INSTANCE_SCORE_TOLERANCE:g})')
    print('ONNX Runtime against mmdet\'s inference_detector:')
    print(f'| size | logits: max diff / max | {what} | onnxruntime s | mmdet s |')
    print('|---|---|' + ('---|' if task == 'panoptic' else '') + '---|---|---|')
    for r in rows:
        decided = f"{100 * r['decided']:.3f}% | " if task == 'panoptic' else ''
        print(f"| {r['size']} | {r['logits']:.2e} | {decided}{100 * r['agreement']:.3f}% | {r['onnxruntime_s']:.4f} | "
              f"{r['mmdet_s']:.4f} |")
    bad = detection_failures(rows, task)
    if bad:
        print(f'error: ONNX Runtime and mmdet\'s inference_detector differ at {", ".join(bad)} (limits: logits '
              f'{LOGIT_TOLERANCE:g} of the largest; '
              + (f'{100 * DETECTION_PIXELS:g}% of the pixels no threshold is within that of, the same segment)'
                 if task == 'panoptic' else 'every one of mmdet\'s top 20 instances)'))
        return 1
    return 0
