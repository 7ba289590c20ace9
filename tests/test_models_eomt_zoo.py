"""EoMT's whole model zoo (issue #45): releases made here with random weights in EoMT's key
layout, converted, and run through the shipped configs predict what the independent reference
(tests/reference_eomt.py: EoMT's eval code written from its definition) predicts; every release
of the zoo converts from a file of its layout and fits the config docs/eomt_zoo.md names.

- ADE20K panoptic (DINOv2-L's width, 640): EoMT predicts in ADE's class order, mmdet's dataset
  puts the things first. Classes are compared by name through mmdet's own ADE20K converter's
  list (tools/dataset_converters/ade20k2coco.py in mmdet's package), not this package's table.
- Cityscapes (at 1024, a CPU width): EoMT's windows over a 1024x2048 photo, written here from
  EoMT's ``window_imgs_semantic`` / ``revert_window_logits_semantic``.
- Every release: a file of its layout (timm's DINOv2 as EoMT creates it, transformers' DINOv3 as
  a delta with its base), one block deep, converted and fitted to the config the docs name.
"""
import ast
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.config import Config

from conftest import REPO, perturb
from reference_eomt import RefDinoV2, RefEoMT, panoptic_map
from test_models_eomt_panoptic import photo, reference_logits, same_segments, sharpened, small_config
from test_models_eomt_release import MEAN, STD, release
from vit5seg.models.convert import convert_file

pytest.importorskip('panopticapi')


def mmdet_ade_names() -> list:
    """ADE's 150 classes in ADE's order with mmdet's panoptic names: ORIGINAL_CATEGORIES of the
    ADE20K converter mmdet ships."""
    import mmdet
    source = (Path(mmdet.__file__).parent / '.mim' / 'tools' / 'dataset_converters' / 'ade20k2coco.py').read_text()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], 'id', '') == 'ORIGINAL_CATEGORIES':
            return ast.literal_eval(node.value)
    raise AssertionError('mmdet\'s ade20k2coco.py has no ORIGINAL_CATEGORIES')


def convert(folder: Path, sd: dict, name='pytorch_model.bin', **kwargs) -> Path:
    torch.save(sd, folder / name)
    out = folder / (name + '.pth')
    convert_file(folder / name, out, **kwargs)
    return out


@pytest.fixture
def ram_path(tmp_path):
    """A temporary folder in memory where there is one (/dev/shm): the giant releases' files are
    hundreds of MB, written, read and deleted by every test."""
    import tempfile
    shm = Path('/dev/shm')
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    with tempfile.TemporaryDirectory(dir=shm, prefix='vit5seg-test-') as folder:
        yield Path(folder)


@pytest.mark.slow
def test_ade20k_panoptic_release_predicts_as_eomt_by_class_name(ram_path):
    from mmdet.apis import inference_detector, init_detector
    from mmdet.datasets import ADE20KPanopticDataset
    torch.manual_seed(0)
    backbone = perturb(RefDinoV2(1024, 2, 16, img_size=(640, 640)), 1)     # DINOv2-L's width, 2 blocks
    # at this width the masks need a larger offset to stay apart: 34 segments on 9% of the photo
    ref = sharpened(RefEoMT(backbone, 1024, 2, num_classes=150, num_q=200, num_blocks=1), 2, class_scale=2.5,
                    mask_offset=70.0)
    sd = release(ref, backbone.vit.state_dict())
    converted = convert(ram_path, sd)
    meta = torch.load(converted, weights_only=True)['meta']['release']
    assert meta['config'] == 'configs/eomt/dinov2-large_eomt_ade20k-panoptic-640.py'
    assert (meta['task'], meta['dataset']) == ('panoptic', 'ADE20K')
    model = init_detector(small_config('dinov2-large_eomt_ade20k-panoptic-640.py', 16, depth=2, masked=1),
                          str(converted), device='cpu')
    img = photo()
    pan = inference_detector(model, img).pred_panoptic_seg.sem_seg[0].numpy()
    class_logits, mask_logits = reference_logits(ref, img)
    stuff = [0, 1, 2, 3, 4, 5, 6, 9, 11, 13, 16, 17, 21, 25, 26, 28, 29, 34, 40, 46, 48, 51, 52, 54, 59, 60, 61, 63, 68,
             77, 79, 84, 91, 94, 96, 99, 100, 101, 105, 106, 109, 113, 114, 117, 122, 128, 131, 140, 141, 145]  # the yaml's
    cls_map, seg_map = panoptic_map(mask_logits, class_logits, stuff_classes=set(stuff))
    cls_map, seg_map = cls_map.numpy(), seg_map.numpy()
    # by name: EoMT's class i is ADE's i-th; ours is named by the model's own meta (the checkpoint's
    # dataset_meta, which init_detector reads: issue #51), mmdet's dataset's order, things first
    names = mmdet_ade_names() + ['void']
    assert list(model.dataset_meta['classes']) == list(ADE20KPanopticDataset.METAINFO['classes'])
    panoptic_names = list(model.dataset_meta['classes']) + ['void']
    theirs = np.array(names, dtype=object)[cls_map]
    ours = np.array(panoptic_names, dtype=object)[pan % 1000]
    assert len(np.unique(seg_map)) > 12
    assert set(cls_map.ravel().tolist()) & set(stuff) and set(cls_map.ravel().tolist()) - set(stuff) - {150}
    assert (ours == theirs).mean() >= 0.999
    assert same_segments(pan, seg_map) >= 0.999
    segment = (theirs != 'void') | (ours != 'void')
    assert (ours == theirs)[segment].mean() >= 0.99
    # mmdet's DetInferencer names and draws the same segments: its visualizer holds the model's names
    from mmdet.apis import DetInferencer
    inferencer = DetInferencer(model=small_config('dinov2-large_eomt_ade20k-panoptic-640.py', 16, depth=2, masked=1),
                               weights=str(converted), device='cpu', show_progress=False)
    out = inferencer(img, return_vis=True, no_save_vis=True, return_datasamples=True)
    assert np.array_equal(out['predictions'][0].pred_panoptic_seg.sem_seg[0].numpy(), pan)
    assert list(inferencer.visualizer.dataset_meta['classes']) == panoptic_names[:-1]
    drawn = out['visualization'][0]
    assert drawn.shape == img.shape and (drawn != img[..., ::-1]).mean() > 0.01   # the segments, over the photo


def eomt_windows(img: torch.Tensor, crop: int):
    """EoMT's ``window_imgs_semantic`` on a (3, H, W) image whose short side is ``crop``:
    ceil(long / crop) windows along the long side, spread evenly -> [(start, window)]."""
    H, W = img.shape[-2:]
    long = max(H, W)
    n = math.ceil(long / crop)
    overlap = n * crop - long
    starts = [int(j * (crop - overlap / (n - 1))) if n > 1 else 0 for j in range(n)]
    return [(s, img[:, s:s + crop, :] if H > W else img[:, :, s:s + crop]) for s in starts]


@pytest.mark.slow
def test_cityscapes_release_predicts_as_eomt_on_a_1024x2048_photo(tmp_path):
    """At a CPU size (width 256, 2 blocks, 20 queries; the release's own shapes convert in the zoo test
    below): the shipped config's windows, resize and head through mmseg's init_model against EoMT's
    windows."""
    from vit5seg.apis import inference_model, init_model
    torch.manual_seed(0)
    backbone = perturb(RefDinoV2(256, 2, 4, img_size=(1024, 1024)), 1)
    ref = perturb(RefEoMT(backbone, 256, 2, num_classes=19, num_q=20, num_blocks=1), 2).eval()
    sd = release(ref, backbone.vit.state_dict())
    sd['criterion.empty_weight'] = torch.ones(20)
    converted = convert(tmp_path, sd)
    meta = torch.load(converted, weights_only=True)['meta']['release']
    assert (meta['num_classes'], meta['grid']) == (19, (64, 64))
    cfg = Config.fromfile(str(REPO / 'configs' / 'eomt' / 'dinov2-large_eomt_cityscapes-1024.py'))
    cfg.model.backbone.update(embed_dims=256, num_layers=2, num_heads=4, init_cfg=None)
    cfg.model.decode_head.update(in_channels=256, num_queries=20, num_blocks=1)
    model = init_model(cfg, str(converted), device='cpu')
    rng = np.random.default_rng(0)
    import cv2
    img = cv2.resize(rng.integers(0, 256, (8, 16, 3), dtype=np.uint8), (2048, 1024), interpolation=cv2.INTER_CUBIC)
    ours = inference_model(model, img).pred_sem_seg.data[0].numpy()
    # EoMT: RGB / 255, normalised; per window the per-pixel class scores; summed where windows overlap, averaged
    x = torch.from_numpy(img[..., ::-1].copy()).permute(2, 0, 1).float() / 255
    x = (x - MEAN.view(3, 1, 1)) / STD.view(3, 1, 1)
    total, count = torch.zeros(19, 1024, 2048), torch.zeros(1, 1024, 2048)
    with torch.no_grad():
        for start, window in eomt_windows(x, 1024):
            total[:, :, start:start + 1024] += ref.semantic(window[None])[0]
            count[:, :, start:start + 1024] += 1
    theirs = (total / count).argmax(0).numpy()
    assert len(np.unique(theirs)) > 5
    assert (ours == theirs).mean() >= 0.999


# --- every release of EoMT's zoo (shared facts: model_zoo/dinov2.md, model_zoo/dinov3.md) ----------
# name -> (task, dataset, backbone family, width, input side, the config docs/eomt_zoo.md gives it)
ZOO = {
    'coco_panoptic_eomt_small_640_2x': ('panoptic', 'COCO', 'dinov2', 'small', 640, 'dinov2-small_eomt_coco-panoptic-640.py'),
    'coco_panoptic_eomt_base_640_2x': ('panoptic', 'COCO', 'dinov2', 'base', 640, 'dinov2-base_eomt_coco-panoptic-640.py'),
    'coco_panoptic_eomt_large_640': ('panoptic', 'COCO', 'dinov2', 'large', 640, 'dinov2-large_eomt_coco-panoptic-640.py'),
    'coco_panoptic_eomt_giant_640': ('panoptic', 'COCO', 'dinov2', 'giant', 640, 'dinov2-giant_eomt_coco-panoptic-640.py'),
    'coco_panoptic_eomt_7b_640': ('panoptic', 'COCO', 'webssl-dino7b', '7b', 640, None),
    'coco_panoptic_eomt_large_1280': ('panoptic', 'COCO', 'dinov2', 'large', 1280, 'dinov2-large_eomt_coco-panoptic-1280.py'),
    'coco_panoptic_eomt_giant_1280': ('panoptic', 'COCO', 'dinov2', 'giant', 1280, 'dinov2-giant_eomt_coco-panoptic-1280.py'),
    'ade20k_panoptic_eomt_large_640': ('panoptic', 'ADE20K', 'dinov2', 'large', 640, 'dinov2-large_eomt_ade20k-panoptic-640.py'),
    'ade20k_panoptic_eomt_giant_640': ('panoptic', 'ADE20K', 'dinov2', 'giant', 640, 'dinov2-giant_eomt_ade20k-panoptic-640.py'),
    'ade20k_panoptic_eomt_large_1280': ('panoptic', 'ADE20K', 'dinov2', 'large', 1280, 'dinov2-large_eomt_ade20k-panoptic-1280.py'),
    'ade20k_panoptic_eomt_giant_1280': ('panoptic', 'ADE20K', 'dinov2', 'giant', 1280, 'dinov2-giant_eomt_ade20k-panoptic-1280.py'),
    'cityscapes_semantic_eomt_large_1024': ('semantic', 'Cityscapes', 'dinov2', 'large', 1024, 'dinov2-large_eomt_cityscapes-1024.py'),
    'ade20k_semantic_eomt_large_512': ('semantic', 'ADE20K', 'dinov2', 'large', 512, 'dinov2-large_eomt_ade20k.py'),
    'coco_instance_eomt_large_640': ('instance', 'COCO', 'dinov2', 'large', 640, 'dinov2-large_eomt_coco-instance-640.py'),
    'coco_instance_eomt_large_1280': ('instance', 'COCO', 'dinov2', 'large', 1280, 'dinov2-large_eomt_coco-instance-1280.py'),
    'coco_panoptic_eomt_small_640_dinov3': ('panoptic', 'COCO', 'dinov3', 'small', 640, 'dinov3-small_eomt_coco-panoptic-640.py'),
    'coco_panoptic_eomt_base_640_dinov3': ('panoptic', 'COCO', 'dinov3', 'base', 640, 'dinov3-base_eomt_coco-panoptic-640.py'),
    'coco_panoptic_eomt_large_640_dinov3': ('panoptic', 'COCO', 'dinov3', 'large', 640, 'dinov3-large_eomt_coco-panoptic-640.py'),
    'coco_panoptic_eomt_large_1280_dinov3': ('panoptic', 'COCO', 'dinov3', 'large', 1280, 'dinov3-large_eomt_coco-panoptic-1280.py'),
    'ade_semantic_eomt_large_512_dinov3': ('semantic', 'ADE20K', 'dinov3', 'large', 512, 'dinov3-large_eomt_ade20k.py'),
    'coco_instance_eomt_large_640_dinov3': ('instance', 'COCO', 'dinov3', 'large', 640, 'dinov3-large_eomt_coco-instance-640.py'),
    'coco_instance_eomt_large_1280_dinov3': ('instance', 'COCO', 'dinov3', 'large', 1280, 'dinov3-large_eomt_coco-instance-1280.py'),
}
CLASSES = {('semantic', 'ADE20K'): 150, ('semantic', 'Cityscapes'): 19, ('panoptic', 'COCO'): 133,
           ('panoptic', 'ADE20K'): 150, ('instance', 'COCO'): 80}
DIMS = {'small': (384, 6), 'base': (768, 12), 'large': (1024, 16), 'giant': (1536, 24)}
# the metric EoMT's zoo reports for each (model_zoo/dinov2.md, model_zoo/dinov3.md)
METRIC = {
    'coco_panoptic_eomt_small_640_2x': '46.7 PQ',
    'coco_panoptic_eomt_base_640_2x': '51.6 PQ',
    'coco_panoptic_eomt_large_640': '56.0 PQ',
    'coco_panoptic_eomt_giant_640': '57.0 PQ',
    'coco_panoptic_eomt_7b_640': '58.4 PQ',
    'coco_panoptic_eomt_large_1280': '58.3 PQ',
    'coco_panoptic_eomt_giant_1280': '59.2 PQ',
    'ade20k_panoptic_eomt_large_640': '50.6 PQ',
    'ade20k_panoptic_eomt_giant_640': '51.3 PQ',
    'ade20k_panoptic_eomt_large_1280': '51.7 PQ',
    'ade20k_panoptic_eomt_giant_1280': '52.8 PQ',
    'cityscapes_semantic_eomt_large_1024': '84.2 mIoU',
    'ade20k_semantic_eomt_large_512': '58.4 mIoU',
    'coco_instance_eomt_large_640': '45.2 AP',
    'coco_instance_eomt_large_1280': '48.8 AP',
    'coco_panoptic_eomt_small_640_dinov3': '47.2 PQ',
    'coco_panoptic_eomt_base_640_dinov3': '53.1 PQ',
    'coco_panoptic_eomt_large_640_dinov3': '56.8 PQ',
    'coco_panoptic_eomt_large_1280_dinov3': '58.9 PQ',
    'ade_semantic_eomt_large_512_dinov3': '59.5 mIoU',
    'coco_instance_eomt_large_640_dinov3': '45.9 AP',
    'coco_instance_eomt_large_1280_dinov3': '49.9 AP',
}
DOCS = REPO / 'docs' / 'eomt_zoo.md'


def test_the_zoo_table_names_every_release_with_its_config_command_and_metric():
    rows = {m.group(1): m.group(0) for m in re.finditer(r'^\| `?(\w+)`? \|.*$', DOCS.read_text(), re.M)}
    assert set(ZOO) <= set(rows), f'releases missing from {DOCS.name}: {sorted(set(ZOO) - set(rows))}'
    for name, (task, dataset, family, width, side, config) in ZOO.items():
        row = rows[name]
        assert f'| {METRIC[name]} |' in row, f'{name}: its row does not give EoMT\'s {METRIC[name]}'
        assert f'| {side} |' in row, f'{name}: its row does not give its input side {side}'
        if config is None:
            assert 'not converted' in row, f'{name}: the row says neither its config nor why not'
            continue
        assert (REPO / 'configs' / 'eomt' / config).is_file() and f'configs/eomt/{config}' in row, name
        assert f'convert_checkpoint.py {name}.bin' in row, f'{name}: no conversion command in its row'
        assert ('--delta-to' in row) == (family == 'dinov3'), f'{name}: a DINOv3 delta names its --delta-to base'


def random_state(module_on_meta: torch.nn.Module) -> dict:
    """The module's state dict, filled with seeded noise (norm weights near 1: trained, not a delta)."""
    g = torch.Generator().manual_seed(0)
    return {k: (1.0 if re.search(r'norm.*weight$', k) else 0.0) + 0.02 * torch.randn(v.shape, generator=g)
            for k, v in module_on_meta.state_dict().items()}


def release_file(folder: Path, task, dataset, family, width, side):
    """A random-weight release of the layout EoMT saves for this row, one block deep (one masked);
    DINOv3's as a delta, with the pretrained base it is added to. The layouts are the libraries'
    own (timm's DINOv2 as EoMT creates it, transformers' DINOv3); their values are noise."""
    import timm
    dim, heads = DIMS[width]
    classes, queries = CLASSES[task, dataset], 100 if task == 'semantic' else 200
    with torch.device('meta'):
        head = RefEoMT(torch.nn.Identity(), dim, 1, num_classes=classes, num_q=queries, num_blocks=1)
    head_sd = random_state(head)
    base = None
    if family == 'dinov2':   # EoMT's models/vit.py: timm.create_model(name, img_size, patch_size=16)
        args = dict(pretrained=False, img_size=side, patch_size=16, num_classes=0, depth=1)
        try:
            with torch.device('meta'):
                vit = timm.create_model(f'vit_{width}_patch14_reg4_dinov2', **args)
        except RuntimeError:   # timm 0.9 calls .item() while it builds
            vit = timm.create_model(f'vit_{width}_patch14_reg4_dinov2', **args)
        backbone = random_state(vit)
    else:
        transformers = pytest.importorskip('transformers')
        config = transformers.DINOv3ViTConfig(hidden_size=dim, intermediate_size=4 * dim, num_hidden_layers=1,
                                              num_attention_heads=heads, patch_size=16, num_register_tokens=4)
        with torch.device('meta'):
            model = transformers.DINOv3ViTModel(config)
        pretrained = random_state(model)
        backbone = {}
        for key, value in pretrained.items():   # EoMT's transformers_to_timm names; the delta is trained - pretrained
            if not key.endswith('mask_token'):
                name = re.sub(r'^(model\.)?layer\.', 'blocks.', key.replace('embeddings.', 'patch_embed.', 1))
                backbone[name] = 0.01 * torch.randn_like(value)
        from safetensors.torch import save_file
        base = folder / 'dinov3.safetensors'
        save_file({k: v.contiguous() for k, v in pretrained.items()}, str(base))
    sd = {f'network.encoder.backbone.{k}': v for k, v in backbone.items()}
    sd.update({f'network.{k}': v for k, v in head_sd.items()})
    sd['network.encoder.pixel_mean'], sd['network.encoder.pixel_std'] = MEAN.view(1, 3, 1, 1), STD.view(1, 3, 1, 1)
    sd['network.attn_mask_probs'] = torch.ones(1)
    sd['criterion.empty_weight'] = torch.ones(classes + 1)
    return sd, base


def fits_on_meta(cfg: Config, task: str, state_dict: dict, source: str) -> None:
    """The config's model, built on the meta device by its library (mmseg for semantic, mmdet otherwise), takes
    every tensor of ``state_dict`` and no other (shapes only)."""
    from mmengine.registry import DefaultScope

    from vit5seg.models.checkpoint import check_fits
    if task == 'semantic':
        from mmseg.registry import MODELS
        scope = 'mmseg'
    else:
        from mmdet.registry import MODELS
        scope = 'mmdet'
    with DefaultScope.overwrite_default_scope(scope), torch.device('meta'):
        model = MODELS.build(cfg.model)
    check_fits(model, state_dict, source=source)


@pytest.mark.slow
@pytest.mark.parametrize('name', [n for n, row in ZOO.items() if row[-1] is not None])
def test_every_release_converts_and_fits_the_config_the_docs_give_it(name, ram_path):
    from vit5seg.models.mask_classification.releases import describe_release
    task, dataset, family, width, side, config = ZOO[name]
    sd, base = release_file(ram_path, task, dataset, family, width, side)
    converted = torch.load(convert(ram_path, sd, name=f'{name}.bin', delta_to=base), weights_only=True)
    meta = converted['meta']
    assert (meta['release']['task'], meta['release']['dataset']) == (task, dataset)
    assert meta['release']['config'] == f'configs/eomt/{config}'   # DINOv3 at 1280: the name's side
    assert len(meta['dataset_meta']['classes']) == CLASSES[task, dataset]
    assert f'configs/eomt/{config}' in describe_release(meta), describe_release(meta)
    cfg = Config.fromfile(str(REPO / 'configs' / 'eomt' / config))
    cfg.model.backbone.update(num_layers=1, init_cfg=None)
    cfg.model.decode_head.update(num_blocks=1)
    fits_on_meta(cfg, task, converted['state_dict'], name)
