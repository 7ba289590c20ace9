"""Converted releases name their classes through the ecosystem's own doors (issue #51): mmdet's
``init_detector`` / ``DetInferencer`` and mmseg's ``init_model`` / ``MMSegInferencer`` read
``meta['dataset_meta']``, and without it fall back to another dataset's names (mmdet: COCO's 80).
Each converted release must carry the names and palette of the dataset its config evaluates on,
in the model's class order: compared here with the dataset classes mmdet and mmseg ship."""
import numpy as np
import pytest
import torch
from mmengine.config import Config

from conftest import REPO
from test_models_eomt_zoo import convert, release_file

pytest.importorskip('panopticapi')

# (task, dataset, family, width, side, the config, the library's dataset class)
RELEASES = {
    'ade20k_semantic': ('semantic', 'ADE20K', 'dinov2', 'small', 512, 'dinov2-small_eomt_ade20k.py',
                        'mmseg.datasets.ADE20KDataset'),
    'cityscapes_semantic': ('semantic', 'Cityscapes', 'dinov2', 'large', 1024, 'dinov2-large_eomt_cityscapes-1024.py',
                            'mmseg.datasets.CityscapesDataset'),
    'coco_panoptic': ('panoptic', 'COCO', 'dinov2', 'small', 640, 'dinov2-small_eomt_coco-panoptic-640.py',
                      'mmdet.datasets.CocoPanopticDataset'),
    'ade20k_panoptic': ('panoptic', 'ADE20K', 'dinov2', 'large', 640, 'dinov2-large_eomt_ade20k-panoptic-640.py',
                        'mmdet.datasets.ADE20KPanopticDataset'),
    'coco_instance': ('instance', 'COCO', 'dinov2', 'large', 640, 'dinov2-large_eomt_coco-instance-640.py',
                      'mmdet.datasets.CocoDataset'),
}


def library_classes(path: str) -> list:
    import importlib
    module, name = path.rsplit('.', 1)
    return list(getattr(importlib.import_module(module), name).METAINFO['classes'])


def one_block(config: str) -> Config:
    cfg = Config.fromfile(str(REPO / 'configs' / 'eomt' / config))
    cfg.model.backbone.update(num_layers=1, init_cfg=None)
    cfg.model.decode_head.update(num_blocks=1)
    return cfg


@pytest.mark.parametrize('name', list(RELEASES))
def test_a_converted_release_names_its_classes_in_mmdet_and_mmseg(name, tmp_path):
    task, dataset, family, width, side, config, library = RELEASES[name]
    sd, _ = release_file(tmp_path, task, dataset, family, width, side)
    converted = convert(tmp_path, sd)
    meta = torch.load(converted, weights_only=True)['meta']
    classes = library_classes(library)
    assert meta['dataset_meta']['classes'] == classes and len(meta['dataset_meta']['palette']) == len(classes)
    cfg = one_block(config)
    if task == 'semantic':
        from mmseg.apis import MMSegInferencer, init_model
        model = init_model(cfg, str(converted), device='cpu')
        inferencer = MMSegInferencer(model=cfg, weights=str(converted), device='cpu')
    else:
        from mmdet.apis import DetInferencer, init_detector
        model = init_detector(cfg, str(converted), device='cpu')
        inferencer = DetInferencer(model=cfg, weights=str(converted), device='cpu', show_progress=False)
    assert list(model.dataset_meta['classes']) == classes, name
    assert list(inferencer.model.dataset_meta['classes']) == classes, name
    if task != 'semantic' or name == 'cityscapes_semantic':
        # mmdet's visualizer fails on an empty panoptic result, which random weights give: the ADE20K panoptic
        # release draws its segments in tests/test_models_eomt_zoo.py; Cityscapes runs ViT-L windows over 1024 x 2048
        assert task == 'semantic' or list(inferencer.visualizer.dataset_meta['classes']) == classes, name
        return
    # mmseg's visualizer takes the model's names when it draws (Cityscapes' until then)
    photo = np.random.default_rng(0).integers(0, 256, (120, 160, 3), dtype=np.uint8)
    drawn = inferencer(photo, return_vis=True)['visualization']
    assert np.asarray(drawn[0] if isinstance(drawn, list) else drawn).shape == photo.shape
    assert list(inferencer.visualizer.dataset_meta['classes']) == classes, name


@pytest.mark.parametrize('file_name, config, said', [
    ('coco_panoptic_eomt_large_1280_dinov3.bin', 'dinov3-large_eomt_coco-panoptic-1280.py', 'as its name says'),
    ('pytorch_model.bin', 'dinov3-large_eomt_coco-panoptic-640.py', 'assumed: its file name gives none')])
def test_a_dinov3_release_fits_the_config_of_the_side_its_name_gives(file_name, config, said, tmp_path):
    """DINOv3 weights carry no position grid: the 1280 release converts for the 1280 config because
    EoMT's name says 1280; a file saved under another name is the 640 config, and the tool says so."""
    from conftest import run_script
    sd, base = release_file(tmp_path, 'panoptic', 'COCO', 'dinov3', 'large', 1280)
    torch.save(sd, tmp_path / file_name)
    out = run_script(REPO / 'tools' / 'convert_checkpoint.py', tmp_path / file_name, tmp_path / 'out.pth',
                     '--delta-to', base)
    assert out.returncode == 0, out.stderr
    meta = torch.load(tmp_path / 'out.pth', weights_only=True)['meta']
    assert meta['release']['config'] == f'configs/eomt/{config}'
    assert f'it fits configs/eomt/{config} (the input side {config[-7:-3].lstrip("-")} {said}' in out.stdout, out.stdout
