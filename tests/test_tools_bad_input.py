"""Bad input gets one error that says what and where: dataset folders and samples,
checkpoints through the Runner's loader, atomic checkpoint writes, inputs smaller than a
patch. (Bad backbone config values and backbone checkpoints: test_models_backbone.py and
test_models_checkpoint.py.)"""
import copy
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmseg.registry import DATASETS
from mmseg.utils import register_all_modules

from conftest import REPO, TINY, run_script
from vit5seg import ViT5
from vit5seg.datasets import (DatasetError, SampleError, check_data, check_dataset_config, make_synthetic_ade20k,
                              skipped_samples)
from vit5seg.engine import atomic_torch_save, latest_complete_checkpoint
from vit5seg.engine.checkpoint_io import load_from_local
from vit5seg.engine.launch import error_message
from vit5seg.models.checkpoint import CheckpointError
from vit5seg.paths import repository_root

TINY_CONFIG = REPO / 'configs' / 'tiny' / 'vit5_upernet_synthetic.py'


@pytest.fixture(scope='module')
def cfg():
    register_all_modules(init_default_scope=True)
    return Config.fromfile(str(TINY_CONFIG))


@pytest.fixture
def root(tmp_path):
    return make_synthetic_ade20k(tmp_path / 'data', num_train=4, num_val=2, size=64, seed=0)


def _dataset_cfg(cfg, root, phase='train'):
    ds = copy.deepcopy(cfg[f'{phase}_dataloader']['dataset'])
    ds['data_root'] = str(root)
    return ds


def _first_sample(cfg, root, phase='train', **pipeline_changes):
    ds_cfg = _dataset_cfg(cfg, root, phase)
    ds_cfg.update(pipeline_changes)
    ds_cfg['serialize_data'] = False
    return DATASETS.build(ds_cfg)[0]


def _train_pair(root, i=1):
    name = f'ADE_train_{i:08d}'
    return root / 'images' / 'training' / f'{name}.jpg', root / 'annotations' / 'training' / f'{name}.png'


# --- folders -------------------------------------------------------------------------

def test_missing_data_root_names_the_config_key(cfg, tmp_path):
    with pytest.raises(DatasetError, match=r"^train_dataloader.dataset.data_root: '.*nowhere' does not exist; "
                                           r"set data_root .*--cfg-options train_dataloader.dataset.data_root=PATH"):
        check_dataset_config(_dataset_cfg(cfg, tmp_path / 'nowhere'), 'train_dataloader.dataset')


def test_a_relative_data_root_names_the_working_directory_and_the_repository_root(cfg, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DatasetError) as err:
        check_dataset_config(_dataset_cfg(cfg, 'data/ade/ADEChallengeData2016'), 'train_dataloader.dataset')
    repo = repository_root()  # None in a regular install, whose configs name no clone
    origin = f"; the repository's configs name theirs from the repository root, {repo})" if repo else ')'
    assert (f"'data/ade/ADEChallengeData2016' does not exist (relative paths are from the working directory, "
            f"{tmp_path}{origin}") in str(err.value)


def test_missing_split_folder(cfg, root):
    (root / 'annotations' / 'validation').rename(root / 'annotations' / 'val')
    with pytest.raises(DatasetError, match=r'^val_dataloader.dataset: folder .*annotations/validation does not exist '
                                           r"\(val_dataloader.dataset.data_prefix.seg_map_path = 'annotations/"
                                           r"validation'"):
        check_data(Config(dict(val_dataloader=dict(dataset=_dataset_cfg(cfg, root, 'val')))), ('val',))


def test_images_without_labels(cfg, root):
    _train_pair(root, 2)[1].unlink()
    with pytest.raises(DatasetError, match=r'^train_dataloader.dataset: 1 of 4 images in .*images/training have no '
                                           r'.png label in .*annotations/training: ADE_train_00000002.jpg$'):
        check_dataset_config(_dataset_cfg(cfg, root), 'train_dataloader.dataset')


def test_labels_without_images(cfg, root):
    _train_pair(root, 3)[0].unlink()
    with pytest.raises(DatasetError, match=r'1 labels in .*annotations/training have no .jpg image in .*'
                                           r'\(a mixed-up split\?\): ADE_train_00000003.png$'):
        check_dataset_config(_dataset_cfg(cfg, root), 'train_dataloader.dataset')


def test_empty_split(cfg, root):
    for path in (root / 'images' / 'training').iterdir():
        path.unlink()
    with pytest.raises(DatasetError, match=r'no \*.jpg images in .*images/training: the split is empty'):
        check_dataset_config(_dataset_cfg(cfg, root), 'train_dataloader.dataset')


def test_a_complete_dataset_passes_and_is_counted(cfg, root):
    assert check_dataset_config(_dataset_cfg(cfg, root), 'x') == 4
    assert check_dataset_config(_dataset_cfg(cfg, root, 'val'), 'x') == 2


# --- samples -------------------------------------------------------------------------

def test_undecodable_image(cfg, root):
    img, _ = _train_pair(root)
    img.write_bytes(b'\xff\xd8 this is not a jpeg \xff\xd9')
    with pytest.raises(SampleError, match=rf'^cannot decode {re.escape(str(img))} / .*ADE_train_00000001.png: '
                                          r'AssertionError: failed to load image'):
        _first_sample(cfg, root)


def test_truncated_image_is_caught_before_it_decodes_half_grey(cfg, root):
    img, _ = _train_pair(root)
    data = img.read_bytes()
    img.write_bytes(data[:len(data) // 2])
    assert cv2.imread(str(img)) is not None  # what makes this worth checking: OpenCV decodes it
    with pytest.raises(SampleError, match=rf'^image {re.escape(str(img))} is truncated \(\d+ bytes, no JPEG EOI'):
        _first_sample(cfg, root)


def test_truncated_label_in_the_val_pipeline(cfg, root):
    label = root / 'annotations' / 'validation' / 'ADE_val_00000001.png'
    data = label.read_bytes()
    label.write_bytes(data[:len(data) - 20])
    with pytest.raises(SampleError, match=rf'^label {re.escape(str(label))} is truncated \(\d+ bytes, no PNG IEND'):
        _first_sample(cfg, root, 'val')


def test_label_out_of_range_explains_reduce_zero_label(cfg, root):
    _, label = _train_pair(root)
    seg = cv2.imread(str(label), cv2.IMREAD_UNCHANGED)
    seg[0, 0], seg[0, 1] = 151, 200  # 0 and 255 stay legal: both are ignored
    seg[1, 0], seg[1, 1] = 0, 255
    cv2.imwrite(str(label), seg)
    with pytest.raises(SampleError, match=rf'^label {re.escape(str(label))}: file values \[151, 200\] are out of '
                                          r'range: with reduce_zero_label=True a label file holds 0 \(ignored\) and '
                                          r'1..150 \(classes 0..149\)$'):
        _first_sample(cfg, root)


def test_label_out_of_range_without_reduce_zero_label(cfg, root):
    ds_cfg = _dataset_cfg(cfg, root)
    ds_cfg['reduce_zero_label'] = False
    ds_cfg['pipeline'][0]['transforms'][1]['reduce_zero_label'] = False
    ds_cfg['serialize_data'] = False
    _, label = _train_pair(root)
    seg = cv2.imread(str(label), cv2.IMREAD_UNCHANGED)
    seg[0, 0] = 150
    cv2.imwrite(str(label), seg)
    with pytest.raises(SampleError, match=r'values \[150\] are out of range: with reduce_zero_label=False a label '
                                          r'file holds 0..149 and 255 \(ignored\); ADE20K-style files'):
        DATASETS.build(ds_cfg)[0]


def test_image_label_size_mismatch(cfg, root):
    img, label = _train_pair(root)
    h, w = cv2.imread(str(img)).shape[:2]
    cv2.imwrite(str(label), cv2.imread(str(label), cv2.IMREAD_UNCHANGED)[:, :50])
    with pytest.raises(SampleError, match=rf'^label {re.escape(str(label))} is 50x{h} but its image '
                                          rf'{re.escape(str(img))} is {w}x{h} \(width x height\)$'):
        _first_sample(cfg, root)


def test_colour_label_map(cfg, root):
    _, label = _train_pair(root)
    seg = cv2.imread(str(label), cv2.IMREAD_UNCHANGED)
    cv2.imwrite(str(label), np.stack([seg] * 3, -1))
    with pytest.raises(SampleError, match=r'has shape \(\d+, \d+, 3\): expected a single-channel map of class ids'):
        _first_sample(cfg, root)


def test_grayscale_and_rgba_images_load_as_three_channels(cfg, root):
    img, _ = _train_pair(root)
    cv2.imwrite(str(img), cv2.cvtColor(cv2.imread(str(img)), cv2.COLOR_BGR2GRAY))
    assert cv2.imread(str(img), cv2.IMREAD_UNCHANGED).ndim == 2
    assert _first_sample(cfg, root)['inputs'].shape[0] == 3
    val_img = root / 'images' / 'validation' / 'ADE_val_00000001.jpg'
    bgra = cv2.cvtColor(cv2.imread(str(val_img)), cv2.COLOR_BGR2BGRA)
    assert bgra.shape[2] == 4
    # an RGBA file under a .jpg name is what a careless export gives; PNG keeps the alpha
    png = val_img.with_suffix('.png')
    cv2.imwrite(str(png), bgra)
    png.rename(val_img)
    assert cv2.imread(str(val_img), cv2.IMREAD_UNCHANGED).shape[2] == 4
    assert _first_sample(cfg, root, 'val')['inputs'].shape[0] == 3


def test_loading_unchanged_channels_is_refused(cfg, root):
    img, _ = _train_pair(root)
    cv2.imwrite(str(img), cv2.cvtColor(cv2.imread(str(img)), cv2.COLOR_BGR2GRAY))
    ds_cfg = _dataset_cfg(cfg, root)
    ds_cfg['pipeline'][0]['transforms'][0]['color_type'] = 'unchanged'
    ds_cfg['serialize_data'] = False
    with pytest.raises(SampleError, match=rf"^image {re.escape(str(img))} has 1 channel\(s\) after loading, the "
                                          r"model takes 3: load with LoadImageFromFile color_type='color'"):
        DATASETS.build(ds_cfg)[0]


def test_skip_corrupt_replaces_and_counts(cfg, root):
    img, _ = _train_pair(root)
    img.write_bytes(b'garbage')
    ds_cfg = _dataset_cfg(cfg, root)
    ds_cfg['pipeline'][0]['skip_corrupt'] = True
    ds_cfg['serialize_data'] = False
    dataset = DATASETS.build(ds_cfg)
    dataset._rand_another = lambda: 1  # mmengine refetches a random index: make it a good one
    sample = dataset[0]  # index 0 is the broken one
    assert not sample['data_samples'].img_path.endswith('ADE_train_00000001.jpg')
    assert skipped_samples(dataset) == 1


def test_worker_error_message_is_the_original_line():
    from torch.utils.data._utils import ExceptionWrapper
    try:
        raise SampleError('label x.png: file values [200] are out of range')
    except SampleError:
        wrapped = ExceptionWrapper(where='in DataLoader worker process 0')
    try:
        wrapped.reraise()
    except SampleError as e:
        assert 'Original Traceback' in str(e)
        assert error_message(e) == 'label x.png: file values [200] are out of range'


def test_input_smaller_than_a_patch():
    model = ViT5(arch='vit5-small', img_size=32, **TINY)
    with pytest.raises(ValueError, match=r'^input 8x40 is smaller than one 16x16 patch: crop_size'):
        model(torch.zeros(1, 3, 8, 40))


# --- checkpoints through the Runner's loader ---------------------------------------------

class _Exploit:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f'touch {self.marker}',))


def test_runner_loader_refuses_code_and_truncation(tmp_path):
    from mmengine.runner.checkpoint import CheckpointLoader
    evil = tmp_path / 'evil.pth'
    torch.save({'state_dict': {}, 'meta': _Exploit(tmp_path / 'pwned')}, evil)
    with pytest.raises(CheckpointError, match=r'refusing to load .*evil.pth: it needs unsafe unpickling'):
        CheckpointLoader.load_checkpoint(str(evil))
    assert not (tmp_path / 'pwned').exists()
    good = tmp_path / 'good.pth'
    torch.save({'state_dict': {'w': torch.ones(3)}}, good)
    assert torch.equal(load_from_local(str(good))['state_dict']['w'], torch.ones(3))
    cut = tmp_path / 'cut.pth'
    cut.write_bytes(good.read_bytes()[:100])
    with pytest.raises(CheckpointError, match=r'cannot read .*cut.pth: truncated or not a PyTorch checkpoint'):
        CheckpointLoader.load_checkpoint(str(cut))


# What sits where a checkpoint should after a clone without Git LFS, a refused or failed
# download, or a wrong path; each written here as those tools write it.
NOT_CHECKPOINTS = {
    'pointer.bin': (b'version https://git-lfs.github.com/spec/v1\noid sha256:' + b'ab' * 32 + b'\nsize 1217123456\n',
                    r'is not a checkpoint: it is a Git LFS pointer.*git lfs pull'),
    'gated.bin': (b'<!DOCTYPE html>\n<html class="">\n<head><title>401 Unauthorized</title></head></html>\n',
                  r"is not a checkpoint: it is an HTML page \(\d+ bytes\).*first line: '<!DOCTYPE html>'"),
    'error.bin': (b'{"error":"Access to model tue-mps/x is restricted."}',
                  r"is not a checkpoint: it is text .*first line: '\{\"error\":\"Access to model"),
    'photo.pth': (cv2.imencode('.png', np.zeros((4, 4, 3), np.uint8))[1].tobytes(),
                  r'is not a checkpoint: it is a PNG image'),
    'empty.pth': (b'', r'is not a checkpoint: the file is empty'),
    'noise.pth': (bytes(range(7, 250, 3)), r'is not a checkpoint: its first bytes \(07 0a 0d .*\) are no zip'),
    # a pickle's header and then garbage: corrupt, not unsafe
    'corrupt.pth': (b'\x80\x02\x8a\x0alZ\xfc\x9cF\xf9 j\xa8P\x19.' + b'\x00' * 40,
                    r'cannot read .*corrupt.pth: truncated or not a PyTorch checkpoint'),
}


@pytest.mark.parametrize('name', sorted(NOT_CHECKPOINTS))
def test_files_that_are_no_checkpoint_are_named_never_called_unsafe(tmp_path, name):
    from mmengine.runner.checkpoint import CheckpointLoader
    content, message = NOT_CHECKPOINTS[name]
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match=message) as raised:
        CheckpointLoader.load_checkpoint(str(path))  # the Runner's, init_cfg's and init_model's loader
    assert 'unsafe' not in str(raised.value) and isinstance(raised.value, RuntimeError)
    out = tmp_path / 'out.pth'
    done = run_script(REPO / 'tools' / 'convert_checkpoint.py', path, out)
    assert done.returncode == 1 and done.stderr.count('\n') == 1 and re.search(message, done.stderr), done.stderr
    assert 'unsafe' not in done.stderr and not out.exists()


def test_a_page_saved_by_a_download_is_named_with_its_url(tmp_path, monkeypatch):
    from local_server import serve
    from vit5seg.models.checkpoint import read_checkpoint
    monkeypatch.setenv('TORCH_HOME', str(tmp_path / 'torch_home'))
    (tmp_path / 'served').mkdir()
    (tmp_path / 'served' / 'model.bin').write_bytes(NOT_CHECKPOINTS['gated.bin'][0])
    with serve(tmp_path / 'served') as server:
        url = server.url('model.bin')
        with pytest.raises(CheckpointError, match=r'it is an HTML page.*cached download of ' + re.escape(url)
                           + ': delete it to download again'):
            read_checkpoint(url, progress=False)


def test_unsafe_opt_in_warns(tmp_path, monkeypatch):
    from vit5seg.engine import checkpoint_io
    monkeypatch.setattr(checkpoint_io, '_allow_unsafe', False)
    path = tmp_path / 'pickled.pth'
    torch.save({'state_dict': {}, 'meta': _Exploit(tmp_path / 'ran')}, path)
    with pytest.warns(UserWarning, match='unsafe checkpoint loading is on'):
        checkpoint_io.allow_unsafe_loading(True)
    with pytest.warns(UserWarning, match='full unpickling'):
        load_from_local(str(path))
    assert (tmp_path / 'ran').exists()  # it really was unpickled in full


# --- atomic writes ---------------------------------------------------------------------

def test_a_save_killed_midway_leaves_the_previous_file(tmp_path, monkeypatch):
    path = tmp_path / 'iter_10.pth'
    atomic_torch_save({'w': torch.ones(2)}, str(path))

    def dies_halfway(obj, f):
        f.write(b'PK\x03\x04 half a checkpoint')
        raise KeyboardInterrupt  # what SIGTERM / Ctrl-C mid-save looks like
    monkeypatch.setattr(torch, 'save', dies_halfway)
    with pytest.raises(KeyboardInterrupt):
        atomic_torch_save({'w': torch.zeros(2)}, str(path))
    monkeypatch.undo()
    assert torch.equal(torch.load(path, weights_only=True)['w'], torch.ones(2))
    assert os.listdir(tmp_path) == ['iter_10.pth']  # no temporary left behind


def test_runner_saves_go_through_the_atomic_writer(tmp_path, monkeypatch):
    import mmengine.runner.runner as runner_mod  # Runner.save_checkpoint calls this name
    renames = []
    real_replace = os.replace
    monkeypatch.setattr(os, 'replace', lambda src, dst: (renames.append((src, dst)), real_replace(src, dst)))
    target = str(tmp_path / 'iter_4.pth')
    runner_mod.save_checkpoint({'meta': {'iter': 4}}, target)
    assert renames == [(f'{target}.tmp', target)]
    assert torch.load(target, weights_only=True) == {'meta': {'iter': 4}}


def test_resume_picks_the_newest_complete_checkpoint(tmp_path):
    for it in (10, 20):
        torch.save({'meta': {'iter': it}}, tmp_path / f'iter_{it}.pth')
    (tmp_path / 'iter_30.pth').write_bytes((tmp_path / 'iter_20.pth').read_bytes()[:50])  # an older, cut save
    (tmp_path / 'last_checkpoint').write_text(str(tmp_path / 'iter_30.pth'))
    with pytest.warns(UserWarning, match=r'not resuming from .*iter_30.pth: truncated'):
        assert latest_complete_checkpoint(str(tmp_path)) == str(tmp_path / 'iter_20.pth')
    assert latest_complete_checkpoint(str(tmp_path / 'none')) is None


def test_bootstrap_without_disk_space_says_so_before_installing(tmp_path):
    """A first install (no torch in .venv) needs the CUDA build's ~6 GB: too little free
    space is one error naming the folder, before any .venv is made."""
    (tmp_path / 'tools').mkdir()
    shutil.copy(REPO / 'tools' / 'bootstrap.sh', tmp_path / 'tools')
    env = {**os.environ, 'PYTHON': sys.executable, 'VIT5SEG_BOOTSTRAP_NEED_MB': str(10 ** 12)}
    out = subprocess.run(['bash', str(tmp_path / 'tools' / 'bootstrap.sh'), 'test'], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and not (tmp_path / '.venv').exists()
    assert re.fullmatch(rf'bootstrap: {tmp_path} has \d+ MB free; the install needs about {10 ** 12} MB there '
                        r"\(torch's CUDA build\): free some space, or set VIT5SEG_BOOTSTRAP_NEED_MB=0 to try anyway\n",
                        out.stderr), out.stderr


STUB_PYTHON = """#!/bin/bash
# a Python whose venvs install and test nothing (the steps before the second environment)
if [ "$1 $2" = "-m venv" ]; then
  [ -n "$NO_VENV" ] && { echo "Error: ensurepip is not available" >&2; exit 1; }
  mkdir -p "$3/bin" && printf '#!/bin/bash\\nexit 0\\n' > "$3/bin/python" && chmod +x "$3/bin/python"
  exit 0
fi
exec "$REAL_PYTHON" "$@"
"""


def _bootstrap_with_one_python(tmp_path, **env):
    """tools/bootstrap.sh test on a machine whose only Python is Debian 12's: no python3.12 on
    PATH, no pyenv (a fresh login shell there)."""
    (tmp_path / 'tools').mkdir(exist_ok=True)
    shutil.copy(REPO / 'tools' / 'bootstrap.sh', tmp_path / 'tools')
    stub = tmp_path / 'python3.11'
    stub.write_text(STUB_PYTHON)
    stub.chmod(0o755)
    path = ':'.join(p for p in ('/usr/local/bin', '/usr/bin', '/bin') if not Path(p, 'python3.12').exists())
    run_env = {'PATH': path, 'HOME': str(tmp_path), 'PYTHON': str(stub), 'REAL_PYTHON': sys.executable,
               'VIT5SEG_BOOTSTRAP_NEED_MB': '0', **env}
    return subprocess.run(['bash', str(tmp_path / 'tools' / 'bootstrap.sh'), 'test'], env=run_env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)


def test_bootstrap_test_without_a_python_3_12_skips_the_second_environment_in_one_line(tmp_path):
    out = _bootstrap_with_one_python(tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1].startswith('second environment: skipped, no Python 3.12 here')
    # CI requires both environments
    out = _bootstrap_with_one_python(tmp_path, VIT5SEG_REQUIRE_SECOND_ENV='1')
    assert out.returncode == 1
    assert out.stderr.strip() == ('bootstrap: the second test environment needs python3.12 (or '
                                  'PYTHON_SECOND=/path/to/python)')
    assert 'VIT5SEG_REQUIRE_SECOND_ENV=1' in (REPO / '.ci' / 'run').read_text()


def test_bootstrap_on_a_python_without_venv_names_the_package(tmp_path):
    out = _bootstrap_with_one_python(tmp_path, NO_VENV='1')
    assert out.returncode == 1 and not (tmp_path / '.venv').exists()
    assert out.stderr.strip().endswith('(Error: ensurepip is not available); on Debian/Ubuntu: sudo apt install '
                                       'python3-venv'), out.stderr


VENV_PYTHON_STUB = """#!/bin/bash
# the clone's .venv python: it finds vit5seg; anything else it is asked to run, it prints
[ "$1" = "-c" ] && exit 0
echo "ran: $*"
"""


@pytest.mark.parametrize('launcher', ['dist_train.sh', 'dist_test.sh'])
def test_launchers_start_a_python_that_finds_vit5seg(tmp_path, launcher):
    """Not whatever `python` is on PATH: the clone's .venv (bootstrap.sh's) where there is one,
    else the first on PATH that finds vit5seg; none is one line saying what to do."""
    (tmp_path / 'tools').mkdir()
    for name in (launcher, 'python.sh'):
        shutil.copy(REPO / 'tools' / name, tmp_path / 'tools')
    args = ['cfg.py', '2'] if launcher == 'dist_train.sh' else ['cfg.py', 'ckpt.pth', '2']
    env = {'PATH': '/usr/bin:/bin', 'HOME': str(tmp_path)}  # Debian's python3 has no vit5seg
    out = subprocess.run(['bash', str(tmp_path / 'tools' / launcher), *args], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 1 and out.stderr.count('\n') == 1, out.stderr
    assert out.stderr.startswith(f'{launcher}: no Python here finds vit5seg (tried: ')
    assert 'set PYTHON=/path/to/its/python' in out.stderr
    venv = tmp_path / '.venv' / 'bin'
    venv.mkdir(parents=True)
    (venv / 'python').write_text(VENV_PYTHON_STUB)
    (venv / 'python').chmod(0o755)
    out = subprocess.run(['bash', str(tmp_path / 'tools' / launcher), *args], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith('ran: -m torch.distributed.run ') and '--nproc_per_node=2' in out.stdout


# --- bad input at the joins (issue #51): one message, exit 1, no traceback, nothing written ----

@pytest.fixture(scope='module')
def tiny_project(tmp_path_factory):
    """A user's folder with the tiny config's data, and the tiny segmentor's own state dict."""
    cwd = tmp_path_factory.mktemp('joins')
    make_synthetic_ade20k(cwd / 'data' / 'synthetic_ade20k', num_train=2, num_val=2, size=64, seed=0)
    from mmseg.registry import MODELS
    register_all_modules(init_default_scope=True)
    model = MODELS.build(Config.fromfile(str(TINY_CONFIG)).model)
    return cwd, model.state_dict()


def _one_line_failure(out, *phrases):
    assert out.returncode == 1 and 'Traceback' not in out.stderr, out.stderr[-3000:]
    line = out.stderr.strip().splitlines()[-1]
    assert line.startswith('error: '), out.stderr[-3000:]
    for phrase in phrases:
        assert phrase in line, line
    return line


def test_a_checkpoint_of_another_model_is_one_error_naming_the_counts_and_nothing_is_written(tiny_project):
    """tools/test.py tested random weights (mIoU 0.03, exit 0) with a file that shares no tensor
    with the model; one holding less than half of them (the decode head alone) is refused too."""
    from safetensors.torch import save_file
    cwd, own = tiny_project
    save_file({'foo.weight': torch.zeros(3), 'bar': torch.ones(2)}, str(cwd / 'unrelated.safetensors'))
    head = {k: v for k, v in own.items() if k.startswith('decode_head.')}
    assert 0 < len(head) < len(own) / 2
    torch.save({'state_dict': head}, cwd / 'head_only.pth')
    for name, phrase in (('unrelated.safetensors', 'shares no tensor with EncoderDecoder (2 tensors, '
                                                   f'{len(own)} in the model'),
                         ('head_only.pth', f'holds {len(head)} of the {len(own)} tensors of EncoderDecoder')):
        out = run_script(REPO / 'tools' / 'test.py', TINY_CONFIG, name, '--work-dir', f'out_{name}', cwd=cwd)
        _one_line_failure(out, f'{name}: the checkpoint {phrase}', 'at least half must load')
        assert not (cwd / f'out_{name}').exists()
    # the model's own file, its class head dropped, still loads: a fine-tuning start
    torch.save({'state_dict': {k: v for k, v in own.items() if 'conv_seg' not in k}, 'meta': {}}, cwd / 'no_head.pth')
    from vit5seg.apis import init_model
    init_model(str(TINY_CONFIG), str(cwd / 'no_head.pth'), device='cpu')


def test_a_directory_given_as_a_checkpoint_is_named_a_directory(tiny_project, tmp_path):
    cwd, own = tiny_project
    folder = tmp_path / 'work_dir'
    folder.mkdir()
    out = run_script(REPO / 'tools' / 'test.py', TINY_CONFIG, folder, cwd=cwd)
    _one_line_failure(out, f'checkpoint {folder} is a directory, not a checkpoint file, and holds no checkpoint file')
    torch.save({'state_dict': own}, folder / 'iter_20.pth')
    out = run_script(REPO / 'tools' / 'convert_checkpoint.py', folder, tmp_path / 'out.pth')
    _one_line_failure(out, f'{folder} is a directory', f'such as {folder / "iter_20.pth"}')
    assert not (tmp_path / 'out.pth').exists()


def test_a_truncated_checkpoint_is_one_short_line(tmp_path):
    torch.save({'state_dict': {'w': torch.zeros(4096)}}, tmp_path / 'whole.pth')
    (tmp_path / 'cut.pth').write_bytes((tmp_path / 'whole.pth').read_bytes()[:4000])
    out = run_script(REPO / 'tools' / 'convert_checkpoint.py', tmp_path / 'cut.pth', tmp_path / 'out.pth')
    line = _one_line_failure(out, f'cannot read {tmp_path / "cut.pth"}: truncated or not a PyTorch checkpoint')
    assert len(line) < 160 + len(str(tmp_path)) and 'miniz' not in line, line
    assert not (tmp_path / 'out.pth').exists()


def test_a_truncated_panoptic_png_is_named_by_the_loader_check_data_and_prepare_coco(tmp_path):
    """mmdet's loader ended in ``cv2.error ... !_src.empty()`` without the file's name, and neither
    check tool decoded the PNGs."""
    pytest.importorskip('panopticapi')
    from vit5seg.datasets import make_synthetic_data
    from vit5seg.datasets.prepare_coco import check_coco
    root = make_synthetic_data('coco_panoptic', tmp_path, num_train=3, num_val=2, size=48)
    pngs = sorted((root / 'annotations' / 'panoptic_train2017').glob('*.png'))
    broken = pngs[1]
    broken.write_bytes(broken.read_bytes()[:60])
    config = REPO / 'configs' / 'tiny' / 'vit5_eomt_coco_panoptic_synthetic.py'
    out = run_script(REPO / 'tools' / 'check_data.py', config, '--cfg-options',
                     f'train_dataloader.dataset.data_root={root}/', f'val_dataloader.dataset.data_root={root}/')
    assert out.returncode == 1 and 'Traceback' not in out.stderr, out.stderr[-2000:]
    assert f'1 bad labels: {broken} is truncated' in out.stdout and 'val_dataloader.dataset: 2 images, 2 labels' \
        in out.stdout, out.stdout
    lines, problems = check_coco(root)
    assert problems == [f'{broken} is truncated ({broken.stat().st_size} bytes, no PNG IEND marker at the end)']
    # the training loader: mmdet's LoadPanopticAnnotations names the file
    from mmdet.registry import DATASETS as DET_DATASETS
    from mmengine.registry import DefaultScope
    cfg = Config.fromfile(str(config))
    dataset_cfg = copy.deepcopy(cfg.train_dataloader.dataset)
    dataset_cfg.update(data_root=f'{root}/', serialize_data=False)
    with DefaultScope.overwrite_default_scope('mmdet'):
        dataset = DET_DATASETS.build(dataset_cfg)
        index = next(i for i, info in enumerate(dataset.data_list) if info['seg_map_path'] == str(broken))
        with pytest.raises(SampleError, match=re.escape(f'panoptic label {broken} is truncated')):
            dataset.prepare_data(index)
        broken.write_bytes(b'\x89PNG\r\n\x1a\n' + b'\x00' * 64 + b'IEND')   # whole-looking, undecodable
        with pytest.raises(SampleError, match=re.escape(f'panoptic label {broken} cannot be decoded')):
            dataset.prepare_data(index)
    assert check_coco(root)[1] == [f'{broken} cannot be decoded as an image']
