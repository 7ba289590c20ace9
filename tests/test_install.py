"""A regular (non-editable) install: the wheel carries the configs, and the package finds
them without the clone. Built from a copy of the sources, installed into a folder of its
own and imported from somewhere else."""
import json
import shutil
import subprocess
import sys

import pytest

from conftest import REPO

PROBE = """
import json, vit5seg
from mmengine.config import Config
from vit5seg import paths
from vit5seg.selfcheck import checks
from vit5seg.demo import TINY_CONFIG
cfg = Config.fromfile(str(paths.config_path('vit5_upernet_ade20k.py')))
print(json.dumps(dict(package=vit5seg.__file__, configs=str(paths.config_root()), repo=str(paths.repository_root()),
                      backbone=cfg.model.backbone.type, schedule=cfg.train_cfg.max_iters, tiny=str(TINY_CONFIG),
                      heads=len(checks.HEAD_CONFIGS), train_tool=checks._tool('train')[0])))
"""


@pytest.mark.slow
def test_a_regular_install_carries_the_configs(tmp_path):
    src = tmp_path / 'src'
    src.mkdir()
    for name in ('pyproject.toml', 'setup.py', 'README.md'):
        shutil.copy(REPO / name, src / name)
    for name in ('vit5seg', 'configs'):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns('__pycache__', '*.egg-info'))
    pip = [sys.executable, '-m', 'pip', '--disable-pip-version-check', '-q']
    subprocess.run(pip + ['wheel', '--no-deps', '--no-build-isolation', '-w', str(tmp_path / 'dist'), str(src)],
                   check=True, capture_output=True, cwd=src)
    wheel, = (tmp_path / 'dist').glob('vit5seg-*.whl')
    site = tmp_path / 'site'
    subprocess.run(pip + ['install', '--no-deps', '--no-index', '--target', str(site), str(wheel)], check=True,
                   capture_output=True)
    elsewhere = tmp_path / 'elsewhere'
    elsewhere.mkdir()
    out = subprocess.run([sys.executable, '-c', PROBE], cwd=elsewhere, capture_output=True, text=True,
                         env={'PATH': '/usr/bin:/bin', 'PYTHONPATH': str(site), 'HOME': str(tmp_path)})
    assert out.returncode == 0, out.stderr[-2000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found['package'].startswith(str(site))  # the installed copy, not the clone
    assert found['configs'] == str(site / 'vit5seg' / '.mim' / 'configs') and found['repo'] == 'None'
    assert found['backbone'] == 'ViT5' and found['schedule'] == 160000  # _base_ files resolved
    assert found['tiny'].startswith(found['configs']) and found['heads'] == 2 + len(list((REPO / 'configs' / 'heads').glob('*.py')))  # + entry, EoMT
    assert found['train_tool'] == '-c'  # no tools/ beside a regular install: the same entry point
