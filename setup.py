"""pyproject.toml holds the metadata; this file only adds the repository's files to a built
wheel.

A regular (non-editable) install copies the package and nothing beside it, so the
repository's ``configs/``, ``tools/`` and ``requirements/lock.txt`` travel inside it under
``vit5seg/.mim/`` (where OpenMMLab packages keep theirs; ``vit5seg.paths`` looks there
first), with the git commit of the clone the wheel (or its sdist) was built from. An
editable install reads them from the clone. MANIFEST.in puts the same files in the sdist,
so a wheel built from the sdist has them too.
"""
import importlib.util
import json
import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
IGNORED = shutil.ignore_patterns('__pycache__', '*.pyc', 'bootstrap.sh')


def _commit():
    # vit5seg.paths by its file: the package's __init__ needs torch, which a build has not
    spec = importlib.util.spec_from_file_location('_vit5seg_paths', HERE / 'vit5seg' / 'paths.py')
    paths = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(paths)
    if os.environ.get(paths.COMMIT_VARIABLE):
        return os.environ[paths.COMMIT_VARIABLE]
    if (HERE / '.git').exists():
        return paths.clone_commit(HERE)
    info = HERE / 'build_info.json'  # an sdist: the commit its clone was at, if it says
    if info.is_file():
        return json.loads(info.read_text()).get('commit')
    return paths.copied_commit(HERE / 'vit5seg')  # git archive's COMMIT, or a copy's record


def _hint():
    spec = importlib.util.spec_from_file_location('_vit5seg_mmcv_hint', HERE / 'vit5seg_mmcv_hint.py')
    hint = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hint)
    return hint


class BuildPyWithRepositoryFiles(build_py):
    def run(self):
        super().run()
        if getattr(self, 'editable_mode', False):
            return  # an editable wheel carries no extra file: bootstrap.sh writes the .pth
        _hint().write_pth(self.build_lib)  # site-packages runs it at start: vit5seg_mmcv_hint.py says why
        mim = Path(self.build_lib) / 'vit5seg' / '.mim'
        for folder in ('configs', 'tools'):
            shutil.rmtree(mim / folder, ignore_errors=True)
            shutil.copytree(HERE / folder, mim / folder, ignore=IGNORED)
        (mim / 'requirements').mkdir(parents=True, exist_ok=True)
        shutil.copy(HERE / 'requirements' / 'lock.txt', mim / 'requirements' / 'lock.txt')
        commit = _commit()
        if commit:
            (mim / 'build_info.json').write_text(json.dumps({'commit': commit}))


class SdistWithCommit(sdist):
    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        commit = _commit()
        if commit:
            (Path(base_dir) / 'build_info.json').write_text(json.dumps({'commit': commit}))


setup(cmdclass={'build_py': BuildPyWithRepositoryFiles, 'sdist': SdistWithCommit})
