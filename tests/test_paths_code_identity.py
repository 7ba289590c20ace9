"""Reports name their code (issue #38): the commit survives every way a tree leaves its
clone. A small clone of the package's paths module, made here with git, is archived
(``git archive``: export-subst fills vit5seg/COMMIT), copied without .git (the record the
last import left), or named by ``VIT5SEG_COMMIT``; ``python -m build`` is test_install.py's.
Each copy's own paths.py answers, loaded by its file as setup.py loads it."""
import importlib.util
import io
import shutil
import subprocess
import tarfile

import pytest

from conftest import REPO, extract_tar


def _git(root, *args):
    out = subprocess.run(['git', '-C', str(root), '-c', 'user.name=t', '-c', 'user.email=t@t', *args],
                         capture_output=True, check=True)
    return out.stdout


def _paths_of(tree, name):
    spec = importlib.util.spec_from_file_location(f'_paths_{name}', tree / 'vit5seg' / 'paths.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture()
def clone(tmp_path):
    """The files that decide the commit (paths.py, COMMIT, .gitattributes, the configs marker)
    as a clone of their own with one commit."""
    root = tmp_path / 'clone'
    (root / 'vit5seg').mkdir(parents=True)
    (root / 'configs').mkdir()
    for name in ('vit5seg/paths.py', 'vit5seg/COMMIT', '.gitattributes', 'configs/vit5_upernet_ade20k.py'):
        shutil.copy(REPO / name, root / name)
    _git(root, 'init', '-q')
    _git(root, 'add', '.')
    _git(root, 'commit', '-q', '-m', 'sources')
    return root, _git(root, 'rev-parse', 'HEAD').decode().strip()


def test_git_archive_fills_in_the_commit(clone, tmp_path, monkeypatch):
    root, commit = clone
    monkeypatch.delenv('VIT5SEG_COMMIT', raising=False)
    assert (root / 'vit5seg' / 'COMMIT').read_text().strip() == '$Format:%H$'  # a clone: not substituted
    with tarfile.open(fileobj=io.BytesIO(_git(root, 'archive', '--format=tar', 'HEAD'))) as tar:
        extract_tar(tar, tmp_path / 'archived')
    archived = _paths_of(tmp_path / 'archived', 'archived')
    assert archived.repository_root() == tmp_path / 'archived' and archived.git_commit() == commit


def test_a_plain_copy_keeps_what_the_last_import_in_its_clone_recorded(clone, tmp_path, monkeypatch):
    root, commit = clone
    monkeypatch.delenv('VIT5SEG_COMMIT', raising=False)
    in_clone = _paths_of(root, 'clone')
    assert in_clone.git_commit() == commit
    in_clone.record_commit()  # what import vit5seg does
    assert (root / 'vit5seg' / '.commit').read_text().strip() == commit
    assert 'vit5seg/.commit' in (REPO / '.gitignore').read_text().splitlines()  # never committed
    shutil.copytree(root, tmp_path / 'copy', ignore=shutil.ignore_patterns('.git'))
    copy = _paths_of(tmp_path / 'copy', 'copy')
    assert copy.git_commit() == f'{commit} (as its clone was when last imported)'
    # a changed tracked file shows in the clone's record
    (root / 'configs' / 'vit5_upernet_ade20k.py').write_text('# changed\n')
    in_clone.record_commit()
    assert (root / 'vit5seg' / '.commit').read_text().strip() == f'{commit} + changes'


def test_the_environment_names_the_code_of_a_tree_without_any_record(clone, tmp_path, monkeypatch):
    root, _ = clone
    shutil.copytree(root, tmp_path / 'bare', ignore=shutil.ignore_patterns('.git'))
    bare = _paths_of(tmp_path / 'bare', 'bare')
    monkeypatch.delenv('VIT5SEG_COMMIT', raising=False)
    assert bare.git_commit() is None  # reports say: unknown (no clone, no build record; set VIT5SEG_COMMIT)
    monkeypatch.setenv('VIT5SEG_COMMIT', 'v0.1.0-rc2 on the cluster')
    assert bare.git_commit() == 'v0.1.0-rc2 on the cluster'
