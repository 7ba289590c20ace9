"""Every shipped config's recipe card, value by value, against tests/recipe_table.py, which
is written from each value's source; and every number in every config file is held by that
comparison: changed alone, it fails it (issue #38)."""
import ast
import shutil
from pathlib import Path

import pytest
from mmengine.config import Config

from conftest import REPO, run_script
from recipe_table import EXPECTED, DecayRule, FrozenCount
from vit5seg.engine.recipe import protocol_gpus, recipe_card
from vit5seg.engine.card import card

CONFIGS = REPO / 'configs'
# every training recipe; the all-tasks configs compose other configs for inference and have no recipe of their own
SHIPPED = sorted(str(p.relative_to(CONFIGS)) for p in CONFIGS.rglob('*.py')
                 if '_base_' not in p.parts and not p.name.endswith('_all-tasks.py'))
# what the card reads from the objects the trainer builds (optimizer wrapper, schedulers, loop)
RUN_KEYS = ('lr by layer', 'weight decay', 'no weight decay on', 'train loop', 'max_iters counts',
            'schedulers in optimizer steps', 'an epoch', 'backbone frozen', 'trained parameters')


def card_values(path: Path, run: bool = True) -> dict:
    """The card of the config at its protocol's GPU count, read from the objects a training builds
    (what print_config --card prints); ``run=False``: its config rows only."""
    cfg = Config.fromfile(str(path))
    return (card(cfg, protocol_gpus(cfg)) if run else recipe_card(cfg, protocol_gpus(cfg))).values()


def parameter_shapes(path: Path, everything: bool = False) -> list:
    """(name, shape) of every trainable parameter of the config's model, built on the meta device here;
    ``everything``: (name, numel, requires_grad) of every parameter."""
    import torch
    from mmengine.registry import DefaultScope
    from mmseg.registry import MODELS
    cfg = Config.fromfile(str(path))
    with DefaultScope.overwrite_default_scope(cfg.get('default_scope') or 'mmseg'):  # mmdet's for the COCO EoMTs
        try:
            with torch.device('meta'):
                model = MODELS.build(cfg.model)
        except RuntimeError:  # mmseg's SegmenterMaskTransformerHead calls .item() while it builds
            model = MODELS.build(cfg.model)
    if everything:
        return [(name, p.numel(), p.requires_grad) for name, p in model.named_parameters()]
    return [(name, tuple(p.shape)) for name, p in model.named_parameters() if p.requires_grad]


def expected_values(name: str, run: bool = True) -> dict:
    """The table's row of ``name``: key -> (value, source), the weight-decay rule applied to the
    config's model; without the run's keys where ``run`` is False."""
    out = {}
    for key, (value, source) in EXPECTED[name].items():
        if isinstance(value, FrozenCount):
            out.update({k: (v, source) for k, v in value.expect(parameter_shapes(CONFIGS / name, True)).items()}
                       if run else {})
        elif isinstance(value, DecayRule):
            out.update({k: (v, source) for k, v in value.expect(parameter_shapes(CONFIGS / name)).items()}
                       if run else {})
        elif run or key not in RUN_KEYS:
            out[key] = (value, source)
    return out


def mismatches(name: str, values: dict, run: bool = True) -> list:
    """One line per value of the card that is not its source's, or has no source."""
    expected = expected_values(name, run)
    out = [f'{key} = {values[key]!r} has no source in tests/recipe_table.py' for key in values if key not in expected]
    out += [f'{key} missing from the card (source: {source})' for key, (_, source) in expected.items()
            if key not in values]
    out += [f'{key} = {values[key]!r}, but {source} says {value!r}' for key, (value, source) in expected.items()
            if key in values and values[key] != value]
    return out


def test_print_config_shows_the_eomt_large_card_on_2_gpus():
    """The done-when of issue #38: 16 images per iteration (2 GPUs x 2 x 4 micro-batches),
    lr 1e-4 and the annealing windows in iterations, as EoMT's ADE20K yaml has them."""
    config = CONFIGS / 'eomt' / 'vit5-large_eomt_ade20k.py'
    out = run_script(REPO / 'tools' / 'print_config.py', config, '--card', '--gpus', '2')
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for line in ('  GPUs: 2', '  images per GPU: 2', '  micro-batches per step: 4', '  images per iteration: 16',
                 '  lr used: 0.0001', "  mask annealing windows: ('block 0: 6520-13040', 'block 1: 13040-19560', "
                 "'block 2: 19560-26080', 'block 3: 26080-32600')"):
        assert line in lines, line
    assert not any(line.startswith('WARNING') for line in lines)


def test_every_shipped_config_has_its_row():
    assert sorted(EXPECTED) == SHIPPED


@pytest.mark.parametrize('name', SHIPPED)
def test_the_card_holds_the_values_of_the_sources(name):
    problems = mismatches(name, card_values(CONFIGS / name))
    assert not problems, f'{name}:\n' + '\n'.join(problems)


# --- every number in every config file is held ------------------------------------------
def _bases(path: Path) -> list:
    """The files ``path`` names in ``_base_`` (mmseg:: bases are mmseg's, not ours)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, 'id', None) == '_base_' for t in node.targets):
            names = [e.value for e in getattr(node.value, 'elts', [node.value]) if isinstance(e, ast.Constant)]
            return [(path.parent / n).resolve() for n in names if '::' not in n]
    return []


def _dependents(relative: str) -> list:
    """The shipped configs that read ``relative``, nearest first (itself, then its children...)."""
    target = (CONFIGS / relative).resolve()
    found = []
    for name in SHIPPED:
        depth, frontier = 0, [(CONFIGS / name).resolve()]
        while frontier and target not in frontier:
            depth, frontier = depth + 1, [b for f in frontier for b in _bases(f)]
        if frontier:
            found.append((depth, name))
    return [name for _, name in sorted(found)]


def _numbers(source: str) -> list:
    """(line, column, end column, value) of each number literal (True/False are not numbers)."""
    return [(n.lineno, n.col_offset, n.end_col_offset, n.value) for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Constant) and type(n.value) in (int, float)]


def _mutated(value):
    return value + 1 if isinstance(value, int) else value * 1.5 + 0.25


CONFIG_FILES = sorted(str(p.relative_to(CONFIGS)) for p in CONFIGS.rglob('*.py') if _numbers(p.read_text()))


@pytest.mark.slow
@pytest.mark.parametrize('relative', CONFIG_FILES)
def test_any_single_changed_number_fails_the_table(relative, tmp_path):
    """Each number literal of the file, changed alone (an int by 1, a float by half itself and a
    quarter), makes the card of at least one config that reads the file disagree with its
    sources; the disagreement names the value and its source."""
    copy = tmp_path / 'configs'
    shutil.copytree(CONFIGS, copy)
    original = (CONFIGS / relative).read_text()
    lines = original.splitlines(keepends=True)
    dependents = _dependents(relative)
    assert dependents, f'{relative}: no shipped config reads it'
    survived = []
    for line, start, end, value in _numbers(original):
        changed = list(lines)
        text = changed[line - 1]
        changed[line - 1] = text[:start] + repr(_mutated(value)) + text[end:]
        (copy / relative).write_text(''.join(changed))
        caught = None
        for name in dependents:
            try:
                problems = mismatches(name, card_values(copy / name, run=False), run=False)
            except ValueError as error:  # a plan the card (and tools/train.py) refuses, in one line
                problems = [f'{name}: {error} says the card']
            if problems:
                caught = problems
                break
        if caught is None:
            survived.append(f'line {line}: {value!r} -> {_mutated(value)!r}')
        else:
            assert all(' says ' in p or 'source' in p for p in caught), caught
    (copy / relative).write_text(original)
    assert not survived, f'{relative}: changed alone, these numbers fail no card comparison: {survived}'


def test_validation_turned_off_the_mmengine_way_trains_and_the_card_says_so(tmp_path):
    """val_cfg, val_dataloader and val_evaluator None: mmengine trains without validation; the card
    died in recipe.py with an AttributeError (issue #51)."""
    import torch

    from vit5seg.datasets import make_synthetic_ade20k
    make_synthetic_ade20k(tmp_path / 'data' / 'synthetic_ade20k', num_train=2, num_val=1, size=64, seed=0)
    config = CONFIGS / 'tiny' / 'vit5_upernet_synthetic.py'
    off = ['val_cfg=None', 'val_dataloader=None', 'val_evaluator=None']
    shown = run_script(REPO / 'tools' / 'print_config.py', config, '--card', '--cfg-options', *off)
    assert shown.returncode == 0, shown.stderr[-2000:]
    line = ("  validation: no validation: val_cfg, val_dataloader or val_evaluator is None (mmengine's way to turn "
            "it off)")
    assert line in shown.stdout.splitlines() and 'val_dataloader.' not in shown.stdout
    run = run_script(REPO / 'tools' / 'train.py', config, '--work-dir', 'run', '--cfg-options', *off,
                     'train_cfg.max_iters=2', 'train_dataloader.batch_size=2', cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert torch.load(tmp_path / 'run' / 'iter_2.pth', weights_only=False)['meta']['iter'] == 2
    log = next((tmp_path / 'run').glob('*/*.log')).read_text()
    assert line.strip() in log and 'Epoch(val)' not in log and 'Iter(val)' not in log


def test_the_cards_epoch_is_the_one_the_schedulers_were_built_with(tmp_path):
    """A by-epoch scheduler converted to iterations: the card's epoch is read from the loader the
    schedulers were built over (64 images / 8 per iteration = 8 steps, the LinearLR's end); where
    the data cannot be read, the card says so and shows no converted scheduler."""
    from vit5seg.datasets import make_synthetic_ade20k
    root = make_synthetic_ade20k(tmp_path / 'data', num_train=64, num_val=1, size=32, seed=0)
    cfg = Config.fromfile(str(CONFIGS / 'tiny' / 'vit5_upernet_synthetic.py'))
    cfg.param_scheduler = [dict(type='LinearLR', start_factor=0.1, by_epoch=True, begin=0, end=1,
                                convert_to_iter_based=True)]
    cfg.train_dataloader.dataset.data_root = str(root)
    values = card(cfg, 1, '1').values()
    assert values['an epoch'] == '64 images / 8 per iteration = 8 optimizer steps'
    assert values['schedulers in optimizer steps'] == ('LinearLR lr steps 0-8 start_factor=0.1 end_factor=1.0',)
    cfg.train_dataloader.dataset.data_root = str(tmp_path / 'nowhere')
    values = card(cfg, 1, '1').values()
    assert values['an epoch'].startswith('unknown: the train dataset cannot be read here (FileNotFoundError: ')
    assert 'schedulers in optimizer steps' not in values
