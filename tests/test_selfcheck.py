"""tools/selfcheck.py: the --quick CPU subset end to end, what a failing check does, and
the report's form. (The full CPU run, with DDP, compile and figures, is in the closing
notes and docs/gpus.md: about 2.5 minutes on 2 cores.)"""
import json
import subprocess
import sys

import pytest

from conftest import REPO
from vit5seg import selfcheck


def test_quick_cpu_run_passes_and_writes_the_report(tmp_path):
    out = subprocess.run([sys.executable, str(REPO / 'tools' / 'selfcheck.py'), '--device', 'cpu', '--quick',
                          '--out', str(tmp_path / 'report')], capture_output=True, text=True, timeout=600,
                         env={**__import__('os').environ, 'OMP_NUM_THREADS': '2'})
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    report = json.loads((tmp_path / 'report' / 'selfcheck.json').read_text())
    assert set(report) >= {'environment', 'checks', 'figures'}
    env = report['environment']
    assert env['torch'] and env['mmseg'] == '1.2.2' and env['mmcv'].startswith('mmcv-lite')
    assert env['mmcv_compiled_ops'] is False and env['gpus'] == []
    checks = {c['name']: c for c in report['checks']}
    assert list(checks) == list(selfcheck.CHECKS)
    for name, check in checks.items():
        assert set(check) == {'name', 'status', 'seconds', 'detail'}
        assert check['status'] == ('pass' if name in selfcheck.QUICK else 'skip'), check
    assert 'resumed to 4' in checks['train_resume_test']['detail']
    assert 'ms_deform_attn' in checks['mmcv_fallbacks']['detail']
    assert report['figures'] == {}
    text = (tmp_path / 'report' / 'selfcheck.md').read_text()
    assert '| train_resume_test | pass |' in text and '| mmcv_compiled_ops | False |' in text
    assert '[pass] heads' in out.stdout


def test_a_failing_check_is_reported_and_exits_1(tmp_path, monkeypatch, capsys):
    def broken(ctx):
        raise RuntimeError('the GPU caught fire\nsecond line')
    monkeypatch.setitem(selfcheck.CHECKS, 'checkpoint_conversion', broken)
    code = selfcheck.main(['--device', 'cpu', '--quick', '--checks', 'checkpoint_conversion', 'amp_bf16',
                           '--out', str(tmp_path)])
    assert code == 1
    checks = json.loads((tmp_path / 'selfcheck.json').read_text())['checks']
    assert checks[0] == dict(name='checkpoint_conversion', status='fail', seconds=checks[0]['seconds'],
                             detail='RuntimeError: the GPU caught fire')
    assert checks[1]['status'] == 'skip'
    assert '0 of 2' not in capsys.readouterr().out


def test_cpu_only_checks_say_why_they_skip(tmp_path):
    report = selfcheck.selfcheck('cpu', checks=['amp_bf16', 'amp_fp16'], quick=False, out=tmp_path,
                                 repeats=1, figures=False)
    assert [c['status'] for c in report['checks']] == ['skip', 'skip']
    assert all('CUDA only' in c['detail'] for c in report['checks'])


def test_cuda_without_a_gpu_is_one_clear_error(tmp_path):
    with pytest.raises(SystemExit, match='--device cuda, but torch sees no CUDA GPU'):
        selfcheck.selfcheck('cuda', out=tmp_path)
