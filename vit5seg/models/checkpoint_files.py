"""What a checkpoint file is, and reading it safely: the lowest layer of conversion
(:mod:`.backbone_layouts` maps keys above it, the release tables of
:mod:`.mask_classification.releases` above those, :func:`.convert.convert_file` on top).

A file is sniffed before it is unpickled (a Git LFS pointer, a saved error page, an image
and an empty file are named as such), read without running pickled code, and its weights
found under ``model`` / ``model_ema`` (authors), ``state_dict`` (mmengine, converted files;
a segmentor's ``backbone.`` prefix is stripped) or at the top level. Every failure is a
:class:`CheckpointError` that says what and where.
"""
import argparse
import json
import pickle
import re
import warnings
from pathlib import Path
from typing import NamedTuple, Optional

import torch

from ..errors import ToolError
from ..hf_hub import WEIGHT_FILES, is_hub_id, shard_names
from ..hub import DINOV3_REQUEST, GATED_WEIGHTS, OFFICIAL_WEIGHTS, is_url, official_name, resolve
from ..paths import tool_command
from ..utils.state_dicts import StateDict, keys_under



class CheckpointError(ValueError, ToolError):
    """A checkpoint that cannot be read or does not fit the model."""


# A file that cannot be read is also the builtin error mmengine's own loader (plain
# torch.load) raises for it, because vit5seg reads every checkpoint the Runner loads:
# callers of mmengine that catch those (mmseg's own tests catch OSError for a missing
# file) see no difference.
class CheckpointNotFound(CheckpointError, FileNotFoundError):
    """No file at that path."""


class CheckpointIsDirectory(CheckpointError, IsADirectoryError):
    """A folder where a checkpoint file was asked for (a work dir, a Hugging Face snapshot)."""


def no_checkpoint_file(path) -> CheckpointError:
    """The error for a ``path`` that is no file: a folder is named a folder (with the newest
    checkpoint in it, where there is one), a missing path is missing."""
    path = Path(path)
    if not path.is_dir():
        return CheckpointNotFound(f'checkpoint {path} does not exist{_where_to_get(path)}')
    files = sorted((f for f in path.iterdir() if f.suffix in ('.pth', '.bin', '.safetensors', '.pt') and f.is_file()),
                   key=lambda f: f.stat().st_mtime)
    hint = f': give a file in it, such as {files[-1]} (the newest)' if files else ', and holds no checkpoint file'
    return CheckpointIsDirectory(f'checkpoint {path} is a directory, not a checkpoint file{hint}')


class UnsafeCheckpoint(CheckpointError, pickle.UnpicklingError):
    """A pickle that only full unpickling can read (torch.load's weights_only error type)."""


class UnreadableCheckpoint(CheckpointError, RuntimeError):
    """A truncated file, or one that is no PyTorch checkpoint (torch.load's RuntimeError)."""


class NotACheckpoint(UnreadableCheckpoint):
    """A file whose first bytes are no checkpoint's: a Git LFS pointer, a saved HTML or error
    page, an image, an empty file."""


# Plain containers the authors' training scripts pickle next to the weights
# (``args``); allowed for ``weights_only`` loading, nothing that can run code.
_SAFE_GLOBALS = [argparse.Namespace]


def read_checkpoint(path, allow_unsafe: bool = False, map_location='cpu', sha256: Optional[str] = None,
                    folder=None, progress: bool = True):
    """Load a ``.pth``/``.bin``/``.safetensors`` file without executing pickled code.

    ``path`` may be an http(s) URL: downloaded once into torch's hub cache
    (:mod:`vit5seg.hub`), then read like a local file. ``sha256`` (full or a prefix of
    8+ hex digits) is checked first. ``allow_unsafe=True`` falls back to full
    unpickling, with a warning: only for files from a source you trust.
    ``map_location`` is torch.load's; ``folder`` replaces the hub cache for URLs.
    """
    local = Path(resolve(path, sha256, progress, folder))
    try:
        return _read_local(local, allow_unsafe, map_location)
    except CheckpointError as e:
        if is_url(path) and not isinstance(e, UnsafeCheckpoint):
            raise type(e)(f'{e}; it is the cached download of {path}: delete it to download again') from None
        raise


def model_folder_weights(folder: Path) -> Optional[Path]:
    """The weights file of a transformers model folder (``config.json`` beside one of
    :data:`vit5seg.hf_hub.WEIGHT_FILES`), or None for any other folder."""
    if not (folder / 'config.json').is_file():
        return None
    return next((folder / name for name in WEIGHT_FILES if (folder / name).is_file()), None)


def read_model_config(path) -> Optional[dict]:
    """The transformers ``config.json`` of a model folder, or beside a weights file; None where there is none."""
    path = Path(path)
    config = (path if path.is_dir() else path.parent) / 'config.json'
    if not config.is_file():
        return None
    try:
        found = json.loads(config.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(f'{config} is not the JSON transformers writes: {e}') from None
    if not isinstance(found, dict):
        raise CheckpointError(f'{config} holds a {type(found).__name__}, not the dict transformers writes')
    return found


def _read_shards(index: Path, map_location) -> dict:
    """transformers' sharded safetensors: the files ``model.safetensors.index.json`` names, as one dict."""
    try:
        files = shard_names(index)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise UnreadableCheckpoint(f'{index} is no transformers shard index (its weight_map: {e})') from None
    out = {}
    for name in files:
        out.update(_read_local(index.parent / name, False, map_location))
    return out


def _read_local(path: Path, allow_unsafe: bool, map_location):
    if path.is_dir() and model_folder_weights(path) is not None:   # transformers' folder: its weights file
        path = model_folder_weights(path)
    if path.name.endswith('.index.json') and path.is_file():
        return _read_shards(path, map_location)
    if not path.is_file():
        raise no_checkpoint_file(path)
    if sniff_format(path) == 'safetensors':
        from safetensors.torch import load_file
        device = str(map_location) if isinstance(map_location, (str, torch.device)) else 'cpu'
        try:
            return load_file(str(path), device=device)
        except Exception as e:  # safetensors raises its own error types
            raise UnreadableCheckpoint(f'cannot read {path}: {e}') from e
    try:
        with torch.serialization.safe_globals(_SAFE_GLOBALS):
            return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        reason = _disallowed_global(str(e))
        if reason is None:  # no code in it: a corrupt pickle, which full unpickling cannot read either
            raise UnreadableCheckpoint(f'cannot read {path}: truncated or not a PyTorch checkpoint '
                                       f'({_unpickler_reason(str(e))})') from None
        if not allow_unsafe:
            raise UnsafeCheckpoint(
                f'refusing to load {path}: it needs unsafe unpickling, which can run code '
                f'({reason}). If you trust the file, pass allow_unsafe=True '
                f'(--allow-unsafe on the command line).') from None
        warnings.warn(f'loading {path} with full unpickling (allow_unsafe=True): '
                      'this runs any code the file contains', stacklevel=2)
        return torch.load(path, map_location=map_location, weights_only=False)
    except (RuntimeError, EOFError, OSError) as e:
        raise UnreadableCheckpoint(f'cannot read {path}: truncated or not a PyTorch checkpoint '
                                   f'({_first_sentence(e)})') from None


def _first_sentence(error: BaseException) -> str:
    """torch's reader error without the advice miniz appends (400 characters that say the file
    may be corrupt)."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return text.split('. This is an internal miniz error')[0].rstrip('.')


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), '')


# torch 2.6+: 'Unsupported global: GLOBAL x was not an allowed global by default', 'Trying to
# load unsupported GLOBAL posix.system whose module posix is blocked'
_GLOBAL = re.compile(r'GLOBAL (\S+)')


def _disallowed_global(message: str) -> Optional[str]:
    """The global torch's weights-only unpickler refused (the one sign of code in a pickle), or None."""
    match = _GLOBAL.search(message)
    return f'{match.group(1)} is not an allowed global' if match else None


def _unpickler_reason(message: str) -> str:
    """The weights-only unpickler's own finding ('Unsupported operand 60'), not torch's advice around it."""
    return _first_line(message.split('WeightsUnpickler error:', 1)[-1])


# The first bytes of what can sit where a checkpoint is expected. torch.load reads any of
# these as a pickle and fails with 'invalid load key' or 'Unsupported operand', which says
# nothing of what the file is; looking first names it.
_LFS_POINTER = b'version https://git-lfs.github.com/spec/'
_OTHER_FORMATS = ((b'\x89PNG', 'a PNG image'), (b'\xff\xd8\xff', 'a JPEG image'), (b'\x1f\x8b', 'gzip data'),
                  (b'BZh', 'bzip2 data'), (b'\xfd7zXZ', 'xz data'), (b'\x93NUMPY', 'a NumPy array'),
                  (b'\x89HDF', 'an HDF5 file'))


def sniff_format(path: Path) -> str:
    """'zip' (torch.save), 'pickle' (torch's legacy format) or 'safetensors', from the
    file's first bytes; anything else is :class:`NotACheckpoint`, saying what it is."""
    with open(path, 'rb') as f:
        head = f.read(1024)
    size = path.stat().st_size
    if head.startswith((b'PK\x03\x04', b'PK\x05\x06')):
        return 'zip'
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:  # pickle's PROTO opcode
        return 'pickle'
    if len(head) > 8 and head[8:9] == b'{' and 8 + int.from_bytes(head[:8], 'little') <= size:
        return 'safetensors'  # a little-endian header length, then the JSON header
    raise NotACheckpoint(f'{path} is not a checkpoint: {_what_it_is(head, size)}')


def _what_it_is(head: bytes, size: int) -> str:
    if size == 0:
        return 'the file is empty (an interrupted download or copy?)'
    if head.startswith(_LFS_POINTER):
        return ('it is a Git LFS pointer, the text a clone without Git LFS leaves in place of the file; fetch the '
                'real file with `git lfs install && git lfs pull` in that clone, or download the file itself')
    for magic, name in _OTHER_FORMATS:
        if head.startswith(magic):
            return f'it is {name}'
    try:
        text = head.decode('utf-8')
    except UnicodeDecodeError as e:
        text = head[:e.start].decode('utf-8') if e.start >= len(head) - 4 else None  # a cut multi-byte character
    if text is not None and text.strip() and all(c.isprintable() or c in '\r\n\t' for c in text):
        kind = 'an HTML page' if text.lstrip()[:15].lower().startswith(('<!doctype', '<html')) else 'text'
        line = _first_line(text)
        line = line if len(line) <= 120 else line[:117] + '...'
        return (f'it is {kind} ({size} bytes), as a failed or refused download saves it; its first line: '
                f'{line!r}')
    return f'its first bytes ({head[:8].hex(" ")}) are no zip, pickle or safetensors header'


def _where_to_get(path: Path) -> str:
    gated = next((arch for arch, name in GATED_WEIGHTS.items() if name == path.name), None)
    if gated is not None:
        return (f'; it is Meta\'s {gated} file, gated by the DINOv3 licence: request it at {DINOV3_REQUEST}, '
                f'then put it at {path} or give its path or URL with --cfg-options '
                f'model.backbone.init_cfg.checkpoint=PATH_OR_URL')
    arch = official_name(path)
    if arch is None:
        return ''
    return (f'; it is the published {arch} file: give its URL {OFFICIAL_WEIGHTS[arch]} instead (downloaded '
            f'once and cached), or fetch it with `{tool_command("download_weights.py")} {arch} --dest {path.parent}`')


def extract_state_dict(obj, use_ema: bool = False, prefix: Optional[str] = None) -> StateDict:
    """The tensor dict inside a loaded checkpoint object."""
    if not isinstance(obj, dict):
        raise CheckpointError(f'expected a dict of weights, got {type(obj).__name__}')
    if use_ema:
        if 'model_ema' not in obj:
            raise CheckpointError(f'use_ema=True but the checkpoint has no model_ema '
                                  f'(top-level keys: {sorted(obj)[:10]})')
        sd = obj['model_ema']
    else:
        sd = next((obj[k] for k in ('model', 'state_dict', 'module') if isinstance(obj.get(k), dict)), obj)
    sd = {k: v for k, v in sd.items() if isinstance(v, torch.Tensor)}
    if prefix is None and 'cls_token' not in sd and any(k.startswith('backbone.') for k in sd):
        prefix = 'backbone.'  # a trained mmseg segmentor: take its backbone
    if prefix:
        sd = keys_under(sd, prefix)
    if sd and all(k.startswith('module.') for k in sd):
        sd = {k[len('module.'):]: v for k, v in sd.items()}
    if not sd:
        raise CheckpointError('the checkpoint holds no tensors' + (f' under prefix {prefix!r}' if prefix else ''))
    return sd


def is_own_layout(obj, prefix: Optional[str]) -> bool:
    """Written by this package: a converted file (``meta.vit5seg_layout``) or a trained
    segmentor (a ``backbone.`` prefix; no upstream release has one)."""
    if not isinstance(obj, dict):
        return False
    if isinstance(obj.get('meta'), dict) and obj['meta'].get('vit5seg_layout'):
        return True
    sd = obj.get('state_dict', obj)
    return prefix is None and isinstance(sd, dict) and 'cls_token' not in sd and \
        any(k.startswith('backbone.') for k in sd)


# An EoMT release (the Lightning module's state dict): its network under ``network.``, its backbone here
EOMT_BACKBONE_PREFIX = 'network.encoder.backbone.'


class Weights(NamedTuple):
    """A checkpoint file read: the loaded object, its tensors (:func:`extract_state_dict`) and
    whether it is in this package's own layout (:func:`is_own_layout`); which format it is, the
    rows of :mod:`vit5seg.models.formats` say."""
    obj: object
    state_dict: StateDict
    own_layout: bool
    model_config: Optional[dict] = None   # transformers' config.json of the folder it came from
    local: Optional[str] = None           # where a Hub id's file or folder is in huggingface_hub's cache


def read_weights(path, allow_unsafe: bool = False, sha256: Optional[str] = None, use_ema: bool = False,
                 prefix: Optional[str] = None) -> Weights:
    """``path`` (a file or URL) read safely (:func:`read_checkpoint`) and its tensors found."""
    local = resolve(path, sha256) if is_hub_id(path) else path   # a Hub id: its snapshot, config.json beside
    obj = read_checkpoint(local, allow_unsafe, sha256=sha256 if local == path else None)   # checked once
    return Weights(obj, extract_state_dict(obj, use_ema=use_ema, prefix=prefix), is_own_layout(obj, prefix),
                   None if is_url(local) else read_model_config(local), str(local) if local != path else None)
