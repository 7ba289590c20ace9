"""Conversion runs downward in layers (docs/layout.md): what a file is (checkpoint_files) below the
backbone layouts (backbone_layouts, dinov_layouts) below the release tables
(mask_classification.releases) below the format rows (formats) below ``convert_file``. Followed
through its calls with ``sys.setprofile``, and statically, for every format: a conversion enters
each module once per file it reads (it returns to no module it has left) and no layer calls one
above it. A format is a row: one written in this file converts through tools/convert_checkpoint.py,
and transformers' EoMT is a row of its own."""
import ast
import re
import sys
from collections import Counter

import pytest
import torch

from conftest import REPO, run_script
from test_models_checkpoint import _authors_file
from test_models_eomt_zoo import release_file, random_state
from vit5seg.models import formats
from vit5seg.models.convert import convert_file

LAYERS = {  # module -> layer, lowest first
    'vit5seg.models.checkpoint_files': 0,
    'vit5seg.models.backbone_layouts': 1, 'vit5seg.models.dinov_layouts': 1,
    'vit5seg.models.mask_classification.releases': 2,
    'vit5seg.models.mask_classification.transformers_eomt': 2.5,
    'vit5seg.models.mask_classification.to_transformers': 2.5,
    'vit5seg.models.formats': 3,
    'vit5seg.models.convert': 4,
}


def traced(run) -> tuple:
    """(entries into each module of LAYERS from another one, calls from a layer to one above it) during
    ``run()``."""
    entries, upward = Counter(), []

    def profile(frame, event, arg):
        if event != 'call' or frame.f_back is None:
            return
        callee, caller = frame.f_globals.get('__name__'), frame.f_back.f_globals.get('__name__')
        if callee in LAYERS and caller in LAYERS and callee != caller:
            entries[callee.rsplit('.', 1)[-1]] += 1
            if LAYERS[callee] > LAYERS[caller]:
                upward.append(f'{caller}.{frame.f_back.f_code.co_name} -> {callee}.{frame.f_code.co_name}')
    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return entries, upward


def test_no_conversion_module_imports_one_above_it():
    """Statically: each module of LAYERS imports only modules of its layer or below."""
    found = []
    for module, layer in LAYERS.items():
        path = REPO / (module.replace('.', '/') + '.py')
        package = module.rsplit('.', 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package.split('.')[:len(package.split('.')) - node.level + 1] if node.level else []
                target = '.'.join(base + (node.module.split('.') if node.module else []))
                names = [target] + [f'{target}.{a.name}' for a in node.names]   # `from . import formats` too
                found += [f'{module} imports {n}' for n in names if LAYERS.get(n, -1) > layer]
    assert not found, found


def test_a_backbone_file_goes_down_through_each_module_once(tmp_path):
    _, path = _authors_file(tmp_path)
    entries, upward = traced(lambda: convert_file(path, tmp_path / 'out.pth',
                                                  arch=dict(embed_dims=64, num_layers=2, num_heads=2)))
    assert not upward, upward
    # read; its row; the layouts (DINO ruled out in one call)
    assert entries == Counter(checkpoint_files=1, formats=1, backbone_layouts=1, dinov_layouts=1), entries
    assert torch.load(tmp_path / 'out.pth', weights_only=True)['meta']['source_format'] == 'backbone'
    entries, upward = traced(lambda: convert_file(tmp_path / 'out.pth', tmp_path / 'again.pth'))
    assert not upward and entries == Counter(checkpoint_files=1, formats=1, backbone_layouts=1), entries
    assert torch.load(tmp_path / 'again.pth', weights_only=True)['meta']['source_format'] == 'vit5seg'


def test_a_delta_release_and_its_base_go_down_through_each_module_once_per_file(tmp_path):
    pytest.importorskip('transformers')
    sd, base = release_file(tmp_path, 'semantic', 'ADE20K', 'dinov3', 'small', 512)
    torch.save(sd, tmp_path / 'release.bin')
    entries, upward = traced(lambda: convert_file(tmp_path / 'release.bin', tmp_path / 'out.pth', delta_to=base))
    assert not upward, upward
    # two files read: the release and its base, each through the DINO layouts once
    assert entries == Counter(checkpoint_files=2, formats=1, releases=1, backbone_layouts=1, dinov_layouts=2), entries
    meta = torch.load(tmp_path / 'out.pth', weights_only=True)['meta']
    assert meta['release']['task'] == 'semantic' and meta['source_format'] == 'eomt-release'


def test_a_pmt_release_and_its_encoder_go_down_through_each_module_once_per_file(tmp_path):
    transformers = pytest.importorskip('transformers')
    from safetensors.torch import save_file

    from reference_pmt import RefPMT
    with torch.device('meta'):
        ref = RefPMT(torch.nn.Identity(), 384, 6, (0, 0, 0, 0), num_classes=150, num_q=100, num_blocks=6, hidden=384)
        hf = transformers.DINOv3ViTModel(transformers.DINOv3ViTConfig(
            hidden_size=384, intermediate_size=1536, num_hidden_layers=1, num_attention_heads=6, patch_size=16,
            num_register_tokens=4))
    save_file({k: v.contiguous() for k, v in random_state(hf).items()}, str(tmp_path / 'dinov3.safetensors'))
    torch.save({'state_dict': {f'network.{k}': v for k, v in random_state(ref).items()}},
               tmp_path / 'ade20k_semantic_pmt_large_512_dinov3.bin')
    entries, upward = traced(lambda: convert_file(tmp_path / 'ade20k_semantic_pmt_large_512_dinov3.bin',
                                                  tmp_path / 'out.pth', delta_to=tmp_path / 'dinov3.safetensors'))
    assert not upward, upward
    # the release (its decoder's blocks: transformers' DINOv3 layers) and its encoder: DINO layouts once each
    assert entries == Counter(checkpoint_files=2, formats=1, releases=1, backbone_layouts=1, dinov_layouts=2), entries
    assert torch.load(tmp_path / 'out.pth', weights_only=True)['meta']['source_format'] == 'pmt-release'


def _under_encoder(weights, request):
    """The test's format: a ViT-5 of the authors' keys under ``encoder.`` with ``layers.N`` for ``blocks.N``."""
    from vit5seg.models.backbone_layouts import convert_weights
    from vit5seg.models.checkpoint_files import Weights
    sd = {re.sub(r'^layers\.', 'blocks.', k.removeprefix('encoder.')): v for k, v in weights.state_dict.items()}
    converted, layout = convert_weights(Weights(weights.obj, sd, False), request.source, model=request.model)
    return converted, f'encoder-wrapped {layout}', {}


@pytest.fixture
def encoder_format(monkeypatch):
    monkeypatch.setattr(formats, 'FORMATS', list(formats.FORMATS))
    return formats.register_format(formats.CheckpointFormat(
        'test-encoder', 'a ViT-5 under encoder.layers.N', (r'^encoder\.cls_token$', r'^encoder\.layers\.0\.'), (),
        'the ViT-5 configs', _under_encoder, own=False))


def test_a_format_written_in_a_test_is_one_row_that_convert_checkpoint_then_converts(tmp_path, encoder_format):
    from vit5seg.models.convert import main
    ref, path = _authors_file(tmp_path)
    obj = torch.load(path, weights_only=False)
    wrapped = {re.sub(r'^blocks\.', 'layers.', k): v for k, v in obj['model'].items()}
    torch.save({f'encoder.{k}': v for k, v in wrapped.items()}, tmp_path / 'wrapped.pth')
    arch = "{'embed_dims': 64, 'num_layers': 2, 'num_heads': 2}"
    main([str(tmp_path / 'wrapped.pth'), str(tmp_path / 'a.pth'), '--arch', arch])
    main([str(path), str(tmp_path / 'b.pth'), '--arch', arch])
    a, b = (torch.load(tmp_path / f, weights_only=True) for f in ('a.pth', 'b.pth'))
    assert a['meta']['source_format'] == 'test-encoder' and a['meta']['source_layout'] == 'encoder-wrapped vit5'
    assert a['state_dict'].keys() == b['state_dict'].keys()
    assert all(torch.equal(a['state_dict'][k], b['state_dict'][k]) for k in b['state_dict'])
    # two rows claiming one file is one error too
    formats.register_format(encoder_format._replace(name='test-encoder-again'))
    with pytest.raises(formats.UnknownFormat, match=r'claimed by 2 checkpoint formats \(test-encoder, test-enc'):
        convert_file(tmp_path / 'wrapped.pth', tmp_path / 'c.pth')
    assert not (tmp_path / 'c.pth').exists()


def test_transformers_eomt_goes_down_through_each_module_once(tmp_path):
    """transformers' EoMT on DINOv3 (save_pretrained's folder), which the DINOv3 layout alone once took
    4 tensors of, dropping the rest: its own row, then the release tables and the layouts, once each."""
    transformers = pytest.importorskip('transformers')
    model = transformers.EomtDinov3ForUniversalSegmentation(transformers.EomtDinov3Config(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128, num_blocks=1,
        num_queries=8, num_labels=5, image_size=64, patch_size=16))
    model.save_pretrained(tmp_path / 'hf')
    entries, upward = traced(lambda: convert_file(tmp_path / 'hf', tmp_path / 'out.pth'))
    assert not upward, upward
    assert entries == Counter(checkpoint_files=1, formats=1, transformers_eomt=1, releases=1, backbone_layouts=1,
                              dinov_layouts=1), entries
    converted = torch.load(tmp_path / 'out.pth', weights_only=True)
    assert converted['meta']['source_format'] == 'transformers-eomt'
    from safetensors.torch import load_file
    held = load_file(tmp_path / 'hf' / 'model.safetensors')
    dropped = {'attn_mask_probs', 'criterion.empty_weight'}   # the annealing state and the loss weights
    # every other tensor is in the result (q, k and v as one; k's bias, which DINOv3 has not, as zeros)
    assert sum(v.numel() for k, v in held.items() if k not in dropped) + 2 * 64 == \
        sum(v.numel() for v in converted['state_dict'].values())
