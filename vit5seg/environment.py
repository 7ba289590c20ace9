"""Is this environment inside the ranges vit5seg declares? ``import vit5seg`` says so in one
line when it is not, before anything fails further in.

The ranges are pyproject.toml's (a clone) or the installed metadata's (a regular install):
one place for them. A release older than a range's lower bound, or a missing package, is an
ImportError, since the code uses what that release lacks. Only what must not be passed has an
upper bound (mmseg 1.2 refuses mmcv 2.2, and the compatibility fixes are written against
mmengine 0.10 and mmseg 1.2 internals); a release past one, or newer than the tested set
(requirements/lock.txt), is a warning, since nothing is known to fail there, only that nobody
has run it. Pre-releases and vendor builds count as their release.
``VIT5SEG_IGNORE_VERSIONS=1`` imports without the check.
"""
import importlib.metadata
import os
import platform
import sys
import warnings
from typing import Dict, List, Optional

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from .paths import locked_versions, repository_root

# What the check looks at: the packages whose releases vit5seg's code and patches depend on.
CHECKED = ('torch', 'torchvision', 'mmengine', 'mmcv-lite', 'mmsegmentation', 'timm')
# Full mmcv (compiled ops) stands in for mmcv-lite; mmseg 1.2's own range for it.
FULL_MMCV = SpecifierSet('>=2.0.0rc4,<2.2.0')


class UnsupportedEnvironment(ImportError):
    """A package (or Python) older than vit5seg's range, or missing."""


def declared() -> Optional[dict]:
    """``{'python': SpecifierSet, 'torch': SpecifierSet, ...}`` from pyproject.toml or the
    installed metadata; None where neither is found (a copy of the package alone)."""
    root = repository_root()
    if root is not None and (root / 'pyproject.toml').is_file():
        import tomllib
        project = tomllib.loads((root / 'pyproject.toml').read_text())['project']
        python, requirements = project.get('requires-python', ''), project.get('dependencies', [])
    else:
        try:
            meta = importlib.metadata.metadata('vit5seg')
        except importlib.metadata.PackageNotFoundError:
            return None
        python, requirements = meta.get('Requires-Python') or '', importlib.metadata.requires('vit5seg') or []
    ranges = {'python': SpecifierSet(python)}
    for text in requirements:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate({'extra': ''}):
            ranges[requirement.name.lower()] = requirement.specifier
    return ranges


def _installed(name: str) -> Optional[str]:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _upper(spec: SpecifierSet) -> SpecifierSet:
    return SpecifierSet(','.join(str(s) for s in spec if s.operator in ('<', '<=')))


def _lower(spec: SpecifierSet) -> SpecifierSet:
    return SpecifierSet(','.join(str(s) for s in spec if s.operator not in ('<', '<=')))


def _newer_than_tested(name: str, version: Version, tested: Dict[str, str]) -> Optional[str]:
    """' (newer than the tested 2.14; ...)' where ``version``'s minor release is past the lock's."""
    locked = tested.get(name)
    if not locked or name == 'python':
        return None
    try:
        locked_release = Version(locked).release[:2]
    except InvalidVersion:
        return None
    if version.release[:2] > locked_release:
        return (f'{name} {version} is newer than the tested {".".join(map(str, locked_release))} '
                f'(requirements/lock.txt): nothing is known to fail there, only that nobody has run it')
    return None


def problems(ranges: Dict[str, SpecifierSet], found: Dict[str, Optional[str]],
             tested: Optional[Dict[str, str]] = None) -> List[tuple]:
    """``[(severity, text)]`` for each package outside its range: 'error' (missing or too
    old) or 'warning' (past an upper bound, or newer than the tested set ``tested``, the lock
    file's versions). ``found`` maps names to installed versions; 'mmcv' (full mmcv) stands in
    for 'mmcv-lite'. A pre-release or vendor build counts as its release: NGC's
    ``2.7.0a0+...nv25.04`` is a torch 2.7.0."""
    out = []
    for name in ('python', *CHECKED):
        spec = ranges.get(name)
        if spec is None:
            continue
        label, version = name, found.get(name)
        if name == 'mmcv-lite' and found.get('mmcv'):
            label, version, spec = 'mmcv', found['mmcv'], FULL_MMCV
        if version is None:
            out.append(('error', f'{label} is not installed (vit5seg needs {label}{spec})'))
            continue
        try:
            parsed = Version(version)
        except InvalidVersion:
            continue  # a locally built release with a version string packaging cannot read: no claim
        release = Version(parsed.base_version)
        if not _lower(spec).contains(release, prereleases=True):
            out.append(('error', f'{label} {version} is outside vit5seg\'s range {label}{spec}'))
        elif _upper(spec) and not _upper(spec).contains(release, prereleases=True):
            out.append(('warning', f'{label} {version} is outside vit5seg\'s range {label}{spec} (newer than any '
                                   'release it was tested with)'))
        else:
            newer = _newer_than_tested(label, release, tested or {})
            if newer:
                out.append(('warning', newer))
    if found.get('mmcv') and found.get('mmcv-lite') and found['mmcv'] != found['mmcv-lite']:
        out.append(('warning', f'mmcv {found["mmcv"]} and mmcv-lite {found["mmcv-lite"]} share the mmcv folder, so '
                               'its Python files come from one and its compiled ops from the other: install the '
                               'same version of both (docs/compatibility.md#full-mmcv)'))
    return out


def check() -> None:
    """Raise :class:`UnsupportedEnvironment`, or warn, in one line each (called by ``import vit5seg``)."""
    if os.environ.get('VIT5SEG_IGNORE_VERSIONS') == '1':
        return
    ranges = declared()
    if ranges is None:
        return
    found = {name: _installed(name) for name in (*CHECKED, 'mmcv')}
    found['python'] = platform.python_version()
    where = f'in {sys.prefix}'
    found_problems = problems(ranges, found, locked_versions())
    errors = [text for severity, text in found_problems if severity == 'error']
    if errors:
        raise UnsupportedEnvironment(f'vit5seg cannot run {where}: {"; ".join(errors)}. Install a release in the '
                                     'range (or set VIT5SEG_IGNORE_VERSIONS=1 to import anyway)')
    for severity, text in found_problems:
        warnings.warn(f'vit5seg {where}: {text}', stacklevel=3)
