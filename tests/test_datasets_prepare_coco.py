"""tools/prepare_coco.py on zips laid out as COCO 2017's four (images, instance annotations, the
panoptic annotations with their nested PNG zips), served from 127.0.0.1 or lying in a folder."""
import shutil
import zipfile

import pytest
from local_server import serve

from conftest import REPO, run_script
from vit5seg.datasets import make_synthetic_data
from vit5seg.datasets.prepare_coco import ZIPS


@pytest.fixture(scope='module')
def release(tmp_path_factory):
    """The four zips, with the official names and paths under a server root (zips/, annotations/)."""
    folder = tmp_path_factory.mktemp('release')
    coco = make_synthetic_data('coco_panoptic', folder / 'made', num_train=3, num_val=2, size=48)
    served = folder / 'served'
    (served / 'zips').mkdir(parents=True)
    (served / 'annotations').mkdir()

    def write(path, files):
        with zipfile.ZipFile(served / path, 'w', zipfile.ZIP_STORED) as zf:
            for arcname, source in files:
                zf.write(source, arcname) if not isinstance(source, bytes) else zf.writestr(arcname, source)

    for split in ('train', 'val'):
        write(f'zips/{split}2017.zip', [(f'{split}2017/{p.name}', p) for p in (coco / f'{split}2017').iterdir()])
    write('annotations/annotations_trainval2017.zip',
          [(f'annotations/instances_{s}2017.json', coco / 'annotations' / f'instances_{s}2017.json')
           for s in ('train', 'val')])
    inner = []
    for split in ('train', 'val'):
        nested = folder / f'panoptic_{split}2017.zip'
        with zipfile.ZipFile(nested, 'w') as zf:
            for png in (coco / 'annotations' / f'panoptic_{split}2017').iterdir():
                zf.write(png, f'panoptic_{split}2017/{png.name}')
        inner += [(f'annotations/panoptic_{split}2017.zip', nested),
                  (f'annotations/panoptic_{split}2017.json', coco / 'annotations' / f'panoptic_{split}2017.json')]
    write('annotations/panoptic_annotations_trainval2017.zip', inner)
    return served


def _run(*args):
    return run_script(REPO / 'tools' / 'prepare_coco.py', *args, '--no-progress')


def test_served_zips_are_downloaded_extracted_checked_and_a_second_run_only_checks(release, tmp_path):
    out = tmp_path / 'data' / 'coco'
    with serve(release) as server:
        done = _run(server.url(''), '--out', out)
        assert done.returncode == 0, done.stderr
        assert len(server.requests) == 4
        again = _run(server.url(''), '--out', out)
        assert len(server.requests) == 4   # nothing fetched again
    assert again.returncode == 0 and again.stdout.count('already prepared') == 4
    assert 'train2017: 3 images (the official release has 118287)' in done.stdout
    assert 'panoptic_val2017.json: 2 images' in done.stdout and done.stdout.strip().endswith(f'{out}: ready')
    assert len(list((out / 'annotations' / 'panoptic_val2017').glob('*.png'))) == 2
    assert not list(out.glob('.*partial'))
    # what mmdet reads: the dataset of the panoptic configs
    from mmdet.datasets import CocoPanopticDataset
    dataset = CocoPanopticDataset(data_root=str(out) + '/', ann_file='annotations/panoptic_val2017.json',
                                  data_prefix=dict(img='val2017/', seg='annotations/panoptic_val2017/'),
                                  pipeline=[], test_mode=True)
    assert len(dataset) == 2


def test_interrupted_download_resumes_and_nothing_partial_is_in_place(release, tmp_path):
    out = tmp_path / 'coco'
    big = release / 'zips' / 'train2017.zip'
    with serve(release) as server:
        server.cut_after = big.stat().st_size // 2
        cut = _run(server.url(''), '--out', out)
        assert cut.returncode == 1 and 'run again to resume' in cut.stderr, cut.stderr
        assert not (out / 'train2017').exists() and not (out / 'train2017.zip').exists()
        server.cut_after = None
        done = _run(server.url(''), '--out', out)
    assert done.returncode == 0, done.stderr
    assert [r for _, r in server.requests if r and r != 'bytes=0-']   # the second run resumed with a range


def test_a_folder_of_zips_and_the_ways_it_goes_wrong(release, tmp_path):
    folder = tmp_path / 'zips'
    folder.mkdir()
    for name, path, _ in ZIPS:
        shutil.copy(release / path, folder / name)
    missing = tmp_path / 'few'
    missing.mkdir()
    shutil.copy(release / ZIPS[0][1], missing / ZIPS[0][0])
    out = _run(missing, '--out', tmp_path / 'a')
    assert out.returncode == 1 and 'holds no val2017.zip' in out.stderr
    (folder / 'val2017.zip').write_bytes((folder / 'val2017.zip').read_bytes()[:200])   # truncated
    out = _run(folder, '--out', tmp_path / 'b')
    assert out.returncode == 1 and 'truncated or not a zip' in out.stderr and out.stderr.count('\n') == 1
    assert not (tmp_path / 'b' / 'val2017').exists() and (folder / 'val2017.zip').exists()   # the user's zip kept
    shutil.copy(release / ZIPS[0][1], folder / 'val2017.zip')   # another zip under the name
    out = _run(folder, '--out', tmp_path / 'c')
    assert out.returncode == 1 and 'holds no val2017/' in out.stderr


def test_a_missing_image_is_a_problem_named_with_its_file(release, tmp_path):
    out = tmp_path / 'coco'
    with serve(release) as server:
        assert _run(server.url(''), '--out', out).returncode == 0
    victim = sorted((out / 'val2017').glob('*.jpg'))[0]
    victim.unlink()
    again = _run('--out', out)
    assert again.returncode == 1 and victim.name in again.stdout and 'has problems' in again.stdout
