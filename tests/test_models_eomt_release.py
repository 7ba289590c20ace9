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


def dinov3_delta_release(folder):
    """EoMT's DINOv3 release as a delta to transformers' DINOv3 (random weights): writes
    ``pytorch_model.bin`` (the delta) and returns (the reference EoMT on the fine-tuned weights, the
    pretrained transformers model the delta is taken against)."""
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
    torch.save(release(ref, delta), folder / 'pytorch_model.bin')
    return ref, pretrained


def test_dinov3_delta_release_adds_to_the_users_weights_and_predicts_as_upstream(tmp_path):
    ref, pretrained = dinov3_delta_release(tmp_path)
    from safetensors.torch import save_file
    save_file({k: v.contiguous() for k, v in pretrained.state_dict().items()}, str(tmp_path / 'dinov3.safetensors'))

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


def test_a_coco_panoptic_release_is_refused_by_the_semantic_config_naming_the_class_head(tmp_path):
    """EoMT's COCO panoptic release (133 classes + no-object, 200 queries) converts, records what
    it is, and does not load into the 150-class semantic config: not through mmseg's init_model,
    MMSegInferencer or the Runner, where mmengine alone would leave those tensors random."""
    from mmengine.runner import Runner
    from mmseg.apis import MMSegInferencer
    from vit5seg.engine.checkpoint_io import CheckpointShapeError
    backbone = perturb(RefDinoV2(DIM, DEPTH, HEADS, img_size=(96, 96)), 1)
    ref = RefEoMT(backbone, DIM, DEPTH, num_classes=133, num_q=200, num_blocks=MASKED)
    torch.save(release(ref, backbone.vit.state_dict()), tmp_path / 'pytorch_model.bin')
    out = tmp_path / 'coco.pth'
    convert_file(tmp_path / 'pytorch_model.bin', out)
    meta = torch.load(out, weights_only=True)['meta']['release']
    assert meta == dict(decoder='EoMT', task='panoptic', dataset='COCO', num_classes=133, num_queries=200,
                        patch_size=16, grid=(6, 6), family='dinov2', width=DIM, config=None,
                        side_from='the position grid', class_order="the release's")
    cfg = small_config('dinov2-large_eomt_ade20k.py')
    expected = ('decode_head.class_head.weight: checkpoint (134, 64) vs model (151, 64)',
                'decode_head.queries.weight: checkpoint (200, 64) vs model (8, 64)',
                'It is EoMT\'s COCO panoptic release (133 classes, 200 queries, a 6x6 position grid (96 px)): '
                'it needs a COCO panoptic config of its backbone and size: '
                'configs/eomt/*-*_eomt_coco-panoptic-*.py')
    runner_cfg = cfg.copy()
    runner_cfg.update(work_dir=str(tmp_path / 'work'), load_from=str(out))
    runner = Runner.from_cfg(runner_cfg)
    for load in (lambda: init_model(cfg, str(out), device='cpu'),
                 lambda: MMSegInferencer(model=cfg, weights=str(out), device='cpu'),
                 runner.load_or_resume):
        with pytest.raises(CheckpointShapeError) as raised:
            load()
        assert all(part in str(raised.value) for part in expected), raised.value
    # the semantic release of the same backbone names the config it fits when given another one
    semantic = RefEoMT(backbone, DIM, DEPTH, num_classes=150, num_q=100, num_blocks=MASKED)
    torch.save(release(semantic, backbone.vit.state_dict()), tmp_path / 'pytorch_model.bin')
    convert_file(tmp_path / 'pytorch_model.bin', tmp_path / 'ade.pth')
    with pytest.raises(CheckpointShapeError, match=r'ADE20K semantic release.*configs/eomt/\*-\*_eomt_ade20k.py'):
        init_model(cfg, str(tmp_path / 'ade.pth'), device='cpu')


def test_delta_to_with_a_whole_release_and_an_arch_that_does_not_fit_are_one_error_each(tmp_path):
    backbone = perturb(RefDinoV2(DIM, DEPTH, HEADS, img_size=(96, 96)), 1)
    ref = perturb(RefEoMT(backbone, DIM, DEPTH, num_classes=150, num_q=QUERIES, num_blocks=MASKED), 2)
    torch.save(release(ref, backbone.vit.state_dict()), tmp_path / 'pytorch_model.bin')
    torch.save({'state_dict': {k: v.clone() for k, v in backbone.vit.state_dict().items()}}, tmp_path / 'base.pth')
    out = tmp_path / 'out.pth'
    tool = [REPO / 'tools' / 'convert_checkpoint.py', tmp_path / 'pytorch_model.bin', out]
    whole = run_script(*tool, '--delta-to', tmp_path / 'base.pth')
    assert whole.returncode == 1 and whole.stderr.count('\n') == 1, whole.stderr
    assert 'this release is whole' in whole.stderr and 'without --delta-to' in whole.stderr
    narrower = run_script(*tool, '--arch', "{'arch': 'dinov2-small', 'embed_dims': 64, 'num_layers': 2, "
                                           "'num_heads': 2, 'patch_size': 16}", '--img-size', '96')
    assert narrower.returncode == 1 and 'does not fit ViT5' in narrower.stderr, narrower.stderr
    assert 'unexpected in checkpoint (' in narrower.stderr and 'blocks.2.' in narrower.stderr
    assert not out.exists()
