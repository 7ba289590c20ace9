"""EoMT's published models in mmseg (issue #39): a release file made here from random weights
with upstream's key names (the Lightning module's ``network.*``), converted by
tools/convert_checkpoint.py, loaded by mmseg's ``init_model`` from the shipped config, must
predict as the independent reference EoMT (tests/reference_eomt.py) on the same weights.

The DINOv2 release is full weights (timm's DINOv2 at patch 16); the DINOv3 one is a delta
to transformers' DINOv3, which ``--delta-to`` adds to the user's pretrained file.
"""
import numpy as np
import pytest
import torch
from mmengine.config import Config

from conftest import REPO, perturb, run_script
from reference_eomt import RefDinoV2, RefDinoV3, RefEoMT
from vit5seg.apis import inference_model, init_model
from vit5seg.models.convert import convert_file

DIM, DEPTH, HEADS, QUERIES, MASKED = 64, 3, 2, 8, 2
DINOV3_DIM = 128   # 2 heads of 64 channels, as every DINOv3 (the converter's default without --arch)
IMAGE = (80, 112)
MEAN, STD = torch.tensor([0.485, 0.456, 0.406]), torch.tensor([0.229, 0.224, 0.225])   # EoMT's models/vit.py


def release(ref: RefEoMT, backbone_sd: dict) -> dict:
    """The Lightning module's state dict as EoMT saves it."""
    sd = {f'network.encoder.backbone.{k}': v for k, v in backbone_sd.items()}
    sd.update({f'network.{k}': v for k, v in ref.state_dict().items() if not k.startswith('backbone.')})
    sd['network.encoder.pixel_mean'], sd['network.encoder.pixel_std'] = MEAN.view(1, 3, 1, 1), STD.view(1, 3, 1, 1)
    sd['network.attn_mask_probs'] = torch.ones(MASKED)
    sd['criterion.empty_weight'] = torch.ones(151)
    return sd


def small_config(name: str, dim: int = DIM) -> Config:
    """The shipped config at a CPU size: its switches and head, narrower and shallower."""
    cfg = Config.fromfile(str(REPO / 'configs' / 'eomt' / name))
    # init_cfg kept: init_model loads the converted file only (no DINOv3 file, no download)
    cfg.model.backbone.update(embed_dims=dim, num_layers=DEPTH, num_heads=HEADS)
    if 'dinov2' in name:  # upstream's timm model runs at its img_size only: the test image's
        cfg.model.backbone.img_size = IMAGE
    cfg.model.decode_head.update(in_channels=dim, num_queries=QUERIES, num_blocks=MASKED)
    cfg.model.test_cfg = dict(mode='whole')
    # the image as it is (inference_model reads test_pipeline, MMSegInferencer the test loader's)
    cfg.test_pipeline = [dict(type='LoadImageFromFile'), dict(type='PackSegInputs')]
    cfg.test_dataloader.dataset.pipeline = cfg.test_pipeline
    return cfg


def upstream_semantic(ref: RefEoMT, img_bgr: np.ndarray) -> torch.Tensor:
    """EoMT's evaluation input: RGB / 255, ImageNet-normalised; per-pixel class scores."""
    x = torch.from_numpy(img_bgr[..., ::-1].copy()).permute(2, 0, 1)[None].float() / 255
    with torch.no_grad():
        return ref.semantic((x - MEAN.view(1, 3, 1, 1)) / STD.view(1, 3, 1, 1))[0]


def predicts_as_upstream(cfg, checkpoint, ref):
    model = init_model(cfg, str(checkpoint), device='cpu')
    img = np.random.default_rng(0).integers(0, 256, (*IMAGE, 3), dtype=np.uint8)
    result = inference_model(model, img)
    expected = upstream_semantic(ref, img)
    torch.testing.assert_close(result.seg_logits.data, expected, atol=2e-5, rtol=1e-4)
    assert torch.equal(result.pred_sem_seg.data[0], expected.argmax(0))
    from mmseg.apis import MMSegInferencer
    inferencer = MMSegInferencer(model=cfg, weights=str(checkpoint), device='cpu')
    assert np.array_equal(inferencer(img)['predictions'], expected.argmax(0).numpy())


def test_dinov2_release_converts_and_predicts_as_upstream(tmp_path):
    backbone = perturb(RefDinoV2(DIM, DEPTH, HEADS, img_size=IMAGE), 1)
    ref = perturb(RefEoMT(backbone, DIM, DEPTH, num_classes=150, num_q=QUERIES, num_blocks=MASKED), 2).eval()
    torch.save(release(ref, backbone.vit.state_dict()), tmp_path / 'pytorch_model.bin')
    layout = convert_file(tmp_path / 'pytorch_model.bin', tmp_path / 'converted.pth')
    assert layout == 'eomt-release, backbone dinov2-timm'
    predicts_as_upstream(small_config('dinov2-large_eomt_ade20k.py'), tmp_path / 'converted.pth', ref)


def test_dinov3_delta_release_adds_to_the_users_weights_and_predicts_as_upstream(tmp_path):
    transformers = pytest.importorskip('transformers')
    config = transformers.DINOv3ViTConfig(hidden_size=DINOV3_DIM, intermediate_size=4 * DINOV3_DIM,
                                          num_hidden_layers=DEPTH, num_attention_heads=HEADS, patch_size=16,
                                          num_register_tokens=4, rope_theta=100.0, layer_norm_eps=1e-5)
    pretrained = perturb(transformers.DINOv3ViTModel(config), 1).eval()
    finetuned = perturb(transformers.DINOv3ViTModel(config), 1)
    finetuned.load_state_dict(pretrained.state_dict())
    perturb(finetuned, 3, scale=0.02).eval()   # fine-tuning moves the weights a little
    ref = perturb(RefEoMT(RefDinoV3(finetuned, HEADS), DINOV3_DIM, DEPTH, num_classes=150, num_q=QUERIES,
                            num_blocks=MASKED), 2).eval()
    # EoMT's transformers_to_timm: embeddings -> patch_embed, the layer list -> blocks, no mask_token;
    # the delta file: fine-tuned - pretrained for the encoder, the head as it is
    base = pretrained.state_dict()
    delta = {}
    for key, value in finetuned.state_dict().items():
        if key.endswith('mask_token'):
            continue
        name = key.replace('embeddings.', 'patch_embed.', 1).replace('model.layer.', 'blocks.', 1)
        delta[name] = value - base[key]
    torch.save(release(ref, delta), tmp_path / 'pytorch_model.bin')
    from safetensors.torch import save_file
    save_file({k: v.contiguous() for k, v in base.items()}, str(tmp_path / 'dinov3.safetensors'))

    out = tmp_path / 'converted.pth'
    tool = [REPO / 'tools' / 'convert_checkpoint.py', tmp_path / 'pytorch_model.bin', out]
    refused = run_script(*tool)     # a delta alone is no model
    assert refused.returncode == 1 and 'delta release' in refused.stderr and '--delta-to' in refused.stderr
    assert not out.exists()
    done = run_script(*tool, '--delta-to', tmp_path / 'dinov3.safetensors')
    assert done.returncode == 0, done.stderr
    assert 'eomt-release, backbone dinov3-hf' in done.stdout and 'dinov3-hf' in done.stdout.split('+')[-1]
    predicts_as_upstream(small_config('dinov3-large_eomt_ade20k.py', DINOV3_DIM), out, ref)


def test_an_unknown_layout_is_one_error_listing_the_known_ones_and_nothing_is_written(tmp_path):
    torch.save({'encoder.layers.0.weight': torch.zeros(2, 2)}, tmp_path / 'other.pth')
    done = run_script(REPO / 'tools' / 'convert_checkpoint.py', tmp_path / 'other.pth', tmp_path / 'out.pth')
    assert done.returncode == 1
    assert done.stderr.count('\n') == 1 and 'eomt-release' in done.stderr and 'dinov3-hf' in done.stderr
    assert not (tmp_path / 'out.pth').exists()
