"""PMT's COCO panoptic and instance models in mmdet (issue #53): a decoder-only release made here with
random weights in PMT's key layout (tests/reference_pmt.py), converted by tools/convert_checkpoint.py
with --delta-to the DINOv3 file, run through mmdet's ``init_detector`` / ``inference_detector`` with the
shipped config (network shrunk), predicts what the independent reference predicts with EoMT's
eval_step, which PMT's panoptic and instance modules inherit (tests/reference_eomt.py).

As in tests/test_models_eomt_panoptic.py, the class head is sharpened and the mask logits offset so
that segments survive PMT's 0.8 class threshold on random weights."""
import numpy as np
import pytest
import torch
from mmengine.config import Config

from conftest import REPO, perturb, run_script
from reference_eomt import RefDinoV3, panoptic_map, top_instances
from reference_pmt import RefPMT
from test_models_eomt_panoptic import photo, reference_logits, same_segments   # RefPMT runs as RefEoMT

pytest.importorskip('panopticapi')
DIM, DEPTH, HEADS, QUERIES, BLOCKS, INDICES = 128, 3, 2, 60, 2, (0, 2)


def make_release(tmp_path, classes, seed=0, class_scale=8.0, mask_scale=0.3, mask_offset=6.0):
    transformers = pytest.importorskip('transformers')
    from safetensors.torch import save_file
    config = transformers.DINOv3ViTConfig(hidden_size=DIM, intermediate_size=4 * DIM, num_hidden_layers=DEPTH,
                                          num_attention_heads=HEADS, patch_size=16, num_register_tokens=4,
                                          rope_theta=100.0, layer_norm_eps=1e-5)
    torch.manual_seed(seed)
    hf = perturb(transformers.DINOv3ViTModel(config), seed + 1).eval()
    ref = RefPMT(RefDinoV3(hf, HEADS), DIM, HEADS, INDICES, num_classes=classes, num_q=QUERIES, num_blocks=BLOCKS,
                 hidden=DIM, registers=4)
    perturb(ref.decoder, seed + 2)
    d = ref.decoder
    with torch.no_grad():   # sharpened: confident classes, masks that cover part of the photo
        d.class_head.weight.mul_(class_scale)
        d.class_head.bias.mul_(class_scale)
        norm = d.upscale[-1].norm
        norm.weight[0], norm.bias[0] = 0.0, 1.0
        last = d.mask_head[-1]
        last.weight.mul_(mask_scale)
        last.weight[0], last.bias[0] = 0.0, -mask_offset
    ref.eval()
    torch.save(ref.release(), tmp_path / 'pytorch_model.bin')
    save_file({k: v.contiguous() for k, v in hf.state_dict().items()}, str(tmp_path / 'dinov3.safetensors'))
    out = tmp_path / 'converted.pth'
    done = run_script(REPO / 'tools' / 'convert_checkpoint.py', tmp_path / 'pytorch_model.bin', out, '--delta-to',
                      tmp_path / 'dinov3.safetensors')
    assert done.returncode == 0, done.stderr
    return ref, out


def small_config(name: str) -> Config:
    cfg = Config.fromfile(str(REPO / 'configs' / 'pmt' / name))
    cfg.model.backbone.update(embed_dims=DIM, num_layers=DEPTH, num_heads=HEADS, init_cfg=None)
    cfg.model.decode_head.update(in_channels=DIM, num_queries=QUERIES, num_blocks=BLOCKS)
    cfg.model.decoder.update(embed_dims=DIM, num_heads=HEADS, num_blocks=BLOCKS, hidden_dims=DIM,
                             interaction_indices=INDICES)
    return cfg


def test_coco_panoptic_release_predicts_as_pmt(tmp_path):
    from mmdet.apis import inference_detector, init_detector
    ref, converted = make_release(tmp_path, 133)
    meta = torch.load(converted, weights_only=True)['meta']['release']
    assert (meta['decoder'], meta['num_classes']) == ('PMT', 133)
    model = init_detector(small_config('dinov3-large_pmt_coco-panoptic-640.py'), str(converted), device='cpu')
    img = photo()
    pan = inference_detector(model, img).pred_panoptic_seg.sem_seg[0].numpy()
    class_logits, mask_logits = reference_logits(ref, img)
    cls_map, seg_map = panoptic_map(mask_logits, class_logits, stuff_classes=set(range(80, 133)))
    cls_map, seg_map = cls_map.numpy(), seg_map.numpy()
    assert len(np.unique(seg_map)) > 12 and (cls_map < 80).any() and ((cls_map >= 80) & (cls_map < 133)).any()
    ours_cls = pan % 1000                 # mmdet: class + instance x INSTANCE_OFFSET; void = 133
    assert (ours_cls == cls_map).mean() >= 0.999
    assert same_segments(pan, seg_map) >= 0.999
    # mmdet's DetInferencer: the same segments, named and drawn (the classes of the shipped config's dataset, which
    # a release of a shipped width carries in its meta; this one is narrower)
    from mmdet.apis import DetInferencer

    from vit5seg.utils.dataset_meta import config_dataset_meta
    cfg = small_config('dinov3-large_pmt_coco-panoptic-640.py')
    checkpoint = torch.load(converted, weights_only=False)
    checkpoint['meta']['dataset_meta'] = config_dataset_meta(cfg)
    torch.save(checkpoint, tmp_path / 'named.pth')
    inferencer = DetInferencer(model=cfg, weights=str(tmp_path / 'named.pth'), device='cpu', show_progress=False)
    out = inferencer(img, return_vis=True, no_save_vis=True, return_datasamples=True)
    assert np.array_equal(out['predictions'][0].pred_panoptic_seg.sem_seg[0].numpy(), pan)
    assert len(inferencer.visualizer.dataset_meta['classes']) == 133
    assert (out['visualization'][0] != img[..., ::-1]).mean() > 0.01


def test_coco_instance_release_predicts_as_pmt(tmp_path):
    from mmdet.apis import inference_detector, init_detector
    ref, converted = make_release(tmp_path, 80, seed=1)
    model = init_detector(small_config('dinov3-large_pmt_coco-instance-640.py'), str(converted), device='cpu')
    img = photo()
    found = inference_detector(model, img).pred_instances
    order = found.scores.argsort(descending=True)[:30]
    class_logits, mask_logits = reference_logits(ref, img)
    masks, labels, scores = top_instances(mask_logits, class_logits)
    assert scores[29] > 1e-3 and masks[:30].flatten(1).any(1).all()
    torch.testing.assert_close(found.scores[order], scores[:30], atol=1e-4, rtol=0)
    unused = set(range(40))
    for i in order.tolist():
        match = [j for j in sorted(unused) if labels[j] == found.labels[i] and abs(scores[j] - found.scores[i]) <= 1e-4
                 and (masks[j] == found.masks[i]).float().mean() >= 0.999]
        assert match, f'our instance {i} (label {int(found.labels[i])}) is no reference instance'
        unused.remove(match[0])
