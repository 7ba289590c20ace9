"""PMT's plain mask decoder on a frozen encoder (issue #53), held to the independent reference
(tests/reference_pmt.py, written from tue-mps/pmt's definitions) at 1e-5: every supervised
prediction with masks on and partly dropped, the semantic scores with patch padding, for a DINOv3
encoder (its own RoPE tables) and a ViT-5 one (PMT's own tables, rescaled while training); PMT's
decoder-only release converted with --delta-to and predicting through mmseg's init_model and
MMSegInferencer as the reference; the tiny twin training with no encoder tensor moving."""
import numpy as np
import pytest
import torch
from mmengine.config import Config

from conftest import REPO, perturb, run_script
from reference_eomt import RefDinoV3
from reference_pmt import RefPMT
from reference_vit5 import RefViT5
from vit5seg.models.builder import build_segmentor
from vit5seg.models.checkpoint_files import Weights, extract_state_dict
from vit5seg.models.mask_classification.releases import convert_pmt_release

TINY = REPO / 'configs' / 'tiny' / 'vit5_pmt_synthetic.py'
DEPTH, HEADS, QUERIES, BLOCKS, INDICES = 3, 2, 8, 2, (0, 2)
WIDTH = {'vit5': 64, 'dinov3': 128}   # DINOv3: 64 channels a head, as the release converter assumes
MEAN, STD = torch.tensor([0.485, 0.456, 0.406]), torch.tensor([0.229, 0.224, 0.225])   # PMT's models/vit.py


def close(ours, ref):
    """Within 1e-5 of the reference's largest magnitude (float32 sums over up to 128 channels of logits
    near 50 differ in the last bits)."""
    assert ours.shape == ref.shape
    assert (ours - ref).abs().max() <= 1e-5 * max(1.0, ref.abs().max())


def reference(family, seed=0):
    """(RefPMT, the encoder's weights as a checkpoint object): ViT-5 in the authors' layout, DINOv3 in
    transformers'."""
    dim = WIDTH[family]
    if family == 'vit5':
        encoder = RefViT5(dim=dim, depth=DEPTH, heads=HEADS).randomize(seed)
        weights, registers = encoder.state_dict(), 4
    else:
        transformers = pytest.importorskip('transformers')
        config = transformers.DINOv3ViTConfig(hidden_size=dim, intermediate_size=4 * dim, num_hidden_layers=DEPTH,
                                              num_attention_heads=HEADS, patch_size=16, num_register_tokens=4,
                                              rope_theta=100.0, layer_norm_eps=1e-5)
        hf = perturb(transformers.DINOv3ViTModel(config), seed).eval()
        encoder, weights, registers = RefDinoV3(hf, HEADS), hf.state_dict(), 4
    ref = RefPMT(encoder, dim, HEADS, INDICES, num_classes=150, num_q=QUERIES, num_blocks=BLOCKS, hidden=dim,
                 registers=registers, own_rope=family != 'dinov3')
    perturb(ref.bn, seed + 1)
    perturb(ref.decoder, seed + 2)
    with torch.no_grad():   # running statistics that matter at evaluation
        for bn in ref.bn:
            bn.running_mean.normal_(0, 0.5, generator=torch.Generator().manual_seed(seed + 3))
            bn.running_var.uniform_(0.5, 2.0, generator=torch.Generator().manual_seed(seed + 4))
    return ref, {'model': weights}


def small_cfg(path, family):
    cfg = Config.fromfile(str(path))
    dim = WIDTH[family]
    cfg.model.backbone.update(arch=f'{family}-small', embed_dims=dim, num_layers=DEPTH, num_heads=HEADS)
    cfg.model.backbone.pop('init_cfg', None)
    cfg.model.decode_head.update(in_channels=dim, num_queries=QUERIES, num_blocks=BLOCKS)
    cfg.model.decoder.update(embed_dims=dim, num_heads=HEADS, num_blocks=BLOCKS, hidden_dims=dim,
                             interaction_indices=INDICES, norm_cfg=dict(type='BN', requires_grad=True))
    cfg.model.test_cfg = dict(mode='whole')
    return cfg


def build_pair(family, seed=0):
    """(our PMT built from the tiny config, the reference) on the same weights: ours from the
    reference's decoder-only release and encoder file, through the release converter."""
    ref, encoder = reference(family, seed)
    model = build_segmentor(small_cfg(TINY, family).model)
    sd, _ = convert_pmt_release(ref.release()['state_dict'], Weights(encoder, extract_state_dict(encoder), False), model=model.backbone)
    model.load_state_dict(sd, strict=True)
    return model.eval(), ref.eval()


FAMILIES = ['vit5', 'dinov3']
SIZES = [(64, 80), (70, 90)]   # a multiple of the patch, and one padded to 80 x 96


@pytest.mark.parametrize('family', FAMILIES)
@pytest.mark.parametrize('hw', SIZES, ids=lambda s: f'{s[0]}x{s[1]}')
@pytest.mark.parametrize('probs', [(1.0, 1.0), (0.6, 0.3)], ids=['P=1', 'P=0.6,0.3'])
def test_every_supervised_prediction_equals_the_reference(family, hw, probs):
    model, ref = build_pair(family)
    x = torch.randn(2, 3, *hw, generator=torch.Generator().manual_seed(2))
    model.train()
    ref.train()
    assert not model.backbone.training
    model.decoder.mask_probs = list(probs)
    with torch.no_grad():
        torch.manual_seed(7)   # the same draws: the own tables' scale, then one torch.rand(B, Q) per dropped block
        feats = model.extract_feat(x)
        torch.manual_seed(7)
        expected, (h, w) = ref(x, probs)
    assert feats.padded_size == (h * 16, w * 16) and len(feats.class_logits) == len(expected) == BLOCKS + 1
    for (cls, masks), ours_cls, ours_masks in zip(expected, feats.class_logits, feats.mask_logits):
        close(ours_cls, cls)
        close(ours_masks, masks)
    inside = (torch.nn.functional.interpolate(expected[0][1], size=(h, w), mode='bilinear') > 0).float().mean()
    assert 0.05 < inside < 0.95   # the masks decided something


@pytest.mark.parametrize('family', FAMILIES)
@pytest.mark.parametrize('hw', [(64, 80), (50, 33)], ids=lambda s: f'{s[0]}x{s[1]}')
def test_semantic_scores_equal_the_reference(family, hw):
    from mmseg.structures import SegDataSample
    model, ref = build_pair(family)
    x = torch.randn(1, 3, *hw, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        out = model.predict(x, [SegDataSample(metainfo=dict(img_shape=hw, ori_shape=hw))])[0]
        expected = ref.semantic(x)[0]
    close(out.seg_logits.data, expected)


def test_the_decoder_has_its_own_rope_only_where_the_encoder_is_not_dinov3():
    vit5, _ = build_pair('vit5')
    dinov3, _ = build_pair('dinov3')
    assert vit5.decoder.rope is not None and dinov3.decoder.rope is None and dinov3.decoder.uses_encoder_rope


def smooth_photo(hw=(300, 560), seed=0) -> np.ndarray:
    """A non-square photo with structure (smooth blobs), RGB."""
    import cv2
    small = np.random.default_rng(seed).integers(0, 256, (6, 9, 3), dtype=np.uint8)
    return cv2.resize(small, hw[::-1], interpolation=cv2.INTER_CUBIC)


def test_pmt_release_converts_with_delta_to_and_predicts_through_init_model_as_pmt(tmp_path):
    """The shipped ADE20K config's pipeline and windows (shrunk network) against PMT's eval_step."""
    from mmseg.apis import MMSegInferencer

    from reference_pmt import eval_semantic
    from vit5seg.apis import inference_model, init_model
    ref, encoder = reference('dinov3', seed=4)
    ref.eval()
    torch.save(ref.release(), tmp_path / 'pytorch_model.bin')
    from safetensors.torch import save_file
    save_file({k: v.contiguous() for k, v in encoder['model'].items()}, str(tmp_path / 'dinov3.safetensors'))
    out = tmp_path / 'ade20k_semantic_pmt_large_512_dinov3.pth'
    tool = [REPO / 'tools' / 'convert_checkpoint.py', tmp_path / 'pytorch_model.bin', out]
    refused = run_script(*tool)
    assert refused.returncode == 1 and 'decoder only' in refused.stderr and '--delta-to' in refused.stderr
    assert not out.exists()
    done = run_script(*tool, '--delta-to', tmp_path / 'dinov3.safetensors')
    assert done.returncode == 0, done.stderr
    assert 'pmt-release (decoder only)' in done.stdout and '[dinov3-hf]' in done.stdout
    meta = torch.load(out, map_location='cpu', weights_only=False)['meta']['release']
    assert (meta['decoder'], meta['num_classes'], meta['num_queries'], meta['family']) == ('PMT', 150, QUERIES,
                                                                                            'dinov3')
    shipped = REPO / 'configs' / 'pmt' / 'dinov3-large_pmt_ade20k-512.py'
    cfg = small_cfg(shipped, 'dinov3')
    cfg.model.test_cfg = Config.fromfile(str(shipped)).model.test_cfg   # its windows
    model = init_model(cfg, str(out), device='cpu')
    rgb = smooth_photo()
    result = inference_model(model, rgb[..., ::-1].copy())   # mmseg reads BGR
    expected = eval_semantic(ref, torch.from_numpy(rgb).permute(2, 0, 1))
    labels = expected.argmax(0)
    assert len(labels.unique()) > 5
    assert (result.pred_sem_seg.data[0] == labels).float().mean() >= 0.999
    inferencer = MMSegInferencer(model=cfg, weights=str(out), device='cpu')
    assert (inferencer(rgb[..., ::-1].copy())['predictions'] == labels.numpy()).mean() >= 0.999
