"""What ``tools/train.py`` and ``tools/test.py`` do, with mmseg's flags and behaviour."""
import argparse
import logging
import os
import os.path as osp
import shutil
import sys
from pathlib import Path

from mmengine.config import Config, DictAction
from mmengine.logging import print_log

from ..datasets.checks import check_data
from ..errors import ToolError
from ..hf_hub import is_hub_id
from ..hub import resolve
from ..models.checkpoint import CheckpointError, no_checkpoint_file
from .accumulation import BatchPlan, apply_plan, batch_plan, launcher_world_size
from ..utils.amp import add_amp_arguments, enable_amp
from ..utils.config_kinds import refuse_all_tasks
from .checkpoint_io import allow_unsafe_loading, latest_complete_checkpoint
from .runner import forget_runner


def _common(parser: argparse.ArgumentParser):
    parser.add_argument('--work-dir', help='where logs and checkpoints go (default: ./work_dirs/<config name>)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config values, key=value (e.g. train_dataloader.batch_size=4)')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'], default='none',
                        help='job launcher (pytorch: torchrun; slurm: srun)')
    parser.add_argument('--allow-unsafe', action='store_true',
                        help='load checkpoints that need full unpickling (can run code: trusted files only)')
    parser.add_argument('--skip-data-check', action='store_true',
                        help='do not check that the dataset folders exist and pair up before starting')
    # torch.distributed.launch passes --local_rank/--local-rank
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)


def train_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description='Train a segmentor (mmseg tools/train.py flags)')
    parser.add_argument('config', help='config file path')
    parser.add_argument('--resume', nargs='?', type=str, const='auto',
                        help='resume from the latest checkpoint in the work dir (no value) or from this path')
    parser.add_argument('--amp', action='store_true', help='automatic mixed precision (GPU)')
    parser.add_argument('--tensorboard', action='store_true',
                        help='also log to TensorBoard (WORK_DIR/<timestamp>/vis_data/); scalars.json is always written')
    parser.add_argument('--accumulate', metavar='auto|N',
                        help='micro-batches per optimizer step; auto: as many as keep the config\'s images per '
                             'iteration (auto_scale_lr.base_batch_size) on this many GPUs (dist_train.sh and '
                             'slurm_train.sh pass auto); every iteration count stays as configured, and so does '
                             'the lr unless auto_scale_lr.enable=True (then it follows the images per iteration)')
    _common(parser)
    return parser


def test_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description='Test a checkpoint (mmseg tools/test.py flags)')
    parser.add_argument('config', help='config file path')
    parser.add_argument('checkpoint', help='checkpoint file, an http(s) URL (downloaded once into the torch hub '
                                           'cache) or a Hugging Face Hub id hf://OWNER/NAME[@REVISION][/FILE] '
                                           '(through its cache; a release or transformers\' model converted once)')
    parser.add_argument('--sha256', help='expected sha256 of the checkpoint (or a prefix of 8+ hex digits)')
    parser.add_argument('--out', help='folder to save the predicted label maps to (mmseg: format_only output)')
    parser.add_argument('--show', action='store_true', help='show prediction results in a window')
    parser.add_argument('--show-dir', help='folder to save painted predictions to (relative: inside the work dir)')
    parser.add_argument('--wait-time', type=float, default=2, help='seconds between shown images')
    parser.add_argument('--tta', action='store_true', help='multi-scale + flip test-time augmentation')
    add_amp_arguments(parser)
    _common(parser)
    return parser



class MissingDependency(ToolError, ImportError):
    """A config that needs a package this environment lacks."""


# what reads COCO's panoptic PNGs in mmdet, each importing panopticapi
_PANOPTIC_TYPES = ('CocoPanopticDataset', 'EoMTCocoPanopticDataset', 'ADE20KPanopticDataset', 'LoadPanopticAnnotations',
                   'CocoPanopticMetric')


def check_panoptic_dependency(cfg: Config) -> None:
    """One line, before a Runner is built, where a panoptic config meets an environment
    without panopticapi (mmdet's own message names a git URL the registries do not serve)."""
    import importlib.util
    if importlib.util.find_spec('panopticapi') is None and any(t in repr(cfg.to_dict()) for t in _PANOPTIC_TYPES):
        raise MissingDependency('this panoptic config needs panopticapi, which the package registries carry as '
                                'panopticapi-lite: pip install --no-deps panopticapi-lite==0.2.0 (docs/panoptic.md)')


def load_config(args) -> Config:
    if not osp.isfile(args.config):
        raise FileNotFoundError(f'config file {args.config} does not exist')
    cfg = Config.fromfile(args.config)
    refuse_all_tasks(cfg, args.config, 'model of its own to train or test')
    cfg.launcher = args.launcher
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)
    check_panoptic_dependency(cfg)
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get('work_dir') is None:
        cfg.work_dir = osp.join('./work_dirs', Path(args.config).stem)
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)
    if args.allow_unsafe:
        allow_unsafe_loading(True)
    if cfg.get('randomness', {}).get('deterministic'):
        # cuBLAS is only deterministic with a fixed workspace; torch raises without it
        os.environ.setdefault('CUBLAS_WORKSPACE_CONFIG', ':4096:8')
    return cfg


def train_config(args) -> Config:
    cfg = load_config(args)
    # no --accumulate: 1, or the config's own accumulative_counts as mmengine trains it
    plan = batch_plan(cfg, launcher_world_size(args.launcher, required=bool(args.accumulate)), args.accumulate)
    apply_plan(cfg, plan)
    cfg.batch_plan = plan._asdict()  # saved with the run's config: how its images per iteration were made
    # the lr rule of accumulation and the recipe card, for a user's config without our default_runtime too
    cfg.setdefault('runner_type', 'ViT5Runner')
    if args.amp:
        wrapper = cfg.optim_wrapper.get('type', 'OptimWrapper')
        if wrapper != 'AmpOptimWrapper':
            if wrapper != 'OptimWrapper':
                raise ValueError(f'--amp needs optim_wrapper.type OptimWrapper, the config has {wrapper}')
            cfg.optim_wrapper.type = 'AmpOptimWrapper'
            cfg.optim_wrapper.loss_scale = 'dynamic'
    if args.tensorboard:
        backends = cfg.visualizer.setdefault('vis_backends', [dict(type='LocalVisBackend')])
        if not any(b['type'] == 'TensorboardVisBackend' for b in backends):
            backends.append(dict(type='TensorboardVisBackend'))
    if args.resume == 'auto':
        # the newest checkpoint that is complete, whatever last_checkpoint says
        latest = latest_complete_checkpoint(cfg.work_dir)
        if latest is None:
            print_log(f'--resume: no complete checkpoint in {cfg.work_dir}, starting from scratch',
                      logger='current', level=logging.WARNING)
        cfg.resume, cfg.load_from = latest is not None, latest
    elif args.resume is not None:
        if not osp.isfile(args.resume):
            raise FileNotFoundError(f'--resume {args.resume}: no such checkpoint')
        cfg.resume, cfg.load_from = True, args.resume
    return cfg


def test_config(args) -> Config:
    cfg = load_config(args)
    checkpoint = resolve(args.checkpoint, args.sha256)  # a URL or Hub id: fetched here, once per node
    if is_hub_id(args.checkpoint):   # mmengine's hf:// loader converts a release or transformers' model once
        checkpoint = args.checkpoint
    elif not osp.isfile(checkpoint):
        raise no_checkpoint_file(checkpoint)
    cfg.load_from = checkpoint
    if args.show or args.show_dir:
        hook = cfg.default_hooks.get('visualization')
        if hook is None:
            raise ValueError('--show/--show-dir need default_hooks.visualization in the config')
        hook['draw'] = True
        if args.show:
            hook['show'] = True
            hook['wait_time'] = args.wait_time
        if args.show_dir:
            # relative to the work dir, as mmseg documents it
            cfg.visualizer['save_dir'] = osp.join(cfg.work_dir, args.show_dir)
            hook['interval'] = 1
    if args.tta:
        cfg.test_dataloader.dataset.pipeline = cfg.tta_pipeline
        cfg.tta_model.module = cfg.model
        cfg.model = cfg.tta_model
    if args.out is not None:
        cfg.test_evaluator['output_dir'] = args.out
        cfg.test_evaluator['keep_results'] = True
    return cfg


def _runner(cfg):
    from mmengine.registry import RUNNERS  # the root's: ViT5Runner under an mmseg or an mmdet default scope
    from mmengine.runner import Runner
    return Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)


def train(argv=None):
    args = train_parser().parse_args(argv)
    cfg = train_config(args)
    if not args.skip_data_check:
        check_data(cfg, ('train', 'val') if cfg.get('val_cfg') else ('train',))
    plan = BatchPlan(**cfg.batch_plan)
    runner = _runner(cfg)  # ViT5Runner: logs the recipe card first, and a warning where the plan is not the protocol's
    runner.logger.info(f'images per iteration: {plan.describe()}')
    runner.train()
    return runner


def test(argv=None):
    args = test_parser().parse_args(argv)
    cfg = test_config(args)
    if not args.skip_data_check:
        check_data(cfg, ('test',))
    existed = osp.isdir(cfg.work_dir)
    runner = _runner(cfg)
    if args.amp:
        enable_amp(runner.model, args.amp_dtype)
    try:
        return runner.test()
    except CheckpointError as e:  # nothing tested: nothing left behind, the message names the file
        forget_runner(runner)
        if not existed:
            shutil.rmtree(cfg.work_dir, ignore_errors=True)
        raise type(e)(str(e) if str(cfg.load_from) in str(e) else f'{cfg.load_from}: {e}') from None


def error_message(e: BaseException) -> str:
    """The message of ``e``; for an error re-raised from a dataloader worker, the
    original one line instead of the worker's traceback."""
    text = str(e).strip()
    if 'Original Traceback' in text:
        last = text.splitlines()[-1]
        text = last.split(f'{type(e).__name__}: ', 1)[-1]
    return text


def end_process_group():
    """Destroy the default process group, where this process made one, while Python is still
    whole. Left to interpreter shutdown, gloo's threads can abort a run that succeeded
    (SIGABRT, 'terminate called without an active exception'; pytorch/pytorch#179291), which
    torchrun then reports as a failed worker. Only after success: a rank that failed may leave
    collectives pending, which NCCL's destroy would wait for."""
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def run_tool(main, argv=None):
    """Run ``train``/``test`` as a command: an expected error (a :class:`ToolError`: bad
    data, checkpoint, non-finite loss, ...; or a missing file) is one line on stderr and
    exit status 1, not a traceback. A distributed run ends its process group (:func:`end_process_group`).
    ``VIT5SEG_DEBUG=1`` shows the traceback too."""
    try:
        result = main(argv)
        end_process_group()
        return result
    except (ToolError, FileNotFoundError) as e:
        if os.environ.get('VIT5SEG_DEBUG'):
            raise
        print(f'error: {error_message(e)}', file=sys.stderr)
        sys.exit(1)
