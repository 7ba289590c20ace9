"""One frozen encoder, one pass, every task (issue #53): the shipped all-tasks config (shrunk) joins PMT's
semantic, panoptic and instance models, each from its own decoder-only release on the same DINOv3 file;
one encoder pass per photo, and each task's output equals its own single-task model's on the same input."""
import numpy as np
import pytest
import torch
from mmengine.config import Config

from conftest import REPO, perturb, run_script
from reference_eomt import RefDinoV3
from reference_pmt import RefPMT
from test_models_eomt_panoptic import photo
from vit5seg.models.convert import convert_file

pytest.importorskip('panopticapi')
DIM, DEPTH, HEADS, BLOCKS = 128, 3, 2, 2
TASKS = {'semantic': (150, 20, (0, 2)), 'panoptic': (133, 30, (1, 2)), 'instance': (80, 30, (0, 1))}
SHIPPED = REPO / 'configs' / 'pmt' / 'dinov3-large_pmt_all-tasks.py'


def shrink(queries, indices):
    return {'model.backbone.embed_dims': DIM, 'model.backbone.num_layers': DEPTH, 'model.backbone.num_heads': HEADS,
            'model.backbone.init_cfg': None, 'model.decode_head.in_channels': DIM,
            'model.decode_head.num_queries': queries, 'model.decode_head.num_blocks': BLOCKS,
            'model.decoder.embed_dims': DIM, 'model.decoder.num_heads': HEADS, 'model.decoder.num_blocks': BLOCKS,
            'model.decoder.hidden_dims': DIM, 'model.decoder.interaction_indices': indices}


@pytest.fixture(scope='module')
def releases(tmp_path_factory):
    """The three tasks' converted releases on one random DINOv3, in a folder by the shipped config's names;
    the config with each task shrunk."""
    transformers = pytest.importorskip('transformers')
    from safetensors.torch import save_file
    folder = tmp_path_factory.mktemp('all_tasks')
    config = transformers.DINOv3ViTConfig(hidden_size=DIM, intermediate_size=4 * DIM, num_hidden_layers=DEPTH,
                                          num_attention_heads=HEADS, patch_size=16, num_register_tokens=4,
                                          rope_theta=100.0, layer_norm_eps=1e-5)
    torch.manual_seed(0)
    hf = perturb(transformers.DINOv3ViTModel(config), 1).eval()
    save_file({k: v.contiguous() for k, v in hf.state_dict().items()}, str(folder / 'dinov3.safetensors'))
    cfg = Config.fromfile(str(SHIPPED))
    for seed, (task, (classes, queries, indices)) in enumerate(TASKS.items()):
        ref = RefPMT(RefDinoV3(hf, HEADS), DIM, HEADS, indices, num_classes=classes, num_q=queries,
                     num_blocks=BLOCKS, hidden=DIM, registers=4)
        perturb(ref.decoder, seed + 2)
        d = ref.decoder
        with torch.no_grad():   # confident classes and masks of part of the photo (test_models_pmt_panoptic.py)
            d.class_head.weight.mul_(8.0)
            d.class_head.bias.mul_(8.0)
            d.upscale[-1].norm.weight[0], d.upscale[-1].norm.bias[0] = 0.0, 1.0
            d.mask_head[-1].weight.mul_(0.3)
            d.mask_head[-1].weight[0], d.mask_head[-1].bias[0] = 0.0, -6.0
        torch.save(ref.release(), folder / f'{task}.bin')
        convert_file(folder / f'{task}.bin', folder / cfg.tasks[task].checkpoint,
                     delta_to=folder / 'dinov3.safetensors')
        cfg.tasks[task].cfg_options = shrink(queries, indices)
    return folder, cfg


def test_one_encoder_pass_serves_every_task_and_each_equals_its_own_model(releases):
    from vit5seg.apis import inference_model, init_model
    from vit5seg.apis.all_tasks import _task_config, init_all_tasks
    folder, cfg = releases
    joined = init_all_tasks(cfg, folder, device='cpu')
    assert all(m.backbone is joined.backbone for m in joined.models.values())   # one encoder in memory
    passes = []
    first_block = joined.backbone.blocks[0]
    hook = first_block.register_forward_hook(lambda *args: passes.append(1))
    img = photo()
    results = joined.predict(img)
    hook.remove()
    assert len(passes) == 1 and set(results) == {'semantic', 'panoptic', 'instance'}
    singles = {task: init_model(_task_config(cfg.tasks[task]), str(folder / cfg.tasks[task].checkpoint),
                                device='cpu') for task in TASKS}
    # panoptic and instance: their own model through mmdet's inference on the photo
    pan = inference_model(singles['panoptic'], img).pred_panoptic_seg.sem_seg
    assert len(np.unique(pan.numpy())) >= 3 and torch.equal(results['panoptic'].pred_panoptic_seg.sem_seg, pan)
    found, alone = results['instance'].pred_instances, inference_model(singles['instance'], img).pred_instances
    assert len(found) == len(alone) and (alone.scores > 0.3).sum() >= 2
    assert torch.equal(found.labels, alone.labels) and torch.equal(found.masks, alone.masks)
    torch.testing.assert_close(found.scores, alone.scores, rtol=0, atol=1e-6)
    # semantic: its own model predicting the same input whole
    inputs, samples = joined.preprocess(img)
    from mmengine.config import ConfigDict
    singles['semantic'].test_cfg = ConfigDict(mode='whole')
    with torch.no_grad():
        alone = singles['semantic'].predict(inputs, joined._seg_samples(samples))[0]
    assert results['semantic'].seg_logits.data.shape[-2:] == img.shape[:2]
    torch.testing.assert_close(results['semantic'].seg_logits.data, alone.seg_logits.data, rtol=0, atol=1e-6)
    assert len(alone.pred_sem_seg.data.unique()) >= 2


def test_tools_infer_writes_every_tasks_outputs_for_a_photo(releases, tmp_path):
    import cv2
    folder, cfg = releases
    cfg.dump(str(tmp_path / 'all_tasks.py'))
    cv2.imwrite(str(tmp_path / 'photo.jpg'), photo())
    out = run_script(REPO / 'tools' / 'infer.py', tmp_path / 'all_tasks.py', folder, tmp_path / 'photo.jpg',
                     '--out-dir', tmp_path / 'out', '--no-progress')
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / 'out' / 'semantic' / 'masks' / 'photo.png').is_file()
    assert (tmp_path / 'out' / 'panoptic' / 'panoptic' / 'photo.png').is_file()
    assert (tmp_path / 'out' / 'panoptic' / 'panoptic.json').is_file()
    assert (tmp_path / 'out' / 'instance' / 'instances.json').is_file()


def test_tasks_of_different_encoders_are_one_error(releases, tmp_path):
    from vit5seg.apis.all_tasks import AllTasksError, init_all_tasks
    folder, cfg = releases
    other = Config(cfg.to_dict())
    other.tasks.instance.cfg_options = {**other.tasks.instance.cfg_options, 'model.backbone.init_cfg': None}
    sd = torch.load(folder / cfg.tasks.instance.checkpoint, weights_only=False)
    sd['state_dict']['backbone.cls_token'] = sd['state_dict']['backbone.cls_token'] + 1
    torch.save(sd, tmp_path / cfg.tasks.instance.checkpoint)
    for task in ('semantic', 'panoptic'):
        (tmp_path / cfg.tasks[task].checkpoint).symlink_to(folder / cfg.tasks[task].checkpoint)
    with pytest.raises(AllTasksError, match="task 'instance' was trained on another encoder.*cls_token"):
        init_all_tasks(other, tmp_path, device='cpu')


@pytest.mark.parametrize('tool, args', [('train.py', ['--work-dir', 'w']), ('test.py', ['x.pth']),
                                         ('print_config.py', ['--card'])])
def test_a_tool_that_needs_a_model_of_its_own_refuses_the_all_tasks_config_in_one_line(tool, args, tmp_path):
    out = run_script(REPO / 'tools' / tool, SHIPPED, *args, cwd=tmp_path)
    assert out.returncode == 1 and 'is an all-tasks config' in out.stderr and out.stderr.count('\n') == 1, out.stderr
