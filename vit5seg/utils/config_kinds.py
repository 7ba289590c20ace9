"""What a config is, asked before anything is built, in one place: its task (:func:`task_of`), which
library's model it builds (:func:`is_detection_config`), and the test pipeline a photo goes through
(:func:`photo_pipeline`). An all-tasks config (configs/pmt/*_all-tasks.py) composes other configs' models
for inference and has no model or recipe of its own."""
from ..errors import ToolError

# what a config can be, by task
TASKS = ('semantic', 'panoptic', 'instance', 'video-instance', 'all-tasks')
# the steps of a test pipeline that read a sample's annotations, which a photo has none of
ANNOTATION_STEPS = ('LoadAnnotations', 'LoadPanopticAnnotations')


def is_all_tasks_config(cfg) -> bool:
    return 'tasks' in cfg and 'model' not in cfg


def is_detection_config(cfg) -> bool:
    """A panoptic or instance config (mmdet's scope: its model is an mmdet detector), not a segmentor's."""
    return cfg.get('default_scope') == 'mmdet'


def task_of(cfg) -> str:
    """One of :data:`TASKS`: an all-tasks config; in mmdet's scope video instance where the model takes
    clips (mmdet's ``TrackDataPreprocessor``, which every mmdet video model has), else panoptic unless its
    fusion head's ``test_cfg`` turns ``panoptic_on`` off (mmdet's default: on), then instance; otherwise
    semantic (mmseg's segmentors)."""
    if is_all_tasks_config(cfg):
        return 'all-tasks'
    if not is_detection_config(cfg):
        return 'semantic'
    if (cfg.model.get('data_preprocessor') or {}).get('type') == 'TrackDataPreprocessor':
        return 'video-instance'
    test_cfg = cfg.model.get('test_cfg') or {}
    return 'panoptic' if test_cfg.get('panoptic_on', True) else 'instance'


def photo_pipeline(pipeline) -> list:
    """A test pipeline for a photo: its steps without those that load annotations (mmdet's
    DetInferencer and mmseg's inferencer drop them alike)."""
    return [step for step in pipeline if step['type'] not in ANNOTATION_STEPS]


def refuse_all_tasks(cfg, path, what: str) -> None:
    """One error where a tool that needs a model of its own (``what``: training, its recipe card) gets an
    all-tasks config."""
    if is_all_tasks_config(cfg):
        raise ToolError(f'{path} is an all-tasks config: it joins the models of {", ".join(cfg.tasks)} for '
                        f'inference (tools/infer.py {path} CHECKPOINT_FOLDER PHOTO --out-dir OUT) and has no '
                        f'{what}; give one of its tasks\' configs instead')


__all__ = ['ANNOTATION_STEPS', 'TASKS', 'is_all_tasks_config', 'is_detection_config', 'photo_pipeline',
           'refuse_all_tasks', 'task_of']
