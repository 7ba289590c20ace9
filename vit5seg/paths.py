"""Where the repository's configs are, in a clone (and an editable install) and in a
regular install, whose wheel carries a copy as ``vit5seg/.mim/configs`` (setup.py), the
place OpenMMLab packages keep theirs."""
from pathlib import Path
from typing import Optional

PACKAGE = Path(__file__).resolve().parent
_MARKER = 'vit5_upernet_ade20k.py'  # a foreign top-level ``configs`` folder does not have it


def repository_root() -> Optional[Path]:
    """The clone this package runs from (an editable install), or None (a regular install)."""
    root = PACKAGE.parent
    return root if (root / 'configs' / _MARKER).is_file() else None


def config_root() -> Path:
    for root in (PACKAGE / '.mim' / 'configs', PACKAGE.parent / 'configs'):
        if (root / _MARKER).is_file():
            return root
    raise FileNotFoundError(
        f'vit5seg finds no configs: neither {PACKAGE / ".mim" / "configs"} (a regular install) nor '
        f'{PACKAGE.parent / "configs"} (a clone) has them. Reinstall with `pip install .` or `pip install -e .` '
        'from a clone of the repository.')


def config_path(name: str) -> Path:
    """``config_path('tiny/vit5_upernet_synthetic.py')``: that file of the repository's configs."""
    return config_root() / name
