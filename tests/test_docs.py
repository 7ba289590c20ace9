"""The README is a front page whose links resolve; the docs name only configs and tools
that exist; the README's GPU commands are the tools' real flags."""
import itertools
import re

from conftest import REPO

README = REPO / 'README.md'
DOCS = sorted((REPO / 'docs').glob('*.md'))


def _expand(path):
    """configs/vit5/vit5-{small,large}_x.py -> both paths; <variant> -> a glob."""
    parts = re.split(r'\{([^}]*)\}', path)
    choices = [[p] if i % 2 == 0 else p.split(',') for i, p in enumerate(parts)]
    return [''.join(c).replace('<variant>', '*') for c in itertools.product(*choices)]


def test_docs_refer_to_real_files():
    for doc in DOCS + [README]:
        paths = set(re.findall(r'\b((?:configs|tools)/[\w./{},<>-]+\.(?:py|sh))', doc.read_text()))
        for path in paths - {p for p in paths if p.startswith('configs/custom/')}:  # written by the reader
            for concrete in _expand(path):
                assert list(REPO.glob(concrete)), f'{doc.name} mentions {path}, but {concrete} does not exist'
    assert len(re.findall(r'configs/', (REPO / 'docs' / 'reproduce.md').read_text())) > 15


def test_links_resolve():
    for doc in DOCS + [README, REPO / 'docker' / 'README.md']:
        for target in re.findall(r'\]\(([^)#]+)(?:#[\w-]+)?\)', doc.read_text()):
            if '://' not in target:
                assert (doc.parent / target).exists(), f'{doc.name} links {target}, which does not exist'


def test_readme_is_a_front_page_linking_every_doc():
    text = README.read_text()
    assert len(text.splitlines()) < 120
    for doc in DOCS:
        assert f'(docs/{doc.name})' in text, f'README does not link docs/{doc.name}'
    for heading in ('## Two commands', '## Train on a GPU machine', '## Documentation'):
        assert heading in text


def test_readme_states_the_driver_the_pinned_torch_needs():
    import torch

    from vit5seg.paths import locked_versions
    from vit5seg.selfcheck.machine import CUDA_MIN_DRIVER
    pinned = locked_versions()['torch']
    text = README.read_text()
    assert f'torch {pinned} for CUDA ' in text
    if torch.__version__.split('+')[0] == pinned:  # the CUDA build is known where the locked torch is installed
        assert torch.version.cuda, 'the pinned torch wheel is its CUDA build'
        major = int(torch.version.cuda.split('.')[0])
        assert f'torch {pinned} for CUDA {torch.version.cuda}: NVIDIA driver >= {CUDA_MIN_DRIVER[major]}' in text


def test_readme_gpu_commands_use_real_flags():
    blocks = README.read_text().split('## Train on a GPU machine')[1].split('## ')[0].split('```')[1::2]
    commands = [line.split('#')[0].strip() for block in blocks for line in block.splitlines() if line.strip()]
    tools = [c for c in commands if 'tools/' in c]
    # mmseg's own commands first, the card beside them; the seeds comparison after
    assert [re.search(r'tools/([\w.]+)', c).group(1) for c in tools] == [
        'selfcheck.py', 'prepare_ade20k.py', 'print_config.py', 'dist_train.sh', 'test.py', 'run_seeds.py',
        'run_seeds.py', 'compare.py']
    assert '--device cuda' in tools[0]  # a node whose GPUs torch cannot use fails instead of checking its CPU
    assert '--card' in tools[2] and tools[3].startswith('bash tools/dist_train.sh')
    for command in tools[5:7]:  # one run per model shows no interval on the delta
        assert len(command.split('--seeds')[1].split('--')[0].split()) >= 2, command
    for command in tools:
        tool = REPO / re.search(r'(tools/[\w.]+)', command).group(1)
        if tool.suffix == '.sh':  # the flags go on to train.py / test.py
            source = (REPO / 'vit5seg' / 'engine' / 'launch.py').read_text()
        else:
            source = tool.read_text()
            module = re.search(r'from (vit5seg[\w.]*) import main', source)
            if module:  # the module main() lives in, or all of its package
                path = REPO / module.group(1).replace('.', '/')
                files = sorted(path.glob('*.py')) if path.is_dir() else [path.with_suffix('.py')]
                source += ''.join(f.read_text() for f in files)
        for flag in re.findall(r'\s(--[\w-]+)', command):
            assert f"'{flag}'" in source, (command, flag)


def test_nothing_points_outside_the_repository():
    """A user's clone has no notes beside it: facts cite their public sources (issue #51)."""
    import subprocess
    files = subprocess.run(['git', 'ls-files'], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    pointing = []
    for name in files:
        path = REPO / name
        if path.suffix not in ('.py', '.md', '.sh', '.txt', '.toml', '.cfg', '') or not path.is_file():
            continue
        for number, line in enumerate(path.read_text(errors='replace').splitlines(), 1):
            if re.search(r'(?<![\w/])(?:\.\./)?shared/[\w-]+\.md', line):
                pointing.append(f'{name}:{number}: {line.strip()}')
    assert not pointing, '\n'.join(pointing)
