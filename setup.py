"""pyproject.toml holds the metadata; this file only adds the configs to a built wheel.

A regular (non-editable) install copies the package and nothing beside it, so the
repository's ``configs/`` travel inside it as ``vit5seg/.mim/configs`` (where OpenMMLab
packages keep theirs; ``vit5seg.paths`` looks there first). An editable install reads
them from the clone.
"""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithConfigs(build_py):
    def run(self):
        super().run()
        if getattr(self, 'editable_mode', False):
            return
        target = Path(self.build_lib) / 'vit5seg' / '.mim' / 'configs'
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(Path(__file__).resolve().parent / 'configs', target,
                        ignore=shutil.ignore_patterns('__pycache__', '*.pyc'))


setup(cmdclass={'build_py': BuildPyWithConfigs})
