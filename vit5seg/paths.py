"""Where the repository's configs, tools and lock file are, and how this copy of vit5seg is
installed.

A clone (and an editable install of it) has them beside the package. A regular install has
no clone: its wheel carries copies under ``vit5seg/.mim/`` (setup.py), where OpenMMLab
packages keep theirs (``mmseg/.mim/configs``, ``mmseg/.mim/tools``). Code finds them here,
never through its own file's parents, so every tool runs from site-packages and any folder.
"""
import importlib.metadata
import json
import os
import subprocess
from pathlib import Path
from typing import Optional

PACKAGE = Path(__file__).resolve().parent
MIM = PACKAGE / '.mim'
_MARKERS = {'configs': 'vit5_upernet_ade20k.py', 'tools': 'train.py'}  # a foreign folder of that name lacks it
LOCK = 'requirements/lock.txt'


def repository_root() -> Optional[Path]:
    """The clone this package runs from (an editable install), or None (a regular install)."""
    root = PACKAGE.parent
    return root if (root / 'configs' / _MARKERS['configs']).is_file() else None


def _shipped_root(kind: str) -> Path:
    for root in (MIM / kind, PACKAGE.parent / kind):
        if (root / _MARKERS[kind]).is_file():
            return root
    raise FileNotFoundError(
        f'vit5seg finds no {kind}: neither {MIM / kind} (a regular install) nor {PACKAGE.parent / kind} (a clone) '
        'has them. Reinstall with `pip install .` or `pip install -e .` from a clone of the repository.')


def config_root() -> Path:
    return _shipped_root('configs')


def config_path(name: str) -> Path:
    """``config_path('tiny/vit5_upernet_synthetic.py')``: that file of the repository's configs."""
    return config_root() / name


def tools_root() -> Path:
    return _shipped_root('tools')


def tool_path(name: str) -> Path:
    """``tool_path('train.py')``: the repository's ``tools/train.py``, in a clone or an install."""
    return tools_root() / name


def tool_command(name: str) -> str:
    """How to run ``tools/<name>`` from the working folder: ``python tools/x.py`` from a clone's
    root, else the path of the copy this install carries (a regular install has no tools/ in
    the user's folder)."""
    try:
        path = tool_path(name)
    except FileNotFoundError:
        return f'python tools/{name}'
    try:
        return f'python {path.relative_to(Path.cwd())}'
    except ValueError:
        return f'python {path}'


def lock_file() -> Optional[Path]:
    """requirements/lock.txt, the exact tested set (None where a build left it out)."""
    for path in (MIM / LOCK, PACKAGE.parent / LOCK):
        if path.is_file():
            return path
    return None


def locked_versions() -> dict:
    """``{'torch': '2.14.1', ...}`` from the lock file (names lower-cased, ``_`` as ``-``)."""
    path = lock_file()
    if path is None:
        return {}
    pins = {}
    for line in path.read_text().splitlines():
        name, sep, version = line.split('#')[0].strip().partition('==')
        if sep:
            pins[name.strip().lower().replace('_', '-')] = version.strip()
    return pins


def install_kind() -> str:
    """'editable' (pip install -e), 'regular' (a wheel in site-packages) or 'source tree'
    (imported from a folder on sys.path that pip did not install). Every distribution of
    vit5seg on sys.path is looked at: run from a clone's root, the ``vit5seg.egg-info`` a build
    left there is found before the editable install's metadata."""
    dists = list(importlib.metadata.distributions(name='vit5seg'))
    if repository_root() is None:  # no clone around the package: pip put it where it is, or nobody did
        located = (Path(d.locate_file('vit5seg/__init__.py')).resolve() for d in dists)
        return 'regular' if PACKAGE / '__init__.py' in located else 'source tree'
    for dist in dists:
        direct = json.loads(dist.read_text('direct_url.json') or '{}')
        url = direct.get('url', '')
        if direct.get('dir_info', {}).get('editable') and url.startswith('file://') and \
                Path(url[len('file://'):]).resolve() == PACKAGE.parent:
            return 'editable'
    return 'source tree'


def clone_commit(root: Path) -> Optional[str]:
    """The commit a clone at ``root`` is at (``+ changes`` when its tracked files differ from
    it), or None where it is no git clone. setup.py records it in a build, loading this file."""
    if not (root / '.git').exists():
        return None
    try:
        head = subprocess.run(['git', '-C', str(root), 'rev-parse', 'HEAD'], capture_output=True, text=True, timeout=10)
        status = subprocess.run(['git', '-C', str(root), 'status', '--porcelain', '--untracked-files=no'],
                                capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + (' + changes' if status.stdout.strip() else '') if head.returncode == 0 else None


# A tree that leaves its clone keeps its commit in one of these (reports name their code):
# ``git archive`` writes it into COMMIT (.gitattributes: export-subst); every import of vit5seg
# from a clone refreshes .commit (git-ignored), which a plain copy (rsync, cp, docker build)
# carries along; ``python -m build`` writes build_info.json (setup.py). Or the environment says it.
COMMIT_VARIABLE = 'VIT5SEG_COMMIT'
ARCHIVED_COMMIT = 'COMMIT'
RECORDED_COMMIT = '.commit'


def copied_commit(package: Path = PACKAGE) -> Optional[str]:
    """The commit a copy of the package's tree carries (``git archive``'s COMMIT, else the
    record the last import in its clone left), or None."""
    archived = package / ARCHIVED_COMMIT
    if archived.is_file():
        text = archived.read_text().strip()
        if text and not text.startswith('$Format'):  # substituted: this is an archive
            return text
    recorded = package / RECORDED_COMMIT
    if recorded.is_file():
        text = recorded.read_text().strip()
        return f'{text} (as its clone was when last imported)' if text else None
    return None


def record_commit() -> None:
    """In a clone, keep its commit in ``vit5seg/.commit`` for the copies made of the tree
    (atomically; a read-only clone keeps none). Called by ``import vit5seg``."""
    root = repository_root()
    if root is None or not (root / '.git').exists():
        return
    commit = clone_commit(root)
    recorded = PACKAGE / RECORDED_COMMIT
    try:
        if commit and (not recorded.is_file() or recorded.read_text().strip() != commit):
            tmp = recorded.with_name(f'{RECORDED_COMMIT}.{os.getpid()}.tmp')
            tmp.write_text(commit + '\n')
            os.replace(tmp, recorded)
    except OSError:
        pass


def git_commit() -> Optional[str]:
    """The commit this code is: ``$VIT5SEG_COMMIT`` where set; else the clone's it runs from;
    else the one a regular install was built from (setup.py records it); else the one a copy
    of the tree carries (:func:`copied_commit`); else None."""
    if os.environ.get(COMMIT_VARIABLE):
        return os.environ[COMMIT_VARIABLE]
    root = repository_root()
    if root is not None and (root / '.git').exists():
        return clone_commit(root)
    info = MIM / 'build_info.json'
    if info.is_file():
        return json.loads(info.read_text()).get('commit')
    return copied_commit()


def code_fields() -> dict:
    """``{'vit5seg': version, 'vit5seg_commit': ..., 'vit5seg_install': ...}``: the code a
    report (self-check, benchmark JSON) was made by."""
    from .version import __version__
    return dict(vit5seg=__version__,
                vit5seg_commit=git_commit() or f'unknown (no clone, no build record; set {COMMIT_VARIABLE})',
                vit5seg_install=install_kind())


def describe_code() -> str:
    """``vit5seg 0.1.0, commit <id>, editable install``: what the train log and card name."""
    fields = code_fields()
    return f"vit5seg {fields['vit5seg']}, commit {fields['vit5seg_commit']}, {fields['vit5seg_install']} install"
