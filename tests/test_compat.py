"""Each fix in vit5seg.compat, shown working in a fresh interpreter (without the fix
each of these fails on the pinned stack: mmcv-lite, setuptools without pkg_resources)."""
import subprocess
import sys
import textwrap

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


def test_mmseg_config_inheritance_without_pkg_resources():
    stdout = _run("""
        import tempfile, os
        import vit5seg
        from mmengine.config import Config
        from mmengine.utils import get_installed_path, is_installed
        path = os.path.join(tempfile.mkdtemp(), 'cfg.py')
        with open(path, 'w') as f:
            f.write("_base_ = ['mmseg::_base_/models/upernet_vit-b16_ln_mln.py']\\n"
                    "model = dict(backbone=dict(_delete_=True, type='ViT5', arch='vit5-base',"
                    " out_indices=(2, 5, 8, 11)))\\n")
        cfg = Config.fromfile(path)
        assert is_installed('mmsegmentation') and not is_installed('no-such-package-xyz')
        print(cfg.model.backbone.type, cfg.model.decode_head.type, get_installed_path('mmsegmentation'))
    """)
    assert stdout.startswith('ViT5 UPerHead') and stdout.strip().endswith('mmseg')


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


def test_a_compiled_mmcv_ext_keeps_its_kernels():
    """With full mmcv (a real ``mmcv._ext``) nothing is replaced by the pure-PyTorch stand-ins."""
    _run("""
        import sys, types
        class CompiledExt(types.ModuleType):   # what full mmcv provides: every kernel mmcv.ops asks for
            def __getattr__(self, name):
                if name.startswith('__'):
                    raise AttributeError(name)
                return lambda *args, **kwargs: None
        sys.modules['mmcv._ext'] = CompiledExt('mmcv._ext')
        import vit5seg
        from vit5seg import compat
        import mmcv.ops.multi_scale_deform_attn as msda, mmcv.ops.psa_mask as psa
        assert compat.has_compiled_mmcv_ops()
        assert msda.MultiScaleDeformableAttnFunction.__module__ == 'mmcv.ops.multi_scale_deform_attn'
        assert psa.psa_mask.__self__.__name__ == 'PSAMaskFunction'
    """)
