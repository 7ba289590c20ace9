"""Files by URL: the official weight table, and downloads into torch's hub cache.

A URL is downloaded once to ``$TORCH_HOME/hub/checkpoints/<file name>`` (where
``torch.hub`` and mmengine put downloaded weights, so their cached copies are hits too).
Bytes go to ``<file>.partial`` first and are renamed only when complete (and, given a
sha256, verified): an interrupted download never looks complete. The next attempt resumes
it with an HTTP range request under ``If-Range`` (the ETag or Last-Modified the server gave
when the partial file was started, kept in ``<file>.partial.validator``), so a file replaced
upstream in between starts over instead of getting the new file's tail on the old one's head;
a partial file with no validator starts over too. A lock file lets the processes of a
multi-GPU job share one download. Redirects (the official URLs answer with one to a CDN
path named by the file's hash) are followed; the file keeps the requested URL's name.

A file already in the cache is read without writing anything, so a cache mounted
read-only or a shared ``TORCH_HOME`` the job cannot write works once it holds the files;
where a file is missing and the folder cannot be written, the error says so. A folder
whose filesystem has no ``flock`` (some Lustre / NFS mounts) downloads without the lock,
with a warning: each process into a file of its own, named by host, process and a random
part (process ids repeat across nodes and containers); the first complete one is linked
into place, and every other process stops as soon as it sees the file there.

Written here rather than taken from ``torch.hub.download_url_to_file`` because that
cannot resume (the ADE20K archive is 923 MB) and its temporary name is random, so the
eight ranks of a node would each download the same file. ``huggingface_hub`` does all of
this for files on the Hub, but only two of the three hosts are (the DeiT-III weights and
ADE20K are not) and it keeps its own cache layout under ``HF_HOME``: one cache, torch's,
which mmengine and ``torch.hub`` also read, keeps offline clusters to one folder to fill.
"""
import errno
import glob
import hashlib
import http.client
import os
import secrets
import shutil
import socket
import sys
import time
import urllib.error
import urllib.request
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import List, Optional, Union
from urllib.parse import urlparse

from .errors import ToolError
from .hf_hub import HubError, hub_path, is_hub_id
from .paths import tool_command

# One place for the public files. sha256 digests are not published by the authors;
# tools/download_weights.py prints each file's digest for pinning (init_cfg sha256=...).
_VIT5 = 'https://huggingface.co/FengWang3211/ViT-5/resolve/main/'
_DEIT3 = 'https://dl.fbaipublicfiles.com/deit/'
OFFICIAL_WEIGHTS = {
    'vit5-small': _VIT5 + 'vit5_small_patch16_224.pth',
    'vit5-base': _VIT5 + 'vit5_base_patch16_224.pth',
    'vit5-base-384': _VIT5 + 'vit5_base_patch16_384.pth',
    'vit5-large': _VIT5 + 'vit5_large_patch16_224.pth',
    'vit5-large-384': _VIT5 + 'vit5_large_patch16_384.pth',
    'deit3-small': _DEIT3 + 'deit_3_small_224_1k.pth',   # ImageNet-1k, the fair twin
    'deit3-base': _DEIT3 + 'deit_3_base_224_1k.pth',
    'deit3-large': _DEIT3 + 'deit_3_large_224_1k.pth',
}
# Meta's DINOv2 hub files (dinov2/hub/backbones.py), public
_DINOV2 = 'https://dl.fbaipublicfiles.com/dinov2/'
for _size, _short in (('small', 's'), ('base', 'b'), ('large', 'l'), ('giant', 'g')):
    OFFICIAL_WEIGHTS[f'dinov2-{_size}'] = f'{_DINOV2}dinov2_vit{_short}14/dinov2_vit{_short}14_pretrain.pth'
    OFFICIAL_WEIGHTS[f'dinov2-{_size}-reg4'] = f'{_DINOV2}dinov2_vit{_short}14/dinov2_vit{_short}14_reg4_pretrain.pth'
# DINOv3's files are gated by Meta's licence: the user requests them and gives the file or URL
# (dinov3/hub/backbones.py names them so).
DINOV3_REQUEST = 'https://ai.meta.com/resources/models-and-libraries/dinov3-downloads/'
GATED_WEIGHTS = {
    'dinov3-small': 'dinov3_vits16_pretrain_lvd1689m-08c60483.pth',
    'dinov3-small-plus': 'dinov3_vits16plus_pretrain_lvd1689m-4057cbaa.pth',
    'dinov3-base': 'dinov3_vitb16_pretrain_lvd1689m-73cec8be.pth',
    'dinov3-large': 'dinov3_vitl16_pretrain_lvd1689m-8aa4cbdd.pth',
}
ADE20K_URL = 'http://data.csail.mit.edu/places/ADEchallenge/ADEChallengeData2016.zip'

PathOrUrl = Union[str, os.PathLike]
_CHUNK = 1 << 20


class DownloadError(RuntimeError, ToolError):
    """A URL that could not be fetched, or a file whose sha256 is not the expected one
    (torch.hub raises RuntimeError for that too)."""


class FetchError(DownloadError, OSError):
    """The server could not be reached, or answered with an error: an OSError too, as
    urllib's URLError is, which mmengine's http loader raises."""


def is_url(path: PathOrUrl) -> bool:
    return isinstance(path, str) and path.startswith(('http://', 'https://'))


def cache_dir() -> Path:
    """``$TORCH_HOME/hub/checkpoints`` (torch.hub's and mmengine's download folder)."""
    import torch.hub
    return Path(torch.hub.get_dir()) / 'checkpoints'


def file_name(url: str) -> str:
    name = os.path.basename(urlparse(url).path)
    if not name:
        raise DownloadError(f'{url} names no file (its path ends with "/")')
    return name


def official_name(path: PathOrUrl) -> Optional[str]:
    """The weight table's name for a file of that name, e.g. ``vit5-base``."""
    base = os.path.basename(str(path))
    return next((arch for arch, url in OFFICIAL_WEIGHTS.items() if file_name(url) == base), None)


def sha256sum(path: PathOrUrl) -> str:
    digest = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(_CHUNK), b''):
            digest.update(block)
    return digest.hexdigest()


def check_sha256(path: PathOrUrl, expected: Optional[str]) -> None:
    """Raise if ``path``'s digest does not start with ``expected`` (a full digest or a
    prefix of at least 8 hex digits, as torch.hub's file names carry)."""
    if not expected:
        return
    expected = expected.strip().lower()
    if len(expected) < 8 or any(c not in '0123456789abcdef' for c in expected):
        raise DownloadError(f'sha256 {expected!r} is not a hex digest (or a prefix of 8+ digits of one)')
    actual = sha256sum(path)
    if not actual.startswith(expected):
        raise DownloadError(f'{path}: sha256 is {actual}, expected {expected}')


# flock on a filesystem that does not implement it (ENOLCK: NFS without lockd; ENOSYS,
# EOPNOTSUPP: some Lustre and FUSE mounts)
_NO_LOCKS = {errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP}
_UNWRITABLE = {errno.EACCES, errno.EPERM, errno.EROFS}


class UnwritableCache(DownloadError, PermissionError):
    """A file missing from a cache folder that this process cannot write."""


def _unwritable(url: str, dst: Path, error: OSError) -> UnwritableCache:
    return UnwritableCache(
        f'{url} is not in the cache and the cache folder cannot be written ({dst.parent}: '
        f'{os.strerror(error.errno)}). Put the file at {dst} from a machine that can write there '
        f'(`{tool_command("download_weights.py")}` with the same TORCH_HOME), point TORCH_HOME at a writable '
        f'folder, or pass a local path instead of the URL.')


@contextmanager
def _locked(path: Path, url: str):
    """Hold ``<path>.lock`` exclusively (other processes wait): one download per file.
    Yields whether the lock is held; a filesystem without locks yields False, with a warning.
    ``VIT5SEG_NO_FILE_LOCKS=1`` yields False at once: for filesystems whose locks succeed but
    hold only on one node (Lustre's ``localflock``, NFS's ``local_lock=flock``), where ranks on
    two nodes would both hold "the" lock and write one partial file."""
    if os.environ.get('VIT5SEG_NO_FILE_LOCKS') == '1':
        yield False
        return
    try:
        import fcntl
    except ImportError:  # no flock (Windows)
        yield False
        return
    try:
        lock = open(f'{path}.lock', 'a')
    except OSError as e:
        if e.errno in _UNWRITABLE:
            raise _unwritable(url, path, e) from None
        raise
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
        except OSError as e:
            if e.errno not in _NO_LOCKS:
                raise
            warnings.warn(f'{path.parent} does not support file locks ({os.strerror(e.errno)}): downloading '
                          f'{path.name} without one; processes that start together each download it', stacklevel=3)
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _progress_bar(total: Optional[int], initial: int, name: str, enabled: bool):
    from tqdm import tqdm
    # a log file (slurm) gets a line every 10 s instead of a redraw per chunk
    return tqdm(total=total, initial=initial, unit='B', unit_scale=True, unit_divisor=1024, desc=name,
                disable=not enabled, mininterval=0.5 if sys.stderr.isatty() else 10, dynamic_ncols=True)


def _open(url: str, start: int, timeout: float, validator: Optional[str] = None):
    headers = {'User-Agent': 'vit5seg'}
    if start:
        # If-Range: the rest of *that* file (206), or the whole file if it changed (200)
        headers.update({'Range': f'bytes={start}-', 'If-Range': validator})
    return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)


def _validator(headers) -> Optional[str]:
    """What ``If-Range`` can name for this response: its strong ETag, else its
    Last-Modified (a weak ETag cannot be used there, RFC 9110 13.1.5)."""
    etag = headers.get('ETag')
    if etag and not etag.startswith('W/'):
        return etag
    return headers.get('Last-Modified')


def _range_start(resp) -> Optional[int]:
    """START of a 206's ``Content-Range: bytes START-END/TOTAL``, None where it names none."""
    unit, _, spec = resp.headers.get('Content-Range', '').partition(' ')
    first = spec.partition('-')[0]
    return int(first) if unit == 'bytes' and first.isdigit() else None


def _total_size(resp) -> Optional[int]:
    if resp.status == 206:  # Content-Range: bytes START-END/TOTAL
        total = resp.headers.get('Content-Range', '').rpartition('/')[2]
        return int(total) if total.isdigit() else None
    length = resp.headers.get('Content-Length')
    return int(length) if length and length.isdigit() else None


def human_size(n: int) -> str:
    return f'{n / 2**30:.2f} GiB' if n >= 2**30 else f'{n / 2**20:.1f} MiB'


class _Superseded(Exception):
    """Another process put the complete file in place while this one was downloading."""


def _left_behind(partial: Path, validator_file: Optional[Path]) -> str:
    """What happens to the bytes of a failed download: kept to resume (only a shared
    partial file with the validator to resume it under), or deleted."""
    kept = partial.stat().st_size if partial.exists() else 0
    if validator_file is None or not validator_file.is_file():
        partial.unlink(missing_ok=True)
        if validator_file is not None and kept:
            return ' (the server names no version of the file, so the next try starts over)'
        return ''
    return f' ({kept} bytes kept in {partial}; run again to resume)' if kept else ''


def _put_in_place(partial: Path, dst: Path, first_wins: bool) -> None:
    if not first_wins:
        os.replace(partial, dst)
        return
    try:
        os.link(partial, dst)  # fails where another process put its complete copy first
    except FileExistsError:
        pass
    except OSError:  # a filesystem without hard links
        if not dst.exists():
            os.replace(partial, dst)
    partial.unlink(missing_ok=True)


def download(url: str, dst: PathOrUrl, sha256: Optional[str] = None, progress: bool = True,
             timeout: float = 60., partial: Optional[PathOrUrl] = None) -> Path:
    """Fetch ``url`` to ``dst`` through ``<dst>.partial`` (resumed if present and the server
    gave a validator for it); ``dst`` appears only complete and, with ``sha256``, verified.
    Raises :class:`DownloadError`. ``partial``: a file of this process's own for the bytes
    in transit (processes that share no lock): never resumed, deleted if the download fails,
    abandoned as soon as ``dst`` appears, and put in place only if ``dst`` is still missing."""
    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    shared = partial is None
    partial = Path(f'{dst}.partial') if shared else Path(partial)
    validator_file = Path(f'{partial}.validator') if shared else None
    validator = validator_file.read_text().strip() if shared and validator_file.is_file() else None
    start = partial.stat().st_size if validator and partial.exists() else 0
    total = received = None
    try:
        try:
            resp = _open(url, start, timeout, validator)
        except urllib.error.HTTPError as e:
            if e.code != 416 or not start:
                raise
            # 416 under a matching If-Range: nothing lies past the partial file's end. One as
            # long as the whole file is complete (a run killed before the rename): keep it.
            whole = e.headers.get('Content-Range', '').rpartition('/')[2]
            if whole.isdigit() and int(whole) == start:
                resp, total, received = None, start, start
            else:
                start = 0
                resp = _open(url, 0, timeout)
        if resp is not None and start and resp.status == 206 and _range_start(resp) != start:
            # bytes from elsewhere in the file would be appended after ours: take the whole file
            resp.close()
            start = 0
            resp = _open(url, 0, timeout)
        if resp is not None:
            with resp:
                if start and resp.status != 206:
                    start = 0  # the file changed upstream, or the server ignores ranges: start over
                total = _total_size(resp)
                free = shutil.disk_usage(dst.parent).free
                if total is not None and total - start > free:
                    raise DownloadError(f'cannot download {url}: it needs {human_size(total - start)} more, '
                                        f'{dst.parent} has {human_size(free)} free')
                if shared and not start:  # the version these bytes can be resumed under, before the bytes
                    new_validator = _validator(resp.headers)
                    if new_validator:
                        validator_file.write_text(new_validator)
                    else:
                        validator_file.unlink(missing_ok=True)
                received = start
                with open(partial, 'ab' if start else 'wb') as out, \
                        _progress_bar(total, start, dst.name, progress) as bar:
                    for block in iter(lambda: resp.read(_CHUNK), b''):
                        out.write(block)
                        received += len(block)
                        bar.update(len(block))
                        if not shared and dst.exists():  # a stat a MiB, on any filesystem
                            raise _Superseded()
                    out.flush()
                    os.fsync(out.fileno())
    except _Superseded:
        partial.unlink(missing_ok=True)
        return dst
    except urllib.error.URLError as e:  # HTTPError too
        reason = e if isinstance(e, urllib.error.HTTPError) else e.reason
        raise FetchError(f'cannot download {url}: {reason}{_left_behind(partial, validator_file)}') from None
    except (http.client.HTTPException, OSError, ValueError) as e:  # timeouts, resets, a full disk too
        raise FetchError(f'cannot download {url}: {e}{_left_behind(partial, validator_file)}') from None
    if total is not None and received != total:
        raise FetchError(f'cannot download {url}: the connection closed after {received} of {total} '
                         f'bytes{_left_behind(partial, validator_file)}')
    try:
        check_sha256(partial, sha256)
    except DownloadError as e:
        partial.unlink()
        raise DownloadError(f'downloaded {url}, but {e}; the download was deleted') from None
    finally:
        if validator_file is not None and not partial.exists():
            validator_file.unlink(missing_ok=True)
    _put_in_place(partial, dst, first_wins=not shared)
    if validator_file is not None:
        validator_file.unlink(missing_ok=True)
    return dst


def _host() -> str:
    return ''.join(c if c.isalnum() or c in '-_' else '_' for c in socket.gethostname())[:40] or 'host'


def _lock_free_partial(dst: Path) -> Path:
    """A partial-file name no other process uses: process ids repeat across the nodes and
    containers that share a filesystem, so host and a random part are in it too."""
    return Path(f'{dst}.{_host()}.{os.getpid()}.{secrets.token_hex(4)}.partial')


STALE_PARTIAL_S = 24 * 3600  # a lock-free partial file untouched this long has lost its process


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def sweep_orphaned_partials(dst: Path) -> List[Path]:
    """Delete the lock-free partial files of ``dst`` whose process is gone (a killed job):
    on this host, those whose process id no longer runs; from any host, those untouched for
    ``STALE_PARTIAL_S``. Another node's live download is never touched. Returns what it deleted."""
    removed = []
    host, prefix = _host(), f'{dst.name}.'
    for path in dst.parent.glob(f'{glob.escape(dst.name)}.*.*.*.partial'):
        parts = path.name[len(prefix):-len('.partial')].split('.')  # host (no dots), pid, random part
        if len(parts) != 3:
            continue
        owner, pid, _ = parts
        try:
            idle = time.time() - path.stat().st_mtime
        except FileNotFoundError:  # its process finished or gave up meanwhile
            continue
        dead = owner == host and pid.isdigit() and int(pid) != os.getpid() and not _running(int(pid))
        if dead or idle > STALE_PARTIAL_S:
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def cached_download(url: str, sha256: Optional[str] = None, progress: bool = True,
                    folder: Optional[PathOrUrl] = None) -> Path:
    """The local copy of ``url`` in ``folder`` (default :func:`cache_dir`), fetched on
    first use; a cached copy is checked against ``sha256`` when one is given, and read
    without writing anything."""
    dst = Path(folder) if folder is not None else cache_dir()
    dst = dst / file_name(url)
    if not dst.exists():
        try:
            dst.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            if e.errno in _UNWRITABLE:
                raise _unwritable(url, dst, e) from None
            raise
        with _locked(dst, url) as locked:
            swept = sweep_orphaned_partials(dst)
            if swept:
                warnings.warn(f'deleted {len(swept)} partial file(s) of {dst.name} left by downloads that were '
                              f'killed: {", ".join(p.name for p in swept)}', stacklevel=2)
            if not dst.exists():  # another process may have finished it while we waited
                try:
                    download(url, dst, sha256, progress, partial=None if locked else _lock_free_partial(dst))
                except DownloadError as e:
                    raise type(e)(
                        f'{e}\nNo copy at {dst} either: put the file there (offline? fetch it on a machine with '
                        f'internet; for weights `{tool_command("download_weights.py")}` with the same TORCH_HOME), or '
                        f'pass a local path instead of the URL.') from None
                if locked or sha256 is None:
                    return dst
    try:
        check_sha256(dst, sha256)
    except DownloadError as e:
        raise DownloadError(f'cached copy of {url}: {e}; delete it to download again') from None
    return dst


def resolve(path: PathOrUrl, sha256: Optional[str] = None, progress: bool = True,
            folder: Optional[PathOrUrl] = None) -> str:
    """A local path for a path or URL: URLs go through the cache (``folder``, default
    :func:`cache_dir`); a local file is checked against ``sha256`` when one is given (a
    missing one is left to the reader). A Hugging Face Hub id (``hf://...``) goes through
    huggingface_hub's cache (:mod:`vit5seg.hf_hub`)."""
    if is_hub_id(path):
        try:
            path = hub_path(path)
        except HubError as e:
            raise FetchError(str(e)) from None
    elif is_url(path):
        return str(cached_download(str(path), sha256, progress, folder))
    if sha256 and os.path.isfile(path):
        check_sha256(path, sha256)
    return str(path)


def fetch_official(names, dest: Optional[PathOrUrl] = None, mirror: Optional[str] = None, progress: bool = True):
    """Download weight files of the table by name into ``dest`` (default: the cache
    the configs' URLs resolve to); ``mirror`` replaces each URL's folder (a cluster's
    copy). Yields ``(name, path, sha256, was_cached)`` as each file is ready."""
    unknown = [n for n in names if n not in OFFICIAL_WEIGHTS]
    if unknown:
        raise DownloadError(f'unknown weights {unknown}; choose from {sorted(OFFICIAL_WEIGHTS)}')
    for name in names:
        url = OFFICIAL_WEIGHTS[name]
        if mirror:
            url = mirror.rstrip('/') + '/' + file_name(url)
        folder = Path(dest) if dest is not None else cache_dir()
        was_cached = (folder / file_name(url)).exists()
        path = cached_download(url, progress=progress, folder=folder)
        yield name, path, sha256sum(path), was_cached


def main(argv=None):
    import argparse
    parser = argparse.ArgumentParser(
        description='Download the published ViT-5 and DeiT-III ImageNet-1k weights ahead of time (e.g. on the login '
                    'node of an offline cluster) into the cache the configs\' URLs resolve to, and print each '
                    'file\'s sha256.')
    parser.add_argument('names', nargs='*', metavar='ARCH', help=f'any of: {", ".join(OFFICIAL_WEIGHTS)}')
    parser.add_argument('--all', action='store_true', help='every file of the table')
    parser.add_argument('--dest', help=f'folder to write to (default: {cache_dir()}, from TORCH_HOME)')
    parser.add_argument('--mirror', help='fetch <MIRROR>/<file name> instead of the official URL')
    parser.add_argument('--list', action='store_true', help='print the table of names and URLs and exit')
    parser.add_argument('--no-progress', action='store_true', help='no progress bar')
    args = parser.parse_args(argv)
    if args.list:
        for name, url in OFFICIAL_WEIGHTS.items():
            print(f'{name:15s} {url}')
        return []
    names = list(OFFICIAL_WEIGHTS) if args.all else args.names
    if not names:
        parser.error('name at least one ARCH, or --all (see --list)')
    done = []
    try:
        for name, path, digest, was_cached in fetch_official(names, args.dest, args.mirror, not args.no_progress):
            print(f'{name}: {path} sha256 {digest}' + (' (already there)' if was_cached else ''), flush=True)
            done.append((name, path, digest))
    except DownloadError as e:
        parser.exit(1, f'error: {e}\n')
    if args.dest is not None:
        print(f'configs name URLs: pass --cfg-options model.backbone.init_cfg.checkpoint={args.dest}/<file>, '
              f'or put the files in {cache_dir()}')
    return done


__all__ = ['ADE20K_URL', 'DownloadError', 'FetchError', 'UnwritableCache', 'OFFICIAL_WEIGHTS', 'cache_dir', 'cached_download', 'check_sha256',
           'download', 'fetch_official', 'file_name', 'human_size', 'is_url', 'official_name', 'resolve', 'sha256sum']
