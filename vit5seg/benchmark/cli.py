"""``tools/benchmark.py``: the backbone against its peers, and with ``--segmentor`` the
segmentors, or with ``--panoptic`` panoptic inference, or with ``--peer transformers`` whole
predictions against transformers' EoMT; figures as a table and JSON."""
import argparse
import functools
import json

import torch

from ..models.convert import parse_arch
from ..paths import code_fields, describe_code
from ..utils.timing import measure_cells
from .backbone import TARGETS, backbone_timings
from .segmentor import EOMT_DINOV3_L_H100_IMAGES_S, SEGMENTOR_TARGETS, segmentor_timings


def run_benchmark(arch='vit5-small', crop=512, batch=2, device='cpu', warmup=1, repeats=5, amp=None,
                  segmentor=False, compile=False, memory=True) -> dict:
    """The backbone's figures (:func:`.backbone.backbone_timings`), and with ``segmentor`` the
    segmentors' (:func:`.segmentor.segmentor_timings`)."""
    result = backbone_timings(arch, crop, batch, device, warmup, repeats, amp, compile, memory)
    if segmentor:
        result.update(segmentor_timings(arch, crop, batch, device, warmup, repeats, amp=amp, memory=memory))
    return result


def results_table(result: dict) -> str:
    rows = ['| measure | value | per-round quartiles | target |', '|---|---|---|---|']
    for key in ('fwd_bwd_s', 'mmseg_vit_fwd_bwd_s', 'timm_rope_vit_fwd_bwd_s', 'timm_deit3_fwd_bwd_s',
                'deit3_fwd_bwd_s', 'reference_fwd_bwd_s', 'with_cp_fwd_bwd_s', 'ratio_vs_mmseg_vit',
                'ratio_vs_timm_rope_vit', 'deit3_ratio_vs_timm_deit3', 'speedup_vs_reference',
                'with_cp_time_ratio', 'peak_mb', 'with_cp_peak_mb', 'with_cp_memory_ratio', 'compiled_fwd_bwd_s',
                'compiled_ratio', 'compile_first_step_s',
                'segmentor_train_step_s', 'segmentor_train_step_amp_s', 'amp_train_speedup', 'segmentor_peak_mb',
                'segmentor_peak_amp_mb', 'slide_inference_2048x512_s', 'slide_bf16_s', 'bf16_slide_speedup',
                'whole_images_s', 'whole_bf16_images_s', 'bf16_whole_speedup', 'bf16_label_agreement',
                'whole_onnxruntime_images_s', 'onnxruntime_vs_pytorch', 'eomt_train_step_s', 'eomt_train_speedup',
                'eomt_train_step_p0_s', 'eomt_train_p0_speedup', 'eomt_whole_images_s', 'eomt_whole_speedup',
                'eomt_peak_mb', 'eomt_dinov3_whole_images_s', 'eomt_vs_dinov3_whole'):
        if result.get(key) is not None:
            rows.append(f'| {key} ' + measure_cells(result, key, {**TARGETS, **SEGMENTOR_TARGETS}.get(key)))
    return '\n'.join(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--arch', type=parse_arch, default=None,
                        help='preset or dict literal (default vit5-small; with --all-tasks dinov3-small; with --peer '
                             'dinov2-large, EoMT-L)')
    parser.add_argument('--crop', type=int, default=512)
    parser.add_argument('--batch', type=int, default=2)
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--warmup', type=int, default=1)
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--amp', choices=['bf16', 'fp16'], default=None,
                        help='autocast dtype of the backbone steps and of a second segmentor train step (fp16: GPU)')
    parser.add_argument('--segmentor', action='store_true',
                        help='also time the UperNet train step, whole and slide inference, and its peak memory, '
                             'and EoMT\'s train step and whole-image inference beside them')
    parser.add_argument('--compile', action='store_true', help='also time torch.compile of our backbone')
    parser.add_argument('--panoptic', action='store_true',
                        help='time panoptic inference instead (mmdet predict at --crop, batch 1): EoMT with this '
                             'backbone, with DINOv3 of its size, and mmdet\'s Mask2Former on the same backbone '
                             '(vit5seg/benchmark/panoptic.py)')
    parser.add_argument('--sides', type=int, nargs='+', metavar='SIDE',
                        help='with --panoptic: time EoMT at each input side instead (and its DINOv3 peer), then the '
                             'peak memory of a training step of --batch images at the largest side')
    parser.add_argument('--frozen', nargs='*', metavar='ARCH',
                        help='time the linear probe\'s train step with its encoder frozen against fine-tuned, and '
                             'their peak memory, for each ARCH (default: vit5-small dinov3-small) at --crop '
                             '(vit5seg/benchmark/frozen.py)')
    parser.add_argument('--all-tasks', action='store_true',
                        help='time configs/pmt/dinov3-large_pmt_all-tasks.py\'s three PMT models on --arch (default '
                             'dinov3-small here): one shared encoder pass against one pass per task, and the peak '
                             'memory of each (vit5seg/benchmark/all_tasks.py)')
    parser.add_argument('--peer', choices=['transformers'],
                        help='time the whole prediction (pre-processing, network, post-processing) of EoMT-L\'s '
                             'ADE20K semantic, COCO panoptic and COCO instance configs against transformers\' EoMT '
                             'with the same random weights, interleaved, and print the ratios and how far the two '
                             'predictions agree (vit5seg/benchmark/transformers_peer.py)')
    parser.add_argument('--tasks', nargs='+', choices=['semantic', 'panoptic', 'instance'],
                        help='with --peer: these tasks only (default: all three)')
    parser.add_argument('--no-memory', action='store_true', help='skip the peak-memory measurements')
    parser.add_argument('--json', help='write all figures to this file')
    args = parser.parse_args(argv)
    args.arch_given, args.arch = args.arch, args.arch or ('dinov3-small' if args.all_tasks else 'vit5-small')
    if args.tasks and not args.peer:
        parser.error('--tasks chooses the tasks of --peer transformers: give --peer transformers with it')
    if args.peer:
        from .transformers_peer import TASKS, eomt_sizes, peer_table, peer_timings
        tasks = tuple(args.tasks or TASKS)
        arch = args.arch_given or 'dinov2-large'
        try:
            eomt_sizes(arch)
        except ValueError as e:
            parser.error(str(e))
        result = peer_timings(tasks, args.device, args.warmup, args.repeats, arch)
        photos = ', '.join(f'{task} {result[task + "_photo"]}' for task in tasks)
        return _report(result, peer_table(result), args, f'EoMT on {arch}, random weights, one photo per task ({photos}) '
                       f'device={args.device} torch={torch.__version__} transformers={result["transformers_version"]} '
                       f'threads={torch.get_num_threads()} repeats={args.repeats}')
    if args.frozen is not None:
        from .frozen import frozen_table, frozen_timings
        archs = [parse_arch(a) for a in args.frozen] or ['vit5-small', 'dinov3-small']
        result = frozen_timings(archs, args.crop, args.batch, args.device, args.warmup, args.repeats,
                                not args.no_memory)
        return _report(result, frozen_table(result), args, f'crop={args.crop} batch={args.batch} '
                       f'device={args.device} torch={torch.__version__} threads={torch.get_num_threads()}')
    if args.all_tasks:
        from .all_tasks import all_tasks_table, all_tasks_timings
        result = all_tasks_timings(args.arch, args.device, args.warmup, args.repeats, not args.no_memory)
        return _report(result, all_tasks_table(result), args, f'arch={args.arch} photo 480x640 device={args.device} '
                       f'torch={torch.__version__} threads={torch.get_num_threads()}')
    if args.panoptic:
        from .panoptic import (panoptic_table, panoptic_timings, panoptic_train_peak_mb, resolution_table,
                               resolution_timings)
        if args.sides:
            result = resolution_timings(args.arch, args.sides, args.device, args.warmup, args.repeats)
            if not args.no_memory:
                side = max(args.sides)
                peak = functools.partial(panoptic_train_peak_mb, args.arch, side, args.batch, args.device)
                result.update(train_side=side, train_batch=args.batch, train_peak_mb=peak(1.0),
                              train_peak_unmasked_mb=peak(0.0))
            table = resolution_table(result)
        else:
            result = panoptic_timings(args.arch, args.crop, args.device, args.warmup, args.repeats)
            table = panoptic_table(result)
        result.update(code_fields())
        print(f'code: {describe_code()}')
        print(table)
        if args.json:
            with open(args.json, 'w') as f:
                json.dump(result, f, indent=2)
        return result
    result = run_benchmark(args.arch, args.crop, args.batch, args.device, args.warmup, args.repeats, args.amp,
                           args.segmentor, args.compile, not args.no_memory)
    result.update(code_fields())
    print(f'code: {describe_code()}')
    print(f'arch={result["arch"]} crop={args.crop} batch={args.batch} device={result["device"]} '
          f'torch={result["torch_version"]} threads={result["threads"]} repeats={args.repeats}')
    print(results_table(result))
    if result.get('eomt_dinov3_arch'):
        print(f'eomt_dinov3: EoMT on {result["eomt_dinov3_arch"]}; eomt_vs_dinov3_whole: its time per image over '
              f'ViT-5 EoMT\'s. Anchor: EoMT\'s DINOv3-L at 512, {EOMT_DINOV3_L_H100_IMAGES_S} images/s compiled '
              'on one H100 (its model zoo)')
    for name, why in result['missing_peers'].items():
        print(f'not measured: {name} ({why})')
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(result, f, indent=2)
    return result


def _report(result: dict, table: str, args, setting: str) -> dict:
    result.update(code_fields())
    print(f'code: {describe_code()}')
    print(setting)
    print(table)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == '__main__':
    main()
