"""VidEoMT's decoder (EoMT with queries carried from frame to frame) held to transformers'
``VideomtForUniversalSegmentation``: a random model written by ``save_pretrained`` converts from
its folder (its ``query_updater`` becomes the decoder's own weights), loads with mmdet's
``init_detector`` and gives, frame by frame, transformers' class and mask logits of every query."""
import pytest
import torch

from conftest import REPO, perturb, run_script
from test_models_transformers_eomt import DEPTH, DIM, HEADS, MASKED, SIDE, small_config

transformers = pytest.importorskip('transformers')

CONVERT = REPO / 'tools' / 'convert_checkpoint.py'
CLASSES, VIDEO_QUERIES, FRAMES = 40, 200, 4   # YouTube-VIS's classes, VidEoMT's queries


def hf_videomt(num_labels: int = CLASSES):
    """A random transformers VidEoMT whose query updater matters: a frame's queries are far from the learned ones."""
    model = transformers.VideomtForUniversalSegmentation(transformers.VideomtConfig(
        hidden_size=DIM, num_hidden_layers=DEPTH, num_attention_heads=HEADS, num_blocks=MASKED,
        num_queries=VIDEO_QUERIES, num_labels=num_labels, image_size=SIDE, patch_size=16))
    perturb(model, 3)
    with torch.no_grad():
        model.query_updater.weight.normal_(0, 2 / DIM ** 0.5, generator=torch.Generator().manual_seed(4))
    return model.eval()


def videomt_config():
    """The COCO instance config at the tiny sizes, with VidEoMT's decoder and YouTube-VIS's classes."""
    cfg = small_config('dinov2-large_eomt_coco-instance-640.py')
    cfg.model.update(num_things_classes=CLASSES, decoder=dict(type='VidEoMTDecoder', embed_dims=DIM))
    cfg.model.decode_head.update(num_classes=CLASSES, num_queries=VIDEO_QUERIES)
    return cfg


def test_transformers_videomt_converts_and_gives_its_logits_on_every_frame(tmp_path):
    from mmdet.apis import init_detector
    model = hf_videomt()
    model.save_pretrained(tmp_path / 'hf')
    done = run_script(CONVERT, tmp_path / 'hf', tmp_path / 'converted.pth')
    assert done.returncode == 0, done.stderr
    assert 'transformers-eomt (videomt)' in done.stdout
    assert "VidEoMT's YouTube-VIS video instance release" in done.stdout, done.stdout
    ours = init_detector(videomt_config(), str(tmp_path / 'converted.pth'), device='cpu').eval()
    clip = torch.randn(1, FRAMES, 3, SIDE, SIDE, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        theirs = model(pixel_values_videos=clip)   # every frame's logits, frame after frame
        state, frames = None, []
        for t in range(FRAMES):
            feats = ours.extract_feat(clip[:, t], state=state)
            frames.append(feats)
            state = feats.state
        alone = ours.extract_feat(clip[:, 1])      # the second frame without the first's queries
    largest = max(theirs.class_queries_logits.abs().max(), theirs.masks_queries_logits.abs().max())
    for t, feats in enumerate(frames):
        assert (feats.class_logits[-1] - theirs.class_queries_logits[t:t + 1]).abs().max() <= 1e-4 * largest, t
        assert (feats.mask_logits[-1] - theirs.masks_queries_logits[t:t + 1]).abs().max() <= 1e-4 * largest, t
    # carried queries change what a frame predicts: a decoder that dropped them would not be transformers'
    assert (alone.class_logits[-1] - theirs.class_queries_logits[1:2]).abs().max() > 1e-2 * largest


def test_the_decoder_refuses_another_width_and_a_state_of_another_shape():
    from mmdet.apis import init_detector
    cfg = videomt_config()
    cfg.model.decoder.embed_dims = DIM * 2
    with pytest.raises(ValueError, match=f'decoder.embed_dims={DIM * 2} differs from the backbone width {DIM}'):
        init_detector(cfg, device='cpu')
    model = init_detector(videomt_config(), device='cpu').eval()
    said = (rf'previous frame\'s query tokens, \(B, Q, C\) = \(1, {VIDEO_QUERIES}, {DIM}\); '
            rf'it was handed \(1, 3, {DIM}\)')
    with torch.no_grad(), pytest.raises(ValueError, match=said):
        model.extract_feat(torch.randn(1, 3, SIDE, SIDE), state=torch.zeros(1, 3, DIM))
