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
    assert "ERR mmcv compiled op 'nms' is not available" in stdout and 'mmcv-lite' in stdout


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
