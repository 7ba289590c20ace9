"""Zip archives of the datasets' releases (ADE20K's, COCO's): opened or one error, and room on
the disk checked before anything is extracted."""
import shutil
import zipfile
from pathlib import Path
from typing import List

from ..hub import human_size
from .checks import DatasetError

_SPARE_BYTES = 256 << 20  # headroom left on the disk after extracting


def open_zip(archive: Path) -> zipfile.ZipFile:
    """``archive`` opened, or one error saying it is truncated or no zip."""
    try:
        return zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as e:
        raise DatasetError(f'{archive} is truncated or not a zip file ({e}); download it again '
                           f'(a download by URL resumes where it stopped)') from None


def check_space(archive: Path, members: List[zipfile.ZipInfo], out: Path) -> None:
    """Room in ``out`` for ``members`` of ``archive``, with some to spare, before extracting."""
    need = sum(m.file_size for m in members)
    free = shutil.disk_usage(out).free
    if need + _SPARE_BYTES > free:
        raise DatasetError(f'extracting {archive} needs {human_size(need)} (+{human_size(_SPARE_BYTES)} spare), '
                           f'but {out} has {human_size(free)} free')


__all__ = ['check_space', 'open_zip']
