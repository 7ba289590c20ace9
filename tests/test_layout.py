"""The package's floors (docs/layout.md): each part imports only from its own floor or the
floors below, counting imports inside functions, and no two parts import each other."""
import ast
from collections import defaultdict

from conftest import REPO

FLOORS = {
    'compat': 1, 'environment': 1, 'errors': 1, 'hf_hub': 1, 'hub': 1, 'ops': 1, 'paths': 1, 'utils': 1, 'version': 1,
    'models': 2, 'datasets': 2, 'evaluation': 2,
    'engine': 3,
    'apis': 4,
    'deploy': 5,
    'analysis': 6, 'benchmark': 6, 'demo': 6, 'registry_audit': 6, 'selfcheck': 6,
}


def _imports():
    """(importing part, imported part, 'file:line') for every import between parts."""
    root = REPO / 'vit5seg'
    for path in sorted(root.rglob('*.py')):
        rel = path.relative_to(REPO).with_suffix('')
        module = list(rel.parts[:-1] if rel.name == '__init__' else rel.parts)
        if len(module) < 2:
            continue  # vit5seg/__init__.py: registers everything
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module[:len(module) - node.level + (path.name == '__init__.py')]
                    target = base + (node.module.split('.') if node.module else [])
                else:
                    target = (node.module or '').split('.')
                names = [target + [a.name] for a in node.names] if len(target) == 1 else [target]
            elif isinstance(node, ast.Import):
                names = [a.name.split('.') for a in node.names]
            else:
                continue
            for name in names:
                if len(name) > 1 and name[0] == 'vit5seg' and name[1] != module[1]:
                    yield module[1], name[1], f'{path.relative_to(REPO)}:{node.lineno}'


def test_every_part_has_a_floor_and_imports_only_from_below():
    parts = {p.stem if p.is_file() else p.name for p in (REPO / 'vit5seg').iterdir()
             if (p.suffix == '.py' and p.stem != '__init__') or (p / '__init__.py').is_file()}
    assert parts == set(FLOORS), f'parts without a floor: {parts - set(FLOORS)}; gone: {set(FLOORS) - parts}'
    upward = [f'{where}: {src} (floor {FLOORS[src]}) imports {dst} (floor {FLOORS[dst]})'
              for src, dst, where in _imports() if FLOORS[dst] > FLOORS[src]]
    assert not upward, '\n'.join(upward)


def _reachable(graph, start):
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def test_no_import_cycles_between_parts():
    graph, where = defaultdict(set), {}
    for src, dst, line in _imports():
        graph[src].add(dst)
        where.setdefault((src, dst), line)
    cycles = [f'{where[a, b]} ({a} -> {b}) closes a cycle' for (a, b) in where if a in _reachable(graph, b)]
    assert not cycles, '\n'.join(cycles)


def test_import_layers_are_fewer_than_before_the_mask_classification_package():
    """The longest chain of imports between parts: 10 before issue #52 (foundations, datasets,
    models, engine, apis, deploy, benchmark, selfcheck on top of three foundation steps), 7 now."""
    graph = defaultdict(set)
    for src, dst, _ in _imports():
        graph[src].add(dst)
    depth = {}

    def layer(part):
        if part not in depth:
            depth[part] = 1 + max((layer(d) for d in graph[part]), default=0)
        return depth[part]
    assert max(layer(p) for p in FLOORS) <= 7, sorted((layer(p), p) for p in FLOORS)


def test_no_model_imports_a_dataset():
    """As in mmseg and mmdet: what models and datasets both need (class orders, dataset meta) lives
    below both (vit5seg.utils)."""
    found = [where for src, dst, where in _imports() if src == 'models' and dst == 'datasets']
    assert not found, found


