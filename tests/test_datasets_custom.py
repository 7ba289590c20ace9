"""tools/make_custom_config.py: the folder check (every problem, by file), the written
config, and docs/custom_dataset.md followed word for word from a folder to a test table."""
import os
import shlex
from pathlib import Path

import cv2
import numpy as np
import pytest
from mmengine.config import Config

from conftest import REPO, class_table, run_script
from vit5seg.datasets import CUSTOM_CLASSES, DatasetError, make_synthetic_data
from vit5seg.datasets.custom import _base_path, check_custom_folder, write_custom_config
from vit5seg.hub import OFFICIAL_WEIGHTS
from vit5seg.paths import config_path, repository_root

ENV = {**os.environ, 'OMP_NUM_THREADS': '2', 'PYTHONUNBUFFERED': '1'}
GUIDE = REPO / 'docs' / 'custom_dataset.md'


def _tool(args, cwd):
    return run_script(*args, cwd=cwd, env=ENV)


@pytest.fixture
def folder(tmp_path):
    return make_synthetic_data('custom', tmp_path, num_train=4, num_val=2, size=32)


def test_every_problem_is_listed_by_file(folder):
    (folder / 'annotations' / 'train' / 'train_0001.png').unlink()
    cv2.imwrite(str(folder / 'annotations' / 'train' / 'extra.png'), np.zeros((32, 43), np.uint8))
    cv2.imwrite(str(folder / 'annotations' / 'val' / 'val_0000.png'), np.full((32, 43), 9, np.uint8))
    cv2.imwrite(str(folder / 'annotations' / 'val' / 'val_0001.png'), np.zeros((32, 43, 3), np.uint8))
    with pytest.raises(DatasetError) as e:
        check_custom_folder(folder, CUSTOM_CLASSES)
    text = str(e.value)
    assert text.startswith(f'{folder} is not ready for training (8 classes: mask ids 0..7, 255 = ignored):')
    assert f'1 images in images/train without a mask:\n    {folder}/images/train/train_0001.jpg' in text
    assert f'1 masks in annotations/train without an image:\n    {folder}/annotations/train/extra.png' in text
    assert (f'{folder}/annotations/val/val_0000.png: value 9 > 7 (BaseSegDataset label files hold 0..7, '
            '255 = ignored)') in text
    assert f'{folder}/annotations/val/val_0001.png: has 3 channels, expected a single-channel class-id map' in text


def test_folder_shape_and_class_errors(folder, tmp_path):
    with pytest.raises(DatasetError, match='--classes needs two or more distinct names'):
        check_custom_folder(folder, ['a', 'a'])
    with pytest.raises(DatasetError, match=r'train_0002.png: values 3, 4, 5 > 2 \(BaseSegDataset label files hold '
                                           r'0..2, 255 = ignored\)'):  # fewer classes than the masks use
        check_custom_folder(folder, CUSTOM_CLASSES[:3])
    cv2.imwrite(str(folder / 'images' / 'val' / 'odd.png'), np.zeros((8, 8, 3), np.uint8))
    with pytest.raises(DatasetError, match=r'images/val mixes image types: 1 .png \(odd.png\); 2 .jpg \(val_0000.jpg, '
                                           r'val_0001.jpg\). mmseg reads one file type per split'):
        check_custom_folder(folder, CUSTOM_CLASSES)
    (tmp_path / 'flat').mkdir()
    with pytest.raises(DatasetError, match=r'flat/images/train does not exist: the folder needs images/\{train,val\}'):
        check_custom_folder(tmp_path / 'flat', CUSTOM_CLASSES)


def test_default_config_starts_from_the_official_weights(folder, tmp_path):
    found = check_custom_folder(folder, CUSTOM_CLASSES)
    assert found.counts == {'train': 4, 'val': 2} and found.img_suffixes == {'train': '.jpg', 'val': '.jpg'}
    out = write_custom_config(found, tmp_path / 'cfg' / 'shapes.py', crop=(256, 320), iters=20000)
    cfg = Config.fromfile(str(out))
    assert cfg.model.backbone.arch == 'vit5-base'
    assert cfg.model.backbone.init_cfg.checkpoint == OFFICIAL_WEIGHTS['vit5-base']
    assert cfg.model.decode_head.num_classes == cfg.model.auxiliary_head.num_classes == 8
    assert cfg.crop_size == (256, 320) and cfg.model.data_preprocessor.size == (256, 320)
    assert cfg.train_pipeline[1]['scale'] == (1280, 256)
    for loader in (cfg.train_dataloader, cfg.val_dataloader, cfg.test_dataloader):
        assert loader.dataset.metainfo['classes'] == CUSTOM_CLASSES and len(loader.dataset.metainfo['palette']) == 8
        assert loader.dataset.data_root == str(folder.resolve()) and loader.dataset.reduce_zero_label is False
    assert cfg.param_scheduler[0].end == 1500 and cfg.param_scheduler[1].end == cfg.train_cfg.max_iters == 20000
    assert cfg.train_cfg.val_interval == cfg.default_hooks.checkpoint.interval == 2000
    assert cfg.optim_wrapper.optimizer.lr == 6e-5  # the protocol's recipe, inherited
    text = out.read_text()
    entry = config_path('vit5_upernet_ade20k.py')  # the clone's or the regular install's
    assert len(text.splitlines()) < 60 and f"_base_ = ['{entry}']" in text
    deit = Config.fromfile(str(write_custom_config(found, tmp_path / 'deit.py', arch='deit3-small', iters=50,
                                                   palette=[[i, i, i] for i in range(8)])))
    assert deit.model.backbone.arch == 'deit3-small' and 'deit_3_small' in deit.model.backbone.init_cfg.checkpoint
    assert deit.param_scheduler[0].end == 5 and deit.train_dataloader.dataset.metainfo['palette'][3] == [3, 3, 3]
    # inside a clone (configs/custom/) the base is relative, so the clone can move
    assert _base_path(REPO / 'configs' / 'vit5_upernet_ade20k.py', REPO / 'configs' / 'custom' / 'x.py') == \
        ('../vit5_upernet_ade20k.py' if repository_root() == REPO else str(REPO / 'configs' / 'vit5_upernet_ade20k.py'))


def test_tool_errors_are_one_line_and_exit_1(folder, tmp_path):
    base = [REPO / 'tools' / 'make_custom_config.py', '--data-root', folder, '--classes', *CUSTOM_CLASSES,
            '--out', tmp_path / 'x.py']
    for extra, message in ((['--palette', '1,2,3'], '--palette needs one R,G,B colour (0..255) per class: 8 classes'),
                           (['--iters', '5'], '--iters 5: train for at least 10 iterations'),
                           (['--crop', '8', '8'], '--crop (8, 8) / --scale (32, 8): each side at least one 16-pixel'),
                           (['--base', tmp_path / 'none.py'], 'none.py does not exist')):
        out = _tool([*base, *extra], tmp_path)
        assert out.returncode == 1 and out.stderr.startswith('error: ') and message in out.stderr, out.stderr
    assert not (tmp_path / 'x.py').exists()
    bad_colour = _tool([*base, '--palette', 'red'], tmp_path)
    assert bad_colour.returncode == 2 and "'red' is not R,G,B" in bad_colour.stderr


def _guide_commands(section: str):
    block = GUIDE.read_text().split(section)[1].split('```bash')[1].split('```')[0]
    return [shlex.split(line) for line in block.strip().splitlines()]


@pytest.mark.slow
def test_the_guide_from_a_folder_to_a_test_table(tmp_path):
    """Section 2 of docs/custom_dataset.md, run as written in an empty folder (the repo's
    tools/ and configs/tiny/ are named by their full path, nothing is written in the repo)."""
    def repo_path(arg):
        return str(REPO / arg) if arg.startswith(('tools/', 'configs/tiny/')) else arg

    outputs = []
    for command in _guide_commands('## 2.'):
        assert command[0] == 'python'
        out = _tool([repo_path(a) for a in command[1:]], tmp_path)
        assert out.returncode == 0, (command, out.stdout[-2000:], out.stderr[-3000:])
        outputs.append(out.stdout + out.stderr)
    make_data, make_config, browse, train, test = outputs
    classes = make_data.split('classes (mask ids 0..7): ')[1].split()
    assert classes == list(CUSTOM_CLASSES) == _guide_commands('## 2.')[1][5:13]
    # the commands the config tool prints are the ones the guide runs next
    printed = [line.strip() for line in make_config.splitlines() if line.startswith('  python')]
    guide_next = _guide_commands('## 2.')[2:]
    assert [shlex.split(p)[1:] for p in printed] == [[repo_path(a) for a in c[1:]] for c in guide_next]
    assert len(list((tmp_path / 'work_dirs' / 'shapes_tiny' / 'samples').glob('*.png'))) == 8
    shares = browse.split('pixels in them: ')[1].split(', ')
    assert {s.rsplit(' ', 1)[0] for s in shares} <= {*CUSTOM_CLASSES, 'ignored'} and 'sky' in browse
    assert class_table(test) == ['Class', *CUSTOM_CLASSES]
    iou = {row.split('|')[1].strip(): float(row.split('|')[2]) for row in test.splitlines()
           if row.startswith('|') and row.split('|')[1].strip() in CUSTOM_CLASSES}
    assert min(iou[c] for c in ('sky', 'grass', 'sand', 'water')) > 50, iou  # what 500 iterations reach
    assert Path(tmp_path / 'work_dirs' / 'shapes_tiny' / 'iter_500.pth').is_file()
    assert not list((REPO / 'configs').glob('custom/shapes_tiny.py'))
    # section 3 on a 3-class copy of the folder: ViT-5-B from the official weights, the printed
    # GPU commands are the guide's
    write, browse_command, dist_train, dist_test = _guide_commands('## 3.')
    leaves = tmp_path / 'leaves'
    for src in (tmp_path / 'data' / 'synthetic' / 'custom').rglob('*.*'):
        dst = leaves / src.relative_to(tmp_path / 'data' / 'synthetic' / 'custom')
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.suffix == '.png':
            mask = cv2.imread(str(src), cv2.IMREAD_UNCHANGED)
            cv2.imwrite(str(dst), np.where(mask == 255, 255, mask % 3).astype(np.uint8))
        else:
            dst.write_bytes(src.read_bytes())
    out = _tool([repo_path(a) if a != '/data/leaves' else leaves for a in write[1:]], tmp_path)
    assert out.returncode == 0, out.stderr
    printed = [shlex.split(line) for line in out.stdout.splitlines() if line.startswith(('  bash', '  python'))]
    assert [printed[0], *printed[3:]] == [[repo_path(a) for a in c] for c in (browse_command, dist_train, dist_test)]
    cfg = Config.fromfile(str(tmp_path / write[-1]))
    assert cfg.model.backbone.arch == 'vit5-base' and cfg.model.decode_head.num_classes == 3
    assert cfg.model.backbone.init_cfg.checkpoint == OFFICIAL_WEIGHTS['vit5-base']
