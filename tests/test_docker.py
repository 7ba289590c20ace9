"""Static checks of docker/Dockerfile (CI has no Docker engine to build it)."""
import re
import tomllib

from conftest import REPO

DOCKERFILE = (REPO / 'docker' / 'Dockerfile').read_text()
INSTRUCTIONS = [line.strip() for line in re.sub(r'\\\n', ' ', DOCKERFILE).splitlines()
                if line.strip() and not line.lstrip().startswith('#')]


def _pyproject():
    return tomllib.loads((REPO / 'pyproject.toml').read_text())['project']


def test_versions_come_from_pyproject_and_the_lock_only():
    # pyproject.toml's ranges, constrained to the exact tested set; no pins of the image's own
    install = r"pip install -c requirements/lock.txt -e '\.\[([a-z0-9,]+)\]'"
    assert any(re.search(install, i) for i in INSTRUCTIONS)
    assert not re.search(r'[A-Za-z0-9_.-]+==[0-9]', DOCKERFILE)
    extras = re.search(install, DOCKERFILE).group(1).split(',')
    assert set(extras) <= set(_pyproject()['optional-dependencies'])
    for needed in ('pyproject.toml', 'requirements', 'vit5seg', 'configs', 'tools'):
        assert any(i.startswith('COPY') and needed in i for i in INSTRUCTIONS), needed


def test_python_is_the_locks_and_inside_requires_python():
    from packaging.specifiers import SpecifierSet
    python = re.search(r'for Python (\d+\.\d+)', (REPO / 'requirements' / 'lock.txt').read_text()).group(1)
    assert python in SpecifierSet(_pyproject()['requires-python'])
    assert f'python{python} -m venv' in DOCKERFILE and f'python{python}-venv' in DOCKERFILE


def test_cuda_runtime_base_non_root_user_demo_command():
    base = re.search(r'ARG BASE_IMAGE=(\S+)', DOCKERFILE).group(1)
    assert base.startswith('nvidia/cuda:') and '-runtime-' in base
    users = [i.split()[1] for i in INSTRUCTIONS if i.startswith('USER ')]
    assert users and users[-1] not in ('root', '0')
    cmd = [i for i in INSTRUCTIONS if i.startswith('CMD ')][-1]
    assert 'vit5seg.demo' in cmd
    assert INSTRUCTIONS.index([i for i in INSTRUCTIONS if i.startswith('USER ')][-1]) < INSTRUCTIONS.index(cmd)


def test_docker_readme_shows_build_run_and_multi_gpu_with_mounted_data():
    text = (REPO / 'docker' / 'README.md').read_text()
    assert 'docker build -f docker/Dockerfile' in text and '--gpus all' in text
    assert 'dist_train.sh' in text and '/home/vit5/data/ade' in text
