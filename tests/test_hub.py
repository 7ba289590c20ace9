"""Checkpoints by URL: downloaded once into torch's hub cache, atomically, resumably,
verified; every place that takes a checkpoint path takes a URL. Served from 127.0.0.1."""
import errno
import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time

import pytest
import torch
from local_server import closed_port_url, serve
from mmengine.config import Config
from mmengine.runner.checkpoint import CheckpointLoader

from conftest import REPO, run_script
from test_models_checkpoint import _Exploit, _authors_file, _vit5
from vit5seg import hub
from vit5seg.engine import launch
from vit5seg.models.checkpoint import CheckpointError, read_checkpoint


@pytest.fixture
def torch_home(tmp_path, monkeypatch):
    monkeypatch.setenv('TORCH_HOME', str(tmp_path / 'torch_home'))
    return tmp_path / 'torch_home' / 'hub' / 'checkpoints'


@pytest.fixture
def served(tmp_path):
    """The authors-layout tiny file, served; yields (server, reference model, file, its sha256)."""
    folder = tmp_path / 'www'
    folder.mkdir()
    ref, path = _authors_file(folder)
    with serve(folder) as server:
        yield server, ref, path, hashlib.sha256(path.read_bytes()).hexdigest()


def _features_equal(model, ref):
    img = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        return (model.forward_features(img) - ref.forward_features(img)).abs().max() < 1e-5


def test_url_downloads_once_into_torch_home_then_loads_without_the_server(torch_home, tmp_path):
    folder = tmp_path / 'www'
    folder.mkdir()
    ref, path = _authors_file(folder)
    with serve(folder) as server:
        url = server.url(path.name)
        model = _vit5(init_cfg=dict(type='Pretrained', checkpoint=url))
        model.init_weights()
        assert _features_equal(model, ref)
        cached = torch_home / path.name
        assert cached.read_bytes() == path.read_bytes()
        assert not list(torch_home.glob('*.partial'))
        again = _vit5(pretrained=url)  # mmseg's pretrained= is the same path
        again.init_weights()
        assert len(server.requests) == 1
    # the server is gone: the cache answers
    third = _vit5(init_cfg=dict(type='Pretrained', checkpoint=url))
    third.init_weights()
    assert _features_equal(third, ref)


def test_sha256_checked_on_download_and_on_cache_hits(torch_home, served):
    server, ref, path, digest = served
    url = server.url(path.name)
    wrong = '0' * 64
    with pytest.raises(hub.DownloadError) as err:
        read_checkpoint(url, sha256=wrong)
    assert digest in str(err.value) and wrong in str(err.value) and url in str(err.value)
    assert not (torch_home / path.name).exists() and not list(torch_home.glob('*.partial'))
    model = _vit5(init_cfg=dict(type='Pretrained', checkpoint=url, sha256=digest[:12]))
    model.init_weights()
    assert _features_equal(model, ref)
    (torch_home / path.name).write_bytes(path.read_bytes()[:-1] + b'x')  # the cached copy went bad
    with pytest.raises(hub.DownloadError, match=f'cached copy of {url}.*expected {digest}.*delete it'):
        read_checkpoint(url, sha256=digest)
    (torch_home / path.name).write_bytes(path.read_bytes()[:4000])  # cut short (e.g. a server that sent no length)
    with pytest.raises(CheckpointError, match=f'truncated.*the cached download of {url}: delete it'):
        read_checkpoint(url)
    with pytest.raises(hub.DownloadError, match='not a hex digest'):
        hub.check_sha256(path, 'abc')


def test_server_closing_mid_file_leaves_nothing_complete_looking_and_the_next_try_resumes(torch_home, served):
    server, ref, path, digest = served
    url = server.url(path.name)
    size = path.stat().st_size
    server.cut_after = size // 3
    with pytest.raises(hub.DownloadError, match=f'cannot download {url}.*run again to resume'):
        read_checkpoint(url)
    assert not (torch_home / path.name).exists()
    partial = torch_home / f'{path.name}.partial'
    assert 0 < partial.stat().st_size < size
    kept = partial.stat().st_size
    server.cut_after = None
    model = _vit5(init_cfg=dict(type='Pretrained', checkpoint=url, sha256=digest))
    model.init_weights()
    assert _features_equal(model, ref)
    assert server.requests[-1][1] == f'bytes={kept}-'  # resumed, not restarted
    assert not partial.exists()


def test_server_without_range_support_restarts_the_download(torch_home, served):
    server, _, path, digest = served
    url = server.url(path.name)
    server.cut_after = path.stat().st_size // 3
    with pytest.raises(hub.DownloadError, match='run again to resume'):
        hub.cached_download(url, progress=False)
    server.cut_after, server.ranges = None, False  # it answers a range request with the whole file (200)
    assert hub.sha256sum(hub.cached_download(url, progress=False)) == digest
    assert server.requests[-1][1] is not None  # a range was asked for, and the whole file taken instead


@pytest.mark.parametrize('validator', ['etag', 'last-modified'])
def test_a_file_replaced_upstream_starts_over_instead_of_splicing_two_files(torch_home, served, validator):
    """The resumed request names the version its bytes came from (If-Range); a server that has
    another version by then sends the whole new file, not the new file's tail after the old head."""
    server, _, path, _ = served
    server.validator = validator
    url = server.url(path.name)
    old = path.read_bytes()
    server.cut_after = len(old) // 2
    with pytest.raises(hub.DownloadError, match='run again to resume'):
        hub.cached_download(url, progress=False)
    new = bytes(reversed(old))  # same size, other bytes: a re-uploaded file
    path.write_bytes(new)
    os.utime(path, (path.stat().st_atime, path.stat().st_mtime + 3600))  # and a later Last-Modified
    server.cut_after = None
    got = hub.cached_download(url, progress=False)
    assert got.read_bytes() == new
    assert server.requests[-1][1] == f'bytes={len(old) // 2}-' and server.if_ranges[-1] is not None
    assert sorted(p.name for p in torch_home.iterdir()) == [path.name, f'{path.name}.lock']


def test_without_a_validator_a_partial_file_is_not_kept_to_resume(torch_home, served):
    """A server that names no version (no ETag, no Last-Modified) gives nothing to resume under."""
    server, _, path, digest = served
    server.validator, server.cut_after = None, path.stat().st_size // 2
    with pytest.raises(hub.DownloadError, match='names no version of the file, so the next try starts over'):
        hub.cached_download(server.url(path.name), progress=False)
    assert not list(torch_home.glob('*.partial*'))
    server.cut_after = None
    assert hub.sha256sum(hub.cached_download(server.url(path.name), progress=False)) == digest
    assert server.requests[-1][1] is None  # started over


def test_a_complete_partial_file_is_kept_and_put_in_place(torch_home, served):
    """A run killed after the last byte but before the rename: the next asks for the bytes past
    the end, the server answers 416 with the file's size, and the partial file is the file."""
    server, _, path, digest = served
    data = path.read_bytes()
    server.cut_after = len(data) // 2
    with pytest.raises(hub.DownloadError, match='run again to resume'):
        hub.cached_download(server.url(path.name), progress=False)
    partial = torch_home / f'{path.name}.partial'
    with open(partial, 'ab') as f:  # the rest arrived; the process died before renaming
        f.write(data[partial.stat().st_size:])
    server.cut_after = None
    got = hub.cached_download(server.url(path.name), sha256=digest, progress=False)
    assert hub.sha256sum(got) == digest and not partial.exists()
    assert server.requests[-1][1] == f'bytes={len(data)}-' and len(server.requests) == 2  # nothing fetched again


def test_a_download_larger_than_the_free_disk_is_refused_before_it_starts(torch_home, served, monkeypatch):
    server, _, path, _ = served
    torch_home.mkdir(parents=True)
    monkeypatch.setattr(hub.shutil, 'disk_usage', lambda p: hub.shutil._ntuple_diskusage(1 << 30, 1 << 30, 1000))
    with pytest.raises(hub.DownloadError, match=r'needs \d\.\d MiB more, .* has 0\.0 MiB free'):
        hub.cached_download(server.url(path.name), progress=False)
    assert not (torch_home / path.name).exists()


def test_offline_error_names_url_cache_path_and_the_way_out(torch_home):
    url = closed_port_url('vit5_base_patch16_224.pth')
    with pytest.raises(hub.DownloadError) as err:
        _vit5(init_cfg=dict(type='Pretrained', checkpoint=url)).init_weights()
    text = str(err.value)
    assert url in text and str(torch_home / 'vit5_base_patch16_224.pth') in text
    assert 'download_weights.py' in text and 'local path' in text
    assert not (torch_home / 'vit5_base_patch16_224.pth').exists()
    assert not list(torch_home.glob('*.partial'))


FETCH = """
import json, sys, warnings
import vit5seg
from vit5seg import hub
url = sys.argv[1]
try:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        path = hub.cached_download(url, progress=False)
    print(json.dumps(dict(path=str(path), sha256=hub.sha256sum(path), warnings=[str(w.message) for w in caught])))
except hub.DownloadError as e:  # and the builtin classes a caller of mmengine's loaders catches
    builtin = [c.__name__ for c in (PermissionError, FileNotFoundError, OSError) if isinstance(e, c)]
    print(json.dumps(dict(error=str(e), type=type(e).__name__, builtin=builtin)))
"""


def _fetch_cmd(url):
    return [sys.executable, '-c', FETCH, url]


@pytest.mark.slow  # > 10 s on 2 cores (the quick tier: <= 3 min)
def test_concurrent_processes_share_one_download(torch_home, served):
    """Three ranks start together: one downloads, the others wait on the lock and read it."""
    server, _, path, digest = served
    server.delay = 0.005  # long enough that the others arrive mid-download
    url = server.url(path.name)
    procs = [subprocess.Popen(_fetch_cmd(url), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_env(torch_home)) for _ in range(3)]
    results = [json.loads(p.communicate(timeout=120)[0].strip().splitlines()[-1]) for p in procs]
    assert [r.get('sha256') for r in results] == [digest] * 3, results
    assert len(server.requests) == 1
    assert sorted(p.name for p in torch_home.iterdir()) == [path.name, f'{path.name}.lock']


def _read_only_run(folder, cmd, env):
    """Run ``cmd`` where ``folder`` cannot be written: a read-only bind mount in a mount
    namespace of its own as root (as a ``:ro`` container volume gives), its permission
    bits otherwise (root ignores those)."""
    if os.geteuid() == 0:
        script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
        return subprocess.run(['unshare', '--user', '--map-root-user', '--mount', 'sh', '-c', script, str(folder),
                               *cmd], capture_output=True, text=True, env=env, timeout=120)
    modes = {p: p.stat().st_mode for p in [folder, *folder.rglob('*')] if p.is_dir()}
    for p in modes:
        p.chmod(0o555)
    try:
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    finally:
        for p, mode in modes.items():
            p.chmod(mode)


@pytest.mark.slow  # > 10 s on 2 cores (the quick tier: <= 3 min)
def test_a_read_only_cache_serves_its_files_and_names_the_missing_one(torch_home, served):
    server, ref, path, digest = served
    url = server.url(path.name)
    hub.cached_download(url, progress=False)
    (torch_home / f'{path.name}.lock').unlink()  # as a cache filled elsewhere and copied in
    before = sorted(p.name for p in torch_home.iterdir())
    probe = _read_only_run(torch_home, ['sh', '-c', 'touch "$0"/x', str(torch_home)], _env(torch_home))
    assert probe.returncode != 0  # the folder really is read-only for the child
    cached = _read_only_run(torch_home, _fetch_cmd(url), _env(torch_home))
    result = json.loads(cached.stdout.strip().splitlines()[-1])
    assert result == dict(path=str(torch_home / path.name), sha256=digest, warnings=[]), cached.stderr
    missing_url = server.url('vit5_large_patch16_224.pth')
    missing = _read_only_run(torch_home, _fetch_cmd(missing_url), _env(torch_home))
    error = json.loads(missing.stdout.strip().splitlines()[-1])
    assert error['type'] == 'UnwritableCache' and error['builtin'] == ['PermissionError', 'OSError'], missing.stderr
    assert error['error'].startswith(f'{missing_url} is not in the cache and the cache folder cannot be written '
                                     f'({torch_home}: ')
    assert str(torch_home / 'vit5_large_patch16_224.pth') in error['error']
    assert 'download_weights.py' in error['error'] and 'TORCH_HOME' in error['error']
    assert sorted(p.name for p in torch_home.iterdir()) == before  # nothing written
    assert len(server.requests) == 1  # and nothing fetched


def test_a_filesystem_without_locks_downloads_lock_free_with_a_warning(torch_home, served, monkeypatch):
    import fcntl
    server, _, path, digest = served

    def no_locks(fd, op):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))
    monkeypatch.setattr(fcntl, 'flock', no_locks)
    with pytest.warns(UserWarning, match=f'{torch_home} does not support file locks .*without one'):
        got = hub.cached_download(server.url(path.name), progress=False)
    assert hub.sha256sum(got) == digest
    assert not list(torch_home.glob('*.partial'))
    (server.root / 'other.pth').write_bytes(b'x' * 5000)
    server.cut_after = 100  # a failed lock-free download leaves no stray partial file behind
    with pytest.warns(UserWarning), pytest.raises(hub.DownloadError) as err:
        hub.cached_download(server.url('other.pth'), progress=False)
    assert 'run again to resume' not in str(err.value) and not list(torch_home.glob('*partial'))


LATE_FETCH = """
import json, sys, time
from pathlib import Path
import vit5seg
from vit5seg import hub
url, start_when = sys.argv[1], Path(sys.argv[2])
while not start_when.exists():  # start once the first process is under way
    time.sleep(0.05)
path = hub.cached_download(url, progress=False)
print(json.dumps(dict(path=str(path), sha256=hub.sha256sum(path))))
"""


def _slow_then_fast(slow, fast, torch_home):
    """Once the slow process's own partial file is there, let the fast one start; both results."""
    for _ in range(1200):  # the slow one's own partial file appears: it is under way
        partials = list(torch_home.glob('big.pth.*.partial')) if torch_home.exists() else []
        if partials:
            break
        threading.Event().wait(0.05)
    host = socket.gethostname()
    assert len(partials) == 1 and re.fullmatch(rf'big\.pth\.{re.escape(host)}\.{slow.pid}\.[0-9a-f]{{8}}\.partial',
                                               partials[0].name), partials
    (torch_home / 'started').touch()
    late = json.loads(fast.communicate(timeout=300)[0].strip().splitlines()[-1])
    first = json.loads(slow.communicate(timeout=300)[0].strip().splitlines()[-1])
    return first, late


@pytest.mark.slow
def test_processes_without_locks_each_download_and_the_first_complete_file_wins(torch_home, tmp_path):
    """Real processes where file locks cannot be trusted (VIT5SEG_NO_FILE_LOCKS=1, for Lustre's
    localflock and NFS's local_lock, whose locks do not reach other nodes): each downloads
    into a file named by host, process and a random part; the first complete one is put in
    place, and a process still downloading stops as soon as it sees it."""
    folder = tmp_path / 'www'
    folder.mkdir()
    data = os.urandom(6 << 20)
    (folder / 'big.pth').write_bytes(data)
    env = {**_env(torch_home), 'VIT5SEG_NO_FILE_LOCKS': '1'}
    with serve(folder) as server:
        server.delay, server.slow_requests = 0.01, 1  # the first request trickles, later ones are fast
        url = server.url('big.pth')
        slow = subprocess.Popen(_fetch_cmd(url), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        fast = subprocess.Popen([sys.executable, '-c', LATE_FETCH, url, str(torch_home / 'started')],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            first, late = _slow_then_fast(slow, fast, torch_home)
        finally:
            for proc in (slow, fast):
                proc.kill()
    digest = hashlib.sha256(data).hexdigest()
    assert first['sha256'] == late['sha256'] == digest and first['path'] == late['path'] == str(torch_home / 'big.pth')
    assert first['warnings'] == []  # an explicit setting, not a failed lock
    assert sorted(p.name for p in torch_home.iterdir()) == ['big.pth', 'started']  # no partial file left, no lock file
    for _ in range(200):  # the server notices the slow one's hang-up at its next write
        if len(server.sent) == 2:
            break
        threading.Event().wait(0.05)
    assert len(server.requests) == 2 and sorted(server.sent)[1] == len(data)
    assert sorted(server.sent)[0] < len(data) // 2  # the slow one stopped early


def test_a_redirect_to_a_content_hash_path_is_cached_under_the_requested_name(torch_home, tmp_path, served):
    """As the official hosts do: the URL answers 302 to a CDN path named by the file's hash.
    The file is cached under the requested URL's name; an interrupted download resumes
    through the redirect with a range request to the CDN."""
    origin, ref, path, digest = served
    cdn_root = tmp_path / 'cdn'
    cdn_root.mkdir()
    (cdn_root / digest).write_bytes(path.read_bytes())
    with serve(cdn_root) as cdn:
        url = origin.url(f'resolve/main/{path.name}')
        origin.redirects[f'/resolve/main/{path.name}'] = cdn.url(digest)
        cdn.cut_after = path.stat().st_size // 2
        with pytest.raises(hub.DownloadError, match='run again to resume'):
            hub.cached_download(url, progress=False)
        kept = (torch_home / f'{path.name}.partial').stat().st_size
        cdn.cut_after = None
        model = _vit5(init_cfg=dict(type='Pretrained', checkpoint=url, sha256=digest))
        model.init_weights()
        assert _features_equal(model, ref)
        assert sorted(p.name for p in torch_home.iterdir()) == [path.name, f'{path.name}.lock']
        assert [r[0] for r in origin.requests] == [f'/resolve/main/{path.name}'] * 2
        assert cdn.requests == [(f'/{digest}', None), (f'/{digest}', f'bytes={kept}-')]


def test_runner_loader_reads_urls_weights_only(torch_home, tmp_path):
    folder = tmp_path / 'www'
    folder.mkdir()
    torch.save({'state_dict': {'w': torch.ones(2)}, 'meta': {}}, folder / 'iter_10.pth')
    exploit = _Exploit()
    exploit.marker = tmp_path / 'pwned'
    torch.save({'state_dict': {}, 'x': exploit}, folder / 'evil.pth')
    with serve(folder) as server:
        ckpt = CheckpointLoader.load_checkpoint(server.url('iter_10.pth'), map_location='cpu')
        assert torch.equal(ckpt['state_dict']['w'], torch.ones(2))
        assert (torch_home / 'iter_10.pth').is_file()
        with pytest.raises(CheckpointError, match='refusing to load'):
            CheckpointLoader.load_checkpoint(server.url('evil.pth'))
    assert not exploit.marker.exists()


def test_test_tool_and_api_take_a_url(torch_home, tmp_path):
    from mmengine.registry import init_default_scope
    from mmseg.registry import MODELS

    from vit5seg.apis import init_model
    tiny = REPO / 'configs' / 'tiny' / 'vit5_upernet_synthetic.py'
    init_default_scope('mmseg')
    model = MODELS.build(Config.fromfile(str(tiny)).model)
    with torch.no_grad():
        model.decode_head.conv_seg.bias.fill_(0.25)
    folder = tmp_path / 'www'
    folder.mkdir()
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, folder / 'tiny.pth')
    digest = hub.sha256sum(folder / 'tiny.pth')
    with serve(folder) as server:
        url = server.url('tiny.pth')
        args = launch.test_parser().parse_args([str(tiny), url, '--sha256', digest, '--work-dir', str(tmp_path / 'w')])
        cfg = launch.test_config(args)
        assert cfg.load_from == str(torch_home / 'tiny.pth')
        loaded = init_model(str(tiny), url, device='cpu', sha256=digest)
        assert torch.equal(loaded.decode_head.conv_seg.bias, torch.full((150,), 0.25))
        with pytest.raises(hub.DownloadError, match='expected 00000000'):
            init_model(str(tiny), url, device='cpu', sha256='0' * 8)
        assert len(server.requests) == 1


def test_convert_tool_takes_a_url(torch_home, served, tmp_path):
    server, ref, path, digest = served
    dst = tmp_path / 'converted.pth'
    cmd = [REPO / 'tools' / 'convert_checkpoint.py', server.url(path.name), dst, '--sha256', digest]
    out = run_script(*cmd, env=_env(torch_home))
    assert out.returncode == 0, out.stderr
    model = _vit5(init_cfg=dict(type='Pretrained', checkpoint=str(dst)))
    model.init_weights()
    assert _features_equal(model, ref)
    cmd[-1] = 'f' * 64
    bad = run_script(*cmd, env=_env(torch_home))
    assert bad.returncode == 1 and bad.stderr.startswith('error: ') and digest in bad.stderr


def _env(torch_home):
    return {**os.environ, 'TORCH_HOME': str(torch_home.parents[1])}


def test_download_weights_tool_fills_the_cache_from_a_mirror(torch_home, tmp_path, capsys):
    folder = tmp_path / 'mirror'
    folder.mkdir()
    for name in ('vit5-small', 'deit3-small'):
        (folder / hub.file_name(hub.OFFICIAL_WEIGHTS[name])).write_bytes(name.encode() * 1000)
    with serve(folder) as server:
        mirror = server.url('')
        out = run_script(REPO / 'tools' / 'download_weights.py', 'vit5-small', 'deit3-small', '--mirror', mirror,
                         '--no-progress', env=_env(torch_home))
        assert out.returncode == 0, out.stderr
        for name in ('vit5-small', 'deit3-small'):
            cached = torch_home / hub.file_name(hub.OFFICIAL_WEIGHTS[name])
            assert f'{name}: {cached} sha256 {hashlib.sha256(name.encode() * 1000).hexdigest()}' in out.stdout
        # the rest in-process: the same main() the tool runs
        hub.main(['vit5-small', '--mirror', mirror, '--no-progress'])
        assert '(already there)' in capsys.readouterr().out and len(server.requests) == 2
        hub.main(['deit3-small', '--mirror', mirror, '--dest', str(tmp_path / 'ck'), '--no-progress'])
        assert (tmp_path / 'ck' / 'deit_3_small_224_1k.pth').is_file()
        with pytest.raises(SystemExit) as exit_:
            hub.main(['vit5-large', '--mirror', mirror, '--no-progress'])
        assert exit_.value.code == 1 and 'HTTP Error 404' in capsys.readouterr().err
    with pytest.raises(SystemExit):
        hub.main(['vit5-huge'])
    assert 'unknown weights' in capsys.readouterr().err
    hub.main(['--list'])
    listing = capsys.readouterr().out
    assert all(url in listing for url in hub.OFFICIAL_WEIGHTS.values())


def test_missing_official_file_says_where_it_comes_from(tmp_path):
    with pytest.raises(CheckpointError) as err:
        read_checkpoint(tmp_path / 'checkpoints' / 'vit5_base_patch16_224.pth')
    assert hub.OFFICIAL_WEIGHTS['vit5-base'] in str(err.value) and 'download_weights.py vit5-base' in str(err.value)


ENTRY_CONFIGS = {
    'vit5_upernet_ade20k.py': 'vit5-base', 'deit3_upernet_ade20k.py': 'deit3-base',
    'vit5/vit5-small_upernet_ade20k.py': 'vit5-small', 'vit5/vit5-large_upernet_ade20k.py': 'vit5-large',
    'deit3/deit3-small_upernet_ade20k.py': 'deit3-small', 'deit3/deit3-large_upernet_ade20k.py': 'deit3-large',
    'vit5/vit5-base_upernet_ade20k_ld.py': 'vit5-base', 'deit3/deit3-large_upernet_ade20k_ld.py': 'deit3-large',
    'heads/vit5_fcn_ade20k.py': 'vit5-base',
}


@pytest.mark.parametrize('config,arch', sorted(ENTRY_CONFIGS.items()))
def test_configs_name_the_official_urls(config, arch):
    backbone = Config.fromfile(str(REPO / 'configs' / config)).model.backbone
    assert backbone.arch == arch
    assert backbone.init_cfg.checkpoint == hub.OFFICIAL_WEIGHTS[arch]


def test_ablation_configs_keep_their_own_local_weights():
    for path in sorted((REPO / 'configs' / 'ablations').glob('*.py')):
        checkpoint = Config.fromfile(str(path)).model.backbone.init_cfg.checkpoint
        assert checkpoint.startswith('checkpoints/ablations/') and not hub.is_url(checkpoint), path


def test_url_helpers():
    assert hub.is_url('https://x/y.pth') and not hub.is_url('checkpoints/y.pth')
    assert hub.official_name('somewhere/deit_3_base_224_1k.pth') == 'deit3-base'
    with pytest.raises(hub.DownloadError, match='names no file'):
        hub.file_name('http://127.0.0.1:1/folder/')


def test_a_206_for_another_range_is_not_spliced_onto_the_partial_file(torch_home, served):
    """A server (or a proxy) answering a resume with bytes from another offset: the whole file
    is fetched instead of appending them."""
    server, _, path, digest = served
    url = server.url(path.name)
    server.cut_after = path.stat().st_size // 3
    with pytest.raises(hub.DownloadError, match='run again to resume'):
        hub.cached_download(url, progress=False)
    kept = (torch_home / f'{path.name}.partial').stat().st_size
    server.cut_after, server.range_shift = None, -7  # its 206 starts 7 bytes early
    assert hub.sha256sum(hub.cached_download(url, progress=False)) == digest
    assert [r for _, r in server.requests[-2:]] == [f'bytes={kept}-', None]  # asked to resume, then took it whole


def test_partial_files_of_killed_lock_free_downloads_are_swept(torch_home, served, monkeypatch):
    """Lock-free partial files (host, pid, random part): one of a process that no longer runs
    here, one of another node idle for more than a day, go; a live one of another node stays."""
    server, _, path, digest = served
    torch_home.mkdir(parents=True)
    dead = subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'], capture_output=True,
                          text=True).stdout.strip()
    host = hub._host()
    orphans = [torch_home / f'{path.name}.{host}.{dead}.0a1b2c3d.partial',
               torch_home / f'{path.name}.othernode.123.0a1b2c3e.partial']
    live = torch_home / f'{path.name}.othernode.456.0a1b2c3f.partial'
    for partial in (*orphans, live):
        partial.write_bytes(b'x' * 100)
    os.utime(orphans[1], (0, time.time() - hub.STALE_PARTIAL_S - 60))
    with pytest.warns(UserWarning, match=r'deleted 2 partial file\(s\) of .* left by downloads that were killed'):
        got = hub.cached_download(server.url(path.name), progress=False)
    assert hub.sha256sum(got) == digest
    assert not any(p.exists() for p in orphans) and live.exists()
