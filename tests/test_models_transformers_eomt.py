"""transformers' EoMT as a door (issue #59): ``EomtForUniversalSegmentation`` (DINOv2) and
``EomtDinov3ForUniversalSegmentation`` (DINOv3) made here with random weights and written by
``save_pretrained``, converted by tools/convert_checkpoint.py from their folder, loaded by mmseg's
``init_model`` and mmdet's ``init_detector``, give transformers' own class and mask logits for every
query on the same input. The config a file fits is chosen from its config.json against the release
table, and its id2label becomes the checkpoint's class names."""
import json
import re

import pytest
import torch
from mmengine.config import Config

from conftest import REPO, perturb, run_script
from vit5seg.models.convert import convert_file
from vit5seg.utils.class_orders import EOMT_STUFF

transformers = pytest.importorskip('transformers')

DIM, DEPTH, HEADS, QUERIES, MASKED, SIDE = 128, 3, 2, 8, 2, 96
CONVERT = REPO / 'tools' / 'convert_checkpoint.py'


# EoMT's DINOv3 models and Meta's use LayerNorm's eps 1e-5 (transformers' DINOv3ViTConfig too), where
# EomtDinov3Config's default is 1e-6: the file's config.json says which
EPS = {'eomt': 1e-6, 'eomt_dinov3': 1e-5}


def hf_model(model_type: str, num_labels: int = 150, dim: int = DIM, depth: int = DEPTH, side: int = SIDE,
             queries: int = QUERIES, id2label=None, perturbed: bool = True, eps=None, heads: int = HEADS,
             blocks: int = MASKED):
    """A random transformers EoMT in eval mode, its annealing finished (attn_mask_probs 0, as a release)."""
    sizes = dict(hidden_size=dim, num_hidden_layers=depth, num_attention_heads=heads, num_blocks=blocks,
                 num_queries=queries, num_labels=num_labels, image_size=side, patch_size=16,
                 layer_norm_eps=eps or EPS[model_type])
    if id2label is not None:
        sizes.update(id2label=dict(enumerate(id2label)), label2id={n: i for i, n in enumerate(id2label)})
    if model_type == 'eomt':
        model = transformers.EomtForUniversalSegmentation(transformers.EomtConfig(**sizes))
    else:
        model = transformers.EomtDinov3ForUniversalSegmentation(transformers.EomtDinov3Config(
            intermediate_size=4 * dim, **sizes))
    if perturbed:
        perturb(model, {'eomt': 1, 'eomt_dinov3': 2}[model_type])
    model.attn_mask_probs.zero_()
    return model.eval()


def small_config(name: str, dim: int = DIM) -> Config:
    """A shipped EoMT config at the tiny model's sizes."""
    cfg = Config.fromfile(str(REPO / 'configs' / 'eomt' / name))
    cfg.model.backbone.update(embed_dims=dim, num_layers=DEPTH, num_heads=HEADS, img_size=SIDE)
    cfg.model.decode_head.update(in_channels=dim, num_queries=QUERIES, num_blocks=MASKED)
    return cfg


def logits_against_transformers(model, ours) -> tuple:
    """(largest class-logit difference, largest mask-logit difference, largest logit) on one normalised
    input at the model's size, every query."""
    x = torch.randn(1, 3, SIDE, SIDE, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        theirs = model(pixel_values=x)
        feats = ours.extract_feat(x)
    cls, masks = feats.class_logits[-1], feats.mask_logits[-1]
    assert cls.shape == theirs.class_queries_logits.shape and masks.shape == theirs.masks_queries_logits.shape
    largest = max(theirs.class_queries_logits.abs().max(), theirs.masks_queries_logits.abs().max())
    return ((cls - theirs.class_queries_logits).abs().max() / largest,
            (masks - theirs.masks_queries_logits).abs().max() / largest, largest)


@pytest.mark.parametrize('model_type,config', [('eomt', 'dinov2-large_eomt_ade20k.py'),
                                               ('eomt_dinov3', 'dinov3-large_eomt_ade20k.py')])
def test_a_saved_model_converts_from_its_folder_and_gives_transformers_logits_through_init_model(
        tmp_path, model_type, config):
    from vit5seg.apis import init_model
    model = hf_model(model_type)
    model.save_pretrained(tmp_path / 'hf')
    done = run_script(CONVERT, tmp_path / 'hf', tmp_path / 'converted.pth')
    assert done.returncode == 0, done.stderr
    family = {'eomt': 'dinov2', 'eomt_dinov3': 'dinov3'}[model_type]
    assert f'transformers-eomt ({model_type}), backbone {family}-hf' in done.stdout, done.stdout
    ours = init_model(small_config(config), str(tmp_path / 'converted.pth'), device='cpu').eval()
    cls, masks, largest = logits_against_transformers(model, ours)
    assert largest > 1 and cls < 1e-4 and masks < 1e-4, (cls, masks, largest)
    meta = torch.load(tmp_path / 'converted.pth', weights_only=True)['meta']
    assert meta['source_format'] == 'transformers-eomt'
    assert meta['transformers'] == dict(model_type=model_type, num_blocks=MASKED, image_size=SIDE,
                                        layer_norm_eps=EPS[model_type], architectures=[type(model).__name__])


def test_a_dinov3_model_at_transformers_default_eps_is_named_and_equal_with_its_eps_set(tmp_path):
    """EomtDinov3Config's own default eps (1e-6) against the config's DINOv3 1e-5: the converter says
    so, the logits differ by more than the bound, and the config value it names makes them equal."""
    from vit5seg.apis import init_model
    model = hf_model('eomt_dinov3', eps=1e-6)
    model.save_pretrained(tmp_path / 'hf')
    done = run_script(CONVERT, tmp_path / 'hf', tmp_path / 'converted.pth')
    assert "layer_norm_eps is 1e-06, where DINOV3 and EoMT's models use 1e-05" in done.stdout, done.stdout
    assert 'set model.backbone.norm_eps=1e-06' in done.stdout
    cfg = small_config('dinov3-large_eomt_ade20k.py')
    cls, masks, _ = logits_against_transformers(model, init_model(cfg, str(tmp_path / 'converted.pth'), 'cpu'))
    assert max(cls, masks) > 1e-4, (cls, masks)
    cfg.model.backbone.norm_eps = 1e-6
    cls, masks, _ = logits_against_transformers(model, init_model(cfg, str(tmp_path / 'converted.pth'), 'cpu'))
    assert cls < 1e-4 and masks < 1e-4, (cls, masks)


def test_a_panoptic_model_loads_with_init_detector_and_gives_transformers_logits(tmp_path):
    from mmdet.apis import init_detector
    model = hf_model('eomt_dinov3', num_labels=133)
    model.save_pretrained(tmp_path / 'hf')
    convert_file(tmp_path / 'hf', tmp_path / 'converted.pth')
    cfg = small_config('dinov3-large_eomt_coco-panoptic-640.py')
    ours = init_detector(cfg, str(tmp_path / 'converted.pth'), device='cpu').eval()
    cls, masks, largest = logits_against_transformers(model, ours)
    assert largest > 1 and cls < 1e-4 and masks < 1e-4, (cls, masks, largest)


def test_the_config_comes_from_config_json_and_id2label_names_the_classes(tmp_path):
    """DINOv2-S at 640 (a 40x40 position grid), 133 classes and 200 queries: EoMT's COCO panoptic S;
    DINOv3-S at 1280: the side only config.json gives; ADE20K panoptic names in ADE's order come out in
    mmdet's order (things first), as the class head's rows do."""
    from mmdet.datasets import ADE20KPanopticDataset, CocoPanopticDataset
    from mmseg.datasets import ADE20KDataset
    coco = list(CocoPanopticDataset.METAINFO['classes'])
    renamed = coco[:5] + ['a cat of its own'] + coco[6:]
    hf_model('eomt', num_labels=133, dim=384, depth=1, side=640, queries=200, id2label=renamed,
             perturbed=False).save_pretrained(tmp_path / 'coco')
    meta = {}
    convert_file(tmp_path / 'coco', tmp_path / 'coco.pth', meta_out=meta)
    assert meta['release']['config'] == 'configs/eomt/dinov2-small_eomt_coco-panoptic-640.py'
    assert meta['dataset_meta']['classes'] == tuple(renamed) and len(meta['dataset_meta']['palette']) == 133
    done = run_script(CONVERT, tmp_path / 'coco', tmp_path / 'coco2.pth')
    assert ("differs from configs/eomt/dinov2-small_eomt_coco-panoptic-640.py's classes at 1 of 133 "
            "(first at 5: 'a cat of its own' against 'bus'); the checkpoint names id2label's") in done.stdout, done.stdout

    ade = list(ADE20KDataset.METAINFO['classes'])   # ADE's order, as EoMT's ADE20K panoptic models predict
    hf_model('eomt_dinov3', num_labels=150, dim=384, depth=1, side=1280, queries=200, id2label=ade,
             perturbed=False).save_pretrained(tmp_path / 'ade')
    meta = {}
    convert_file(tmp_path / 'ade', tmp_path / 'ade.pth', meta_out=meta)
    assert meta['release']['config'] == 'configs/eomt/dinov3-small_eomt_ade20k-panoptic-1280.py'
    assert meta['release']['side_from'] == 'config.json'
    # things first, then EoMT's stuff classes (its ADE20K panoptic yamls' stuff_classes), each in ADE's order
    things = [name for i, name in enumerate(ade) if i not in EOMT_STUFF]
    assert meta['dataset_meta']['classes'] == tuple(things + [ade[i] for i in EOMT_STUFF])
    assert len(ADE20KPanopticDataset.METAINFO['thing_classes']) == len(things)


def test_what_is_not_transformers_eomt_or_lacks_its_config_is_one_error_and_nothing_is_written(tmp_path):
    model = hf_model('eomt_dinov3', num_labels=5, perturbed=False)
    model.save_pretrained(tmp_path / 'hf')
    (tmp_path / 'alone').mkdir()
    (tmp_path / 'alone' / 'model.safetensors').write_bytes((tmp_path / 'hf' / 'model.safetensors').read_bytes())
    config = json.loads((tmp_path / 'hf' / 'config.json').read_text())
    (tmp_path / 'other').mkdir()
    (tmp_path / 'other' / 'model.safetensors').write_bytes((tmp_path / 'hf' / 'model.safetensors').read_bytes())
    (tmp_path / 'other' / 'config.json').write_text(json.dumps(dict(config, model_type='mask2former')))
    (tmp_path / 'silu').mkdir()
    (tmp_path / 'silu' / 'model.safetensors').write_bytes((tmp_path / 'hf' / 'model.safetensors').read_bytes())
    (tmp_path / 'silu' / 'config.json').write_text(json.dumps(dict(config, hidden_act='silu')))
    (tmp_path / 'unknown').mkdir()
    from safetensors.torch import save_file
    save_file({'model.pixel_level_module.encoder.embeddings.weight': torch.zeros(2)},
              tmp_path / 'unknown' / 'model.safetensors')
    (tmp_path / 'unknown' / 'config.json').write_text(json.dumps(dict(model_type='mask2former')))
    for source, says in ((tmp_path / 'alone' / 'model.safetensors', 'no config.json is beside it'),
                         (tmp_path / 'other', "its config.json is transformers' 'mask2former' model; the EoMT "
                                              "types this converter reads are eomt, eomt_dinov3"),
                         (tmp_path / 'silu', "its config.json's hidden_act is 'silu', which transformers runs "
                                             "in the mask head and upscale too"),
                         (tmp_path / 'unknown', "its config.json is transformers' 'mask2former' model; the "
                                                "transformers types this converter reads are dinov2")):
        done = run_script(CONVERT, source, tmp_path / 'out.pth')
        assert done.returncode == 1 and done.stderr.count('\n') == 1 and says in done.stderr, done.stderr
        assert not (tmp_path / 'out.pth').exists()
    done = run_script(CONVERT, tmp_path / 'hf', tmp_path / 'out.pth', '--delta-to', tmp_path / 'hf')
    assert done.returncode == 1 and 'convert it without --delta-to' in done.stderr, done.stderr


@pytest.mark.parametrize('config', ['dinov2-large_eomt_ade20k.py', 'dinov3-large_eomt_coco-panoptic-640.py'])
def test_a_model_of_ours_goes_back_to_transformers_and_predicts_as_ours(tmp_path, config):
    """``--to transformers``: a segmentor (mmseg) or detector (mmdet) of ours, saved as mmengine saves a
    training's checkpoint (its config in meta['cfg']), written as transformers' folder, which
    ``from_pretrained`` loads and which gives our logits; the processor's config loads beside it."""
    from vit5seg.apis import init_model
    cfg = small_config(config)
    if 'dinov3' in config:   # as shipped: the DINOv3 img_size is the preset's 224; the input is the pad size
        cfg.model.backbone.pop('img_size')
        cfg.model.data_preprocessor.pad_size = (SIDE, SIDE)
    ours = perturb(init_model(cfg, None, device='cpu'), 3).eval()
    torch.save({'state_dict': ours.state_dict(), 'meta': {'cfg': cfg.pretty_text}}, tmp_path / 'ours.pth')
    done = run_script(CONVERT, tmp_path / 'ours.pth', tmp_path / 'hf', '--to', 'transformers')
    assert done.returncode == 0, done.stderr
    name = 'EomtDinov3ForUniversalSegmentation' if 'dinov3' in config else 'EomtForUniversalSegmentation'
    assert f"as transformers' {name}" in done.stdout
    theirs = getattr(transformers, name).from_pretrained(tmp_path / 'hf').eval()
    cls, masks, largest = logits_against_transformers(theirs, ours)
    assert largest > 1 and cls < 1e-4 and masks < 1e-4, (cls, masks, largest)
    # as the Hub's processors are set (tue-mps/ade20k_semantic_eomt_large_512: the short side and windows;
    # tue-mps/coco_panoptic_eomt_large_640: the long side, padded)
    processor = transformers.EomtImageProcessor.from_pretrained(tmp_path / 'hf')
    semantic = 'ade20k' in config
    assert (processor.size.get('shortest_edge'), processor.size.get('longest_edge')) == (
        SIDE, None if semantic else SIDE)
    assert (processor.do_split_image, processor.do_pad) == (semantic, not semantic)


def test_dinov2_giants_swiglu_goes_to_transformers_and_back_with_our_logits(tmp_path):
    """DINOv2-g's SwiGLU (transformers' ``use_swiglu_ffn``): a detector of ours written with
    ``--to transformers`` gives our logits in transformers, and the folder it wrote converts back to the
    same logits through ``init_detector``."""
    from mmdet.apis import init_detector
    cfg = small_config('dinov2-giant_eomt_coco-panoptic-640.py', dim=96)   # SwiGLU 256 wide: transformers' rounding
    ours = perturb(init_detector(cfg, None, device='cpu'), 3).eval()
    assert 'backbone.blocks.0.mlp.fc1_g.weight' in ours.state_dict()
    torch.save({'state_dict': ours.state_dict(), 'meta': {'cfg': cfg.pretty_text}}, tmp_path / 'ours.pth')
    done = run_script(CONVERT, tmp_path / 'ours.pth', tmp_path / 'hf', '--to', 'transformers')
    assert done.returncode == 0, done.stderr
    hf_config = json.loads((tmp_path / 'hf' / 'config.json').read_text())
    assert hf_config['use_swiglu_ffn'] is True, hf_config
    theirs = transformers.AutoModelForUniversalSegmentation.from_pretrained(tmp_path / 'hf').eval()
    cls, masks, largest = logits_against_transformers(theirs, ours)
    assert largest > 1 and cls < 1e-4 and masks < 1e-4, (cls, masks, largest)
    convert_file(tmp_path / 'hf', tmp_path / 'back.pth')
    back = init_detector(cfg, str(tmp_path / 'back.pth'), device='cpu').eval()
    cls, masks, largest = logits_against_transformers(theirs, back)
    assert largest > 1 and cls < 1e-4 and masks < 1e-4, (cls, masks, largest)


@pytest.mark.parametrize('arch,says', [
    ('vit5-large', "transformers has no class for EoMT on a 'vit5-large' backbone"),
    ('dinov3-small-plus', "EomtDinov3 runs its gated MLP, mask head and upscale with one activation")])
def test_a_model_transformers_cannot_hold_is_one_message(tmp_path, arch, says):
    from vit5seg.apis import init_model
    cfg = small_config(arch.split('-')[0] + '-large_eomt_ade20k.py')
    cfg.model.backbone.arch = arch
    torch.save({'state_dict': init_model(cfg, None, device='cpu').state_dict(), 'meta': {'cfg': cfg.pretty_text}},
               tmp_path / 'ours.pth')
    done = run_script(CONVERT, tmp_path / 'ours.pth', tmp_path / 'hf', '--to', 'transformers')
    assert done.returncode == 1 and done.stderr.count('\n') == 1, done.stderr
    assert says in done.stderr
    assert not (tmp_path / 'hf').exists()


def test_a_config_json_that_disagrees_with_its_weights_is_one_error_and_nothing_is_written(tmp_path):
    from vit5seg.models.checkpoint_files import CheckpointError
    hf_model('eomt', perturbed=False).save_pretrained(tmp_path / 'hf')
    config = json.loads((tmp_path / 'hf' / 'config.json').read_text())
    seven = {str(i): f'class {i}' for i in range(7)}
    for key, value, says in (('hidden_size', 2 * DIM, f'hidden_size is {2 * DIM}, its weights\' {DIM} (query.weight)'),
                             ('num_queries', QUERIES + 1, f'num_queries is {QUERIES + 1}, its weights\' {QUERIES}'),
                             ('num_hidden_layers', 5, f'num_hidden_layers is 5, its weights\' {DEPTH} (layers.N)'),
                             ('id2label', seven, 'id2label names 7 classes, its weights\' 150')):
        (tmp_path / 'hf' / 'config.json').write_text(json.dumps(dict(config, **{key: value})))
        with pytest.raises(CheckpointError, match=re.escape(f"its config.json's {says}")):
            convert_file(tmp_path / 'hf', tmp_path / 'out.pth')
        assert not (tmp_path / 'out.pth').exists()
    done = run_script(CONVERT, tmp_path / 'hf', tmp_path / 'out.pth')
    assert done.returncode == 1 and done.stderr.count('\n') == 1 and 'they are not one model' in done.stderr
    assert not (tmp_path / 'out.pth').exists()
