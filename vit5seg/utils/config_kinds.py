"""What kind of config a file is, where a tool must tell before it builds anything: an all-tasks config
(configs/pmt/*_all-tasks.py) composes other configs' models for inference and has no model or recipe of its own."""
from ..errors import ToolError


def is_all_tasks_config(cfg) -> bool:
    return 'tasks' in cfg and 'model' not in cfg


def refuse_all_tasks(cfg, path, what: str) -> None:
    """One error where a tool that needs a model of its own (``what``: training, its recipe card) gets an
    all-tasks config."""
    if is_all_tasks_config(cfg):
        raise ToolError(f'{path} is an all-tasks config: it joins the models of {", ".join(cfg.tasks)} for '
                        f'inference (tools/infer.py {path} CHECKPOINT_FOLDER PHOTO --out-dir OUT) and has no '
                        f'{what}; give one of its tasks\' configs instead')
