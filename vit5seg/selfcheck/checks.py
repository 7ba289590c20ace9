"""The self-check's checks: each takes the run's :class:`Context` and returns a one-line
detail, raises :class:`Skip` where it does not apply, or fails with any other error.
Trainings run the real tools (train, test, torchrun) in subprocesses on synthetic data."""
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Callable, Dict, List

import torch

from .. import compat, ops
from ..paths import config_path, config_root, tool_path

TINY_CONFIG = config_path('tiny/vit5_upernet_synthetic.py')
HEAD_CONFIGS = [config_path('vit5_upernet_ade20k.py'), *sorted((config_root() / 'heads').glob('*.py')),
                config_path('eomt/vit5-base_eomt_ade20k.py')]
ENTRY_CONFIGS = {'vit5-base': config_path('vit5_upernet_ade20k.py'), 'deit3-base': config_path('deit3_upernet_ade20k.py')}
HAS_MMDET = importlib.util.find_spec('mmdet') is not None  # Mask2Former's parts (the mask2former extra)
NO_MMDET = 'mask2former skipped: mmdet is not installed (pip install -e .[mask2former])'


class Skip(Exception):
    """A check that does not apply here; the message says why."""


class Context:
    def __init__(self, device: str, gpus: int, out: Path, threads: int):
        self.device, self.gpus, self.out, self.threads = device, gpus, out, threads


def _subprocess_env(device: str, threads: int) -> dict:
    env = {**os.environ, 'OMP_NUM_THREADS': str(threads), 'PYTHONUNBUFFERED': '1'}
    if device == 'cpu':
        env['CUDA_VISIBLE_DEVICES'] = ''  # the Runner takes a GPU whenever it sees one
    return env


EXCEPTION_LINE = re.compile(r'^(\[rank\d+\]:\s*)?[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b')


def failure_line(output: str) -> str:
    """The line of a failed command's output that says what failed: its last exception line,
    not torchrun's own ChildFailedError (which names no error: the worker's comes before it),
    else its last line of text."""
    lines = [line.strip() for line in output.splitlines() if line.strip().strip('=-~^ ')]
    exceptions = [line for line in lines if EXCEPTION_LINE.match(line) and 'ChildFailedError' not in line]
    return (exceptions or lines or ['(no output)'])[-1]


def _run(args: List[str], cwd: Path, env: dict, timeout: int = 900) -> str:
    out = subprocess.run([sys.executable, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=timeout)
    if out.returncode:
        name = {'-c': 'python -c', '-m': str(args[1])}.get(str(args[0]), Path(str(args[0])).name)
        output = f'{out.stdout}\n{out.stderr}'  # stderr last: its exception lines win
        log = Path(cwd) / f'{name.replace(" ", "_")}.log'  # the whole output, beside the run it belongs to
        log.write_text(output)
        raise RuntimeError(f'{name} exited {out.returncode}: {failure_line(output)[:300]} (output: {log})')
    return out.stdout + out.stderr


def _tiny_data(work: Path) -> List[str]:
    from ..datasets import make_synthetic_ade20k
    data = work / 'data' / 'synthetic_ade20k'
    if not (data / 'ADEChallengeData2016').is_dir():
        make_synthetic_ade20k(data, num_train=8, num_val=4, size=64, seed=0)
    root = data / 'ADEChallengeData2016'
    return [f'{k}.dataset.data_root={root}' for k in ('train_dataloader', 'val_dataloader', 'test_dataloader')] + [
        'train_dataloader.batch_size=2', 'train_dataloader.num_workers=0', 'val_dataloader.num_workers=0',
        'test_dataloader.num_workers=0']


def _tool(name: str) -> List[str]:
    """The command of ``tools/<name>.py``, in a clone or a regular install."""
    return [str(tool_path(f'{name}.py'))]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def check_train_resume_test(ctx) -> str:
    """The tiny ViT-5 UperNet trains 2 iterations and checkpoints, resumes to 4, and tests."""
    work, env = ctx.out / 'train', _subprocess_env(ctx.device, ctx.threads)
    work.mkdir(parents=True, exist_ok=True)
    opts = _tiny_data(work) + ['default_hooks.checkpoint.interval=2', 'train_cfg.val_interval=4']
    train = [*_tool('train'), TINY_CONFIG, '--work-dir', 'run']
    _run(train + ['--cfg-options', *opts, 'train_cfg.max_iters=2'], work, env)
    if not (work / 'run' / 'iter_2.pth').is_file():
        raise RuntimeError('training wrote no iter_2.pth')
    log = _run(train + ['--resume', '--cfg-options', *opts, 'train_cfg.max_iters=4'], work, env)
    if 'resumed epoch: 0, iter: 2' not in log:
        raise RuntimeError('the second run did not resume from iteration 2')
    _run([*_tool('test'), TINY_CONFIG, 'run/iter_4.pth', '--work-dir', 'test', '--cfg-options', *opts],
         work, env)
    metrics = json.loads(sorted((work / 'test').glob('*/*.json'))[-1].read_text())
    return f"trained to iteration 2, resumed to 4, tested: mIoU {metrics['mIoU']:.2f} (4 iterations from scratch)"


def check_heads(ctx) -> str:
    """Every head config (tiny backbone) trains a step and predicts whole and slide."""
    from mmengine.config import ConfigDict

    from ..models.builder import tiny_segmentor
    from ..registry_audit import train_and_predict
    failed, configs = [], [c for c in HEAD_CONFIGS if HAS_MMDET or 'mask2former' not in c.stem]
    for config in configs:
        try:
            model = tiny_segmentor(config).to(ctx.device)
            train_and_predict(model, device=ctx.device)
            model.test_cfg = ConfigDict(mode='slide', crop_size=(64, 64), stride=(48, 48))
            train_and_predict(model, device=ctx.device, train=False)
        except Exception as error:  # reported, the other heads still run
            failed.append(f'{config.stem}: {type(error).__name__}: {str(error)[:120]}')
    if failed:
        raise RuntimeError('; '.join(failed))
    return f'{len(configs)} configs: one train step, whole and slide prediction each' + (
        '' if HAS_MMDET else f'; {NO_MMDET}')


# the stand-in each case must go through where mmcv has no compiled ops
EXPECTED_FALLBACKS = {'Mask2FormerHead': 'ms_deform_attn', 'PSAHead': 'psa_mask', 'FocalLoss': 'sigmoid_focal_loss'}


def check_fallbacks(ctx) -> str:
    """The pure-PyTorch stand-ins for missing compiled mmcv ops, on the branch a GPU takes
    (on CPU through the dispatch simulation); fails if a case ran without its stand-in."""
    from ..registry_audit import cases, run_case, train_and_predict
    chosen = [c for c in cases() if c.name in EXPECTED_FALLBACKS and (HAS_MMDET or c.name != 'Mask2FormerHead')]
    if compat.has_compiled_mmcv_ops():
        return 'full mmcv with compiled ops: its kernels are used, no stand-ins installed'
    done, bad = [], []
    for case in chosen:
        expected = EXPECTED_FALLBACKS[case.name]
        if ctx.device == 'cuda':
            before = ops.FALLBACK_CALLS[expected]
            try:
                train_and_predict(case.build().to('cuda'), device='cuda')
            except Exception as error:  # reported with the others
                bad.append(f'{case.name}: {type(error).__name__}: {str(error)[:120]}')
                continue
            used = ops.FALLBACK_CALLS[expected] > before
        else:
            result = run_case(case)
            if not result.verdict.startswith('works'):
                bad.append(f'{case.name}: {result.verdict}')
                continue
            used = expected in result.fallbacks
        if not used:
            bad.append(f'{case.name} ran without its stand-in `{expected}`')
        done.append(f'{case.name} through `{expected}`')
    if bad:
        raise RuntimeError('; '.join(bad))
    where = 'on the GPU' if ctx.device == 'cuda' else 'CUDA branch simulated on CPU'
    return f'{where}: ' + ', '.join(done) + ('' if HAS_MMDET else f'; {NO_MMDET}')


def _amp_check(dtype: torch.dtype):
    def check(ctx) -> str:
        if ctx.device != 'cuda':
            raise Skip('autocast train steps are checked on CUDA only')
        if dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
            raise Skip('this GPU has no bfloat16')
        from ..models.builder import tiny_segmentor
        from ..registry_audit import synthetic_batch
        model = tiny_segmentor(HEAD_CONFIGS[0]).cuda().train()
        scaler = torch.amp.GradScaler('cuda', enabled=dtype == torch.float16)
        optim = torch.optim.AdamW(model.parameters(), lr=1e-4)
        data = model.data_preprocessor(synthetic_batch(2, (64, 64), 150), training=True)
        for _ in range(2):
            with torch.autocast('cuda', dtype=dtype):
                losses = model(data['inputs'].cuda(), data['data_samples'], mode='loss')
            loss = sum(v for k, v in losses.items() if 'loss' in k)
            optim.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(optim)
            scaler.update()
            if not torch.isfinite(loss):
                raise FloatingPointError(f'loss {loss.item()}')
        return f'2 steps, loss {loss.item():.3f}' + (f', grad scale {scaler.get_scale():g}' if scaler.is_enabled() else '')
    return check


DDP_WORKER = """
import os, sys, torch
import torch.nn.parallel as parallel
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
import vit5seg
from vit5seg.engine.launch import end_process_group, train

# Count the backward passes whose gradients DDP all-reduces (its first bucket marks one): with
# k micro-batches a step, mmengine's no_sync must leave all but the last one unsynchronised.
synced = [0]
def counting_allreduce(state, bucket):
    synced[0] += bucket.index() == 0
    return allreduce_hook(state, bucket)
ddp_init = parallel.DistributedDataParallel.__init__
def ddp_init_counting(self, *args, **kwargs):
    ddp_init(self, *args, **kwargs)
    self.register_comm_hook(None, counting_allreduce)
parallel.DistributedDataParallel.__init__ = ddp_init_counting

runner = train(sys.argv[1:])
model = runner.model.module if hasattr(runner.model, 'module') else runner.model
state = {**{n: p.detach().cpu() for n, p in model.named_parameters()},
         **{'buffer:' + n: b.detach().cpu() for n, b in model.named_buffers() if n.endswith(('running_mean', 'running_var'))},
         'syncbn': torch.tensor(sum(isinstance(m, torch.nn.SyncBatchNorm) for m in model.modules())),
         'synced_backwards': torch.tensor(synced[0]), 'iterations': torch.tensor(runner.iter)}
torch.save(state, os.path.join(runner.work_dir, f"rank{os.environ['RANK']}.pth"))
end_process_group()
"""
RANK_BOOKKEEPING = ('syncbn', 'synced_backwards', 'iterations')  # DDP_WORKER's keys beside the tensors


def ranks_differ(states: List[dict], buffers: bool) -> List[str]:
    """Names of the parameters (and with ``buffers`` the BN running statistics) that are
    not equal on every rank."""
    names = [n for n in states[0] if n not in RANK_BOOKKEEPING and (buffers or not n.startswith('buffer:'))]
    return [n for n in names if any(not torch.equal(states[0][n], s[n]) for s in states[1:])]


def _norm_options(config: Path) -> List[str]:
    """cfg-options giving the tiny config's neck and heads the norm of ``config``."""
    from mmengine.config import Config
    norm = Config.fromfile(str(config)).model.decode_head.norm_cfg.type
    return [f'model.{part}.norm_cfg.type={norm}' for part in ('neck', 'decode_head', 'auxiliary_head')]


def check_ddp(ctx) -> str:
    """DDP over the GPUs (NCCL) or two CPU processes (gloo), 2 micro-batches per step (the
    first without gradient synchronisation); parameters equal afterwards.
    On GPUs with the entry configs' norm (SyncBN), whose running statistics must then be
    equal on every rank too (the Runner does not broadcast buffers)."""
    ranks = ctx.gpus if ctx.device == 'cuda' else 2
    if ctx.device == 'cuda' and ranks < 2:
        raise Skip('one GPU: nothing to synchronise (run with more GPUs visible or --gpus N)')
    work = ctx.out / 'ddp'
    work.mkdir(parents=True, exist_ok=True)
    (work / 'worker.py').write_text(DDP_WORKER)
    env = _subprocess_env(ctx.device, max(1, ctx.threads // ranks))
    options = _tiny_data(work) + ['train_cfg.max_iters=3', 'train_cfg.val_interval=3']
    if ctx.device == 'cuda':  # the first N of the GPUs this process sees
        seen = os.environ.get('CUDA_VISIBLE_DEVICES') or ','.join(map(str, range(torch.cuda.device_count())))
        env['CUDA_VISIBLE_DEVICES'] = ','.join(seen.split(',')[:ranks])
        options += _norm_options(ENTRY_CONFIGS['vit5-base'])  # SyncBN has no CPU kernel
    _run(['-m', 'torch.distributed.run', f'--nproc_per_node={ranks}', f'--master_port={_free_port()}',
          'worker.py', TINY_CONFIG, '--launcher', 'pytorch', '--accumulate', '2', '--work-dir', 'run',
          '--cfg-options', *options], work, env)
    states = [torch.load(work / 'run' / f'rank{r}.pth', weights_only=True) for r in range(ranks)]
    return compare_ranks(states, ctx.device)


def compare_ranks(states: List[dict], device: str) -> str:
    backend = 'nccl' if device == 'cuda' else 'gloo'
    syncbn = int(states[0]['syncbn'])
    if device == 'cuda' and not syncbn:
        raise RuntimeError('the DDP run has no SyncBatchNorm layer: the entry configs\' norm was not used')
    iterations = int(states[0]['iterations'])
    synced = [int(s['synced_backwards']) for s in states]
    if any(n != iterations for n in synced):
        # 2 micro-batches a step: an all-reduce on every backward doubles the traffic (no_sync skipped)
        raise RuntimeError(f'DDP all-reduced the gradients of {synced} backward passes on the ranks in {iterations} '
                           f'optimizer steps: once a step, on its last micro-batch, was expected')
    differ = ranks_differ(states, buffers=bool(syncbn))
    if differ:
        raise RuntimeError(f'{len(differ)} tensors differ between ranks, e.g. {differ[0]}')
    params = sum(n not in RANK_BOOKKEEPING and not n.startswith('buffer:') for n in states[0])
    stats = sum(n.startswith('buffer:') for n in states[0])
    tail = (f' and the {stats} running statistics of {syncbn} SyncBN layers' if syncbn else
            ' (BN statistics stay per rank: SyncBN needs GPUs)')
    return (f'{len(states)} ranks ({backend}), {iterations} iterations of 2 micro-batches, gradients all-reduced '
            f'once each: all {params} parameters{tail} equal on every rank')


def check_compile(ctx) -> str:
    """torch.compile of the block stack: same outputs and gradients as eager, no complex ops."""
    from ..models.backbones.vit5 import ViT5
    torch.manual_seed(0)
    # LayerScale 1 so the first block's gradient is not at the rounding level
    kwargs = dict(arch='vit5-small', embed_dims=64, num_layers=2, num_heads=2, out_indices=(1,), layer_scale_init=1.)
    eager = ViT5(**kwargs).to(ctx.device)
    compiled = ViT5(**kwargs, compile=True).to(ctx.device)
    compiled.load_state_dict(eager.state_dict())
    x = torch.randn(2, 3, 64, 96, device=ctx.device)
    probe = torch.randn(2, 64, 4, 6, device=ctx.device)  # a loss whose gradient the final norm does not cancel
    outs, grads = [], []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        start = time.perf_counter()
        for model in (eager, compiled):
            out = model(x)[0]
            (out * probe).sum().backward()
            outs.append(out.detach())
            grads.append(model.blocks[0].attn.qkv.weight.grad.clone())
        seconds = time.perf_counter() - start
    complex_warnings = [w for w in caught if 'complex' in str(w.message).lower()]
    if complex_warnings:
        raise RuntimeError(f'inductor fell back on complex ops: {complex_warnings[0].message}')
    diff = (outs[0] - outs[1]).abs().max().item()
    grad_diff = ((grads[0] - grads[1]).abs().max() / grads[0].abs().max()).item()
    if diff > 1e-3 or grad_diff > 1e-3:
        raise RuntimeError(f'compiled differs from eager: outputs {diff:.2e}, gradients {grad_diff:.2e} (relative)')
    return f'outputs within {diff:.1e}, gradients within {grad_diff:.1e} of eager; first step {seconds:.0f} s'


def check_conversion(ctx) -> str:
    """An authors'-layout checkpoint converts and loads to the same features."""
    from ..models.backbones.vit5 import ViT5
    from ..models.convert import convert_file
    from ..models.layers import rope_frequencies
    arch = dict(embed_dims=64, num_layers=2, num_heads=2)
    torch.manual_seed(0)
    source = ViT5(arch=arch).eval()
    authors = dict(source.state_dict())
    for i in range(2):  # what the authors' files also hold: derived RoPE frequencies, the classifier
        authors[f'blocks.{i}.attn.rope.freqs'] = rope_frequencies(32, 10000.)
        authors[f'blocks.{i}.attn.rope_reg.freqs'] = rope_frequencies(32, 100.)
    authors['head.weight'] = torch.zeros(1000, 64)
    work = ctx.out / 'convert'
    work.mkdir(parents=True, exist_ok=True)
    torch.save({'model': authors}, work / 'authors.pth')
    layout = convert_file(work / 'authors.pth', work / 'converted.pth', arch=arch)  # checks the fit too
    loaded = ViT5(arch=arch).eval()
    loaded.load_state_dict(torch.load(work / 'converted.pth', weights_only=True)['state_dict'])
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        diff = (source(x)[0] - loaded(x)[0]).abs().max().item()
    if diff != 0:
        raise RuntimeError(f'features differ by {diff:.2e} after conversion')
    return f'{layout} layout -> ours -> same features (max diff 0)'


CHECKS: Dict[str, Callable] = {
    'train_resume_test': check_train_resume_test,
    'heads': check_heads,
    'mmcv_fallbacks': check_fallbacks,
    'amp_bf16': _amp_check(torch.bfloat16),
    'amp_fp16': _amp_check(torch.float16),
    'ddp': check_ddp,
    'compile': check_compile,
    'checkpoint_conversion': check_conversion,
}
QUICK = ('train_resume_test', 'heads', 'mmcv_fallbacks', 'checkpoint_conversion')
