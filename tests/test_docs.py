"""docs/reproduce.md names only configs and tools that exist, and the README links it."""
import itertools
import re

from conftest import REPO

DOC = REPO / 'docs' / 'reproduce.md'


def _expand(path):
    """configs/vit5/vit5-{small,large}_x.py -> both paths; <variant> -> a glob."""
    parts = re.split(r'\{([^}]*)\}', path)
    choices = [[p] if i % 2 == 0 else p.split(',') for i, p in enumerate(parts)]
    return [''.join(c).replace('<variant>', '*') for c in itertools.product(*choices)]


def test_reproduce_doc_refers_to_real_files():
    text = DOC.read_text()
    paths = set(re.findall(r'\b((?:configs|tools)/[\w./{},<>-]+\.(?:py|sh))', text))
    assert len(paths) > 15, paths
    for path in paths:
        for concrete in _expand(path):
            assert list(REPO.glob(concrete)), f'docs/reproduce.md mentions {path}, but {concrete} does not exist'


def test_readme_links_the_reproduction_guide():
    assert '(docs/reproduce.md)' in (REPO / 'README.md').read_text()
