"""What the self-check runs on: versions, GPUs, the NVIDIA driver, and why torch may see
no GPU on a machine that has some."""
import contextlib
import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path
from typing import Optional

import torch

from .. import paths

# Minimum NVIDIA driver of each CUDA major release (minor-version compatibility, Linux;
# NVIDIA's CUDA compatibility guide): a torch wheel built for CUDA X.y runs on these or newer.
CUDA_MIN_DRIVER = {11: 450, 12: 525, 13: 580}

def _version(package: str) -> Optional[str]:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment() -> dict:
    from .. import compat
    env = dict(python=platform.python_version(), platform=platform.platform(), cpu_count=os.cpu_count(),
               torch_threads=torch.get_num_threads(), torch=torch.__version__, cuda=torch.version.cuda,
               cudnn=None, nccl=None, gpus=[], bf16_supported=None)
    if torch.cuda.is_available():
        env['cudnn'] = torch.backends.cudnn.version()
        with contextlib.suppress(Exception):
            env['nccl'] = '.'.join(map(str, torch.cuda.nccl.version()))
        env['gpus'] = [dict(name=torch.cuda.get_device_name(i),
                            memory_gib=round(torch.cuda.get_device_properties(i).total_memory / 2 ** 30, 1),
                            capability='.'.join(map(str, torch.cuda.get_device_capability(i))))
                       for i in range(torch.cuda.device_count())]
        env['bf16_supported'] = torch.cuda.is_bf16_supported()
    env['nvidia_driver'] = (nvidia_gpus() or {}).get('driver')
    mmcv_kind = 'mmcv' if _version('mmcv') else 'mmcv-lite'
    env.update(mmengine=_version('mmengine'), mmcv=f'{mmcv_kind} {_version(mmcv_kind)}',
               mmcv_compiled_ops=compat.has_compiled_mmcv_ops(), mmseg=_version('mmsegmentation'),
               mmdet=_version('mmdet'), timm=_version('timm'), **paths.code_fields())
    return env


# environment() key -> its name in requirements/lock.txt
_LOCKED_AS = {'torch': 'torch', 'mmengine': 'mmengine', 'mmcv': 'mmcv-lite', 'mmseg': 'mmsegmentation',
              'mmdet': 'mmdet', 'timm': 'timm'}


def tested_set() -> dict:
    """The exact tested set beside each environment() key it covers: ``{'python': '3.11',
    'torch': '2.14.1', 'mmcv': 'mmcv-lite 2.1.0', ...}`` (empty without a lock file)."""
    pins = paths.locked_versions()
    if not pins:
        return {}
    lock = paths.lock_file().read_text()
    python = re.search(r'for Python (\d+\.\d+)', lock)
    tested = {'python': python.group(1)} if python else {}
    for key, name in _LOCKED_AS.items():
        if name in pins:
            tested[key] = f'{name} {pins[name]}' if key == 'mmcv' else pins[name]
    return tested


def nvidia_gpus() -> Optional[dict]:
    """The NVIDIA GPUs this machine has, whatever torch sees: ``{'names', 'driver',
    'device_files'}`` from ``nvidia-smi`` and ``/dev/nvidia<N>``, or None where it has none."""
    files = sorted(str(p) for p in Path('/dev').glob('nvidia[0-9]*'))
    names, driver = [], None
    smi = shutil.which('nvidia-smi')
    if smi:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run([smi, '--query-gpu=name,driver_version', '--format=csv,noheader'],
                                 capture_output=True, text=True, timeout=30)
            if out.returncode == 0:
                rows = [line.rsplit(',', 1) for line in out.stdout.strip().splitlines() if ',' in line]
                names = [name.strip() for name, _ in rows]
                driver = rows[0][1].strip() if rows else None
    if not names and not files:
        return None
    return dict(names=names, driver=driver, device_files=files)


def no_cuda_reason(gpus: Optional[dict]) -> str:
    """One line: why torch sees no GPU here, and what to do."""
    version = f'torch {torch.__version__}'
    if gpus is None:
        return f'--device cuda, but this machine has no NVIDIA GPU that torch or nvidia-smi can see ({version})'
    seen = (f"{len(gpus['names'])} x {gpus['names'][0]}" if gpus['names'] else ', '.join(gpus['device_files']))
    driver = gpus['driver'] or 'unknown (nvidia-smi gave none)'
    head = f'this machine has NVIDIA GPUs ({seen}; driver {driver}) but torch sees none: '
    if torch.version.cuda is None:
        return head + f'{version} is a CPU-only build; install its CUDA build (pip install -e . from pyproject)'
    major = int(torch.version.cuda.split('.')[0])
    need = CUDA_MIN_DRIVER.get(major)
    text = head + f'{version} is built for CUDA {torch.version.cuda}, which needs an NVIDIA driver >= {need}'
    have = gpus['driver'].split('.')[0] if gpus['driver'] else ''
    if have.isdigit() and need and int(have) < need:
        return text + ': update the driver, or install a torch build for an older CUDA (docs/gpus.md#drivers)'
    visible = os.environ.get('CUDA_VISIBLE_DEVICES')
    return text + (f'; CUDA_VISIBLE_DEVICES={visible!r} hides them' if visible is not None else
                   '; check that nvidia-smi works and the job was given the GPUs')


def default_device() -> str:
    """cuda where torch sees a GPU, and also where the machine has NVIDIA GPUs that torch
    does not see (so a broken node fails instead of passing on its CPU)."""
    return 'cuda' if torch.cuda.is_available() or nvidia_gpus() is not None else 'cpu'
