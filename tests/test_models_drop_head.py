"""Fine-tuning across class counts in one command (issue #51): ``tools/convert_checkpoint.py IN
OUT --drop-head`` writes the checkpoint without the tensors whose shape is its class count, so
``load_from`` starts a model of other classes from it. ADE20K's 150 classes to Cityscapes' 19
(UperNet: a training's checkpoint, then a real training step) and COCO panoptic's 133 to ADE20K
panoptic's 150 (EoMT's own route, from its release file: mask queries kept)."""
import pytest
import torch
from mmengine.config import Config
from mmengine.runner import load_checkpoint

from conftest import REPO, run_script
from vit5seg.engine.checkpoint_io import CheckpointShapeError

TINY = REPO / 'configs' / 'tiny'


def _model(config, scope='mmseg'):
    import importlib
    from mmengine.registry import DefaultScope
    importlib.import_module(f'{scope}.utils').register_all_modules(init_default_scope=False)
    with DefaultScope.overwrite_default_scope(scope):
        return importlib.import_module(f'{scope}.registry').MODELS.build(
            config if isinstance(config, dict) else Config.fromfile(str(config)).model)


def test_ade20k_to_cityscapes_starts_from_every_tensor_but_the_classifiers(tmp_path):
    from vit5seg.datasets import make_synthetic_data
    torch.manual_seed(0)
    ade = _model(TINY / 'vit5_upernet_synthetic.py')
    torch.save({'state_dict': ade.state_dict(), 'meta': {'dataset_meta': {'classes': ['wall'] * 150}},
                'optimizer': {}}, tmp_path / 'iter_160000.pth')
    cityscapes_cfg = TINY / 'vit5_upernet_synthetic_cityscapes.py'
    with pytest.raises(CheckpointShapeError, match='decode_head.conv_seg.weight: checkpoint .150, 32, 1, 1. vs '
                                                   r'model \(19, 32, 1, 1\)'):
        load_checkpoint(_model(cityscapes_cfg), str(tmp_path / 'iter_160000.pth'), map_location='cpu')
    out = run_script(REPO / 'tools' / 'convert_checkpoint.py', tmp_path / 'iter_160000.pth', tmp_path / 'start.pth',
                     '--drop-head')
    assert out.returncode == 0, out.stderr
    assert 'dropped 4 class-dependent tensors (auxiliary_head.conv_seg.bias, auxiliary_head.conv_seg.weight, ' \
           'decode_head.conv_seg.bias, decode_head.conv_seg.weight)' in out.stdout
    saved = torch.load(tmp_path / 'start.pth', weights_only=True)
    assert set(saved['state_dict']) == {k for k in ade.state_dict() if 'conv_seg' not in k}
    assert 'dataset_meta' not in saved['meta'] and saved['meta']['fine_tuned_from']['dataset_meta']
    # a real training on Cityscapes-layout data starts from it: every tensor the ADE20K model shares
    make_synthetic_data('cityscapes', tmp_path / 'data' / 'synthetic', num_train=2, num_val=1, size=64)
    run = run_script(REPO / 'tools' / 'train.py', cityscapes_cfg, '--work-dir', 'run', '--cfg-options',
                     f'load_from={tmp_path / "start.pth"}', 'train_cfg.max_iters=1', 'train_cfg.val_interval=10',
                     'train_dataloader.batch_size=2', 'optim_wrapper.optimizer.lr=0', cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    trained = torch.load(tmp_path / 'run' / 'iter_1.pth', weights_only=False)['state_dict']
    for key, value in saved['state_dict'].items():
        if not key.endswith(('running_mean', 'running_var', 'num_batches_tracked')):   # BN's statistics move
            assert torch.equal(trained[key], value), key                                 # lr 0: the start itself
    assert trained['decode_head.conv_seg.weight'].shape == (19, 32, 1, 1)


def test_coco_panoptic_release_to_ade20k_panoptic_keeps_the_queries(tmp_path):
    """EoMT's ADE20K panoptic models start from its COCO panoptic ones: the release file itself
    converts with --drop-head, and loads into the ADE20K panoptic config."""
    pytest.importorskip('panopticapi')
    from test_models_eomt_zoo import release_file
    from test_models_release_meta import one_block
    sd, _ = release_file(tmp_path, 'panoptic', 'COCO', 'dinov2', 'large', 640)
    torch.save(sd, tmp_path / 'coco_panoptic_eomt_large_640.bin')
    ade = _model(one_block('dinov2-large_eomt_ade20k-panoptic-640.py').model, 'mmdet')
    out = run_script(REPO / 'tools' / 'convert_checkpoint.py', tmp_path / 'coco_panoptic_eomt_large_640.bin',
                     tmp_path / 'whole.pth')
    assert out.returncode == 0, out.stderr
    with pytest.raises(CheckpointShapeError, match=r'decode_head.class_head.weight: checkpoint \(134, 1024\) vs '
                                                   r'model \(151, 1024\)'):
        load_checkpoint(ade, str(tmp_path / 'whole.pth'), map_location='cpu')
    out = run_script(REPO / 'tools' / 'convert_checkpoint.py', tmp_path / 'coco_panoptic_eomt_large_640.bin',
                     tmp_path / 'start.pth', '--drop-head')
    assert out.returncode == 0, out.stderr
    assert 'dropped 2 class-dependent tensors (decode_head.class_head.bias, decode_head.class_head.weight)' \
        in out.stdout
    saved = torch.load(tmp_path / 'start.pth', weights_only=True)
    assert saved['meta']['fine_tuned_from']['dataset'] == 'COCO'
    load_checkpoint(ade, str(tmp_path / 'start.pth'), map_location='cpu')
    state = ade.state_dict()
    assert torch.equal(state['decode_head.queries.weight'], sd['network.q.weight'])   # the queries, as EoMT trained
    assert torch.equal(state['decode_head.mask_mlp.0.weight'], sd['network.mask_head.0.weight'])
    assert state['decode_head.class_head.weight'].shape == (151, 1024)


def test_drop_head_on_a_backbone_file_is_one_error(tmp_path):
    torch.save({'pos_embed': torch.zeros(1, 4, 8), 'blocks.0.norm1.weight': torch.ones(8)}, tmp_path / 'bb.pth')
    out = run_script(REPO / 'tools' / 'convert_checkpoint.py', tmp_path / 'bb.pth', tmp_path / 'out.pth',
                     '--drop-head')
    assert out.returncode == 1 and out.stderr.strip() == (
        f"error: --drop-head is for a segmentor's checkpoint (a training's iter_N.pth, a converted release, or "
        f"EoMT's release file itself); {tmp_path / 'bb.pth'} holds no decode_head.* tensors")
    assert not (tmp_path / 'out.pth').exists()
