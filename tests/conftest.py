import os
import sys
from pathlib import Path

import pytest
import torch

os.environ.setdefault('OMP_NUM_THREADS', '2')
sys.path.insert(0, str(Path(__file__).parent))  # reference_vit5
import vit5seg  # noqa: E402,F401  (registers ViT5)

REPO = Path(__file__).resolve().parents[1]


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
