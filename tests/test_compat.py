"""Each fix in vit5seg.compat, shown working in a fresh interpreter (without the fix
each of these fails on the pinned stack: mmcv-lite, setuptools without pkg_resources)."""
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO


def _run(code: str):
    out = subprocess.run([sys.executable, '-c', textwrap.dedent(code)], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_mmseg_models_import_and_missing_ops_fail_clearly():
    stdout = _run("""
        import importlib.util, pkgutil
        import vit5seg
        import mmseg.models                     # imports mmcv.ops -> mmcv._ext
        from mmengine.utils.dl_utils import mmcv_full_available
        assert importlib.util.find_spec('mmcv._ext') is not None
        assert pkgutil.find_loader('mmcv._ext') is not None   # needs a module __spec__
        mmcv_full_available()
        import torch
        from mmcv.ops import nms
        try:
            nms(torch.zeros(1, 4), torch.zeros(1), 0.5)
        except ModuleNotFoundError as e:          # what mmseg's guarded imports catch
            print('ERR', e)
    """)
    assert "ERR mmcv compiled op 'nms' is not available" in stdout and 'mmcv-lite' in stdout and 'full mmcv' in stdout


def test_mmseg_config_inheritance_without_pkg_resources_and_mmsegs_metafiles_parsed_once():
    """``mmseg::`` bases resolve through importlib.metadata (fix 2). And each config that reads
    one made mmengine parse mmseg's model-index and every metafile again (53 YAML files,
    0.26 s): now the first parse reads them, later ones none, and an mmseg model config and a
    missing base resolve as before (fix 7). One interpreter for both: it must start cold."""
    stdout = _run("""
        import glob, os, tempfile
        import vit5seg, mmseg
        from mmengine.config import Config
        from mmengine.fileio.handlers.yaml_handler import YamlHandler
        from mmengine.utils import get_installed_path, is_installed
        parsed = []
        parse = YamlHandler.load_from_fileobj
        def counting(self, file, **kwargs):
            parsed.append(file)
            return parse(self, file, **kwargs)
        YamlHandler.load_from_fileobj = counting
        mim = os.path.join(os.path.dirname(mmseg.__file__), '.mim')
        metafiles = glob.glob(os.path.join(mim, 'configs', '*', 'metafile.y*ml'))
        first = Config.fromfile('configs/_base_/datasets/cityscapes.py')
        assert len(parsed) == 1 + len(metafiles)  # the model-index, then each metafile
        parsed.clear()
        second = Config.fromfile('configs/_base_/datasets/pascal_context_59.py')
        again = Config.fromfile('configs/_base_/datasets/cityscapes.py')
        assert parsed == [] and again.to_dict() == first.to_dict()
        folder = tempfile.mkdtemp()
        for name, base in (('psp', 'pspnet/pspnet_r50-d8_4xb2-40k_cityscapes-512x1024.py'),
                           ('missing', '_base_/datasets/no_such_dataset.py')):
            with open(os.path.join(folder, name + '.py'), 'w') as f:
                f.write(f"_base_ = ['mmseg::{base}']\\n")
        for _ in range(2):
            assert Config.fromfile(os.path.join(folder, 'psp.py')).model.decode_head.type == 'PSPHead'
            try:
                Config.fromfile(os.path.join(folder, 'missing.py'))
            except FileNotFoundError as e:
                assert 'no_such_dataset.py' in str(e)
            else:
                raise AssertionError('a missing mmseg:: base parsed')
        print(len(metafiles), first.train_dataloader.dataset.type, second.train_dataloader.dataset.type)
        path = os.path.join(folder, 'cfg.py')
        with open(path, 'w') as f:
            f.write("_base_ = ['mmseg::_base_/models/upernet_vit-b16_ln_mln.py']\\n"
                    "model = dict(backbone=dict(_delete_=True, type='ViT5', arch='vit5-base',"
                    " out_indices=(2, 5, 8, 11)))\\n")
        cfg = Config.fromfile(path)
        assert is_installed('mmsegmentation') and not is_installed('no-such-package-xyz')
        print(cfg.model.backbone.type, cfg.model.decode_head.type, get_installed_path('mmsegmentation'))
    """)
    metafiles, inheritance = stdout.strip().splitlines()[-2:]
    assert metafiles == '52 CityscapesDataset PascalContextDataset59'
    assert inheritance.startswith('ViT5 UPerHead') and inheritance.endswith('mmseg')


def test_mmengine_checkpoints_load_with_weights_only_and_getattr_stays_forbidden(tmp_path):
    import pickle

    import pytest
    import torch
    from mmengine.logging import HistoryBuffer, MessageHub

    hub = MessageHub.get_instance('compat-test')
    hub.update_scalar('train/loss', 1.5)
    hub.update_scalar('train/loss', 0.5)
    path = tmp_path / 'ckpt.pth'
    torch.save({'meta': {'iter': 3}, 'message_hub': hub.state_dict(), 'state_dict': {}}, path)
    assert 'builtins.getattr' not in torch.serialization.get_unsafe_globals_in_checkpoint(path)
    loaded = torch.load(path, weights_only=True)
    buffer = loaded['message_hub']['log_scalars']['train/loss']
    assert isinstance(buffer, HistoryBuffer) and buffer.mean() == 1.0 and buffer.statistics('min') == 0.5

    class Evil:
        def __reduce__(self):
            return (getattr, (print, '__call__'))
    evil = tmp_path / 'evil.pth'
    torch.save({'x': Evil()}, evil)
    with pytest.raises(pickle.UnpicklingError, match='getattr'):
        torch.load(evil, weights_only=True)


def test_init_dist_and_ddp_on_cpu():
    stdout = _run("""
        import os
        os.environ.update(RANK='0', LOCAL_RANK='0', WORLD_SIZE='1', MASTER_ADDR='127.0.0.1', MASTER_PORT='29541')
        import torch, vit5seg
        from mmengine.dist import init_dist, get_world_size
        from mmengine.model.wrappers import MMDistributedDataParallel
        init_dist('pytorch', backend='nccl')          # what the configs ask for
        ddp = MMDistributedDataParallel(module=torch.nn.Linear(2, 2), device_ids=[0])
        ddp(torch.randn(3, 2)).sum().backward()
        print(torch.distributed.get_backend(), get_world_size())
    """)
    assert stdout.split() == ['gloo', '1']


COMPILED_EXT = """
# Stands in for full mmcv's compiled mmcv/_ext*.so: every kernel mmcv.ops asks for exists and
# records its call; the few that the checks below reach return what the real kernel would
# shape (the values are not the point: which code ran is).
import torch
CALLS = []


def ms_deform_attn_forward(value, shapes, start, locations, weights, im2col_step):
    CALLS.append('ms_deform_attn_forward')
    return value.new_zeros(value.shape[0], locations.shape[1], value.shape[2] * value.shape[3])


def __getattr__(name):
    if name.startswith('__'):
        raise AttributeError(name)
    def kernel(*args, **kwargs):
        CALLS.append(name)
    return kernel
"""


def test_full_mmcv_keeps_its_compiled_kernels_and_gets_no_stand_in(tmp_path):
    """Where mmcv's compiled ops import (full mmcv), vit5seg installs no stand-in: not the
    import-time ``mmcv._ext`` module, not the pure-PyTorch ops; the CUDA branches of mmcv and
    mmseg reach the compiled kernels, as without vit5seg."""
    (tmp_path / '_ext.py').write_text(COMPILED_EXT)
    _run(f"""
        import sys
        import mmcv
        mmcv.__path__.append({str(tmp_path)!r})     # mmcv/_ext found as a file of the mmcv package
        import torch
        import vit5seg
        from vit5seg import compat, ops
        from vit5seg.utils.cuda_simulation import CudaLikeTensor, simulated_cuda
        import mmcv._ext as ext
        import mmcv.ops, mmcv.ops.focal_loss, mmcv.ops.psa_mask as psa, mmcv.ops.multi_scale_deform_attn as msda
        import mmseg.models.losses.focal_loss as mmseg_focal
        import mmdet.models.losses.focal_loss as mmdet_focal
        assert ext.__file__ == {str(tmp_path / '_ext.py')!r} and compat.has_compiled_mmcv_ops()
        assert not any(isinstance(f, compat._ExtStandInFinder) for f in sys.meta_path)
        assert msda.MultiScaleDeformableAttnFunction.__module__ == 'mmcv.ops.multi_scale_deform_attn'
        assert psa.psa_mask.__self__.__name__ == 'PSAMaskFunction'
        assert mmcv.ops.sigmoid_focal_loss is mmcv.ops.focal_loss.sigmoid_focal_loss
        assert mmcv.ops.sigmoid_focal_loss.__self__.__module__ == 'mmcv.ops.focal_loss'
        assert mmseg_focal._sigmoid_focal_loss is mmdet_focal._sigmoid_focal_loss is mmcv.ops.sigmoid_focal_loss

        cuda = lambda t: t.as_subclass(CudaLikeTensor)
        attn = mmcv.ops.MultiScaleDeformableAttention(embed_dims=32, num_heads=4, num_levels=1, num_points=2,
                                                      batch_first=True, dropout=0.)
        query = torch.randn(1, 16, 32)
        with simulated_cuda():
            attn(cuda(query), value=cuda(query), reference_points=torch.rand(1, 16, 1, 2),
                 spatial_shapes=torch.tensor([[4, 4]]), level_start_index=torch.tensor([0]))
            from mmseg.models.losses import FocalLoss
            FocalLoss(use_sigmoid=True)(cuda(torch.randn(2, 3, 4, 4)), cuda(torch.randint(0, 3, (2, 4, 4))))
            mmcv.ops.PSAMask('collect', (3, 3))(cuda(torch.randn(1, 9, 4, 4)))
        assert ext.CALLS == ['ms_deform_attn_forward', 'sigmoid_focal_loss_forward', 'psamask_forward'], ext.CALLS
        assert not any(ops.FALLBACK_CALLS.values()), ops.FALLBACK_CALLS   # no stand-in ran
    """)


@pytest.mark.slow
@pytest.mark.parametrize('api', ['from mmdet.apis import DetInferencer', 'from mmseg.apis import MMSegInferencer'])
def test_a_fresh_interpreter_importing_an_ecosystem_api_first_is_told_what_to_do(api):
    """With mmcv-lite, mmdet's and mmseg's APIs import mmcv's compiled ops: in a fresh interpreter
    without ``import vit5seg`` they stopped at mmcv's ``No module named 'mmcv._ext'``. The installed
    vit5seg-mmcv-hint.pth makes that one message saying what to do; after ``import vit5seg`` both work."""
    import subprocess
    import sys

    import vit5seg_mmcv_hint
    from vit5seg.compat import has_compiled_mmcv_ops
    pytest.importorskip('mmdet')
    alone = subprocess.run([sys.executable, '-c', api], capture_output=True, text=True, timeout=300)
    if has_compiled_mmcv_ops():   # full mmcv: nothing to say
        assert alone.returncode == 0, alone.stderr[-2000:]
    else:
        assert alone.returncode == 1
        assert alone.stderr.strip().splitlines()[-1] == f'ModuleNotFoundError: {vit5seg_mmcv_hint.MESSAGE}', \
            alone.stderr[-2000:]
    after = subprocess.run([sys.executable, '-c', f'import vit5seg; {api}'], capture_output=True, text=True,
                           timeout=300)
    assert after.returncode == 0, after.stderr[-2000:]


def test_mmdets_youtube_vis_evaluation_runs_on_numpy_2_and_numpy_keeps_no_alias(tmp_path):
    """mmdet's YTVISeval (YouTubeVISMetric's AP) calls np.float; with the fix, predictions equal to the
    annotations of synthetic clips score AP 1, and numpy itself still has no np.float."""
    out = _run(f"""
        import json, numpy
        import vit5seg
        from vit5seg.datasets import make_synthetic_data
        from mmdet.evaluation.functional import YTVIS, YTVISeval
        root = make_synthetic_data('ytvis', {str(tmp_path)!r}, num_train=1, num_val=3, size=48)
        gt = YTVIS(str(root / 'valid.json'))
        exact = [dict(video_id=a['video_id'], category_id=a['category_id'], score=1.0,
                      segmentations=a['segmentations']) for a in gt.dataset['annotations']]
        evaluation = YTVISeval(gt, gt.loadRes(exact), 'segm')
        evaluation.evaluate(); evaluation.accumulate(); evaluation.summarize()
        print('AP', evaluation.stats[0], 'numpy.float', hasattr(numpy, 'float'))
        """)
    assert 'AP 1.0 numpy.float False' in out, out


def test_a_config_text_is_formatted_by_yapf_once_and_reads_as_yapf_formats_it(monkeypatch):
    """pretty_text (the logged, dumped and checkpointed config) is yapf's formatting of the text,
    as mmengine writes it; an unchanged text is not formatted again, a changed one is, and a text
    yapf cannot parse fails every time (fix 9)."""
    from mmengine.config import Config
    from mmengine.config.config import FormatCode
    from yapf.yapflib import yapf_api
    runs = []
    format_tree = yapf_api.FormatTree  # what yapf's FormatCode calls for the formatting itself
    monkeypatch.setattr(yapf_api, 'FormatTree', lambda *a, **k: runs.append(1) or format_tree(*a, **k))
    cfg = Config(dict(model=dict(type='EncoderDecoder', backbone=dict(type='ViT5', depth=12, out_indices=(3, 7)),
                                 note=f'{id(runs)}'),  # a text no earlier test formatted
                      train_cfg=dict(type='IterBasedTrainLoop', max_iters=80000)))
    first = cfg.pretty_text
    assert runs == [1]
    assert cfg.pretty_text == first and Config(cfg.to_dict()).pretty_text == first and runs == [1]
    # mmengine's style (Config.pretty_text) applied by yapf itself to the unformatted text
    style = dict(based_on_style='pep8', blank_line_before_nested_class_or_def=True,
                 split_before_expression_after_opening_paren=True)
    plain = Config(cfg.to_dict(), format_python_code=False).pretty_text
    assert first == yapf_api.FormatCode(plain, style_config=style)[0] != plain and len(runs) == 2
    cfg.train_cfg.max_iters = 160000
    assert cfg.pretty_text != first and 'max_iters=160000' in cfg.pretty_text and len(runs) == 3
    for _ in range(2):
        with pytest.raises(Exception):
            FormatCode('model = dict(type=', style_config=style)
