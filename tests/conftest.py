import contextlib
import gc
import io
import os
import runpy
import subprocess
import sys
import tarfile
import traceback
from pathlib import Path

import pytest
import torch

if os.environ.get('PYTEST_XDIST_WORKER'):
    # two workers share the two cores: one thread each (subprocesses inherit it)
    os.environ['OMP_NUM_THREADS'] = '1'
    torch.set_num_threads(1)
os.environ.setdefault('OMP_NUM_THREADS', '2')
sys.path.insert(0, str(Path(__file__).parent))  # reference_vit5
import vit5seg  # noqa: E402,F401  (registers ViT5)

REPO = Path(__file__).resolve().parents[1]


# Test modules whose tests share nothing (no module fixture): under pytest-xdist they go
# to whichever worker is free instead of all to one.
SPREAD_OVER_WORKERS = {'tests/test_tools_dataset_twins.py', 'tests/test_models_eomt.py', 'tests/test_engine_recipes.py',
                       'tests/test_tools_dinov_twins.py', 'tests/test_models_eomt_panoptic.py'}
# The longest modules (--durations on 2 cores), handed out first so that the two workers
# finish together rather than one waiting on a long module it got last.
LONGEST_FIRST = ['tests/test_compat_mmseg_unit_tests.py', 'tests/test_tools_dataset_twins.py',
                 'tests/test_datasets_custom.py', 'tests/test_engine_seeds.py', 'tests/test_tools_panoptic_e2e.py',
                 'tests/test_engine_reliability.py', 'tests/test_demo.py', 'tests/test_tools_e2e.py',
                 'tests/test_selfcheck.py', 'tests/test_registry_audit.py', 'tests/test_benchmark.py',
                 'tests/test_models_eomt.py', 'tests/test_tools_dinov_twins.py', 'tests/test_models_dinov.py',
                 'tests/test_models_eomt_release.py']


def pytest_collection_modifyitems(config, items):
    rank = {module: i for i, module in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split('::', 1)[0], len(rank)))  # stable: file order kept


def pytest_collection_finish(session):
    """Every test module is imported now, and what exists lives as long as this process: frozen, it
    is left out of later garbage collections. mmengine's BaseDataset calls gc.collect() at each build
    and Python collects on its own as objects pile up: over these 570k objects each took 0.24 s (one
    thread of a Xeon with AMX), now microseconds."""
    gc.collect()
    gc.freeze()


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` (pyproject), except for SPREAD_OVER_WORKERS: a module's tests run
    on one worker, one after another, so its module fixtures are built once. Modules go out
    in the collection order (LONGEST_FIRST), not xdist's most-tests-first."""
    if config.getvalue('dist') != 'loadfile':
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split('::', 1)[0]
            return nodeid if module in SPREAD_OVER_WORKERS else module

    config.option.loadscopereorder = False
    return FileScheduling(config, log)


def run_script(script, *args, cwd=None, env=None) -> subprocess.CompletedProcess:
    """``python SCRIPT ARGS`` run in this process: the script file itself runs as __main__
    with its argv, working directory and environment, and its stdout, stderr and exit
    status come back as from ``subprocess.run(..., capture_output=True, text=True)``.
    Saves a new interpreter's imports (about 5 s of torch, mmseg and mmdet) per call;
    tests whose point is a second process (signals, locks, torchrun) start real ones."""
    command = [str(script), *map(str, args)]
    argv, cwd_before, env_before = sys.argv, os.getcwd(), dict(os.environ)
    out, err = io.StringIO(), io.StringIO()
    sys.argv = list(command)
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    code = 0
    try:
        os.chdir(cwd or cwd_before)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                runpy.run_path(str(script), run_name='__main__')
            except SystemExit as e:
                if isinstance(e.code, str):
                    print(e.code, file=sys.stderr)
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except Exception:  # as the interpreter would: the traceback and status 1
                traceback.print_exc()
                code = 1
    finally:
        sys.argv = argv
        os.chdir(cwd_before)
        os.environ.clear()
        os.environ.update(env_before)
    return subprocess.CompletedProcess(command, code, out.getvalue(), err.getvalue())


def extract_tar(tar: tarfile.TarFile, dest: Path) -> None:
    """``tar.extractall(dest)`` refusing members outside ``dest``, links and devices: the
    ``filter='data'`` of Python 3.11.4+, where pyproject admits 3.11.0 and up (Debian 12's
    Python is 3.11.2)."""
    if hasattr(tarfile, 'data_filter'):
        tar.extractall(dest, filter='data')
        return
    root = Path(dest).resolve()
    for member in tar.getmembers():
        target = (root / member.name).resolve()
        if not target.is_relative_to(root) or not (member.isfile() or member.isdir()):
            raise tarfile.TarError(f'{member.name}: outside {root}, or not a plain file or folder')
    tar.extractall(dest)


def perturb(module, seed: int = 0, scale: float = 0.1):
    """Seeded noise on every parameter of a randomly initialised model, so LayerScale, biases
    and norms all matter in a comparison; returns the module."""
    import torch
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(scale * torch.randn(p.shape, generator=g))
    return module


def same_segments(ours, theirs) -> float:
    """The share of pixels whose segment corresponds in two panoptic maps numbered differently: each of our
    ids is paired with the reference segment it overlaps most, one to one; a pixel agrees where its pair holds."""
    import numpy as np
    pairs, counts = np.unique(np.stack([ours.ravel(), theirs.ravel()]), axis=1, return_counts=True)
    best = {}
    for (a, b), n in zip(pairs.T, counts):
        if n > best.get(a, (None, 0))[1]:
            best[a] = (b, n)
    assert len({b for b, _ in best.values()}) == len(best), 'two of our segments pair with one reference segment'
    return sum(n for _, n in best.values()) / ours.size


def logged_scalars(work_dir: Path) -> list:
    """Every record mmengine logged in ``work_dir`` (all runs, oldest first)."""
    from vit5seg.analysis.logs import read_scalars, scalar_files
    return [record for path in scalar_files(work_dir) for record in read_scalars(path)]


def class_table(log: str) -> list:
    """The first column of the per-class table a test run prints: 'Class', then the names."""
    rows = log.split('per class results:')[1].split('Iter(test)')[0].splitlines()
    return [row.split('|')[1].strip() for row in rows if row.startswith('|')]


# A narrow, shallow ViT-5 (head dim 16, so 4 rotary frequencies per axis).
TINY = dict(embed_dims=32, num_layers=2, num_heads=2)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _default_scope():
    """Each test starts in mmseg's default scope. A test or module fixture that ran an mmdet model
    (init_detector, a Runner of an mmdet config) leaves mmdet's behind, under which mmseg's
    registry builds mmdet's classes of the same names (FocalLoss, HungarianAssigner)."""
    from mmengine.registry import DefaultScope, init_default_scope
    current = DefaultScope.get_current_instance()
    if current is not None and current.scope_name != 'mmseg':
        init_default_scope('mmseg')
