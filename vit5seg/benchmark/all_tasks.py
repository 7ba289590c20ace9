"""One encoder pass for every task against one model per task (issue #53): the all-tasks config's three PMT
models (semantic, panoptic, instance) on one random frozen encoder, predicting one photo with one shared pass
against each task running the encoder itself, interleaved in one process; then the peak memory of each way
(the joined models hold one encoder, three models three; CPU: a fresh process's peak RSS growth)."""
import statistics

from ..models.backbones.vit5 import resolve_arch
from ..utils.memory import peak_rss_mb, probe_peak_mb
from ..utils.timing import measure_cells, quartiles, time_interleaved

# the issue's expectation: one pass with three heads at most 0.45 of three models' time
ALL_TASKS_TARGETS = {'one_pass_time_ratio': ('<=', 0.45)}
CONFIG = 'pmt/dinov3-large_pmt_all-tasks.py'


def task_options(arch) -> dict:
    """Each task's config at this encoder's size (random weights: no checkpoint); a dict ``arch`` sizes the
    config's DINOv3 preset."""
    size = resolve_arch(arch)
    width, depth = size['embed_dims'], size['num_layers']
    sizing = ({'model.backbone.arch': arch} if isinstance(arch, str) else
              {f'model.backbone.{k}': size[k] for k in ('embed_dims', 'num_layers', 'num_heads')})
    return {**sizing, 'model.backbone.init_cfg': None, 'model.decode_head.in_channels': width,
            'model.decoder.embed_dims': width, 'model.decoder.num_heads': size['num_heads'],
            'model.decoder.hidden_dims': width,
            'model.decoder.interaction_indices': tuple(depth // 4 * (i + 1) - 1 for i in range(4))}


def build_all_tasks(arch: str, device: str = 'cpu', joined: bool = True):
    """The all-tasks models at ``arch`` on one random encoder: joined (one encoder) or, ``joined=False``,
    three models with an encoder each."""
    from mmengine.config import Config

    from ..apis.all_tasks import AllTasksModel, _task_config
    from ..apis.inference import init_model
    from ..paths import config_path
    cfg = Config.fromfile(str(config_path(CONFIG)))
    models = {}
    for name, entry in cfg.tasks.items():
        models[name] = init_model(_task_config(dict(entry, cfg_options=task_options(arch))), None, device=device)
    first = models[cfg.input_task].backbone.state_dict()
    for model in models.values():
        model.backbone.load_state_dict(first)
    if joined:
        return AllTasksModel(models, cfg.input_task)
    # three models as three files would load, each with its own encoder; the joined view only for its input pipeline
    own = {name: model.backbone for name, model in models.items()}
    view = AllTasksModel(models, cfg.input_task)
    for name, model in models.items():
        model.backbone = own[name]
    view.backbone = None   # no shared encoder beside the three: predict(shared=False) only
    return view


def photo(side: int = 640):
    import numpy as np
    return np.random.default_rng(0).integers(0, 256, (side * 3 // 4, side, 3), dtype=np.uint8)


def all_tasks_timings(arch: str = 'dinov3-small', device: str = 'cpu', warmup: int = 1, repeats: int = 3,
                      memory: bool = True) -> dict:
    joined = build_all_tasks(arch, device)
    img = photo()
    times = time_interleaved({'one_pass': lambda: joined.predict(img),
                              'three_models': lambda: joined.predict(img, shared=False)}, device, warmup, repeats)
    one, three = times['one_pass'], times['three_models']
    result = dict(arch=arch, one_pass_s=statistics.median(one), three_models_s=statistics.median(three),
                  one_pass_time_ratio=statistics.median(one) / statistics.median(three),
                  one_pass_time_ratio_quartiles=quartiles([a / b for a, b in zip(one, three)]))
    if memory:
        del joined
        for key, joined_flag in (('one_pass_peak_mb', True), ('three_models_peak_mb', False)):
            code = ('import json, vit5seg; from vit5seg.benchmark.all_tasks import _cpu_probe; '
                    f'print(json.dumps(_cpu_probe({arch!r}, {joined_flag})))')
            result[key] = probe_peak_mb(code)
        result['one_pass_memory_ratio'] = result['one_pass_peak_mb'] / result['three_models_peak_mb']
    return result


def _cpu_probe(arch: str, joined: bool) -> float:
    import mmdet.models  # noqa: F401  (imports outside the measurement)
    import mmseg.models  # noqa: F401
    before = peak_rss_mb()
    build_all_tasks(arch, 'cpu', joined=joined).predict(photo(), shared=joined)
    return peak_rss_mb() - before


def all_tasks_table(result: dict) -> str:
    rows = ['| measure | value | per-round quartiles | target |', '|---|---|---|---|']
    for key in ('one_pass_s', 'three_models_s', 'one_pass_time_ratio', 'one_pass_peak_mb', 'three_models_peak_mb',
                'one_pass_memory_ratio'):
        if key in result:
            rows.append(f'| {key} ' + measure_cells(result, key, ALL_TASKS_TARGETS.get(key)))
    return '\n'.join(rows)


__all__ = ['ALL_TASKS_TARGETS', 'all_tasks_table', 'all_tasks_timings', 'build_all_tasks']
