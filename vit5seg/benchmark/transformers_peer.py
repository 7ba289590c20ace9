"""Whole predictions against transformers' EoMT (issue #59, ``tools/benchmark.py --peer transformers``): for
EoMT-L's ADE20K semantic, COCO panoptic and COCO instance configs, one random transformers model written by
``save_pretrained``, converted here and loaded by ``init_model``, predicts one photo both ways, interleaved in
one process: ours through mmseg's or mmdet's pipeline (``inference_model``: resize, windows or padding, the
network, the post-processing to the photo), transformers' through ``EomtImageProcessor`` as the Hub's EoMT
processors are set, the model, and ``post_process_*`` at EoMT's evaluation settings (stuff classes merged, no
instance threshold), so that both compute the same prediction. The two predictions' agreement is printed
beside the times."""
import statistics
import tempfile
from pathlib import Path

import numpy as np
import torch

from ..models.backbones.vit5 import resolve_arch
from ..utils.timing import measure_cells, quartiles, time_interleaved

# the issue's expectation: ours at most 0.7 of transformers' time in each task
PEER_TARGETS = {f'{task}_time_ratio': ('<=', 0.7) for task in ('semantic', 'panoptic', 'instance')}
# EoMT-L's configs (DINOv2-L, 4 registers, queries in the last 4 blocks), their classes, queries and input side,
# and a photo of the dataset's usual size (ADE20K 4:3 at short side 512, COCO 480x640)
TASKS = {
    'semantic': dict(config='eomt/dinov2-large_eomt_ade20k.py', num_labels=150, num_queries=100, side=512,
                     photo=(512, 683)),
    'panoptic': dict(config='eomt/dinov2-large_eomt_coco-panoptic-640.py', num_labels=133, num_queries=200,
                     side=640, photo=(480, 640)),
    'instance': dict(config='eomt/dinov2-large_eomt_coco-instance-640.py', num_labels=80, num_queries=200,
                     side=640, photo=(480, 640)),
}


def eomt_sizes(arch) -> dict:
    """transformers' EomtConfig sizes of EoMT on a DINOv2 preset (``dinov2-large``: EoMT-L) or a dict literal
    of ``embed_dims``, ``num_layers`` and ``num_heads``; queries join the last 4 blocks of 24 and more, else
    the last 3 (EoMT's ViT-L and ViT-S/B settings)."""
    if isinstance(arch, str) and not arch.startswith('dinov2'):
        raise ValueError(f'--peer transformers times EoMT on DINOv2 (transformers\' EomtForUniversalSegmentation); '
                         f'{arch!r} is not a DINOv2 preset: give dinov2-small, dinov2-base or dinov2-large')
    s = resolve_arch(arch)
    depth = s['num_layers']
    return dict(hidden_size=s['embed_dims'], num_hidden_layers=depth, num_attention_heads=s['num_heads'],
                num_blocks=min(4 if depth >= 24 else 3, depth - 1))


def photo(size) -> np.ndarray:
    """An RGB photo with structure: smooth colour blobs and grain."""
    import cv2
    rng = np.random.default_rng(0)
    img = cv2.resize(rng.integers(0, 256, (6, 8, 3), dtype=np.uint8), size[::-1], interpolation=cv2.INTER_CUBIC)
    return np.clip(img.astype(int) + rng.integers(-12, 13, img.shape), 0, 255).astype(np.uint8)


def peer_models(task: str, folder: Path, device: str, sizes: dict):
    """(transformers' model, ours): one random transformers EoMT of ``sizes`` (:func:`eomt_sizes`), annealing
    finished as a release's, saved with ``save_pretrained``, converted and loaded here with the task's config
    at the same sizes."""
    import transformers

    from ..apis.inference import init_model
    from ..models.convert import convert_file
    from ..paths import config_path
    spec = TASKS[task]
    config = transformers.EomtConfig(num_labels=spec['num_labels'], num_queries=spec['num_queries'],
                                     image_size=spec['side'], **sizes)
    theirs = transformers.EomtForUniversalSegmentation(config)
    theirs.attn_mask_probs.zero_()
    theirs.save_pretrained(folder / 'transformers')
    convert_file(folder / 'transformers', folder / 'converted.pth')
    options = {'model.backbone.init_cfg': None, 'model.backbone.embed_dims': config.hidden_size,
               'model.backbone.num_layers': config.num_hidden_layers,
               'model.backbone.num_heads': config.num_attention_heads,
               'model.decode_head.in_channels': config.hidden_size, 'model.decode_head.num_blocks': config.num_blocks}
    ours = init_model(str(config_path(spec['config'])), str(folder / 'converted.pth'), device=device,
                      cfg_options=options)
    return theirs.to(device).eval(), ours


def transformers_prediction(task: str, model, processor, rgb: np.ndarray, device: str):
    """transformers' whole prediction as its docs run it: the processor, the model, ``post_process_*`` to the
    photo's size, at EoMT's evaluation settings."""
    inputs = processor(images=rgb, return_tensors='pt')
    with torch.no_grad():
        outputs = model(pixel_values=inputs['pixel_values'].to(device), patch_offsets=inputs.get('patch_offsets'))
    target = [rgb.shape[:2]]
    if task == 'semantic':
        return processor.post_process_semantic_segmentation(outputs, target_sizes=target)[0]
    num_labels = outputs.class_queries_logits.shape[-1] - 1
    if task == 'panoptic':   # COCO's stuff classes follow its 80 things, merged per class as EoMT merges them
        return processor.post_process_panoptic_segmentation(outputs, target_sizes=target,
                                                            stuff_classes=list(range(80, num_labels)))[0]
    return processor.post_process_instance_segmentation(outputs, target_sizes=target, threshold=0.0)[0]


def agreement(task: str, ours, theirs, num_labels: int) -> dict:
    """How far the two predictions agree: semantic and panoptic, the share of pixels with the same class
    (void alike); instance, how many of transformers' 30 best instances ours holds with its label and score."""
    from mmdet.evaluation.functional import INSTANCE_OFFSET
    if task == 'semantic':
        return {'semantic_same_labels': float((ours.pred_sem_seg.data[0].cpu() == theirs.cpu()).float().mean())}
    if task == 'panoptic':
        pan = ours.pred_panoptic_seg.sem_seg[0].cpu().numpy()
        label_of = {s['id']: s['label_id'] for s in theirs['segments_info']}
        their_labels = np.vectorize(lambda i: label_of.get(int(i), -1))(theirs['segmentation'].cpu().numpy())
        our_labels = np.where(pan == num_labels, -1, pan % INSTANCE_OFFSET)   # mmdet's void: num_classes
        return {'panoptic_same_labels': float((our_labels == their_labels).mean()), 'panoptic_segments': len(label_of)}
    found = ours.pred_instances
    top = sorted(theirs['segments_info'], key=lambda s: -s['score'])[:30]
    held = sum(bool(((found.labels.cpu() == s['label_id']) & ((found.scores.cpu() - s['score']).abs() <= 1e-4)).any())
               for s in top)
    return {'instance_top30_held': held}


def peer_timings(tasks=tuple(TASKS), device: str = 'cpu', warmup: int = 1, repeats: int = 3,
                 arch='dinov2-large') -> dict:
    """Per task: our and transformers' whole-prediction times (medians) of EoMT on ``arch``
    (:func:`eomt_sizes`), the ratio of the medians with the quartiles of the per-round ratios, and the
    predictions' agreement."""
    import transformers
    sizes = eomt_sizes(arch)
    result = dict(arch=arch, device=device, torch_version=torch.__version__,
                  transformers_version=transformers.__version__, threads=torch.get_num_threads(), **sizes)
    for task in tasks:   # one task's two models at a time: EoMT-L twice is about 2.5 GB in float32
        result.update(task_timing(task, device, warmup, repeats, sizes))
    return result


def task_timing(task: str, device: str, warmup: int, repeats: int, sizes: dict) -> dict:
    """One task's row of :func:`peer_timings`."""
    import transformers

    from ..apis.inference import inference_model
    from ..models.mask_classification.to_transformers import processor_settings
    spec = TASKS[task]
    with tempfile.TemporaryDirectory() as folder:
        theirs, ours = peer_models(task, Path(folder), device, sizes)
    rgb = photo(spec['photo'])
    bgr = np.ascontiguousarray(rgb[..., ::-1])
    processor = transformers.EomtImageProcessor(**processor_settings(task, spec['side']))
    out = {}
    steps = {'ours': lambda: out.__setitem__('ours', inference_model(ours, bgr)),
             'transformers': lambda: out.__setitem__(
                 'transformers', transformers_prediction(task, theirs, processor, rgb, device))}
    times = time_interleaved(steps, device, warmup, repeats)
    a, b = times['ours'], times['transformers']
    return {f'{task}_photo': 'x'.join(map(str, spec['photo'])), f'{task}_ours_s': statistics.median(a),
            f'{task}_transformers_s': statistics.median(b),
            f'{task}_time_ratio': statistics.median(a) / statistics.median(b),
            f'{task}_time_ratio_quartiles': quartiles([x / y for x, y in zip(a, b)]),
            **agreement(task, out['ours'], out['transformers'], spec['num_labels'])}


def peer_table(result: dict) -> str:
    rows = ['| measure | value | per-round quartiles | target |', '|---|---|---|---|']
    for task in TASKS:
        for key in (f'{task}_ours_s', f'{task}_transformers_s', f'{task}_time_ratio'):
            if key in result:
                rows.append(f'| {key} ' + measure_cells(result, key, PEER_TARGETS.get(key)))
    for key in ('semantic_same_labels', 'panoptic_same_labels', 'panoptic_segments', 'instance_top30_held'):
        if key in result:
            rows.append(f'| {key} | {result[key]:.4g} | | |')
    return '\n'.join(rows)


__all__ = ['PEER_TARGETS', 'TASKS', 'eomt_sizes', 'peer_table', 'peer_timings']
