"""A regular (non-editable) install, as a user makes it: the sdist is built from a clone, the
wheel from the sdist, and the wheel installed into a fresh venv. From another folder, with
no clone on the path, the package finds its configs, tools and lock file, names its commit,
and the tools run: a two-iteration training through run_seeds.py and make_custom_config.py, the
wheel's copies both. The venv sees this environment's torch and mmseg behind its own folder
(installing them anew takes minutes and gigabytes); bootstrap.sh's second environment is the
install from nothing, and runs this test there too.
"""
import json
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

from conftest import REPO
from vit5seg.datasets import CUSTOM_CLASSES, make_synthetic_ade20k, make_synthetic_data  # test data only

SOURCES = ('pyproject.toml', 'setup.py', 'README.md', 'MANIFEST.in', 'vit5seg', 'vit5seg_mmcv_hint.py', 'configs',
           'tools', 'requirements')
PROBE = """
import json, vit5seg
from mmengine.config import Config
from vit5seg import paths
cfg = Config.fromfile(str(paths.config_path('vit5_upernet_ade20k.py')))
print(json.dumps(dict(package=vit5seg.__file__, kind=paths.install_kind(), commit=paths.git_commit(),
                      configs=str(paths.config_root()), tools=str(paths.tools_root()), repo=str(paths.repository_root()),
                      lock=str(paths.lock_file()), torch=paths.locked_versions().get('torch'),
                      backbone=cfg.model.backbone.type, schedule=cfg.train_cfg.max_iters)))
"""


def _run(cmd, **kwargs):
    out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=900, **kwargs)
    assert out.returncode == 0, f'{cmd}:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}'
    return out


def _clone_with_a_commit(src):
    """The repository's sources as a clone of their own, with one commit (its id is what
    the built package must report)."""
    src.mkdir()
    for name in SOURCES:
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy
        kwargs = dict(ignore=shutil.ignore_patterns('__pycache__', '*.egg-info', '.mim')) if copy is shutil.copytree else {}
        copy(REPO / name, src / name, **kwargs)
    git = ['git', '-C', src, '-c', 'user.name=t', '-c', 'user.email=t@t']
    _run([*git, 'init', '-q'])
    _run([*git, 'add', '.'])
    _run([*git, 'commit', '-q', '-m', 'sources'])
    return _run([*git, 'rev-parse', 'HEAD']).stdout.strip()


def _fresh_venv(path):
    """A new venv that sees this environment's packages (torch, mmseg, ...) behind its own,
    with their .pth hooks (setuptools' distutils shim, which mmengine needs on Python 3.12+),
    but not an editable vit5seg's path hook."""
    _run([sys.executable, '-m', 'venv', path])
    python = path / 'bin' / 'python'
    own = Path(_run([python, '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])']).stdout.strip())
    ours = sorted({sysconfig.get_paths()['purelib'], sysconfig.get_paths()['platlib']})
    (own / '_this_environment.pth').write_text('\n'.join(ours) + '\n')  # read first: '_' sorts before letters
    for folder in ours:
        for hook in Path(folder).glob('*.pth'):
            if not hook.name.startswith('__editable__'):
                shutil.copy(hook, own / hook.name)
    return python


def test_hints_name_a_tool_that_exists_from_the_working_folder(tmp_path, monkeypatch):
    from vit5seg import paths
    monkeypatch.chdir(paths.tools_root().parent)  # a clone's root, or what an install carries
    assert paths.tool_command('download_weights.py') == 'python tools/download_weights.py'
    monkeypatch.chdir(tmp_path)  # a user's folder: no tools/ here
    command = paths.tool_command('download_weights.py')
    assert command == f"python {paths.tool_path('download_weights.py')}" and Path(command.split()[1]).is_file()


@pytest.mark.slow
@pytest.mark.install
def test_a_wheel_built_from_the_sdist_runs_the_tools_from_another_folder(tmp_path):
    commit = _clone_with_a_commit(tmp_path / 'src')
    dist = tmp_path / 'dist'
    _run([sys.executable, '-m', 'build', '--outdir', dist, tmp_path / 'src'])  # the sdist, then its wheel
    sdist, = dist.glob('vit5seg-*.tar.gz')
    wheel, = dist.glob('vit5seg-*.whl')
    with tarfile.open(sdist) as tar:
        names = {n.split('/', 1)[1] for n in tar.getnames() if '/' in n}
    assert {'configs/vit5_upernet_ade20k.py', 'tools/train.py', 'requirements/lock.txt', 'build_info.json'} <= names
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
    assert {'vit5seg/.mim/configs/tiny/vit5_upernet_synthetic.py', 'vit5seg/.mim/tools/train.py',
            'vit5seg/.mim/tools/dist_train.sh', 'vit5seg/.mim/requirements/lock.txt',
            'vit5seg/.mim/build_info.json', 'vit5seg_mmcv_hint.py', 'vit5seg-mmcv-hint.pth'} <= names
    assert 'vit5seg/.mim/tools/bootstrap.sh' not in names

    venv = tmp_path / 'venv'
    python = _fresh_venv(venv)
    _run([python, '-m', 'pip', 'install', '--quiet', '--no-deps', '--no-index', '--ignore-installed', wheel])  # beside, not over, a vit5seg installed here
    elsewhere = tmp_path / 'elsewhere'
    elsewhere.mkdir()
    found = json.loads(_run([python, '-c', PROBE], cwd=elsewhere).stdout.strip().splitlines()[-1])
    site = venv / 'lib'
    assert found['package'].startswith(str(site)) and found['kind'] == 'regular' and found['repo'] == 'None'
    assert found['commit'] == commit
    mim = found['package'].rsplit('/', 1)[0] + '/.mim'
    assert (found['configs'], found['tools'], found['lock']) == (f'{mim}/configs', f'{mim}/tools',
                                                                 f'{mim}/requirements/lock.txt')
    assert found['torch'] and found['backbone'] == 'ViT5' and found['schedule'] == 160000  # _base_ files resolved

    # run_seeds.py (the wheel's copy) starts the wheel's train.py on the wheel's tiny config
    make_synthetic_ade20k(elsewhere / 'data' / 'synthetic_ade20k', num_train=4, num_val=2, size=64)
    short = ['train_cfg.max_iters=2', 'train_cfg.val_interval=2', 'default_hooks.checkpoint.interval=2']
    seeds = _run([python, f'{mim}/tools/run_seeds.py', f'{mim}/configs/tiny/vit5_upernet_synthetic.py', '--seeds', '0',
                  '--work-root', 'runs', '--cfg-options', *short], cwd=elsewhere)
    assert (elsewhere / 'runs' / 'vit5_upernet_synthetic_seed0' / 'iter_2.pth').is_file(), seeds.stdout[-2000:]
    assert f'{mim}/tools/train.py' in seeds.stdout  # the command it printed

    # the wheel's make_custom_config.py on a folder of masks
    make_synthetic_data('custom', elsewhere / 'data', num_train=4, num_val=2, size=64)
    custom = _run([python, f'{mim}/tools/make_custom_config.py', '--data-root', 'data/custom', '--classes',
                   *CUSTOM_CLASSES, '--arch', 'vit5-small', '--out', 'leaves.py'], cwd=elsewhere)
    # written only once its _base_ resolved (the tool reads it back with mmengine)
    assert f"_base_ = ['{mim}/configs/vit5/vit5-small_upernet_ade20k.py']" in (elsewhere / 'leaves.py').read_text()
    assert f'python {mim}/tools/train.py leaves.py' in custom.stdout
