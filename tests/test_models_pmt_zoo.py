"""PMT's seven releases (tue-mps/pmt model_zoo/image/dinov3.md): docs/pmt.md names each with its metric,
input, config and command, and a random-weight file of each release's layout (PMT's decoder-only keys,
transformers' DINOv3 base one block deep) converts and fits the config the docs give it."""
import re

import pytest
import torch
from mmengine.config import Config

from conftest import REPO
from reference_pmt import RefPMT
from test_models_eomt_zoo import convert, fits_on_meta, ram_path, random_state  # noqa: F401  (ram_path: a fixture)

DOCS = REPO / 'docs' / 'pmt.md'
# name -> (task, width, input side, metric, config)
ZOO = {
    'coco_panoptic_pmt_small_640_dinov3': ('panoptic', 'small', 640, '45.3 PQ',
                                           'dinov3-small_pmt_coco-panoptic-640.py'),
    'coco_panoptic_pmt_base_640_dinov3': ('panoptic', 'base', 640, '52.8 PQ', 'dinov3-base_pmt_coco-panoptic-640.py'),
    'coco_panoptic_pmt_large_640_dinov3': ('panoptic', 'large', 640, '56.1 PQ',
                                           'dinov3-large_pmt_coco-panoptic-640.py'),
    'coco_panoptic_pmt_large_1280_dinov3': ('panoptic', 'large', 1280, '58.1 PQ',
                                            'dinov3-large_pmt_coco-panoptic-1280.py'),
    'coco_instance_pmt_large_640_dinov3': ('instance', 'large', 640, '45.4 AP',
                                           'dinov3-large_pmt_coco-instance-640.py'),
    'coco_instance_pmt_large_1280_dinov3': ('instance', 'large', 1280, '49.0 AP',
                                            'dinov3-large_pmt_coco-instance-1280.py'),
    'ade20k_semantic_pmt_large_512_dinov3': ('semantic', 'large', 512, '58.5 mIoU', 'dinov3-large_pmt_ade20k-512.py'),
}
DIMS = {'small': (384, 6), 'base': (768, 12), 'large': (1024, 16)}
CLASSES = {'semantic': 150, 'panoptic': 133, 'instance': 80}
DATASET = {'semantic': 'ADE20K', 'panoptic': 'COCO', 'instance': 'COCO'}


def test_the_docs_name_every_release_with_its_config_command_and_metric():
    rows = {m.group(1): m.group(0) for m in re.finditer(r'^\| `?(\w+)`? \|.*$', DOCS.read_text(), re.M)}
    assert set(ZOO) <= set(rows), f'releases missing from {DOCS.name}: {sorted(set(ZOO) - set(rows))}'
    for name, (task, width, side, metric, config) in ZOO.items():
        row = rows[name]
        assert f'| {metric} |' in row and f'| {side} |' in row, name
        assert (REPO / 'configs' / 'pmt' / config).is_file() and f'configs/pmt/{config}' in row, name
        assert f'convert_checkpoint.py {name}.bin {name}.pth --delta-to' in row, name


@pytest.mark.slow
@pytest.mark.parametrize('name', list(ZOO))
def test_every_release_converts_and_fits_the_config_the_docs_give_it(name, ram_path):  # noqa: F811
    transformers = pytest.importorskip('transformers')
    from safetensors.torch import save_file

    from vit5seg.models.mask_classification.releases import describe_release
    task, width, side, _, config = ZOO[name]
    dim, heads = DIMS[width]
    queries = 100 if task == 'semantic' else 200
    with torch.device('meta'):
        ref = RefPMT(torch.nn.Identity(), dim, heads, (0, 0, 0, 0), num_classes=CLASSES[task], num_q=queries,
                     num_blocks=6, hidden=dim)
        hf = transformers.DINOv3ViTModel(transformers.DINOv3ViTConfig(
            hidden_size=dim, intermediate_size=4 * dim, num_hidden_layers=1, num_attention_heads=heads, patch_size=16,
            num_register_tokens=4))
    release = {f'network.{k}': v for k, v in random_state(ref).items()}
    release['network.decoder.attn_mask_probs'] = torch.zeros(6)
    save_file({k: v.contiguous() for k, v in random_state(hf).items()}, str(ram_path / 'dinov3.safetensors'))
    converted = torch.load(convert(ram_path, {'state_dict': release}, name=f'{name}.bin',
                                   delta_to=ram_path / 'dinov3.safetensors'), weights_only=True)
    meta = converted['meta']['release']
    assert (meta['decoder'], meta['task'], meta['dataset']) == ('PMT', task, DATASET[task])
    assert meta['config'] == f'configs/pmt/{config}'   # DINOv3 has no position grid: the name's side
    assert len(converted['meta']['dataset_meta']['classes']) == CLASSES[task]
    assert f'configs/pmt/{config}' in describe_release(converted['meta'])
    cfg = Config.fromfile(str(REPO / 'configs' / 'pmt' / config))
    cfg.model.backbone.update(num_layers=1, init_cfg=None)
    cfg.model.decoder.update(interaction_indices=(0, 0, 0, 0))   # the four levels, from the one block
    fits_on_meta(cfg, task, converted['state_dict'], name)
