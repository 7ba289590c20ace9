"""``import vit5seg`` in an environment outside pyproject.toml's ranges: one line saying what
it found and what it needs. Shown in fresh interpreters that see a torch release's metadata
other than the installed one (a dist-info folder first on the path; torch itself unchanged)."""
import os
import subprocess
import sys
import tomllib

import pytest
from packaging.specifiers import SpecifierSet

from conftest import REPO
from vit5seg.environment import declared, problems


def _import_with_torch_metadata(version, tmp_path, **env):
    meta = tmp_path / f'torch-{version}.dist-info'
    meta.mkdir(parents=True)
    (meta / 'METADATA').write_text(f'Metadata-Version: 2.1\nName: torch\nVersion: {version}\n')
    return subprocess.run([sys.executable, '-W', 'default', '-c', 'import vit5seg; print("imported")'],
                          capture_output=True, text=True, cwd=REPO, timeout=300,
                          env={**os.environ, 'PYTHONPATH': str(tmp_path), **env})


@pytest.mark.slow  # > 10 s on 2 cores (the quick tier: <= 3 min)
def test_an_older_torch_is_one_import_error_naming_found_and_needed(tmp_path):
    out = _import_with_torch_metadata('2.6.0', tmp_path)
    assert out.returncode == 1 and 'imported' not in out.stdout
    last = out.stderr.strip().splitlines()[-1]
    assert last == (f"vit5seg.environment.UnsupportedEnvironment: vit5seg cannot run in {sys.prefix}: torch 2.6.0 is "
                    "outside vit5seg's range torch>=2.7. Install a release in the range (or set "
                    "VIT5SEG_IGNORE_VERSIONS=1 to import anyway)")
    ignored = _import_with_torch_metadata('2.6.0', tmp_path / 'again', VIT5SEG_IGNORE_VERSIONS='1')
    assert ignored.returncode == 0 and 'imported' in ignored.stdout


@pytest.mark.slow  # > 10 s on 2 cores (the quick tier: <= 3 min)
def test_a_newer_torch_is_one_warning_and_imports(tmp_path):
    """No upper bound (pip would downgrade a user who is ahead): a torch past the tested set
    imports, with one line saying so."""
    locked = next(line.split('==')[1] for line in (REPO / 'requirements' / 'lock.txt').read_text().splitlines()
                  if line.startswith('torch=='))
    major, minor = map(int, locked.split('.')[:2])
    out = _import_with_torch_metadata(f'{major}.{minor + 2}.0', tmp_path)
    assert out.returncode == 0 and 'imported' in out.stdout
    warned = [line for line in out.stderr.splitlines() if 'vit5seg in ' in line]
    assert len(warned) == 1 and (f'torch {major}.{minor + 2}.0 is newer than the tested {major}.{minor} '
                                 '(requirements/lock.txt): nothing is known to fail there') in warned[0]


def test_a_vendor_build_of_a_release_in_the_range_imports(tmp_path):
    """NGC's containers carry torch as a pre-release of the release they ship."""
    out = _import_with_torch_metadata('2.7.0a0+79aa17489c.nv25.04', tmp_path)
    assert out.returncode == 0 and 'imported' in out.stdout
    assert not [line for line in out.stderr.splitlines() if 'vit5seg in ' in line], out.stderr


def test_the_ranges_are_pyprojects_and_full_mmcv_stands_in_for_mmcv_lite():
    project = tomllib.loads((REPO / 'pyproject.toml').read_text())['project']
    ranges = declared()
    assert ranges['python'] == SpecifierSet(project['requires-python'])
    assert ranges['torch'] == SpecifierSet(next(d for d in project['dependencies'] if d.startswith('torch'))[5:])
    inside = dict(python='3.12.1', torch='2.7.1', torchvision='0.22.1', mmengine='0.10.7', mmsegmentation='1.2.2',
                  timm='0.9.16')
    assert problems(ranges, {**inside, 'mmcv-lite': '2.1.0'}) == []
    assert problems(ranges, {**inside, 'mmcv': '2.0.1'}) == []  # full mmcv, mmseg's own range
    assert problems(ranges, {**inside, 'mmcv': '2.1.0', 'mmcv-lite': '2.1.0'}) == []
    (kind, text), = problems(ranges, {**inside, 'mmcv': '2.0.1', 'mmcv-lite': '2.1.0'})
    assert kind == 'warning' and text.startswith('mmcv 2.0.1 and mmcv-lite 2.1.0 share the mmcv folder')
    assert problems(ranges, {**inside, 'timm': None, 'mmcv-lite': '2.1.0'}) == [
        ('error', 'timm is not installed (vit5seg needs timm>=0.9.16)')]
    assert problems(ranges, {**inside, 'timm': '0.9.12', 'mmcv-lite': '2.1.0'}) == [
        ('error', "timm 0.9.12 is outside vit5seg's range timm>=0.9.16")]
    # the bounds that stay: mmseg 1.2 refuses mmcv 2.2; vit5seg's fixes patch mmengine 0.10 internals
    (kind, text), = problems(ranges, {**inside, 'mmcv-lite': '2.2.0'})
    assert kind == 'warning' and "mmcv-lite 2.2.0 is outside vit5seg's range mmcv-lite<2.2.0,>=2.1.0" in text
    # torchvision: EoMT's augmentation imports it (torch 2.7's release, 0.22, and newer)
    assert problems(ranges, {**inside, 'torchvision': '0.21.0', 'mmcv-lite': '2.1.0'}) == [
        ('error', "torchvision 0.21.0 is outside vit5seg's range torchvision>=0.22")]
    assert problems(ranges, {**inside, 'python': '3.10.13', 'mmcv-lite': '2.1.0'}) == [
        ('error', "python 3.10.13 is outside vit5seg's range python>=3.11")]
    assert problems(ranges, {**inside, 'python': '3.14.0', 'mmcv-lite': '2.1.0'}) == []  # no cap on Python
