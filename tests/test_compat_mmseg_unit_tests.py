"""Importing vit5seg changes nothing mmseg relies on: mmseg's own unit tests, from the source
distribution of the installed release (fetched from the package index once, then cached),
run with ``import vit5seg`` in their conftest and the configs of the installed package.

Every outcome is held: the exact number of tests, the two that skip (and why), and the
failures this machine causes, each matched by its message; everything else passes. A
resnet18 file made here (torchvision's layout, random weights) stands where
``torchvision://resnet18`` would be downloaded, so test_resnet_backbone runs to its end.

The sdist carries only the test folders that are Python packages. These folders of mmseg's
repository are not in it, so they never run here: tests/test_apis, tests/test_datasets,
tests/test_engine, tests/test_evaluation, tests/test_utils, tests/test_models/test_assigners
and tests/test_models/test_losses. Of what they test, vit5seg changes mmseg's FocalLoss
(vit5seg.compat): tests/test_compat_focal_loss.py holds it to the same contract and to the values of
mmcv's CUDA kernel. (docs/compatibility.md says the same.)"""
import importlib.metadata
import os
import re
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import extract_tar

NOT_IN_SDIST = ('tests/test_apis', 'tests/test_datasets', 'tests/test_engine', 'tests/test_evaluation',
                'tests/test_utils', 'tests/test_models/test_assigners', 'tests/test_models/test_losses')
# Failures that come from this machine, not from vit5seg (they fail without vit5seg too):
# test id -> (why, a pattern of the failure's message)
ENVIRONMENTAL = {
    'tests/test_config.py::test_config_data_pipeline': (
        'a config in it imports mmpretrain.models (custom_imports), and mmpretrain is not installed',
        r"Failed to import custom modules from \{'imports': \['mmpretrain.models'\]"),
    'tests/test_models/test_backbones/test_timm_backbone.py::test_timm_backbone': (
        'network: it downloads pretrained timm weights from the Hugging Face Hub (offline here)',
        r'LocalEntryNotFoundError'),
    'tests/test_models/test_backbones/test_vpd.py::TestVPD::test_forward': (
        "it reads configs/_base_/models/vpd_sd.py beside the mmseg package, which only a source checkout has "
        "(and VPD needs mmseg's optional ldm)", r"No such file or directory: '.*/configs/_base_/models/vpd_sd.py'"),
    'tests/test_models/test_segmentors/test_depth_estimator.py::TestDepthEstimator::test__forward': (
        'it builds VPD from that config too', r"No such file or directory: '.*/configs/_base_/models/vpd_sd.py'"),
    'tests/test_models/test_segmentors/test_depth_estimator.py::TestDepthEstimator::test_slide_flip_inference': (
        'it builds VPD from that config too', r"No such file or directory: '.*/configs/_base_/models/vpd_sd.py'"),
}
SKIPPED = {  # test id -> its skip message (these need a GPU)
    'tests/test_models/test_forward.py::test_ccnet_forward': 'CCNet requires CUDA',
    'tests/test_models/test_heads/test_cc_head.py::test_cc_head': 'CCHead requires CUDA',
}
COLLECTED = 139  # mmsegmentation 1.2.2's sdist: 132 pass, 2 skip, 5 fail here
CONFTEST = 'import vit5seg  # noqa: F401  (what a user of vit5seg has imported)\n'


def _cache() -> Path:
    return Path(os.environ.get('XDG_CACHE_HOME') or Path.home() / '.cache') / 'vit5seg' / 'mmseg-sdist'


def mmseg_sdist() -> Path:
    """The installed mmseg release's source distribution: from the cache, or the package index."""
    version = importlib.metadata.version('mmsegmentation')
    cache = _cache()
    found = sorted(cache.glob(f'mmsegmentation-{version}.tar.gz'))
    if not found:
        cache.mkdir(parents=True, exist_ok=True)
        out = subprocess.run([sys.executable, '-m', 'pip', 'download', '--no-deps', '--no-binary', ':all:',
                              '--disable-pip-version-check', '-d', str(cache), f'mmsegmentation=={version}'],
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, f'cannot fetch the mmsegmentation {version} sdist: {out.stderr[-2000:]}'
        found = sorted(cache.glob(f'mmsegmentation-{version}.tar.gz'))
    return found[0]


def _outcomes(junit: Path) -> dict:
    """``{'tests/x.py::Class::test': ('passed' | 'failed' | 'skipped', message)}`` from pytest's JUnit XML."""
    outcomes = {}
    for case in ET.parse(junit).getroot().iter('testcase'):
        module, _, cls = case.get('classname', '').partition('.Test')
        path = module.replace('.', '/') + '.py'
        nodeid = '::'.join([path] + ([f'Test{cls}'] if cls else []) + [case.get('name')])
        kinds = {child.tag: child.get('message') or '' for child in case}
        failure = kinds.get('failure', kinds.get('error'))
        if failure is not None:
            outcomes[nodeid] = ('failed', failure)
        elif 'skipped' in kinds:
            outcomes[nodeid] = ('skipped', kinds['skipped'])
        else:
            outcomes[nodeid] = ('passed', '')
    return outcomes


def _torchvision_resnet18(torch_home: Path) -> None:
    """Where mmengine's ``torchvision://resnet18`` finds its file once downloaded."""
    import torch
    import torchvision
    url = torchvision.models.ResNet18_Weights.IMAGENET1K_V1.url
    folder = torch_home / 'hub' / 'checkpoints'
    folder.mkdir(parents=True)
    torch.save(torchvision.models.resnet18().state_dict(), folder / url.rsplit('/', 1)[1])


def test_the_sdist_extracts_without_pythons_data_filter(tmp_path, monkeypatch):
    """Python 3.11.0-3.11.3 (Debian 12 has 3.11.2) have no filter='data': members outside the
    folder, and links, are refused by hand there."""
    import io
    monkeypatch.delattr(tarfile, 'data_filter', raising=False)  # absent before 3.11.4
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode='w') as tar:
        info = tarfile.TarInfo('pkg/file.txt')
        info.size = 2
        tar.addfile(info, io.BytesIO(b'ok'))
    archive.seek(0)
    with tarfile.open(fileobj=archive) as tar:
        extract_tar(tar, tmp_path / 'out')
    assert (tmp_path / 'out' / 'pkg' / 'file.txt').read_text() == 'ok'
    for name, kind in (('../escaped.txt', tarfile.REGTYPE), ('pkg/link', tarfile.SYMTYPE)):
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode='w') as tar:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, '/etc/passwd'
            tar.addfile(info, io.BytesIO(b''))
        archive.seek(0)
        with tarfile.open(fileobj=archive) as tar, pytest.raises(tarfile.TarError, match='outside'):
            extract_tar(tar, tmp_path / 'refused')
    assert not (tmp_path / 'escaped.txt').exists()


@pytest.mark.slow
def test_mmsegs_own_unit_tests_pass_with_vit5seg_imported(tmp_path):
    import mmseg
    with tarfile.open(mmseg_sdist()) as tar:
        extract_tar(tar, tmp_path)
    root, = tmp_path.glob('mmsegmentation-*')
    assert not [folder for folder in NOT_IN_SDIST if (root / folder).exists()], 'the sdist has them now: run them'
    (root / 'configs').symlink_to(Path(mmseg.__file__).parent / '.mim' / 'configs')  # the installed configs
    (root / 'conftest.py').write_text(CONFTEST)
    # the mmseg package of the sdist must not shadow the installed one vit5seg was tested with
    (root / 'mmseg').rename(root / 'mmseg_source')
    _torchvision_resnet18(tmp_path / 'torch_home')
    junit = tmp_path / 'junit.xml'
    env = {**os.environ, 'HF_HUB_OFFLINE': '1', 'OMP_NUM_THREADS': '1',  # offline: fail fast, no retries
           'TORCH_HOME': str(tmp_path / 'torch_home')}
    run = subprocess.run([sys.executable, '-m', 'pytest', 'tests', '-q', '-p', 'no:cacheprovider', '-n', '0',
                          f'--junitxml={junit}'], cwd=root, capture_output=True, text=True, env=env, timeout=1500)
    assert junit.is_file(), run.stdout[-3000:] + run.stderr[-3000:]
    outcomes = _outcomes(junit)
    failed = {test: message for test, (outcome, message) in outcomes.items() if outcome == 'failed'}
    assert sorted(failed) == sorted(ENVIRONMENTAL), f'failed: {sorted(failed)}\n{run.stdout[-4000:]}'
    for test, message in failed.items():
        why, pattern = ENVIRONMENTAL[test]
        assert re.search(pattern, message), f'{test} failed for another reason than "{why}": {message[:500]}'
    skipped = {test: message for test, (outcome, message) in outcomes.items() if outcome == 'skipped'}
    assert skipped == SKIPPED, skipped
    assert len(outcomes) == COLLECTED, f'{len(outcomes)} tests ran, not {COLLECTED}'  # the rest passed
    for test in ('tests/test_models/test_backbones/test_vit.py::test_vit_init',  # missing file: an OSError
                 'tests/test_models/test_backbones/test_beit.py::test_beit_init',
                 'tests/test_models/test_backbones/test_resnet.py::test_resnet_backbone'):  # to its last assert
        assert outcomes[test][0] == 'passed'
