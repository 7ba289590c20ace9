"""Whole predictions against transformers' (issue #59, item 3): a random transformers EoMT made with
``save_pretrained`` and converted here predicts, through mmseg's and mmdet's own pipelines
(``vit5seg.apis.inference_model``: the config's test pipeline, slide windows, mmdet's fusion head), what
transformers' ``EomtImageProcessor`` and its ``post_process_*`` give on non-square photos of three sizes:
semantic labels and panoptic segments on >= 99.9% of pixels, the top 30 instances one to one.

transformers' processor is set as the Hub's EoMT processors are (semantic: the short side, windows; panoptic
and instance: the long side, padded to the square). Its post-processing is called with EoMT's own
evaluation settings where its defaults differ (stuff classes merged, no instance threshold); the
defaults' effect is measured in docs/transformers.md.

The photos are smaller than the input, with sides that the short-side and long-side scales map to whole
pixels: there the resize kernels (PIL's in both of our pipelines, as EoMT's; transformers' torchvision)
compute the same bilinear weights, so what is compared is the model and the post-processing. Where an
image is shrunk they differ (docs/transformers.md, "Whole predictions against transformers' processor"). That holds where torchvision's uint8
resize rounds as PIL's does (the lock's torch 2.14 and torchvision 0.29); with torch 2.7 and torchvision
0.22 (the oldest the ranges admit) transformers' resized photo is up to one level off PIL's, so whole
predictions are compared only where the two resizes are the same (:func:`resizes_as_pil`).
"""
import cv2
import numpy as np
import pytest
import torch
from mmengine.config import Config

from conftest import REPO, perturb, same_segments
from vit5seg.models.convert import convert_file

transformers = pytest.importorskip('transformers')
pytest.importorskip('mmdet')

DIM, DEPTH, HEADS, MASKED, SIDE = 128, 3, 2, 2, 96
# (height, width): landscape 3:2, portrait 2:3 and 4:3; the short side to 96 and the long side to 96 are
# whole pixels for each, and 72x96 needs no resize to fit the square
PHOTOS = [(60, 90), (75, 50), (72, 96)]
# what the Hub's EoMT processors hold (preprocessor_config.json of tue-mps/ade20k_semantic_eomt_large_512,
# tue-mps/coco_panoptic_eomt_large_640, tue-mps/coco_instance_eomt_large_640), at the tiny side
SEMANTIC_PROCESSOR = dict(size=dict(shortest_edge=SIDE, longest_edge=None), do_split_image=True, do_pad=False)
SQUARE_PROCESSOR = dict(size=dict(shortest_edge=SIDE, longest_edge=SIDE), do_split_image=False, do_pad=True)


def resizes_as_pil() -> bool:
    """Whether transformers' processor enlarges the first photo to the very pixels PIL's bilinear resize gives."""
    from PIL import Image
    h, w = PHOTOS[0]
    rgb = np.random.default_rng(0).integers(0, 256, (h, w, 3), dtype=np.uint8)
    processor = transformers.EomtImageProcessor(**dict(SEMANTIC_PROCESSOR, do_split_image=False), do_rescale=False,
                                                do_normalize=False)
    theirs = processor(images=rgb, return_tensors='pt')['pixel_values'][0].permute(1, 2, 0).numpy()
    pil = np.asarray(Image.fromarray(rgb).resize((w * SIDE // h, SIDE), Image.BILINEAR))
    return theirs.shape == pil.shape and bool((theirs == pil).all())


@pytest.fixture(autouse=True, scope='module')
def same_resize():
    if not resizes_as_pil():
        import torchvision
        pytest.skip(f'transformers\' processor resizes other pixels than PIL on torch {torch.__version__}, '
                    f'torchvision {torchvision.__version__}: whole predictions are compared where the resizes agree')


def sharpened(model, seed: int, class_scale=8.0, mask_scale=0.05, mask_offset=2.0):
    """A random transformers EoMT whose class head is sharpened and whose mask logits are scaled and
    moved down (a constant channel of the upscaled features times a bias of the mask MLP), so that
    segments pass EoMT's 0.8 class threshold and masks cover parts of the photo; eval mode, annealing
    finished (attn_mask_probs 0, as a release)."""
    perturb(model, seed)
    with torch.no_grad():
        model.class_predictor.weight.mul_(class_scale)
        model.class_predictor.bias.mul_(class_scale)
        norm = model.upscale_block.block[-1].layernorm2d
        norm.weight[0], norm.bias[0] = 0.0, 1.0
        last = model.mask_head.fc3
        last.weight.mul_(mask_scale)
        last.weight[0], last.bias[0] = 0.0, -mask_offset
    model.attn_mask_probs.zero_()
    return model.eval()


def hf_model(model_type: str, num_labels: int, queries: int, seed: int, **sharpen):
    sizes = dict(hidden_size=DIM, num_hidden_layers=DEPTH, num_attention_heads=HEADS, num_blocks=MASKED,
                 num_queries=queries, num_labels=num_labels, image_size=SIDE, patch_size=16)
    torch.manual_seed(seed)   # transformers' initialisation, under the perturbation
    if model_type == 'eomt':
        model = transformers.EomtForUniversalSegmentation(transformers.EomtConfig(layer_norm_eps=1e-6, **sizes))
    else:
        model = transformers.EomtDinov3ForUniversalSegmentation(transformers.EomtDinov3Config(
            intermediate_size=4 * DIM, layer_norm_eps=1e-5, **sizes))
    return sharpened(model, seed, **sharpen)


def tiny_config(name: str, queries: int) -> Config:
    """A shipped EoMT config at the tiny model's sizes, its test resize, windows and padding scaled from
    the config's input side to the tiny one."""
    cfg = Config.fromfile(str(REPO / 'configs' / 'eomt' / name))
    cfg.model.backbone.update(embed_dims=DIM, num_layers=DEPTH, num_heads=HEADS, img_size=SIDE, init_cfg=None)
    cfg.model.decode_head.update(in_channels=DIM, num_queries=queries, num_blocks=MASKED)
    pipeline = cfg.test_dataloader.dataset.pipeline
    resize = next(step for step in pipeline if step['type'] == 'Resize')
    if cfg.get('default_scope') == 'mmdet':
        resize['scale'] = (SIDE, SIDE)
        cfg.model.data_preprocessor.pad_size = (SIDE, SIDE)
    else:   # mmseg: the short side to the window, slide windows at the config's stride / window
        window, stride = cfg.model.test_cfg.crop_size[0], cfg.model.test_cfg.stride[0]
        resize['scale'] = tuple(s * SIDE // window for s in resize['scale'])
        cfg.model.test_cfg.update(crop_size=(SIDE, SIDE), stride=(stride * SIDE // window,) * 2)
    cfg.test_pipeline = pipeline
    return cfg


def converted(tmp_path, model, config: str, queries: int):
    from vit5seg.apis import init_model
    model.save_pretrained(tmp_path / 'hf')
    convert_file(tmp_path / 'hf', tmp_path / 'converted.pth')
    return init_model(tiny_config(config, queries), str(tmp_path / 'converted.pth'), device='cpu')


def photo(path, size) -> np.ndarray:
    """A photo with structure (smooth colour blobs and grain), written as a PNG; returned RGB."""
    rng = np.random.default_rng(sum(size))
    small = rng.integers(0, 256, (4, 5, 3), dtype=np.uint8)
    img = cv2.resize(small, size[::-1], interpolation=cv2.INTER_CUBIC)
    img = np.clip(img.astype(int) + rng.integers(-12, 13, img.shape), 0, 255).astype(np.uint8)
    cv2.imwrite(str(path), img[..., ::-1])
    return img


def transformers_outputs(model, processor_settings: dict, rgb: np.ndarray):
    processor = transformers.EomtImageProcessor(**processor_settings)
    inputs = processor(images=rgb, return_tensors='pt')
    with torch.no_grad():
        return processor, model(**inputs)


def test_semantic_labels_through_mmseg_equal_transformers_windows_and_post_processing(tmp_path):
    from vit5seg.apis import inference_model
    model = hf_model('eomt', 150, 8, seed=1, class_scale=1.0, mask_scale=1.0, mask_offset=0.0)
    ours = converted(tmp_path, model, 'dinov2-large_eomt_ade20k.py', 8)
    for size in PHOTOS:
        rgb = photo(tmp_path / 'photo.png', size)
        labels = inference_model(ours, str(tmp_path / 'photo.png')).pred_sem_seg.data[0].numpy()
        processor, outputs = transformers_outputs(model, SEMANTIC_PROCESSOR, rgb)
        theirs = processor.post_process_semantic_segmentation(outputs, target_sizes=[size])[0].numpy()
        assert labels.shape == theirs.shape == size
        _, counts = np.unique(theirs, return_counts=True)
        assert len(counts) >= 5 and counts.max() < 0.9 * theirs.size, counts   # 8, 14 and 13 classes
        assert (labels == theirs).mean() >= 0.999, (size, (labels == theirs).mean())


def test_panoptic_segments_through_mmdet_equal_transformers_with_eomts_stuff_classes(tmp_path):
    from mmdet.evaluation.functional import INSTANCE_OFFSET

    from vit5seg.apis import inference_model
    model = hf_model('eomt_dinov3', 133, 50, seed=2, mask_scale=0.2, mask_offset=3.0)
    ours = converted(tmp_path, model, 'dinov3-large_eomt_coco-panoptic-640.py', 50)
    for size in PHOTOS:
        rgb = photo(tmp_path / 'photo.png', size)
        pan = inference_model(ours, str(tmp_path / 'photo.png')).pred_panoptic_seg.sem_seg[0].numpy()
        processor, outputs = transformers_outputs(model, SQUARE_PROCESSOR, rgb)
        # EoMT's evaluation merges a stuff class's queries into one segment, as mmdet does; transformers
        # merges only the classes it is given
        result = processor.post_process_panoptic_segmentation(outputs, target_sizes=[size],
                                                              stuff_classes=list(range(80, 133)))[0]
        theirs = result['segmentation'].numpy()
        label_of = {s['id']: s['label_id'] for s in result['segments_info']}
        # things and stuff: 9, 14 and 12 segments on the three photos
        assert len(label_of) >= 5 and {v < 80 for v in label_of.values()} == {True, False}, label_of
        ours_labels = np.where(pan == 133, -1, pan % INSTANCE_OFFSET)
        theirs_labels = np.vectorize(lambda i: label_of.get(int(i), -1))(theirs)
        assert (ours_labels == theirs_labels).mean() >= 0.999, size
        assert same_segments(pan, theirs) >= 0.999, size


def test_the_top_30_instances_through_mmdet_are_transformers_one_to_one(tmp_path):
    """transformers keeps each query's best class; mmdet and EoMT keep the top 100 of queries x classes:
    transformers' top 30 (its threshold 0, EoMT keeps no threshold) are among ours, each once, with its
    label, score and mask. transformers returns one map where a later instance overwrites an earlier one:
    its pixels of instance j lie in our mask j, and our mask j lies where it wrote j or a later one."""
    from vit5seg.apis import inference_model
    model = hf_model('eomt', 80, 40, seed=3)
    ours = converted(tmp_path, model, 'dinov2-large_eomt_coco-instance-640.py', 40)
    for size in PHOTOS:
        rgb = photo(tmp_path / 'photo.png', size)
        found = inference_model(ours, str(tmp_path / 'photo.png')).pred_instances
        processor, outputs = transformers_outputs(model, SQUARE_PROCESSOR, rgb)
        result = processor.post_process_instance_segmentation(outputs, target_sizes=[size], threshold=0.0)[0]
        seg = result['segmentation'].numpy()
        top = sorted(result['segments_info'], key=lambda s: -s['score'])[:30]
        assert len(top) == 30 and top[-1]['score'] > 1e-3, top[-1]
        unused = set(range(len(found.scores)))
        for segment in top:
            match = [i for i in sorted(unused) if found.labels[i] == segment['label_id']
                     and abs(float(found.scores[i]) - segment['score']) <= 1e-4]
            assert len(match) == 1, (size, segment, match)
            unused.remove(match[0])
            mask = found.masks[match[0]].numpy()
            written = seg == segment['id']
            assert (mask[written]).mean() >= 0.999 if written.any() else True
            assert (seg[mask] >= segment['id']).mean() >= 0.999, (size, segment)
