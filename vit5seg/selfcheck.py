"""Show that a machine is ready: environment, checks (pass / fail / skip), figures.

    python tools/selfcheck.py [--device cpu|cuda] [--gpus N] [--quick] --out DIR

Writes ``DIR/selfcheck.json`` ({"environment", "checks", "figures"}) and a readable
``DIR/selfcheck.md``; exits 1 if any check fails. Trainings run the real tools
(``tools/train.py``, ``tools/test.py``, torchrun) in subprocesses on synthetic data, so
they exercise what a user's job does; everything stays under DIR.
"""
import argparse
import contextlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Callable, Dict, List, Optional

import torch

from .benchmark import AMP_DTYPES, SegmentorSteps, segmentor_peak_mb, time_interleaved
from .models.segmentor import build_segmentor
from .paths import PACKAGE, config_path, config_root

TINY_CONFIG = config_path('tiny/vit5_upernet_synthetic.py')
HEAD_CONFIGS = [config_path('vit5_upernet_ade20k.py'), *sorted((config_root() / 'heads').glob('*.py'))]
ENTRY_CONFIGS = {'vit5-base': config_path('vit5_upernet_ade20k.py'), 'deit3-base': config_path('deit3_upernet_ade20k.py')}
# the protocol's images per iteration (8 GPUs x 2), shared/segmentation-protocol.md
PROTOCOL_BATCH = 16
# Minimum NVIDIA driver of each CUDA major release (minor-version compatibility, Linux;
# NVIDIA's CUDA compatibility guide): a torch wheel built for CUDA X.y runs on these or newer.
CUDA_MIN_DRIVER = {11: 450, 12: 525, 13: 580}
HAS_MMDET = importlib.util.find_spec('mmdet') is not None  # Mask2Former's parts (the mask2former extra)
NO_MMDET = 'mask2former skipped: mmdet is not installed (pip install -e .[mask2former])'


class Skip(Exception):
    """A check that does not apply here; the message says why."""


# --- environment ----------------------------------------------------------------------

def _version(package: str) -> Optional[str]:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment() -> dict:
    from . import compat
    env = dict(python=platform.python_version(), platform=platform.platform(), cpu_count=os.cpu_count(),
               torch_threads=torch.get_num_threads(), torch=torch.__version__, cuda=torch.version.cuda,
               cudnn=None, nccl=None, gpus=[], bf16_supported=None)
    if torch.cuda.is_available():
        env['cudnn'] = torch.backends.cudnn.version()
        with contextlib.suppress(Exception):
            env['nccl'] = '.'.join(map(str, torch.cuda.nccl.version()))
        env['gpus'] = [dict(name=torch.cuda.get_device_name(i),
                            memory_gib=round(torch.cuda.get_device_properties(i).total_memory / 2 ** 30, 1),
                            capability='.'.join(map(str, torch.cuda.get_device_capability(i))))
                       for i in range(torch.cuda.device_count())]
        env['bf16_supported'] = torch.cuda.is_bf16_supported()
    env['nvidia_driver'] = (nvidia_gpus() or {}).get('driver')
    mmcv_kind = 'mmcv-lite' if _version('mmcv-lite') else 'mmcv'
    env.update(mmengine=_version('mmengine'), mmcv=f'{mmcv_kind} {_version(mmcv_kind)}',
               mmcv_compiled_ops=compat.has_compiled_mmcv_ops(), mmseg=_version('mmsegmentation'),
               mmdet=_version('mmdet'), timm=_version('timm'), vit5seg=_version('vit5seg'))
    return env


def nvidia_gpus() -> Optional[dict]:
    """The NVIDIA GPUs this machine has, whatever torch sees: ``{'names', 'driver',
    'device_files'}`` from ``nvidia-smi`` and ``/dev/nvidia<N>``, or None where it has none."""
    files = sorted(str(p) for p in Path('/dev').glob('nvidia[0-9]*'))
    names, driver = [], None
    smi = shutil.which('nvidia-smi')
    if smi:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run([smi, '--query-gpu=name,driver_version', '--format=csv,noheader'],
                                 capture_output=True, text=True, timeout=30)
            if out.returncode == 0:
                rows = [line.rsplit(',', 1) for line in out.stdout.strip().splitlines() if ',' in line]
                names = [name.strip() for name, _ in rows]
                driver = rows[0][1].strip() if rows else None
    if not names and not files:
        return None
    return dict(names=names, driver=driver, device_files=files)


def no_cuda_reason(gpus: Optional[dict]) -> str:
    """One line: why torch sees no GPU here, and what to do."""
    version = f'torch {torch.__version__}'
    if gpus is None:
        return f'--device cuda, but this machine has no NVIDIA GPU that torch or nvidia-smi can see ({version})'
    seen = (f"{len(gpus['names'])} x {gpus['names'][0]}" if gpus['names'] else ', '.join(gpus['device_files']))
    driver = gpus['driver'] or 'unknown (nvidia-smi gave none)'
    head = f'this machine has NVIDIA GPUs ({seen}; driver {driver}) but torch sees none: '
    if torch.version.cuda is None:
        return head + f'{version} is a CPU-only build; install its CUDA build (pip install -e . from pyproject)'
    major = int(torch.version.cuda.split('.')[0])
    need = CUDA_MIN_DRIVER.get(major)
    text = head + f'{version} is built for CUDA {torch.version.cuda}, which needs an NVIDIA driver >= {need}'
    have = gpus['driver'].split('.')[0] if gpus['driver'] else ''
    if have.isdigit() and need and int(have) < need:
        return text + ': update the driver, or install a torch build for an older CUDA (docs/gpus.md#drivers)'
    visible = os.environ.get('CUDA_VISIBLE_DEVICES')
    return text + (f'; CUDA_VISIBLE_DEVICES={visible!r} hides them' if visible is not None else
                   '; check that nvidia-smi works and the job was given the GPUs')


# --- helpers ----------------------------------------------------------------------------

def _subprocess_env(device: str, threads: int) -> dict:
    env = {**os.environ, 'OMP_NUM_THREADS': str(threads), 'PYTHONUNBUFFERED': '1'}
    if device == 'cpu':
        env['CUDA_VISIBLE_DEVICES'] = ''  # the Runner takes a GPU whenever it sees one
    return env


def _run(args: List[str], cwd: Path, env: dict, timeout: int = 900) -> str:
    out = subprocess.run([sys.executable, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=timeout)
    if out.returncode:
        tail = (out.stderr.strip() or out.stdout.strip()).splitlines()[-1:] or ['(no output)']
        name = Path(str(args[0])).name if args[0] != '-c' else 'python -c'
        raise RuntimeError(f'{name} exited {out.returncode}: {tail[0][:300]}')
    return out.stdout + out.stderr


def _tiny_data(work: Path) -> List[str]:
    from .datasets import make_synthetic_ade20k
    data = work / 'data' / 'synthetic_ade20k'
    if not (data / 'ADEChallengeData2016').is_dir():
        make_synthetic_ade20k(data, num_train=8, num_val=4, size=64, seed=0)
    root = data / 'ADEChallengeData2016'
    return [f'{k}.dataset.data_root={root}' for k in ('train_dataloader', 'val_dataloader', 'test_dataloader')] + [
        'train_dataloader.batch_size=2', 'train_dataloader.num_workers=0', 'val_dataloader.num_workers=0',
        'test_dataloader.num_workers=0']


def _tool(name: str) -> List[str]:
    """The command of ``tools/<name>.py`` (a regular install has no tools/: the same entry
    point through ``python -c``)."""
    script = PACKAGE.parent / 'tools' / f'{name}.py'
    if script.is_file():
        return [str(script)]
    return ['-c', f'import sys, vit5seg; from vit5seg.engine.launch import run_tool, {name}; '
                  f'sys.argv[0] = {name!r}; run_tool({name})']


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


# --- checks -----------------------------------------------------------------------------

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

    from .registry_audit import tiny_segmentor, train_and_predict
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
    from . import compat
    from .registry_audit import cases, run_case, train_and_predict
    chosen = [c for c in cases() if c.name in EXPECTED_FALLBACKS and (HAS_MMDET or c.name != 'Mask2FormerHead')]
    if compat.has_compiled_mmcv_ops():
        return 'full mmcv with compiled ops: its kernels are used, no stand-ins installed'
    done, bad = [], []
    for case in chosen:
        expected = EXPECTED_FALLBACKS[case.name]
        if ctx.device == 'cuda':
            before = compat.FALLBACK_CALLS[expected]
            try:
                train_and_predict(case.build().to('cuda'), device='cuda')
            except Exception as error:  # reported with the others
                bad.append(f'{case.name}: {type(error).__name__}: {str(error)[:120]}')
                continue
            used = compat.FALLBACK_CALLS[expected] > before
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
        from .registry_audit import synthetic_batch, tiny_segmentor
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
import vit5seg
from vit5seg.engine.launch import train
runner = train(sys.argv[1:])
model = runner.model.module if hasattr(runner.model, 'module') else runner.model
state = {**{n: p.detach().cpu() for n, p in model.named_parameters()},
         **{'buffer:' + n: b.detach().cpu() for n, b in model.named_buffers() if n.endswith(('running_mean', 'running_var'))},
         'syncbn': torch.tensor(sum(isinstance(m, torch.nn.SyncBatchNorm) for m in model.modules()))}
torch.save(state, os.path.join(runner.work_dir, f"rank{os.environ['RANK']}.pth"))
"""


def ranks_differ(states: List[dict], buffers: bool) -> List[str]:
    """Names of the parameters (and with ``buffers`` the BN running statistics) that are
    not equal on every rank."""
    names = [n for n in states[0] if n != 'syncbn' and (buffers or not n.startswith('buffer:'))]
    return [n for n in names if any(not torch.equal(states[0][n], s[n]) for s in states[1:])]


def _norm_options(config: Path) -> List[str]:
    """cfg-options giving the tiny config's neck and heads the norm of ``config``."""
    from mmengine.config import Config
    norm = Config.fromfile(str(config)).model.decode_head.norm_cfg.type
    return [f'model.{part}.norm_cfg.type={norm}' for part in ('neck', 'decode_head', 'auxiliary_head')]


def check_ddp(ctx) -> str:
    """DDP over the GPUs (NCCL) or two CPU processes (gloo); parameters equal afterwards.
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
          'worker.py', TINY_CONFIG, '--launcher', 'pytorch', '--work-dir', 'run', '--cfg-options', *options],
         work, env)
    states = [torch.load(work / 'run' / f'rank{r}.pth', weights_only=True) for r in range(ranks)]
    return compare_ranks(states, ctx.device)


def compare_ranks(states: List[dict], device: str) -> str:
    backend = 'nccl' if device == 'cuda' else 'gloo'
    syncbn = int(states[0]['syncbn'])
    if device == 'cuda' and not syncbn:
        raise RuntimeError('the DDP run has no SyncBatchNorm layer: the entry configs\' norm was not used')
    differ = ranks_differ(states, buffers=bool(syncbn))
    if differ:
        raise RuntimeError(f'{len(differ)} tensors differ between ranks, e.g. {differ[0]}')
    params = sum(not n.startswith('buffer:') for n in states[0]) - 1
    stats = sum(n.startswith('buffer:') for n in states[0])
    tail = (f' and the {stats} running statistics of {syncbn} SyncBN layers' if syncbn else
            ' (BN statistics stay per rank: SyncBN needs GPUs)')
    return f'{len(states)} ranks ({backend}), 3 iterations: all {params} parameters{tail} equal on every rank'


def check_compile(ctx) -> str:
    """torch.compile of the block stack: same outputs and gradients as eager, no complex ops."""
    from .models.backbones.vit5 import ViT5
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
    from .models.backbones.vit5 import ViT5
    from .models.convert import convert_file
    from .models.layers import rope_frequencies
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


# --- figures ----------------------------------------------------------------------------

def rms_norm_figures(device: str, width: int, repeats: int = 20) -> dict:
    """fwd+bwd of the two RMSNorm implementations on a ViT token tensor, in ms."""
    from .models.layers import RMSNorm
    x = torch.randn(2, 1029, width, device=device, requires_grad=True)
    norms = {impl: RMSNorm(width, impl=impl).to(device) for impl in ('exact', 'fused')}

    def step(norm):
        def run():
            for _ in range(repeats):
                norm(x).sum().backward()
        return run
    times = time_interleaved({k: step(n) for k, n in norms.items()}, device, warmup=1, repeats=5)
    out = {f'rms_norm_{k}_ms': round(1e3 * statistics.median(v) / repeats, 3) for k, v in times.items()}
    out['rms_norm_faster'] = min(('exact', 'fused'), key=lambda k: out[f'rms_norm_{k}_ms'])
    return out


def segmentor_figures(device: str, repeats: int) -> dict:
    """Train step and inference images/s (and peak GPU memory) of ViT-5, DeiT-III and
    mmseg's own DeiT UperNet, interleaved in this process. GPU: B sizes, 512 crops, 2
    images per step, slide over 2048x512; CPU: S sizes at a quarter of the pixels."""
    import mmseg
    size = 'base' if device == 'cuda' else 'small'
    mmseg_cfgs = Path(mmseg.__file__).parent / '.mim' / 'configs' / 'vit'
    if size == 'base':  # the entry pair
        ours = list(ENTRY_CONFIGS.values())
    else:
        ours = [config_path(f'{family}/{family}-small_upernet_ade20k.py') for family in ('vit5', 'deit3')]
    configs = {f'vit5-{size}': ours[0], f'deit3-{size}': ours[1],
               f'mmseg-deit-{size[0]}16': mmseg_cfgs / f'vit_deit-{size[0]}16_mln_upernet_8xb2-160k_ade20k-512x512.py'}
    crop = 512 if device == 'cuda' else 256
    slide_hw = (crop, 4 * crop)
    batch = 2
    figures = dict(size=size, crop=crop, batch=batch, slide=f'{slide_hw[1]}x{slide_hw[0]}', repeats=repeats)
    steps = {}
    for name, config in configs.items():
        timed = SegmentorSteps(build_segmentor(config, device), crop, batch, device, slide_hw, window=crop)
        steps.update({f'{name}/train': timed.train(), f'{name}/whole': timed.whole(), f'{name}/slide': timed.slide()})
    times = time_interleaved(steps, device, warmup=1, repeats=repeats)
    del steps, timed
    for key, values in times.items():
        name, what = key.split('/')
        per_call = statistics.median(values)
        images = 1 if what == 'slide' else batch
        figures[f'{name} {what} images/s'] = round(images / per_call, 3)
    reference = f'mmseg-deit-{size[0]}16'
    for name in configs:
        if name != reference:
            figures[f'{name} train speed vs {reference} (x)'] = round(
                figures[f'{name} train images/s'] / figures[f'{reference} train images/s'], 3)
    if device == 'cuda':  # weights, gradients, AdamW state and a step's activations
        for name, config in configs.items():
            figures[f'{name} train peak GiB'] = round(segmentor_peak_mb(_model_cfg(config), crop, batch, device) / 1024, 2)
    return figures


def _model_cfg(config):
    from mmengine.config import Config
    return Config.fromfile(str(config)).model


def device_memory_gib(device: str) -> float:
    if device == 'cuda':
        return torch.cuda.get_device_properties(0).total_memory / 2 ** 30
    return os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2 ** 30


def schedule_estimates(configs, device: str, gpus: int, repeats: int) -> List[dict]:
    """For each config, as configured (crop, images per GPU, iterations): the train step
    measured here in float32 and under bf16 autocast (fp16 on a GPU without bf16), its peak
    memory against the device's, and the hours the schedule takes at that step. A DDP
    rank's step is this step plus the gradient all-reduce (not measured here); data
    loading and validation are not counted."""
    from mmengine.config import Config
    total_gib = device_memory_gib(device)
    amp = 'fp16' if device == 'cuda' and not torch.cuda.is_bf16_supported() else 'bf16'
    rows = []
    for config in configs:
        cfg = Config.fromfile(str(config))
        crop, per_gpu, iters = cfg.crop_size[0], cfg.train_dataloader.batch_size, cfg.train_cfg.max_iters
        timed = SegmentorSteps(build_segmentor(cfg.model, device), crop, per_gpu, device, (crop, crop), window=crop)
        times = time_interleaved({None: timed.train(), amp: timed.train(AMP_DTYPES[amp])}, device, warmup=2,
                                 repeats=repeats)
        del timed
        for precision, values in times.items():
            step = statistics.median(values)
            peak = segmentor_peak_mb(cfg.model, crop, per_gpu, device, precision) / 1024
            rows.append(dict(config=Path(config).name, precision=precision or 'float32', crop=crop,
                             images_per_gpu=per_gpu, iterations=iters, step_s=round(step, 4),
                             peak_gib=round(peak, 2), gpu_gib=round(total_gib, 1), fits=peak < 0.95 * total_gib,
                             gpus=gpus, images_per_iteration=gpus * per_gpu,
                             hours=round(iters * step / 3600, 2)))
    return rows


def estimate_line(row: dict) -> str:
    fits = 'fits' if row['fits'] else 'does NOT fit'
    protocol = '' if row['images_per_iteration'] == PROTOCOL_BATCH else (
        f"; the protocol's {PROTOCOL_BATCH} images/iteration need {PROTOCOL_BATCH // row['images_per_gpu']} GPUs")
    return (f"{row['config']} ({row['precision']}): {row['iterations']} iterations x {row['step_s']:.3f} s = "
            f"{row['hours']:.1f} h of train steps on {row['gpus']} GPU(s) x {row['images_per_gpu']} images"
            f"{protocol}; peak {row['peak_gib']:.1f} of {row['gpu_gib']:.0f} GiB: {fits}")


# --- report -----------------------------------------------------------------------------

class Context:
    def __init__(self, device: str, gpus: int, out: Path, threads: int):
        self.device, self.gpus, self.out, self.threads = device, gpus, out, threads


def run_checks(ctx: Context, names, quick: bool) -> List[dict]:
    results = []
    for name in names:
        start = time.perf_counter()
        if quick and name not in QUICK:
            status, detail = 'skip', 'not in --quick'
        else:
            try:
                status, detail = 'pass', CHECKS[name](ctx)
            except Skip as reason:
                status, detail = 'skip', str(reason)
            except Exception as error:  # a failed check is reported, the others still run
                status, detail = 'fail', f'{type(error).__name__}: {error}'.splitlines()[0][:400]
        result = dict(name=name, status=status, seconds=round(time.perf_counter() - start, 1), detail=detail)
        print(f"[{status}] {name} ({result['seconds']} s): {detail}", flush=True)
        results.append(result)
    return results


def markdown(report: dict) -> str:
    env = report['environment']
    lines = ['# vit5seg self-check', '', f"device: {report['device']}" + (' (--quick)' if report['quick'] else ''), '',
             '## Environment', '', '| | |', '|---|---|']
    for key, value in env.items():
        if key == 'gpus':
            value = '; '.join(f"{g['name']} ({g['memory_gib']} GiB, sm {g['capability']})" for g in value) or 'none'
        lines.append(f'| {key} | {value} |')
    lines += ['', '## Checks', '', '| check | status | seconds | detail |', '|---|---|---|---|']
    lines += [f"| {c['name']} | {c['status']} | {c['seconds']} | {c['detail']} |" for c in report['checks']]
    lines += ['', '## Figures', '']
    if report['figures']:
        lines += ['| figure | value |', '|---|---|']
        lines += [f'| {k} | {v} |' for k, v in report['figures'].items()]
    else:
        lines.append('(none: --quick or --no-figures)')
    if report.get('estimates'):
        lines += ['', '## Run time and memory of the entry configs', '',
                  'Train steps only, at the step measured here (a DDP rank adds the gradient all-reduce; '
                  'data loading and validation are not counted).', '']
        lines += [f'- {estimate_line(row)}' for row in report['estimates']]
    return '\n'.join(lines) + '\n'


def default_device() -> str:
    """cuda where torch sees a GPU, and also where the machine has NVIDIA GPUs that torch
    does not see (so a broken node fails instead of passing on its CPU)."""
    return 'cuda' if torch.cuda.is_available() or nvidia_gpus() is not None else 'cpu'


def selfcheck(device: Optional[str] = None, gpus: Optional[int] = None, quick: bool = False, out='selfcheck',
              checks=None, repeats: Optional[int] = None, figures: bool = True) -> dict:
    device = device or default_device()
    if device == 'cuda' and not torch.cuda.is_available():
        raise SystemExit(f'error: {no_cuda_reason(nvidia_gpus())}')
    visible = torch.cuda.device_count() if device == 'cuda' else 0
    gpus = visible if gpus is None else gpus
    if device == 'cuda' and not 1 <= gpus <= visible:
        raise SystemExit(f'error: --gpus {gpus}, but {visible} GPUs are visible')
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    ctx = Context(device, gpus, out.resolve(), threads=torch.get_num_threads())
    report = dict(device=device, quick=quick, environment=environment())
    report['checks'] = run_checks(ctx, checks or list(CHECKS), quick)
    report['figures'] = {}
    if figures and not quick:
        width = 768 if device == 'cuda' else 384
        report['figures'].update(rms_norm_figures(device, width))
        report['figures'].update(segmentor_figures(device, repeats or (5 if device == 'cuda' else 2)))
        if device == 'cuda':
            report['estimates'] = schedule_estimates(ENTRY_CONFIGS.values(), device, gpus, repeats or 5)
            for row in report['estimates']:
                print(estimate_line(row), flush=True)
    (out / 'selfcheck.json').write_text(json.dumps(report, indent=2))
    (out / 'selfcheck.md').write_text(markdown(report))
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--device', choices=['cpu', 'cuda'],
                        help='default: cuda where torch sees a GPU or the machine has NVIDIA GPUs, else cpu')
    parser.add_argument('--gpus', type=int, help='GPUs for the DDP check (default: all visible)')
    parser.add_argument('--quick', action='store_true', help='only ' + ', '.join(QUICK) + '; no figures')
    parser.add_argument('--checks', nargs='+', choices=list(CHECKS), help='run only these checks')
    parser.add_argument('--repeats', type=int, help='timed rounds for the figures (default: 5 on CUDA, 2 on CPU)')
    parser.add_argument('--no-figures', action='store_true', help='checks only')
    parser.add_argument('--out', default='selfcheck', help='folder for selfcheck.json and selfcheck.md')
    args = parser.parse_args(argv)
    report = selfcheck(args.device, args.gpus, args.quick, args.out, args.checks, args.repeats, not args.no_figures)
    failed = [c['name'] for c in report['checks'] if c['status'] == 'fail']
    print(f"{len(report['checks']) - len(failed)} of {len(report['checks'])} checks passed or skipped; "
          f"report: {Path(args.out) / 'selfcheck.md'}")
    return 1 if failed else 0
