"""COCO 2017 where the panoptic and instance configs read it (``tools/prepare_coco.py``):
``OUT/{train2017,val2017}``, ``OUT/annotations/instances_*2017.json``,
``OUT/annotations/panoptic_*2017.json`` and their PNG folders ``OUT/annotations/panoptic_*2017/``.

The four official zips are downloaded into OUT (resumable; an interrupted download never
looks complete) or taken from a folder that holds them. Each is extracted into a hidden
staging folder and moved into place once whole; the panoptic zip's inner PNG zips too. A
zip done is recorded (``OUT/.prepared-<zip>``), so a second run only checks. The check pairs
each annotation file with the files it names: every image, every panoptic PNG.
"""
import json
import os
import shutil
import zipfile
from pathlib import Path
from typing import List, Optional, Tuple

from ..hub import DownloadError, cached_download
from .archives import check_space, open_zip
from .checks import DatasetError, panoptic_png_problems

COCO_URL = 'http://images.cocodataset.org'
# (zip, the path under COCO_URL, a member it must hold)
ZIPS = (('train2017.zip', 'zips/train2017.zip', 'train2017/'),
        ('val2017.zip', 'zips/val2017.zip', 'val2017/'),
        ('annotations_trainval2017.zip', 'annotations/annotations_trainval2017.zip',
         'annotations/instances_val2017.json'),
        ('panoptic_annotations_trainval2017.zip', 'annotations/panoptic_annotations_trainval2017.zip',
         'annotations/panoptic_val2017.json'))
OFFICIAL_IMAGES = {'train': 118287, 'val': 5000}


def _open(archive: Path, required: str) -> zipfile.ZipFile:
    zf = open_zip(archive)
    if not any(name.startswith(required) for name in zf.namelist()):
        zf.close()
        raise DatasetError(f'{archive} is not the COCO 2017 zip of that name: it holds no {required}')
    return zf


def extract(archive: Path, out: Path, required: str, progress: bool = True) -> None:
    """Every member of ``archive`` under ``out``, through a staging folder; nested zips of the
    panoptic release (``annotations/panoptic_*2017.zip``) are extracted beside themselves."""
    from tqdm import tqdm
    staging = out / f'.{archive.name}.partial'
    shutil.rmtree(staging, ignore_errors=True)   # left by a run that was killed
    with _open(archive, required) as zf:
        check_space(archive, zf.infolist(), out)
        try:
            for member in tqdm(zf.infolist(), desc=f'extracting {archive.name}', unit='file', disable=not progress,
                               dynamic_ncols=True, mininterval=1):
                zf.extract(member, staging)   # zipfile drops absolute and '..' parts of names
            for inner in sorted(staging.glob('annotations/panoptic_*2017.zip')):
                with _open(inner, inner.stem + '/') as nested:
                    nested.extractall(inner.parent)
                inner.unlink()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as e:
            shutil.rmtree(staging, ignore_errors=True)
            raise DatasetError(f'{archive} is damaged: {e}; nothing of it was put in {out}') from None
    for path in sorted(staging.rglob('*'), key=lambda p: len(p.parts)):
        target = out / path.relative_to(staging)
        if path.is_dir() and not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)   # a whole folder at once (train2017/, annotations/panoptic_val2017/)
        elif path.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)
    shutil.rmtree(staging)


def check_coco(root: Path) -> Tuple[List[str], List[str]]:
    """(lines of counts, problems): each split's instance and panoptic annotations against the
    images and PNGs they name."""
    lines, problems = [], []
    for split in ('train', 'val'):
        images = root / f'{split}2017'
        count = len(list(images.glob('*.jpg'))) if images.is_dir() else 0
        note = '' if count == OFFICIAL_IMAGES[split] else f' (the official release has {OFFICIAL_IMAGES[split]})'
        lines.append(f'{split}2017: {count} images{note}')
        for kind in ('instances', 'panoptic'):
            path = root / 'annotations' / f'{kind}_{split}2017.json'
            try:
                ann = json.loads(path.read_text())
            except (OSError, ValueError) as e:
                problems.append(f'{path}: unreadable ({e})')
                continue
            missing = [i['file_name'] for i in ann['images'] if not (images / i['file_name']).is_file()]
            if kind == 'panoptic':  # each PNG decoded: a truncated one stopped mmdet's loader without its name
                pngs = root / 'annotations' / f'panoptic_{split}2017'
                names = [a['file_name'] for a in ann['annotations']]
                found = panoptic_png_problems([str(pngs / name) for name in names])
                missing += [name for name, problem in zip(names, found) if problem == 'does not exist']
                problems += [f'{pngs / name} {problem}' for name, problem in zip(names, found)
                             if problem not in (None, 'does not exist')]
            segments = len(ann['annotations']) if kind == 'instances' else \
                sum(len(a['segments_info']) for a in ann['annotations'])
            lines.append(f'  {path.name}: {len(ann["images"])} images, {segments} '
                         f'{"instances" if kind == "instances" else "segments"}, {len(ann["categories"])} categories')
            if missing:
                problems.append(f'{path} names {len(missing)} files that are not there, e.g. {missing[:3]}')
    return lines, problems


def prepare_coco(src: Optional[str] = None, out='data/coco',
                 progress: bool = True) -> Tuple[Path, List[str], List[str]]:
    """Put COCO 2017 at ``out`` and check it. ``src``: a base URL (default COCO's) or a folder
    holding the four zips. Returns (out, lines of what was done and counted, problems)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    done = []
    for name, path, required in ZIPS:
        marker = out / f'.prepared-{name}'
        if marker.exists():
            done.append(f'{name}: already prepared')
            continue
        if src is not None and Path(src).is_dir():
            archive = Path(src) / name
            if not archive.is_file():
                raise DatasetError(f'{src} holds no {name}: give a folder with the four COCO 2017 zips '
                                   f'({", ".join(z[0] for z in ZIPS)}) or a base URL')
            how = f'extracted {archive}'
        else:
            url = f'{(src or COCO_URL).rstrip("/")}/{path}'
            archive = cached_download(url, progress=progress, folder=out)
            how = f'downloaded {url} and extracted it'
        try:
            extract(archive, out, required, progress)
        except DatasetError as e:
            if archive.parent == out:
                archive.unlink()   # our own download: the next run fetches it anew
                raise DatasetError(f'{e} (the download was deleted: run again to fetch it anew)') from None
            raise
        marker.write_text(f'{how}\n')
        done.append(f'{name}: {how}')
    lines, problems = check_coco(out)
    return out, done + lines, problems


def main(argv=None):
    import argparse
    parser = argparse.ArgumentParser(
        description='Download (resumable) and extract COCO 2017 for the panoptic and instance configs: images, '
                    'panoptic annotations (PNG + JSON) and instance annotations, then check that every file the '
                    'annotations name is there (118287 / 5000 images in the release).')
    parser.add_argument('src', nargs='?', default=None,
                        help=f'a folder holding the four zips, or a base URL (default: {COCO_URL})')
    parser.add_argument('--out', default='data/coco', help='where the configs read it from (default: %(default)s)')
    parser.add_argument('--no-progress', action='store_true', help='no progress bars')
    args = parser.parse_args(argv)
    try:
        out, lines, problems = prepare_coco(args.src, args.out, progress=not args.no_progress)
    except (DatasetError, DownloadError) as e:
        parser.exit(1, f'error: {e}\n')
    print('\n'.join(lines + [f'problem: {p}' for p in problems]))
    print(f'{out}: ' + ('has problems (above); fix or remove them and run again' if problems else 'ready'))
    return 1 if problems else 0
