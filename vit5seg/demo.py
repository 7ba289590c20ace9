"""The demo: train the tiny ViT-5 + UperNet config (or another tiny config, such as the
EoMT twin configs/tiny/vit5_eomt_synthetic.py) on synthetic ADE20K-layout data on CPU,
evaluate it, save prediction overlays, print the mIoU.

    python -m vit5seg.demo [--config CONFIG] [--work-dir work_dirs/demo] [--data-dir data/synthetic_ade20k]
                           [--iters 300]
"""
import argparse
import json
from pathlib import Path

import vit5seg  # noqa: F401  (registers ViT5, applies the compat fixes)

from .paths import config_path  # noqa: E402

TINY_CONFIG = config_path('tiny/vit5_upernet_synthetic.py')


def run(work_dir='work_dirs/demo', data_dir='data/synthetic_ade20k', iters=300, seed=0, config=TINY_CONFIG):
    from mmengine.config import Config

    from .datasets import make_synthetic_ade20k
    from .engine.launch import test, train

    work_dir, data_dir = Path(work_dir), Path(data_dir)
    data_root = data_dir / 'ADEChallengeData2016'
    if not data_root.is_dir():
        make_synthetic_ade20k(data_dir, seed=seed)
        print(f'wrote synthetic ADE20K-layout data to {data_root}')
    options = [f'train_dataloader.dataset.data_root={data_root}', f'val_dataloader.dataset.data_root={data_root}',
               f'test_dataloader.dataset.data_root={data_root}', f'train_cfg.max_iters={iters}',
               f'train_cfg.val_interval={iters}', f'randomness.seed={seed}']
    # the schedule's last part ends with the training
    last = len(Config.fromfile(str(config)).param_scheduler) - 1
    options.append(f'param_scheduler.{last}.end={iters}')
    train([str(config), '--work-dir', str(work_dir), '--cfg-options', *options])
    checkpoint = (work_dir / 'last_checkpoint').read_text().strip()
    metrics = test([str(config), checkpoint, '--work-dir', str(work_dir), '--show-dir', 'overlays',
                    '--cfg-options', *options])
    overlays = sorted(work_dir.glob('**/overlays/**/*.png'))
    metrics = {k: float(v) for k, v in metrics.items()}
    (work_dir / 'demo_metrics.json').write_text(json.dumps(metrics, indent=2))
    return metrics, checkpoint, overlays


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--config', default=str(TINY_CONFIG), help='a tiny config (default: the UperNet one)')
    parser.add_argument('--work-dir', default='work_dirs/demo', help='checkpoints, logs, overlays (default: %(default)s)')
    parser.add_argument('--data-dir', default='data/synthetic_ade20k',
                        help='synthetic data, written if missing (default: %(default)s)')
    parser.add_argument('--iters', type=int, default=300, help='training iterations (default: %(default)s)')
    parser.add_argument('--seed', type=int, default=0)
    args = parser.parse_args(argv)
    metrics, checkpoint, overlays = run(args.work_dir, args.data_dir, args.iters, args.seed, args.config)
    print(f'\ndemo: trained {args.iters} iterations of {Path(args.config).name} on CPU')
    print(f'demo: validation mIoU {metrics["mIoU"]:.2f}  mAcc {metrics["mAcc"]:.2f}  aAcc {metrics["aAcc"]:.2f}')
    print(f'demo: checkpoint {checkpoint}')
    print(f'demo: {len(overlays)} prediction overlays under {overlays[0].parent if overlays else args.work_dir}')
    print(f'demo: logs and scalars.json under {args.work_dir}/<timestamp>/')


if __name__ == '__main__':
    main()
