"""Hugging Face Hub ids, ``hf://OWNER/NAME[@REVISION][/FILE]``, as local files through huggingface_hub.

Files on the Hub go through its own cache (``HF_HOME``: a model a user already fetched with
transformers is not fetched again), so ``HF_HUB_OFFLINE``, ``HF_ENDPOINT`` (a mirror) and the
user's login (``HF_TOKEN`` or ``hf auth login``; Meta's DINOv3 repositories are gated) work as
they do for transformers; the token is never printed. Other hosts keep :mod:`vit5seg.hub`.

An id without FILE is a model folder as transformers' ``from_pretrained`` reads it: its
``config.json`` and its weights (``model.safetensors``, its shards, or ``pytorch_model.bin``),
in one snapshot folder of the cache; with FILE, that file, and the repository's ``config.json``
beside it where there is one.
"""
import importlib
import json
import re
from pathlib import Path
from typing import NamedTuple, Optional

from .errors import ToolError

PREFIX = 'hf://'
# what transformers' save_pretrained writes (and a Hub snapshot holds) beside its config.json
WEIGHT_FILES = ('model.safetensors', 'model.safetensors.index.json', 'pytorch_model.bin')


class HubError(ToolError, OSError):
    """An id that is no Hub id, or a file the Hub (or its cache, offline) cannot give."""


class HubId(NamedTuple):
    repo_id: str
    revision: Optional[str]
    filename: Optional[str]


def is_hub_id(path) -> bool:
    return isinstance(path, str) and path.startswith(PREFIX)


def parse_hub_id(text: str) -> HubId:
    """``hf://OWNER/NAME[@REVISION][/FILE]`` -> its parts."""
    parts = text[len(PREFIX):].split('/')
    name, _, revision = parts[1].partition('@') if len(parts) > 1 else ('', '', '')
    if not parts[0] or not name or '' in parts[2:] or (_ and not revision):
        raise HubError(f'{text!r} is no Hub id: write hf://OWNER/NAME[@REVISION][/FILE]')
    return HubId(f'{parts[0]}/{name}', revision or None, '/'.join(parts[2:]) or None)


def shard_names(index: Path) -> list:
    """The files transformers' ``model.safetensors.index.json`` names (its ``weight_map``'s values)."""
    return sorted(set(json.loads(Path(index).read_text())['weight_map'].values()))


def snapshot_revision(path) -> Optional[str]:
    """The commit a file of huggingface_hub's cache belongs to (``.../snapshots/<commit>/...``), or None."""
    found = re.search(r'[/\\]snapshots[/\\]([0-9a-f]{40})(?:[/\\]|$)', str(path))
    return found.group(1) if found else None


def _one_line(text: str, error: Exception) -> HubError:
    from huggingface_hub import errors
    why = {errors.GatedRepoError: 'it is gated: accept its licence on the Hub, then log in (hf auth login) or '
                                  'set HF_TOKEN',
           errors.RepositoryNotFoundError: 'no such repository (or it is private: log in, or set HF_TOKEN)',
           errors.RevisionNotFoundError: f'the repository has no revision {parse_hub_id(text).revision!r}',
           errors.LocalEntryNotFoundError: 'it is not in the Hugging Face cache and the Hub cannot be reached '
                                           '(offline: HF_HUB_OFFLINE, or no network); fetch it where there is one '
                                           'with the same HF_HOME',
           errors.EntryNotFoundError: 'no such file in it'}
    reason = next((words for kind, words in why.items() if isinstance(error, kind)), None)
    if reason is None:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return HubError(f'{text}: {reason}')


def _transport_errors() -> tuple:
    """The connection errors of huggingface_hub's HTTP client that are no ``OSError`` (2.x: httpx2's, 1.x:
    httpx's; 0.x's requests errors are OSErrors)."""
    found = []
    for module in ('httpx2', 'httpx'):
        try:
            found.append(importlib.import_module(module).TransportError)
        except ImportError:
            pass
    return tuple(found)


def _download(hub_id: HubId, filename: str, text: str) -> str:
    """huggingface_hub's ``hf_hub_download``, which retries a dropped connection within the call (from where it
    was, past its 10 MB chunk); one that drops after those retries is one error. huggingface_hub 2.x writes to
    a temporary name of its own and deletes it on failure, so no part of the file looks complete in the cache:
    the next call downloads it again."""
    from huggingface_hub import hf_hub_download
    try:
        return hf_hub_download(hub_id.repo_id, filename, revision=hub_id.revision)
    except _transport_errors() as e:
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise HubError(f'{text}: the download of {filename} was interrupted ({why}); nothing of it is kept: '
                       f'run the same command again to fetch it') from None


def hub_path(text: str) -> str:
    """The local path of a Hub id: its FILE, or (no FILE) the snapshot folder with ``config.json`` and
    the weights. Fetched into huggingface_hub's cache where it is not there yet."""
    from huggingface_hub import errors
    hub_id = parse_hub_id(text)
    try:
        if hub_id.filename is not None:
            path = _download(hub_id, hub_id.filename, text)
            if Path(hub_id.filename).suffix in ('.safetensors', '.bin', '.json'):
                try:   # a transformers model's weights: its config, beside them in the snapshot
                    _download(hub_id, str(Path(hub_id.filename).parent / 'config.json').removeprefix('./'), text)
                except errors.EntryNotFoundError:
                    pass
            return path
        folder = Path(_download(hub_id, 'config.json', text)).parent
        for name in WEIGHT_FILES:
            try:
                path = _download(hub_id, name, text)
            except errors.EntryNotFoundError:   # LocalEntryNotFoundError too: offline, another of them cached
                continue
            if name.endswith('.index.json'):
                for shard in shard_names(Path(path)):
                    _download(hub_id, shard, text)
            return str(folder)
        raise HubError(f'{text} holds a config.json but none of {", ".join(WEIGHT_FILES)}'
                       f'{" in the cache (offline)" if _offline() else ""}: give its weights file as '
                       f'{PREFIX}{hub_id.repo_id}/FILE')
    except HubError:
        raise
    except (errors.HfHubHTTPError, errors.EntryNotFoundError, errors.HFValidationError, errors.OfflineModeIsEnabled,
            OSError) as e:
        raise _one_line(text, e) from None


def _offline() -> bool:
    from huggingface_hub import constants
    return bool(constants.HF_HUB_OFFLINE)


__all__ = ['HubError', 'HubId', 'PREFIX', 'WEIGHT_FILES', 'hub_path', 'is_hub_id', 'parse_hub_id', 'shard_names',
           'snapshot_revision']
