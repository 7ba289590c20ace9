"""Mixed-precision inference switches: which dtype a device can take, what runs under
autocast, and that RMSNorm still normalises in float32 there. (A trained model's masks
and mIoU under --amp: tests/test_tools_e2e.py::test_demo_training_learns.)"""
import pytest
import torch

from vit5seg.utils.amp import amp_dtype, enable_amp
from vit5seg.engine.launch import test_parser as tool_parser  # not collected as a test
from vit5seg.models.layers import RMSNorm


def test_amp_dtype_per_device(monkeypatch):
    assert amp_dtype('cpu', 'bf16') is torch.bfloat16 and amp_dtype('cpu', 'fp16') is torch.float16
    with pytest.raises(ValueError, match="amp must be one of"):
        amp_dtype('cpu', 'fp8')
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match='torch sees no CUDA GPU'):
            amp_dtype('cuda:0', 'bf16')
    # a GPU without bfloat16 (as a V100): one error that says what to use instead
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'is_bf16_supported', lambda *a, **k: False)
    monkeypatch.setattr(torch.cuda, 'get_device_name', lambda *a: 'Tesla V100-SXM2-32GB')
    with pytest.raises(ValueError, match='Tesla V100-SXM2-32GB has no bfloat16; use --amp-dtype fp16'):
        amp_dtype('cuda:0', 'bf16')
    assert amp_dtype('cuda:0', 'fp16') is torch.float16


class Probe(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.seen = []

    def forward(self, x):
        self.seen.append(torch.is_autocast_enabled('cpu'))
        return self.linear(x)

    def test_step(self, x):
        return self(x)


def test_enable_amp_wraps_forward_and_test_step_once():
    model = enable_amp(Probe(), 'bf16')
    assert model(torch.randn(2, 4)).dtype is torch.bfloat16
    assert model.test_step(torch.randn(2, 4)).dtype is torch.bfloat16
    assert model.seen == [True, True]
    assert enable_amp(model, 'bf16').forward is model.forward  # not wrapped twice
    plain = enable_amp(Probe(), None)
    assert plain(torch.randn(2, 4)).dtype is torch.float32 and plain.seen == [False]


def test_rmsnorm_normalises_in_float32_under_autocast():
    norm = RMSNorm(16, impl='exact')
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    x = (torch.randn(3, 16) * 40).bfloat16()
    with torch.autocast('cpu', dtype=torch.bfloat16):
        y = norm(x)
    x32 = x.float()
    expected = (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-6)).to(torch.bfloat16) * norm.weight
    assert torch.equal(y, expected)


def test_test_tool_takes_amp_flags():
    args = tool_parser().parse_args(['c.py', 'k.pth', '--amp', '--amp-dtype', 'fp16'])
    assert args.amp and args.amp_dtype == 'fp16'
    assert tool_parser().parse_args(['c.py', 'k.pth']).amp is False


@pytest.mark.skipif(torch.cuda.is_available(), reason='needs a machine without a GPU')
def test_infer_tool_with_amp_on_a_missing_gpu_is_one_line(tmp_path):
    from conftest import REPO, run_script
    out = run_script(REPO / 'tools' / 'infer.py', REPO / 'configs' / 'tiny' / 'vit5_upernet_synthetic.py', 'no.pth',
                   'x.jpg', '--out-dir', tmp_path, '--device', 'cuda:0', '--amp')
    assert out.returncode == 1 and 'Traceback' not in out.stderr
    assert 'error: --amp bf16 on cuda:0: torch sees no CUDA GPU' in out.stderr
