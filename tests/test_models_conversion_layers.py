"""Conversion runs downward in layers (docs/layout.md): what a file is (checkpoint_files) below the
backbone layouts (backbone_layouts, dinov_layouts) below the release tables
(mask_classification.releases) below ``convert_file``. Followed through its calls, with
``sys.setprofile``, a conversion enters each layer once per file it reads, and no layer calls
one above it."""
import sys
from collections import Counter

import pytest
import torch

from test_models_checkpoint import _authors_file
from test_models_eomt_zoo import release_file
from vit5seg.models.convert import convert_file

LAYERS = {  # module -> layer, lowest first
    'vit5seg.models.checkpoint_files': 0,
    'vit5seg.models.backbone_layouts': 1, 'vit5seg.models.dinov_layouts': 1,
    'vit5seg.models.mask_classification.releases': 2,
    'vit5seg.models.convert': 3,
}


def traced(run) -> tuple:
    """(entries into each layer from another layer, calls from a layer to one above it) during ``run()``."""
    entries, upward = Counter(), []

    def profile(frame, event, arg):
        if event != 'call' or frame.f_back is None:
            return
        callee, caller = frame.f_globals.get('__name__'), frame.f_back.f_globals.get('__name__')
        if callee in LAYERS and caller in LAYERS and LAYERS[callee] != LAYERS[caller]:
            entries[LAYERS[callee]] += 1
            if LAYERS[callee] > LAYERS[caller]:
                upward.append(f'{caller}.{frame.f_back.f_code.co_name} -> {callee}.{frame.f_code.co_name}')
    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return entries, upward


def test_a_backbone_file_goes_down_through_each_layer_once(tmp_path):
    _, path = _authors_file(tmp_path)
    entries, upward = traced(lambda: convert_file(path, tmp_path / 'out.pth',
                                                  arch=dict(embed_dims=64, num_layers=2, num_heads=2)))
    assert not upward, upward
    assert entries == Counter({0: 1, 1: 1}), entries          # the file read, its layout converted


def test_a_delta_release_and_its_base_go_down_through_each_layer_once_per_file(tmp_path):
    pytest.importorskip('transformers')
    sd, base = release_file(tmp_path, 'semantic', 'ADE20K', 'dinov3', 'small', 512)
    torch.save(sd, tmp_path / 'release.bin')
    entries, upward = traced(lambda: convert_file(tmp_path / 'release.bin', tmp_path / 'out.pth', delta_to=base))
    assert not upward, upward
    # files: the release and its base; releases: once; layouts: the backbone with its base, once
    assert entries == Counter({0: 2, 2: 1, 1: 1}), entries
    assert torch.load(tmp_path / 'out.pth', weights_only=True)['meta']['eomt_release']['task'] == 'semantic'
