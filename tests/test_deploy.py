"""ONNX export of the whole segmentor (fixed and dynamic sizes), the ONNX Runtime slide
helper against mmseg's slide inference, and the export errors."""
import contextlib
import io

import numpy as np
import pytest
import torch
from mmengine.config import Config, ConfigDict
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample
from mmseg.utils import register_all_modules

from conftest import REPO, run_script
from vit5seg.deploy import OnnxSession, slide_windows
from vit5seg.deploy.export import (AdaptiveAvgPool2dByMatmul, ExportError, OnnxSegmentor, dynamic_export_supported,
                                   export_onnx, generated_image, main)
from vit5seg.engine.launch import run_tool

pytest.importorskip('onnxruntime')  # the deploy extra (installed with the tests)
TINY = REPO / 'configs' / 'tiny' / 'vit5_upernet_synthetic.py'


@pytest.fixture(scope='module')
def tiny_checkpoint(tmp_path_factory):
    register_all_modules(init_default_scope=True)
    torch.manual_seed(0)
    model = MODELS.build(Config.fromfile(str(TINY)).model)
    model.init_weights()
    path = tmp_path_factory.mktemp('ckpt') / 'tiny.pth'
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, path)
    return path


@pytest.fixture(scope='module')
def dynamic_export(tiny_checkpoint, tmp_path_factory):
    if not dynamic_export_supported():  # the second test environment's older torch
        pytest.skip(f'torch {torch.__version__}: the dynamic-shape export needs torch >= 2.10')
    out = tmp_path_factory.mktemp('onnx') / 'dynamic.onnx'
    assert main([str(TINY), str(tiny_checkpoint), '--out', str(out), '--dynamic', '--example-shape', '64', '96',
                 '--repeats', '1']) == 0
    return out


@pytest.fixture(scope='module')
def fixed_export(tiny_checkpoint, tmp_path_factory):
    """The tool's default export: the config's crop (96x96), its test settings stored; and what it printed."""
    out, printed = tmp_path_factory.mktemp('onnx') / 'fixed.onnx', io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main([str(TINY), str(tiny_checkpoint), '--out', str(out), '--repeats', '1']) == 0
    return out, printed.getvalue()


def _loaded(checkpoint):
    from vit5seg.deploy.export import load_model
    return load_model(TINY, checkpoint)


def test_fixed_size_export_matches_pytorch_and_refuses_other_sizes(tiny_checkpoint, fixed_export):
    out, printed = fixed_export
    assert 'exported' in printed and '1x3x96x96' in printed and '| 96x96 |' in printed  # the config's crop
    session = OnnxSession(out)
    assert session.fixed_hw == (96, 96)
    image = generated_image((96, 96))
    batch = torch.from_numpy(image).permute(2, 0, 1)[None].float()
    logits, labels = session.run(batch.numpy())
    with torch.no_grad():
        ref_logits, ref_labels = OnnxSegmentor(_loaded(tiny_checkpoint))(batch)
    assert logits.shape == (1, 150, 96, 96) and labels.shape == (1, 96, 96) and labels.dtype == np.int64
    assert np.abs(logits - ref_logits.numpy()).max() < 1e-4 and (labels == ref_labels.numpy()).all()
    with pytest.raises(ValueError, match='exported for 96x96 inputs, got 64x96: export with --dynamic'):
        session.run(np.zeros((1, 3, 64, 96), np.float32))


def test_the_graph_holds_the_preprocessing_bgr_and_mean_std(tiny_checkpoint, dynamic_export):
    """Same image through mmseg's own pipeline pieces (data preprocessor + predict) and the graph."""
    model = _loaded(tiny_checkpoint)
    image = generated_image((80, 112), seed=3)
    sample = SegDataSample(metainfo=dict(img_shape=(80, 112), ori_shape=(80, 112), pad_shape=(80, 112)))
    data = model.data_preprocessor(dict(inputs=[torch.from_numpy(image).permute(2, 0, 1)], data_samples=[sample]))
    with torch.no_grad():
        pred = model.predict(data['inputs'], data['data_samples'])[0]
    logits, labels = OnnxSession(dynamic_export).run(image.transpose(2, 0, 1)[None].astype(np.float32))
    assert np.abs(logits[0] - pred.seg_logits.data.numpy()).max() < 1e-4
    assert (labels[0] == pred.pred_sem_seg.data[0].numpy()).mean() == 1.0


@pytest.mark.parametrize('hw', [(100, 170), (50, 130)], ids=['larger', 'shorter-than-crop'])
def test_onnx_slide_equals_mmseg_slide_inference(tiny_checkpoint, dynamic_export, hw):
    model = _loaded(tiny_checkpoint)
    model.test_cfg = ConfigDict(mode='slide', crop_size=(64, 64), stride=(48, 48))
    image = generated_image(hw, seed=1)
    sample = SegDataSample(metainfo=dict(img_shape=hw, ori_shape=hw, pad_shape=hw))
    data = model.data_preprocessor(dict(inputs=[torch.from_numpy(image).permute(2, 0, 1)], data_samples=[sample]))
    with torch.no_grad():
        pred = model.predict(data['inputs'], data['data_samples'])[0]
    logits, labels = OnnxSession(dynamic_export).slide(image, crop=(64, 64), stride=(48, 48))
    assert logits.shape == (150, *hw)
    assert np.abs(logits - pred.seg_logits.data.numpy()).max() < 1e-4
    assert (labels == pred.pred_sem_seg.data[0].numpy()).mean() == 1.0


def test_slide_windows_are_mmsegs():
    windows = list(slide_windows((100, 170), (64, 64), (48, 48)))
    assert windows[0] == (0, 64, 0, 64) and windows[-1] == (36, 100, 106, 170)
    assert len(windows) == 2 * 4
    assert list(slide_windows((50, 60), (64, 64), (48, 48))) == [(0, 50, 0, 60)]


def test_a_fixed_export_refuses_slide_it_cannot_do(fixed_export):
    with pytest.raises(ValueError, match='export with --dynamic'):  # an image shorter than the crop
        OnnxSession(fixed_export[0]).slide(generated_image((50, 200)), crop=(96, 96), stride=(64, 64))


@pytest.mark.parametrize('size', [(1, 1), (2, 3), (6, 6), (3, 7)])
@pytest.mark.parametrize('hw', [(2, 2), (5, 9), (13, 11), (32, 24)])
def test_matmul_adaptive_pool_equals_torchs(size, hw):
    x = torch.randn(2, 4, *hw)
    expected = torch.nn.functional.adaptive_avg_pool2d(x, size)
    torch.testing.assert_close(AdaptiveAvgPool2dByMatmul(size)(x), expected, rtol=1e-5, atol=1e-6)


def test_a_checkpoint_that_does_not_fit_is_one_error(tiny_checkpoint, tmp_path):
    deit3 = REPO / 'configs' / 'tiny' / 'deit3_upernet_synthetic.py'
    out = run_script(REPO / 'tools' / 'export_onnx.py', deit3, tiny_checkpoint, '--out', tmp_path / 'x.onnx')
    assert out.returncode == 1
    assert 'error:' in out.stderr and 'does not fit EncoderDecoder' in out.stderr
    assert 'unexpected in checkpoint' in out.stderr and 'backbone.reg_token' in out.stderr
    assert 'Traceback' not in out.stderr and not (tmp_path / 'x.onnx').exists()


def test_a_dynamic_export_on_a_torch_whose_exporter_cannot_is_one_error(tiny_checkpoint, tmp_path, monkeypatch):
    monkeypatch.setattr(torch, '__version__', '2.9.1+cu128')
    with pytest.raises(ExportError, match=r'^--dynamic needs torch >= 2.10, .* this is torch 2.9.1\+cu128. Export at '
                                          r'a fixed size'):
        export_onnx(_loaded(tiny_checkpoint), tmp_path / 'd.onnx', shape=(64, 64), dynamic=True)
    assert not (tmp_path / 'd.onnx').exists()


class Singular(torch.nn.Module):
    """A classifier that calls an op ONNX has no conversion for."""

    def __init__(self, conv):
        super().__init__()
        self.conv = conv

    def forward(self, x):
        y = self.conv(x)
        return y * torch.linalg.svdvals(y.flatten(2))[..., :1, None]


def test_an_op_the_exporter_cannot_take_names_the_op_and_the_module(tiny_checkpoint, tmp_path, capsys):
    model = _loaded(tiny_checkpoint)
    model.decode_head.conv_seg = Singular(model.decode_head.conv_seg)
    with pytest.raises(ExportError) as info:
        export_onnx(model, tmp_path / 'bad.onnx', shape=(64, 64))
    message = str(info.value)
    assert "cannot take op '_linalg_svd' (called by segmentor.decode_head.conv_seg (Singular))" in message
    assert '\x1b' not in message
    with pytest.raises(SystemExit) as exit_info:  # what the tool prints: one line, exit 1
        run_tool(lambda argv: (_ for _ in ()).throw(info.value))
    assert exit_info.value.code == 1 and "error: the ONNX exporter cannot take op '_linalg_svd'" in capsys.readouterr().err


def test_the_tool_exits_1_when_onnxruntime_and_mmseg_disagree(tiny_checkpoint, tmp_path, monkeypatch, capsys):
    import vit5seg.deploy.export as export
    bad = dict(size='96x96', max_abs_diff=2e-3, label_agreement=0.9995, onnxruntime_s=0.1, mmseg_s=0.1)
    monkeypatch.setattr(export, 'compare_with_mmseg', lambda *args, **kwargs: [bad])
    assert main([str(TINY), str(tiny_checkpoint), '--out', str(tmp_path / 'm.onnx')]) == 1
    assert "error: ONNX Runtime and mmseg's inference_model differ at 96x96" in capsys.readouterr().out


def test_the_check_is_mmsegs_inference_model_and_a_changed_graph_fails_it(tiny_checkpoint, tmp_path, monkeypatch,
                                                                          capsys):
    """The tool holds ONNX Runtime to mmseg's own inference_model, not to the graph it exported: a
    graph that normalises with the wrong mean (exported and checked in PyTorch alike) fails."""
    from vit5seg.deploy import export
    forward = export.OnnxSegmentor.forward

    def shifted(self, image):
        return forward(self, image + 8.0)
    monkeypatch.setattr(export.OnnxSegmentor, 'forward', shifted)
    assert main([str(TINY), str(tiny_checkpoint), '--out', str(tmp_path / 'm.onnx'), '--repeats', '1']) == 1
    assert "error: ONNX Runtime and mmseg's inference_model differ at 96x96" in capsys.readouterr().out


def test_predict_applies_the_configs_test_resize_and_mode_like_inference_model(tiny_checkpoint, dynamic_export):
    """A photo whose size is not the test scale: the graph alone sees it as given, predict()
    resizes it as the config's test pipeline does, runs the config's mode and returns labels
    at the photo's size, agreeing with inference_model."""
    from vit5seg.apis import inference_model, init_model
    session = OnnxSession(dynamic_export)
    assert session.settings == dict(resize=dict(scale=[160, 128], keep_ratio=True, backend='cv2'), mode='whole',
                                    align_corners=False)
    photo = generated_image((150, 230), seed=3)
    slide_cfg = dict(mode='slide', crop_size=(64, 64), stride=(48, 48))
    # whole, slide, and the resize by PIL (EoMT's ADE20K configs): the photo is shrunk, where the kernels differ
    for options in ({}, {'model.test_cfg': slide_cfg}, {'test_pipeline.1.backend': 'pillow'}):
        model = init_model(str(TINY), str(tiny_checkpoint), device='cpu', cfg_options=options or None)
        if 'model.test_cfg' in options:
            session.settings.update(mode='slide', crop_size=[64, 64], stride=[48, 48])
        if 'test_pipeline.1.backend' in options:
            session.settings.update(mode='whole')
            session.settings['resize']['backend'] = 'pillow'
        expected = inference_model(model, photo).pred_sem_seg.data[0].numpy()
        logits, labels = session.predict(photo)
        assert logits.shape == (150, 150, 230) and labels.shape == (150, 230)
        assert (labels == expected).mean() >= 0.995, (options, (labels == expected).mean())
    _, as_given = session.run(photo.transpose(2, 0, 1)[None].astype(np.float32))
    assert as_given.shape == (1, 150, 230)  # the graph alone: no resize, whole image


def test_predict_needs_a_size_the_export_can_take(fixed_export, tmp_path):
    import onnx
    with pytest.raises(ValueError, match='tests this photo at 128x158, but the model was exported for 96x96 only: '
                                         'export with --dynamic'):
        OnnxSession(fixed_export[0]).predict(generated_image((130, 160)))
    model = onnx.load(str(fixed_export[0]))  # as a file exported before the settings were stored
    del model.metadata_props[:]
    onnx.save(model, str(tmp_path / 'old.onnx'))
    with pytest.raises(ValueError, match='holds no test settings'):
        OnnxSession(tmp_path / 'old.onnx').predict(generated_image((96, 96)))
