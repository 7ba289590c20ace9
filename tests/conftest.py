import os
import sys
from pathlib import Path

import pytest
import torch

os.environ.setdefault('OMP_NUM_THREADS', '2')
sys.path.insert(0, str(Path(__file__).parent))  # reference_vit5
import vit5seg  # noqa: E402,F401  (registers ViT5)

REPO = Path(__file__).resolve().parents[1]
# A narrow, shallow ViT-5 (head dim 16, so 4 rotary frequencies per axis).
TINY = dict(embed_dims=32, num_layers=2, num_heads=2)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
