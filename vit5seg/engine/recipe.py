"""The recipe card: every value a training run will use, resolved before the run starts.

``tools/print_config.py CONFIG --card [--gpus N]`` prints it and ``tools/train.py`` logs it
first (``ViT5Runner`` keeps it in the run's saved config as ``recipe_card``). It holds:

- what the launch decides: GPUs x images per GPU x micro-batches = images per iteration,
  against the config's ``auto_scale_lr.base_batch_size``, and the lr after any scaling
  (:func:`lr_scale`: the lr follows the images per iteration, however they are split);
- every value of the keys the Runner reads (model, dataloaders, optimizer, schedulers,
  hooks, evaluators, ...), flattened to the dotted paths ``--cfg-options`` takes, plus the
  defaults the backbone and each data transform fill in for what the config leaves out;
- what the trainer builds from them, read from the built objects (:mod:`.run_objects`; the
  Runner's own in a training's log): the lr and weight decay of every param group after
  scaling (by layer where layer decay applies), the parameters without weight decay, each
  scheduler's begin and end in optimizer steps, the train loop and what ``max_iters`` counts;
- what follows from the config: EoMT's annealing windows in iterations, the scale rule of
  the augmentation, the precision and ``torch.compile``.

``tests/test_engine_recipes.py`` pins every value of every shipped config's card to its source.
"""
import copy
import inspect
import re
from typing import Dict, Iterator, List, NamedTuple, Optional

from mmengine.optim.scheduler.param_scheduler import INF

from ..paths import describe_code
from ..utils.config_values import defaults_of, flatten, plain
from .accumulation import BatchPlan, apply_plan, batch_plan
from .run_objects import RunObjects, lr_scale, wrappers

# What mmengine's Runner.from_cfg reads (and test.py --tta): a config's other top-level names
# (crop_size, width, ...) only matter through these.
RUNNER_KEYS = ('runner_type', 'model', 'train_dataloader', 'train_cfg', 'optim_wrapper', 'param_scheduler',
               'auto_scale_lr', 'val_dataloader', 'val_cfg', 'val_evaluator', 'test_dataloader', 'test_cfg',
               'test_evaluator', 'tta_pipeline', 'tta_model', 'default_hooks', 'custom_hooks', 'env_cfg', 'randomness',
               'log_processor')
SECTIONS = ('batch and lr', 'optimizer', 'schedule', 'model', 'loss and matching', 'train data', 'evaluation',
            'precision and compile', 'runtime')
_LOSS_KEYS = ('loss_decode', 'loss_cls', 'loss_mask', 'loss_dice', 'train_cfg')
_EVAL_KEYS = ('val_dataloader', 'val_cfg', 'val_evaluator', 'test_dataloader', 'test_cfg', 'test_evaluator',
              'tta_pipeline', 'tta_model')


class Row(NamedTuple):
    section: str
    key: str        # a dotted config path (``model.backbone.drop_path_rate``) or a derived name
    value: object
    how: str = ''   # 'default': the class's default, not in the config; 'derived': computed here


def _transform_defaults(pipeline, prefix: str, scope: str = 'mmseg') -> Iterator[tuple]:
    """The defaults of each transform, as the config's library (``scope``: its default scope)
    builds it: mmdet's LoadAnnotations is not mmseg's."""
    import importlib
    TRANSFORMS = importlib.import_module(f'{scope}.registry').TRANSFORMS
    for i, step in enumerate(pipeline or ()):
        if not isinstance(step, dict) or 'type' not in step:
            continue
        cls = TRANSFORMS.get(step['type'])
        if cls is not None and inspect.isclass(cls):
            for name, value in defaults_of(cls, step, skip=('transforms',)).items():
                yield f'{prefix}.{i}.{name}', value
        if isinstance(step.get('transforms'), list) and all(isinstance(t, dict) for t in step['transforms']):
            yield from _transform_defaults(step['transforms'], f'{prefix}.{i}.transforms', scope)


def _section(key: str) -> str:
    top = key.split('.', 1)[0]
    parts = key.split('.')
    if top == 'model':
        if any(p in _LOSS_KEYS for p in parts[1:]) and parts[1] != 'test_cfg':
            return 'loss and matching'
        if parts[1] == 'test_cfg':
            return 'evaluation'
        return 'model'
    if top == 'optim_wrapper':
        return 'optimizer'
    if top in ('train_cfg', 'param_scheduler') or key.startswith('default_hooks.checkpoint'):
        return 'schedule'
    if top == 'train_dataloader':
        return 'train data'
    if top in _EVAL_KEYS:
        return 'evaluation'
    return 'runtime'


def batch_warnings(plan: BatchPlan, auto_scale_lr: Optional[dict]) -> List[str]:
    """One line where the images per optimizer step differ from the config's."""
    if plan.target is None or plan.images_per_step == plan.target:
        return []
    factor = plan.images_per_step / plan.target
    images = f'{plan.images_per_step} images per {"iteration" if plan.iteration_is_step else "optimizer step"}'
    if lr_scale(plan, auto_scale_lr) != 1.0:
        lr = f'the lr is scaled by the same {factor:g} (auto_scale_lr.enable)'
    else:
        lr = 'the lr stays as configured (auto_scale_lr.enable=True would scale it by as much)'
    if factor > 1:
        return [f'{images} are {factor:g}x the config\'s {plan.target} (auto_scale_lr.base_batch_size): {lr}; '
                f'fewer GPUs or a smaller train_dataloader.batch_size keep the protocol']
    if plan.iteration_is_step:
        keep = f'--accumulate auto keeps {plan.target}'
    elif plan.target % plan.images_per_iteration == 0:
        keep = f'optim_wrapper.accumulative_counts={plan.target // plan.images_per_iteration} keeps {plan.target}'
    else:
        keep = f'no whole number of micro-batches per step keeps {plan.target}'
    return [f'{images} are {factor:g}x the config\'s {plan.target} (auto_scale_lr.base_batch_size): {lr}; {keep}']


def schedule_warnings(run: RunObjects) -> List[str]:
    """One line where the last lr scheduler ends before the last iteration: the lr stays at
    its end value from there on (mmseg's BEiT-L: PolyLR over 160000 of 320000 iterations)."""
    lr = [s for s in run.schedulers if s.param_name == 'lr' and not s.by_epoch]
    if not lr or run.max_iters >= INF:
        return []
    last = max(lr, key=lambda s: s.end)
    if last.end >= run.max_iters:
        return []
    eta_min = getattr(last, 'eta_min', None)
    after = f'lr {eta_min:g} after' if eta_min is not None else 'the lr stays at its end value after'
    return [f'{type(last).__name__} ends at iteration {last.end} of {run.max_iters}: {after}']


def _component_rows(cfg) -> Iterator[Row]:
    """The rows each component of the config gives of itself (its class's ``card_rows(given, prefix, cfg)``:
    what a preset or the class fills in, what follows from it): the backbone, the decode head, the
    decoder, the custom hooks. A component the card should say more of gives more rows; the card names
    no component."""
    from mmengine.registry import HOOKS
    from mmseg.registry import MODELS
    model = cfg.model
    parts = [(MODELS, f'model.{name}', model.get(name)) for name in ('backbone', 'decode_head', 'decoder')]
    parts += [(HOOKS, f'custom_hooks.{i}', hook) for i, hook in enumerate(cfg.get('custom_hooks') or [])]
    for registry, prefix, given in parts:
        if not (isinstance(given, dict) and isinstance(given.get('type'), str)):
            continue
        try:
            cls = registry.get(given['type'])
        except (KeyError, ImportError):  # another library's scope that is not installed: nothing to say
            cls = None
        if inspect.isclass(cls) and hasattr(cls, 'card_rows'):
            for section, key, value, how in cls.card_rows(given, prefix, cfg):
                yield Row(section, key, value, how)


def _lr_rows(cfg, plan: BatchPlan, run: Optional[RunObjects]) -> Iterator[Row]:
    """The factor the lr rule applied and the base lr after it: read from the run (the optimizer's
    own lr times the factor the Runner applied), or from the config where nothing was built."""
    if run is not None:
        scale = run.lr_scale
        lr = wrappers(run.optim_wrapper)[0].optimizer.defaults.get('lr')
    else:
        scale = lr_scale(plan, cfg.get('auto_scale_lr'))
        lr = cfg.get('optim_wrapper', {}).get('optimizer', {}).get('lr')
    yield Row('batch and lr', 'lr scale', scale, 'derived')
    if lr is not None:
        yield Row('batch and lr', 'lr used', plain(lr * scale), 'derived')


def _names(model) -> Dict[int, str]:
    return {id(p): name for name, p in model.named_parameters()}


def _pattern(name: str) -> str:
    """A parameter name with its block and layer indices as ``*``: one line for all blocks."""
    return re.sub(r'\.\d+(?=\.)', '.*', name)


def _layer_name(layer_id: int, last: int) -> str:
    return 'embeddings' if layer_id == 0 else 'head and neck' if layer_id == last else f'block {layer_id - 1}'


def _group_rows(optim_wrapper, model) -> Iterator[Row]:
    """Each param group's lr (the base the schedulers start from, after scaling) and weight
    decay, read from the optimizer the constructor built."""
    names = _names(model)
    for index, wrapper in enumerate(wrappers(optim_wrapper)):
        suffix = f' ({index})' if index else ''
        groups = wrapper.optimizer.param_groups
        lr_of = [g.get('initial_lr', g['lr']) for g in groups]
        if all('layer_id' in g for g in groups):
            last = max(g['layer_id'] for g in groups)
            by_layer = {}
            for group, lr in zip(groups, lr_of):
                by_layer.setdefault(group['layer_id'], set()).add(lr)
            yield Row('optimizer', f'lr by layer{suffix}', tuple(
                f'{_layer_name(i, last)} ' + '/'.join(f'{lr:.4g}' for lr in sorted(lrs))
                for i, lrs in sorted(by_layer.items())), 'derived')
        else:
            counts = {}
            for group, lr in zip(groups, lr_of):
                counts[lr] = counts.get(lr, 0) + len(group['params'])
            yield Row('optimizer', f'lr by group{suffix}', tuple(f'{lr:.4g}: {n} tensors' for lr, n in counts.items()),
                      'derived')
        decays, exempt = {}, set()
        for group in groups:
            decay = group.get('weight_decay', 0.0)
            decays[decay] = decays.get(decay, 0) + len(group['params'])
            if not decay:
                exempt.update(_pattern(names.get(id(p), '?')) for p in group['params'])
        yield Row('optimizer', f'weight decay{suffix}',
                  tuple(f'{d:g} on {n} tensors' for d, n in sorted(decays.items())), 'derived')
        yield Row('optimizer', f'no weight decay on{suffix}',
                  tuple(sorted(exempt)) or 'nothing: every parameter decays', 'derived')


def _iterations(max_iters, plan: BatchPlan) -> str:
    """What ``max_iters`` counts, in one line."""
    if plan.iteration_is_step:
        return (f'{max_iters} optimizer steps of {plan.images_per_step} images ({plan.micro_batches} '
                f'micro-batch(es) each)')
    k = plan.micro_batches
    if max_iters >= INF:
        return f'iterations of 1 micro-batch, an optimizer step of {plan.images_per_step} images every {k}'
    steps, rest = -(-max_iters // k), max_iters % k
    text = f'{max_iters} iterations of 1 micro-batch = {steps} optimizer steps of {plan.images_per_step} images'
    if rest:  # mmengine's OptimWrapper steps once more over the remainder, its loss scaled by 1 / rest
        text += f' (the last of {rest} micro-batch(es), mmengine\'s remainder rule)'
    return text


def _schedule_rows(run: RunObjects, plan: BatchPlan) -> Iterator[Row]:
    yield Row('schedule', 'train loop', run.loop, 'derived')
    yield Row('schedule', 'max_iters counts', _iterations(run.max_iters, plan), 'derived')
    if run.epoch is not None:
        yield Row('schedule', 'an epoch', run.epoch, 'derived')
    steps = []
    for scheduler in run.schedulers:
        end = 'the end' if scheduler.end >= INF else scheduler.end
        unit = 'epochs' if scheduler.by_epoch else 'steps' if plan.iteration_is_step else 'iterations'
        factors = ''.join(f' {name}={value!r}' for name, value in scheduler_factors(scheduler).items())
        steps.append(f'{type(scheduler).__name__} {scheduler.param_name} {unit} {scheduler.begin}-{end}{factors}')
    if steps:
        unit = 'optimizer steps' if plan.iteration_is_step else 'iterations'
        yield Row('schedule', f'schedulers in {unit}', tuple(steps), 'derived')


# a scheduler's arguments that place it or say what it steps, not what it computes
_SCHEDULER_PLACE = ('self', 'optimizer', 'param_name', 'begin', 'end', 'last_step', 'by_epoch', 'verbose',
                    'epoch_length')


def scheduler_factors(scheduler) -> Dict[str, object]:
    """The numbers a built scheduler computes with (``start_factor``, ``power``, ``eta_min``, ...):
    each argument of its class that it keeps under the same name, read from the object."""
    out = {}
    for klass in type(scheduler).__mro__:  # mmengine's LR schedulers take *args through a mixin
        if '__init__' not in vars(klass):
            continue
        for name, param in inspect.signature(klass.__init__).parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or name in _SCHEDULER_PLACE or name in out:
                continue
            value = getattr(scheduler, name, None)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out[name] = value
    return out


def _trained_rows(model) -> Iterator[Row]:
    """A frozen backbone's count (none of its parameters trains) and what trains instead, by part."""
    backbone = getattr(model, 'backbone', None)
    if not getattr(backbone, 'frozen', False):
        return
    total = sum(p.numel() for p in backbone.parameters())
    trained = sum(p.numel() for p in backbone.parameters() if p.requires_grad)
    yield Row('optimizer', 'backbone frozen', f'{trained:,} of {total:,} parameters trained', 'derived')
    parts = {}
    for name, p in model.named_parameters():
        if p.requires_grad:
            part = name.split('.')[0]
            parts[part] = parts.get(part, 0) + p.numel()
    yield Row('optimizer', 'trained parameters', tuple(f'{part}: {n:,}' for part, n in parts.items()), 'derived')


def run_rows(run: RunObjects, plan: BatchPlan) -> List[Row]:
    """The card's rows read from what the trainer built (:class:`RunObjects`)."""
    return [*_trained_rows(run.model), *_group_rows(run.optim_wrapper, run.model), *_schedule_rows(run, plan)]


def _scale_rule(pipeline) -> Optional[str]:
    for step in _steps(pipeline):
        if step['type'] == 'RandomResize':
            low, high = step.get('ratio_range') or (1, 1)
            w, h = step['scale']
            return (f'RandomResize: the image fitted into ({w}, {h}) x r, r uniform in [{low}, {high}]: '
                    f'its short side {h} r unless its long side would pass {w} r')
        if step['type'] == 'ScaleJitterCrop':
            low, high = step.get('scale_range', (0.5, 2.0))
            size = step.get('crop_size', (512, 512))
            return (f'ScaleJitterCrop: the image fitted into {tuple(size)} x s, s uniform in [{low}, {high}]: '
                    f'its long side {max(size)} s; padded and cropped to {tuple(size)}')
    return None


def _steps(pipeline) -> Iterator[dict]:
    for step in pipeline or ():
        if isinstance(step, dict) and 'type' in step:
            yield step
            if isinstance(step.get('transforms'), list):
                yield from _steps([t for t in step['transforms'] if isinstance(t, dict)])


def _precision(wrapper: dict, backbone: dict) -> Iterator[Row]:
    if wrapper.get('type') == 'AmpOptimWrapper':
        dtype = wrapper.get('dtype') or 'float16'
        scale = wrapper.get('loss_scale', 'dynamic')
        text = f'{dtype} autocast' + (f', loss scale {scale}' if 'float16' == str(dtype) else '')
    else:
        text = 'float32'
    yield Row('precision and compile', 'precision', text, 'derived')
    yield Row('precision and compile', 'torch.compile', plain(backbone.get('compile', False)), 'derived')


class RecipeCard:
    """The rows of a config's card for one launch; :meth:`text` prints it, :meth:`values`
    maps each key to its value."""

    def __init__(self, rows: List[Row], warnings: List[str], config: str = '', code: Optional[str] = None):
        self.rows, self.warnings, self.config, self._code = rows, warnings, config, code

    @property
    def code(self) -> str:
        """The code this card was made by (version, commit, install), asked for when shown."""
        if self._code is None:
            self._code = describe_code()
        return self._code

    def values(self) -> Dict[str, object]:
        return {row.key: row.value for row in self.rows}

    def text(self) -> str:
        """Sections of lines; a config component's values on one line (``key: type a=1 b=2``),
        what a class fills in for the config after ``|``, derived values as ``name: value``."""
        lines = [f'recipe card: {self.config}' if self.config else 'recipe card']
        lines += [f'code: {self.code}'] if self.code else []
        lines += [f'WARNING: {warning}' for warning in self.warnings]
        for section in SECTIONS:
            rows = [r for r in self.rows if r.section == section]
            if rows:
                lines.append(f'[{section}]')
                lines += [f'  {line}' for line in _component_lines(rows)]
        return '\n'.join(lines)


def _shown(value) -> str:
    return value if isinstance(value, str) else repr(value)


def _component_line(component: str, rows: List[Row]) -> str:
    """``component: Type a=1 b=2 | filled=3``: what the config gives, then what classes fill in."""
    def pairs(selected):
        return [f'{r.key.rsplit(".", 1)[1]}={_shown(r.value)}' for r in selected if not r.key.endswith('.type')]
    given = [r for r in rows if not r.how]
    kind = [r.value for r in given if r.key.endswith('.type')]
    text = ' '.join(kind[:1] + pairs(given))
    filled = [r for r in rows if r.how]
    if filled:
        text += ' | ' + ' '.join(pairs(filled))
    return f'{component}: {text.strip()}'


def _component_lines(rows: List[Row]) -> List[str]:
    """Derived values one a line; a config component's rows gathered on one line, in the order
    the component first appears."""
    entries, components = [], {}
    for row in rows:
        if row.how == 'derived' or '.' not in row.key:
            entries.append(f'{row.key}: {_shown(row.value)}')
            continue
        component = row.key.rsplit('.', 1)[0]
        if component not in components:
            components[component] = []
            entries.append((component, components[component]))
        components[component].append(row)
    return [e if isinstance(e, str) else _component_line(*e) for e in entries]


def recipe_card(cfg, gpus: int = 8, accumulate: Optional[str] = 'auto', config: str = '',
                run: Optional[RunObjects] = None, plan: Optional[BatchPlan] = None) -> RecipeCard:
    """The card of ``cfg`` (an mmengine Config, ``--cfg-options`` applied) launched on
    ``gpus`` processes with ``accumulate`` ('auto' or a number of micro-batches, as
    ``tools/train.py --accumulate``; None: no flag), or with the run's own ``plan``. ``run``:
    the objects the trainer built (``ViT5Runner.run_objects``; for a card before the run,
    ``vit5seg.engine.card.card`` builds them as the trainer does); without it, the config's
    values only."""
    plan = plan or batch_plan(cfg, gpus, accumulate)
    cfg = copy.deepcopy(cfg)
    apply_plan(cfg, plan)  # the loop and accumulative_counts the run trains with
    if run is not None:  # the micro-batches the run's loop (or mmengine's wrapper) steps over
        plan = plan._replace(micro_batches=run.micro_batches)
    rows = [Row('batch and lr', 'GPUs', plan.gpus, 'derived'),
            Row('batch and lr', 'images per GPU', plan.per_gpu, 'derived'),
            Row('batch and lr', 'micro-batches per step', plan.micro_batches, 'derived'),
            Row('batch and lr', 'images per iteration', plan.images_per_iteration, 'derived')]
    rows += _lr_rows(cfg, plan, run)
    scope = cfg.get('default_scope') or 'mmseg'
    if cfg.get('train_cfg') and not (cfg.get('val_cfg') and cfg.get('val_dataloader') and cfg.get('val_evaluator')):
        rows.append(Row('evaluation', 'validation', 'no validation: val_cfg, val_dataloader or val_evaluator is None '
                                                    '(mmengine\'s way to turn it off)', 'derived'))
    for top in RUNNER_KEYS:
        if cfg.get(top) is None:
            continue
        if top.startswith('test_') and top.replace('test_', 'val_') in cfg and \
                cfg[top] == cfg[top.replace('test_', 'val_')]:
            rows.append(Row('evaluation', top, f'the same as {top.replace("test_", "val_")}', 'derived'))
            continue
        rows += [Row(_section(key), key, value) for key, value in flatten(top, cfg[top])]
        if top.endswith('_dataloader'):
            rows += [Row(_section(key), key, value, 'default')
                     for key, value in _transform_defaults(cfg[top].get('dataset', {}).get('pipeline'),
                                                           f'{top}.dataset.pipeline', scope)]
        if top == 'tta_pipeline':
            rows += [Row('evaluation', key, value, 'default')
                     for key, value in _transform_defaults(cfg[top], top, scope)]
    rows += _component_rows(cfg)
    if run is not None:
        rows += run_rows(run, plan)
    rule = _scale_rule(cfg.get('train_dataloader', {}).get('dataset', {}).get('pipeline'))
    if rule:
        rows.append(Row('train data', 'scale rule', rule, 'derived'))
    rows += _precision(cfg.get('optim_wrapper', {}), cfg.model.get('backbone', {}))
    rows.sort(key=lambda r: SECTIONS.index(r.section))  # stable: each section keeps its order
    warnings = batch_warnings(plan, cfg.get('auto_scale_lr')) + (schedule_warnings(run) if run else [])
    return RecipeCard(rows, warnings, config)


def protocol_gpus(cfg) -> int:
    """The GPU count a config was written for: ``base_batch_size`` / images per GPU (1
    where that is no whole number)."""
    target = cfg.get('auto_scale_lr', {}).get('base_batch_size')
    per_gpu = cfg.train_dataloader.batch_size
    return target // per_gpu if target and target % per_gpu == 0 else 1


__all__ = ['RecipeCard', 'Row', 'batch_warnings', 'lr_scale', 'protocol_gpus', 'recipe_card', 'run_rows',
           'schedule_warnings', 'scheduler_factors']
