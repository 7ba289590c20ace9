"""The DINOv2 and DINOv3 tiny twins (issue #39) train, test and export as the ViT-5 twins do:
tools/train.py on synthetic ADE20K with the test loop's metrics at its end (tools/test.py's
own path is held by the ViT-5 twin in test_tools_e2e.py), tools/export_onnx.py with onnxruntime
checked against PyTorch."""
import pytest

from conftest import REPO, logged_scalars, run_script

TWINS = {'dinov3_eomt_synthetic.py': ['backbone.reg_token', 'backbone.blocks.0.attn.qkv.bias'],
         'dinov2_upernet_synthetic.py': ['backbone.reg_token', 'backbone.pos_embed']}


@pytest.mark.slow
@pytest.mark.parametrize('name', sorted(TWINS))
def test_twin_trains_tests_and_exports(name, tmp_path):
    import torch

    from vit5seg.datasets import make_synthetic_ade20k
    config = REPO / 'configs' / 'tiny' / name
    root = make_synthetic_ade20k(tmp_path / 'data', num_train=4, num_val=2, size=96, seed=0)
    iters = 4
    opts = [f'{k}.dataset.data_root={root}' for k in ('train_dataloader', 'val_dataloader', 'test_dataloader')]
    opts += [f'train_cfg.max_iters={iters}', f'train_cfg.val_interval={iters}', 'train_dataloader.batch_size=2',
             f'default_hooks.checkpoint.interval={iters}']
    if 'eomt' in name:
        opts += [f'param_scheduler.0.end={iters}', 'param_scheduler.0.warmup_new=1',
                 'param_scheduler.0.warmup_backbone=1', 'custom_hooks.3.starts=[0,2]', 'custom_hooks.3.ends=[2,4]']
    else:
        opts += ['param_scheduler.0.end=2', 'param_scheduler.1.begin=2', f'param_scheduler.1.end={iters}']
    out = run_script(REPO / 'tools' / 'train.py', config, '--work-dir', tmp_path / 'work', '--cfg-options', *opts,
                     cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    checkpoint = tmp_path / 'work' / f'iter_{iters}.pth'
    state = torch.load(checkpoint, map_location='cpu', weights_only=True)['state_dict']
    assert all(key in state for key in TWINS[name])
    assert any('mIoU' in r for r in logged_scalars(tmp_path / 'work'))

    out = run_script(REPO / 'tools' / 'export_onnx.py', config, checkpoint, '--out', tmp_path / 'twin.onnx',
                     '--shape', '96', '112', '--repeats', '1', cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    rows = [line.split('|') for line in out.stdout.splitlines() if line.startswith('| ') and 'x' in line.split('|')[1]]
    assert len(rows) == 1 and float(rows[0][3].strip(' %')) >= 99.9, out.stdout
