"""The benchmark's naive peer is a faithful ViT-5, the tool reports what the interface
names, and mixed precision stays close to float32."""
import importlib.util
import json
import subprocess

import pytest
import timm
import torch
from mmengine.config import Config

from conftest import REPO, run_script
from vit5seg.benchmark import TARGETS, reference_forward, run_benchmark, timm_peers
from vit5seg.models import ViT5

TINY = "{'embed_dims': 64, 'num_layers': 4, 'num_heads': 2}"
KEYS = ('fwd_bwd_s', 'mmseg_vit_fwd_bwd_s', 'timm_rope_vit_fwd_bwd_s', 'reference_fwd_bwd_s',
        'ratio_vs_mmseg_vit', 'ratio_vs_timm_rope_vit', 'missing_peers', 'deit3_ratio_vs_timm_deit3',
        'speedup_vs_reference',
        'with_cp_memory_ratio', 'with_cp_time_ratio', 'device', 'torch_version')


@pytest.mark.parametrize('arch', [dict(embed_dims=64, num_layers=3, num_heads=2),
                                  dict(embed_dims=64, num_layers=3, num_heads=2, norm_type='layernorm',
                                       use_rope=False, num_registers=0, qk_norm=False, qkv_bias=True)])
def test_reference_path_computes_the_same_model(arch):
    model = ViT5(arch=arch, out_indices=(0, 2)).eval()
    x = torch.randn(2, 3, 48, 80)
    with torch.no_grad():
        for ours, ref in zip(model(x), reference_forward(model, x)):
            assert (ours - ref).abs().max() < 1e-5


def test_ratios_are_the_medians_of_one_interleaved_run():
    r = run_benchmark(arch=eval(TINY), crop=32, batch=2, repeats=2, memory=False)
    assert r['ratio_vs_mmseg_vit'] == pytest.approx(r['fwd_bwd_s'] / r['mmseg_vit_fwd_bwd_s'])
    assert r['speedup_vs_reference'] == pytest.approx(r['reference_fwd_bwd_s'] / r['fwd_bwd_s'])
    assert all(len(v) == 2 and min(v) > 0 for v in r['all_times'].values())
    per_round = sorted(a / b for a, b in zip(r['all_times']['ours'], r['all_times']['mmseg_vit']))
    assert r['ratio_vs_mmseg_vit_quartiles'] == pytest.approx([per_round[0] * 0.75 + per_round[1] * 0.25,
                                                               per_round[0] * 0.25 + per_round[1] * 0.75])
    assert r['rope_table_builds'] == 1  # one grid: built once over all blocks and repeats


@pytest.mark.slow  # > 10 s on 2 cores (the quick tier: <= 3 min)
def test_cli_writes_the_interface_json(tmp_path):
    out = run_script(REPO / 'tools' / 'benchmark.py', '--arch', TINY, '--crop', '32', '--batch', '2', '--repeats', '1',
                     '--device', 'cpu', '--json', tmp_path / 'b.json')
    assert out.returncode == 0, out.stderr[-3000:]
    data = json.loads((tmp_path / 'b.json').read_text())
    assert set(KEYS) <= set(data) and data['device'] == 'cpu' and data['torch_version'] == torch.__version__
    # the code that made the figures: the clone's commit, read here with git itself
    head = subprocess.run(['git', '-C', str(REPO), 'rev-parse', 'HEAD'], capture_output=True, text=True).stdout.strip()
    assert data['vit5seg_commit'].startswith(head) and data['vit5seg'] and data['vit5seg_install']
    assert f"code: vit5seg {data['vit5seg']}, commit {head}" in out.stdout
    assert set(TARGETS) <= set(KEYS)
    if 'timm_rope_vit' in timm_peers():
        assert '| ratio_vs_timm_rope_vit |' in out.stdout and not data['missing_peers']
    else:  # timm before 1.0.17 (vit5seg's floor is 0.9.16): one line says what was not compared
        assert data['ratio_vs_timm_rope_vit'] is None
        assert f'not measured: timm_rope_vit (timm {timm.__version__} has no ' in out.stdout


@pytest.mark.slow
def test_with_cp_lowers_peak_memory_of_a_training_step():
    from vit5seg.benchmark import peak_memory_mb
    # deep and narrow, so activations (what with_cp saves) outweigh weights and gradients;
    # measured here: 103-104 MB and 27 MB (ratio 0.26) in two runs
    arch = dict(embed_dims=96, num_layers=12, num_heads=2)
    plain, cp, again = (peak_memory_mb(arch, 256, 4, flag, 'cpu') for flag in (False, True, False))
    assert plain > 50 and cp < 0.5 * plain, (plain, cp)
    assert abs(again - plain) < 0.05 * plain, (plain, again)  # the probe repeats (fixed mmap threshold)


@pytest.mark.parametrize('dtype,tolerance', [(torch.bfloat16, 0.05), (torch.float16, 0.01)])
def test_mixed_precision_outputs_stay_close_to_float32(dtype, tolerance):
    model = ViT5(arch=dict(embed_dims=64, num_layers=4, num_heads=2), out_indices=(3,), final_norm=True).eval()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        ref = model(x)[0]
        with torch.autocast('cpu', dtype=dtype):
            low = model(x)[0]
    assert torch.isfinite(low).all()
    assert ((low.float() - ref).norm() / ref.norm()).item() < tolerance


def test_amp_configs():
    for kind, dtype in (('bf16', 'bfloat16'), ('fp16', 'float16')):
        cfg = Config.fromfile(str(REPO / 'configs' / 'vit5' / f'vit5-base_upernet_ade20k_amp-{kind}.py'))
        assert cfg.optim_wrapper.type == 'AmpOptimWrapper' and cfg.optim_wrapper.dtype == dtype
        assert cfg.optim_wrapper.constructor == 'ViT5OptimWrapperConstructor'


@pytest.mark.slow  # about 30 s on 2 cores: a whole UperNet, two EoMTs, an ONNX export, memory in subprocesses
def test_segmentor_timings_give_train_inference_and_memory_figures():
    from vit5seg.benchmark import segmentor_timings, upernet_model_cfg
    from vit5seg.models.builder import build_segmentor
    from vit5seg.models.backbones.vit5 import ARCH_PRESETS
    arch = {'embed_dims': 32, 'num_layers': 4, 'num_heads': 2}
    dinov3 = dict(ARCH_PRESETS['dinov3-small'], **arch)   # DINOv3's EoMT beside ViT-5's (issue #39)
    result = segmentor_timings(arch, crop=64, batch=2, device='cpu', warmup=0, repeats=1, slide_shape=(64, 128),
                               amp='bf16', dinov3_peer=dinov3)
    assert result['eomt_dinov3_whole_images_s'] > 0
    assert result['eomt_vs_dinov3_whole'] == pytest.approx(result['eomt_whole_images_s']
                                                           / result['eomt_dinov3_whole_images_s'])
    for key in ('segmentor_train_step_s', 'segmentor_train_step_amp_s', 'amp_train_speedup',
                'slide_inference_2048x512_s', 'slide_bf16_s', 'whole_images_s', 'whole_bf16_images_s',
                'bf16_whole_speedup', 'bf16_slide_speedup'):
        assert result[key] > 0, key
    assert 0.5 <= result['bf16_label_agreement'] <= 1
    if importlib.util.find_spec('onnxruntime') is not None:  # the deploy extra, installed with the tests
        assert result['whole_onnxruntime_images_s'] > 0 and result['onnxruntime_vs_pytorch'] > 0
    # the whole segmentor's training holds float32 weights, gradients and AdamW's two moments:
    # 16 bytes per parameter at least (the backbone alone is a small part of it)
    params = sum(p.numel() for p in build_segmentor(upernet_model_cfg(arch)).parameters())
    floor_mb = 16 * params / 2 ** 20
    assert floor_mb < result['segmentor_peak_mb'] < 4 * floor_mb, (floor_mb, result['segmentor_peak_mb'])
    assert floor_mb < result['segmentor_peak_amp_mb'] < 4 * floor_mb
    # EoMT with the same backbone beside it
    from vit5seg.benchmark import eomt_model_cfg
    assert result['eomt_train_step_s'] > 0 and result['eomt_whole_images_s'] > 0
    # the train step with every mask on (P = 1) and with every mask annealed away (P = 0)
    assert result['eomt_train_step_p0_s'] > 0
    assert result['eomt_train_p0_speedup'] == pytest.approx(result['segmentor_train_step_s']
                                                            / result['eomt_train_step_p0_s'])
    assert result['eomt_whole_speedup'] == pytest.approx(result['eomt_whole_images_s'] / result['whole_images_s'])
    eomt_params = sum(p.numel() for p in build_segmentor(eomt_model_cfg(arch)).parameters())
    assert 16 * eomt_params / 2 ** 20 < result['eomt_peak_mb']


def test_fp16_train_steps_need_a_gpu():
    from vit5seg.benchmark import SegmentorSteps
    from vit5seg.models.builder import tiny_segmentor
    steps = SegmentorSteps(tiny_segmentor(REPO / 'configs' / 'vit5_upernet_ade20k.py'), 32, 1, 'cpu', (32, 32), 32)
    with pytest.raises(ValueError, match='fp16 autocast train steps need a CUDA GPU'):
        steps.train(torch.float16)


def test_panoptic_benchmark_times_eomt_its_dinov3_peer_and_mmdets_mask2former_on_the_backbone():
    """tools/benchmark.py --panoptic at a CPU size: three mmdet models built as the docs say (EoMT from
    the COCO panoptic config, mmdet's Mask2Former with the ViT-5 backbone of mmseg's registry and its
    pyramid), each running mmdet's predict; the report and the self-check's section show them."""
    from mmdet.models.detectors import Mask2Former
    from vit5seg.benchmark.panoptic import mask2former_detector, panoptic_table, panoptic_timings
    from vit5seg.models.backbones.vit5 import ViT5
    from vit5seg.selfcheck import report_markdown
    tiny = {'arch': 'vit5-small', 'embed_dims': 64, 'num_layers': 12, 'num_heads': 2}
    peer = mask2former_detector(tiny)
    assert isinstance(peer, Mask2Former) and isinstance(peer.backbone, ViT5)
    assert tuple(peer.backbone.out_indices) == (3, 5, 7, 11)
    result = panoptic_timings(tiny, side=64, repeats=1, warmup=0)
    assert result['eomt_s'] > 0 and result['mask2former_s'] > 0 and result['dinov3_peer'] is None
    assert result['mask2former_vs_eomt'] == pytest.approx(result['mask2former_s'] / result['eomt_s'])
    table = panoptic_table(result)
    assert 'EoMT' in table and 'mask2former_vs_eomt' in table
    report = dict(environment={}, quick=False, device='cpu', checks=[], figures={}, panoptic=result)
    assert '## Panoptic inference (COCO, 640)' in report_markdown(report) and table in report_markdown(report)


def test_panoptic_sides_time_each_side_and_the_training_step_learns():
    """tools/benchmark.py --panoptic --sides at a CPU size: each side timed for the arch (no DINOv3 peer for
    a dict arch), the ratio to the first side; the training step the memory probe runs is a real step:
    the loss is finite and the weights move, with every attention mask on."""
    from vit5seg.benchmark.panoptic import _train_step, eomt_detector, resolution_table, resolution_timings
    tiny = {'arch': 'vit5-small', 'embed_dims': 64, 'num_layers': 4, 'num_heads': 2}
    result = resolution_timings(tiny, sides=(32, 64), repeats=1, warmup=0)
    keys = [f'{tiny}@32', f'{tiny}@64']
    assert list(result['seconds']) == keys and result['ratios'][keys[0]] == 1.0
    assert result['ratios'][keys[1]] == pytest.approx(result['seconds'][keys[1]] / result['seconds'][keys[0]])
    assert 'at 64: ' in resolution_table(result)
    model = eomt_detector(tiny, 64)
    before = [p.detach().clone() for p in model.parameters()]
    step = _train_step(model, 64, 2, 'cpu', mask_prob=1.0)
    step()
    assert model.decoder.mask_probs == [1.0] * model.decode_head.num_blocks   # the decoder's own state
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


@pytest.mark.slow   # fresh processes measure the peaks
def test_frozen_against_fine_tuned_times_both_heads_in_one_run(tmp_path):
    """tools/benchmark.py --frozen at a CPU size: each encoder + head frozen and fine-tuned, their ratio the
    medians' of one interleaved run; the peaks, each in a fresh process, smaller frozen."""
    out = run_script(REPO / 'tools' / 'benchmark.py', '--frozen', TINY, '--crop', '64', '--batch', '2', '--repeats',
                     '2', '--device', 'cpu', '--no-memory', '--json', tmp_path / 'f.json')
    assert out.returncode == 0, out.stderr[-3000:]
    data = json.loads((tmp_path / 'f.json').read_text())
    keys = [k for k in data if k.endswith('.frozen_time_ratio')]
    assert len(keys) == 2, keys   # linear and pmt
    for key in keys:
        base = key.rsplit('.', 1)[0]
        # a figure, not a bound: which step is faster is for the benchmark to print on the CPU at hand
        assert data[key] == pytest.approx(data[f'{base}.frozen_train_step_s'] / data[f'{base}.finetune_train_step_s'])
        assert data[f'{base}.frozen_train_step_s'] > 0 and data[f'{base}.finetune_train_step_s'] > 0
    assert '| frozen_time_ratio |' in out.stdout
    from vit5seg.benchmark.frozen import linear_model_cfg
    from vit5seg.benchmark.segmentor import segmentor_peak_mb
    frozen, tuned = (segmentor_peak_mb(linear_model_cfg(eval(TINY), f), 64, 2, 'cpu') for f in (True, False))
    assert 0 < frozen < tuned


@pytest.mark.slow
def test_all_tasks_one_pass_against_three_models(tmp_path):
    """tools/benchmark.py --all-tasks at a CPU size: the shared pass against a pass per task, same photo."""
    pytest.importorskip('panopticapi')
    out = run_script(REPO / 'tools' / 'benchmark.py', '--all-tasks', '--arch', TINY, '--repeats', '2',
                     '--device', 'cpu', '--no-memory', '--json', tmp_path / 'a.json')
    assert out.returncode == 0, out.stderr[-3000:]
    data = json.loads((tmp_path / 'a.json').read_text())
    assert data['one_pass_time_ratio'] == pytest.approx(data['one_pass_s'] / data['three_models_s'])
    assert data['one_pass_s'] > 0 and data['three_models_s'] > 0 and '| one_pass_time_ratio |' in out.stdout


def test_peer_transformers_times_the_three_tasks_whole_and_the_predictions_agree(tmp_path):
    """tools/benchmark.py --peer transformers at a CPU size: our whole prediction and transformers' (its
    processor, model and post-processing) of the same converted weights, per task, in one interleaved run;
    the two predictions agree (transformers is the independent side). A ViT-5 backbone is one error."""
    pytest.importorskip('transformers')
    pytest.importorskip('mmdet')
    out = run_script(REPO / 'tools' / 'benchmark.py', '--peer', 'transformers', '--arch',
                     "{'embed_dims': 64, 'num_layers': 2, 'num_heads': 2}", '--warmup', '0', '--repeats', '2',
                     '--device', 'cpu', '--json', tmp_path / 'p.json')
    assert out.returncode == 0, out.stderr[-3000:]
    data = json.loads((tmp_path / 'p.json').read_text())
    for task in ('semantic', 'panoptic', 'instance'):
        assert data[f'{task}_ours_s'] > 0 and data[f'{task}_transformers_s'] > 0
        assert data[f'{task}_time_ratio'] == pytest.approx(data[f'{task}_ours_s'] / data[f'{task}_transformers_s'])
        assert f'| {task}_time_ratio |' in out.stdout
    assert data['num_blocks'] == 1 and data['semantic_photo'] == '512x683'
    assert data['semantic_same_labels'] >= 0.999 and data['panoptic_same_labels'] >= 0.999
    assert data['instance_top30_held'] == 30
    done = run_script(REPO / 'tools' / 'benchmark.py', '--peer', 'transformers', '--arch', 'vit5-small')
    assert done.returncode == 2 and "error: --peer transformers times EoMT on DINOv2" in done.stderr, done.stderr
    done = run_script(REPO / 'tools' / 'benchmark.py', '--tasks', 'semantic')
    assert done.returncode == 2 and 'error: --tasks chooses the tasks of --peer transformers' in done.stderr, done.stderr
