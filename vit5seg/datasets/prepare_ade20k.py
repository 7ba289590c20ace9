"""ADE20K as users get it (the official zip, its URL, or a folder already extracted) ->
``OUT/ADEChallengeData2016`` where the configs read it, checked.

Nothing half-made is ever at the configs' path: the archive is extracted into a hidden
``.ADEChallengeData2016.partial`` folder beside it and renamed once complete.
"""
import os
import shutil
import tarfile
import zipfile
from pathlib import Path
from typing import List, Tuple

from ..hub import ADE20K_URL, DownloadError, cached_download, is_url
from .archives import check_space, open_zip
from .checks import DatasetError, SplitReport, check_ade20k, format_report

RELEASE = 'ADEChallengeData2016'
_REQUIRED = (f'{RELEASE}/images/training/', f'{RELEASE}/annotations/training/',
             f'{RELEASE}/images/validation/', f'{RELEASE}/annotations/validation/')


def _release_members(archive: Path, zf: zipfile.ZipFile) -> List[zipfile.ZipInfo]:
    members = [m for m in zf.infolist() if m.filename.startswith(f'{RELEASE}/')]
    names = [m.filename for m in members]
    missing = [d for d in _REQUIRED if not any(n.startswith(d) and not n.endswith('/') for n in names)]
    if missing:
        sample = ', '.join(m.filename for m in zf.infolist()[:3]) or 'nothing'
        raise DatasetError(f'{archive} is not the ADE20K release: it has no files under {", ".join(missing)} '
                           f'(it holds {len(zf.infolist())} entries: {sample} ...)')
    return members


def extract_release(archive, out, progress: bool = True) -> Path:
    """Unzip the release's ``ADEChallengeData2016/`` from ``archive`` into ``out``.

    The zip is checked first (readable, the release's folders, free space); a member
    that fails its CRC stops it with the partial folder removed.
    """
    from tqdm import tqdm
    archive, out = Path(archive), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    zf = open_zip(archive)
    staging = out / f'.{RELEASE}.partial'
    with zf:
        members = _release_members(archive, zf)
        check_space(archive, members, out)
        shutil.rmtree(staging, ignore_errors=True)  # left by a run that was killed
        try:
            for member in tqdm(members, desc=f'extracting {archive.name}', unit='file', disable=not progress,
                               dynamic_ncols=True, mininterval=1):
                zf.extract(member, staging)  # zipfile drops absolute and '..' parts of names
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as e:
            shutil.rmtree(staging, ignore_errors=True)
            raise DatasetError(f'{archive} is damaged: {e}; nothing was extracted to {out / RELEASE}') from None
    os.replace(staging / RELEASE, out / RELEASE)
    shutil.rmtree(staging)
    return out / RELEASE


def _extracted_root(folder: Path) -> Path:
    for root in (folder, folder / RELEASE):
        if (root / 'images' / 'training').is_dir() and (root / 'annotations' / 'training').is_dir():
            return root
    raise DatasetError(f'{folder} is not an extracted ADE20K release: expected images/training and '
                       f'annotations/training in it or in {folder / RELEASE}')


def prepare_ade20k(src, out='data/ade', progress: bool = True,
                   check_values: bool = True) -> Tuple[Path, List[SplitReport], str]:
    """Put ADE20K at ``out/ADEChallengeData2016`` and check it.

    ``src``: the official zip, an http(s) URL of it (downloaded to ``out`` with
    resume), or an extracted folder (linked, not copied). If the target is already
    there, it is only checked. Returns (target, per-split reports, what was done).
    """
    out = Path(out)
    target = out / RELEASE
    if target.is_symlink() and not target.exists():
        raise DatasetError(f'{target} is a link to {os.readlink(target)}, which does not exist: remove the link')
    if target.exists():
        done = 'already prepared: checked only'
    elif is_url(src):
        archive = cached_download(str(src), progress=progress, folder=out)
        try:
            extract_release(archive, out, progress)
        except DatasetError as e:
            archive.unlink()  # our own download: the next run fetches it anew instead of reusing it
            raise DatasetError(f'{e} (the download was deleted: run again to fetch it anew)') from None
        done = f'downloaded {src} to {archive} and extracted it'
    else:
        src = Path(src)
        if src.is_dir():
            out.mkdir(parents=True, exist_ok=True)
            target.symlink_to(_extracted_root(src).resolve(), target_is_directory=True)
            done = f'linked {target} -> {target.resolve()}'
        elif src.is_file():
            extract_release(src, out, progress)
            done = f'extracted {src}'
        else:
            raise DatasetError(f'{src} does not exist: give the ADE20K zip, its URL or an extracted folder')
    return target, check_ade20k(target, check_values=check_values), done


def _unpack(archive: Path, into: Path) -> None:
    """A zip (zipfile makes its names safe) or a tar of plain files and folders whose names stay
    inside ``into`` (checked here: Python 3.11.2 has no tar extraction filter)."""
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(into)
        return
    with tarfile.open(archive) as tf:
        members = tf.getmembers()
        bad = [m.name for m in members if not (m.isfile() or m.isdir()) or os.path.isabs(m.name)
               or '..' in Path(m.name).parts]
        if bad:
            raise tarfile.TarError(f'members that are links or leave the folder: {bad[:3]}')
        safe = {'filter': 'data'} if hasattr(tarfile, 'data_filter') else {}   # 3.11.4+ checks too
        tf.extractall(into, members=members, **safe)


def add_instances(target: Path, src) -> str:
    """ADE20K's instance annotations at ``target/annotations_instance``: from a folder (linked)
    or an archive (tar or zip, extracted through a staging folder); nothing if already there."""
    place = target / 'annotations_instance'
    if place.is_dir():
        return f'{place} already there'
    if src is None:
        raise DatasetError(f'{place} is missing: give ADE20K\'s instance annotations (annotations_instance.tar or '
                           'its extracted folder) after --panoptic')
    src = Path(src)
    if src.is_dir():
        folder = src if (src / 'training').is_dir() else src / 'annotations_instance'
        if not (folder / 'training').is_dir() or not (folder / 'validation').is_dir():
            raise DatasetError(f'{src} is not ADE20K\'s instance annotations: no training/ and validation/ in it or '
                               'in its annotations_instance/')
        place.symlink_to(folder.resolve(), target_is_directory=True)
        return f'linked {place} -> {folder.resolve()}'
    if not src.is_file():
        raise DatasetError(f'{src} does not exist: give annotations_instance.tar (or .zip) or its extracted folder')
    staging = target / '.annotations_instance.partial'
    shutil.rmtree(staging, ignore_errors=True)
    try:
        _unpack(src, staging)
    except (tarfile.TarError, OSError, EOFError, zipfile.BadZipFile) as e:
        shutil.rmtree(staging, ignore_errors=True)
        raise DatasetError(f'{src} is damaged or no archive ({e}); nothing was extracted') from None
    found = next((d for d in [staging, *staging.rglob('*')] if (d / 'training').is_dir() and
                  (d / 'validation').is_dir()), None)
    if found is None:
        shutil.rmtree(staging)
        raise DatasetError(f'{src} holds no training/ and validation/ folders of instance PNGs')
    os.replace(found, place)
    shutil.rmtree(staging, ignore_errors=True)   # gone already where the archive held the folders at its top
    return f'extracted {src} to {place}'


def main(argv=None):
    import argparse
    parser = argparse.ArgumentParser(
        description='Download / extract / link ADE20K (SceneParsing, ADEChallengeData2016) to OUT/ADEChallengeData2016 '
                    'and check it: 20210 / 2000 image-label pairs and label ids <= 150 in the release.')
    parser.add_argument('src', nargs='?', default=ADE20K_URL,
                        help='the official zip, a URL of it, or an extracted folder (default: %(default)s)')
    parser.add_argument('--out', default='data/ade', help='where the configs read it from (default: %(default)s)')
    parser.add_argument('--no-values', action='store_true',
                        help='only pair images with labels; skip reading every label map')
    parser.add_argument('--no-progress', action='store_true', help='no progress bars')
    parser.add_argument('--panoptic', nargs='?', const='', metavar='INSTANCES',
                        help='also write the panoptic annotations mmdet\'s ADE20KPanopticDataset reads '
                             '(ade20k_panoptic_{train,val}.json and PNGs) from ADE20K\'s instance annotations: '
                             'annotations_instance.tar (or .zip) or its folder; leave it out where '
                             'OUT/ADEChallengeData2016/annotations_instance is already there')
    args = parser.parse_args(argv)
    try:
        target, reports, done = prepare_ade20k(args.src, args.out, progress=not args.no_progress,
                                               check_values=not args.no_values)
        print(done)
        if args.panoptic is not None:
            from .ade20k_panoptic import write_panoptic
            print(add_instances(target, args.panoptic or None))
            counts = write_panoptic(target, progress=not args.no_progress)
            print('panoptic annotations (ade20k_panoptic_{train,val}.json): '
                  + ', '.join(f'{split} {n} image{"s" * (n != 1)}' for split, n in counts.items()))
    except (DatasetError, DownloadError, FileNotFoundError) as e:
        parser.exit(1, f'error: {e}\n')
    print(format_report(reports))
    ok = all(r.ok for r in reports)
    print(f'{target}: ' + ('ready' if ok else 'has problems (above); fix or remove it and run again'))
    return 0 if ok else 1
