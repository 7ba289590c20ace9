"""tools/prepare_ade20k.py on a synthetic release zip: local, served from 127.0.0.1, an
extracted folder, and the ways an archive goes wrong (truncated, damaged, not ADE20K, no space)."""
import shutil
import zipfile

import cv2
import numpy as np
import pytest
from local_server import serve

from conftest import REPO, run_script
from vit5seg.datasets import make_synthetic_ade20k
from vit5seg.datasets.prepare_ade20k import RELEASE, main, prepare_ade20k
from vit5seg.datasets.checks import DatasetError


@pytest.fixture(scope='module')
def release(tmp_path_factory):
    """A zip laid out as the official one: ADEChallengeData2016/{images,annotations}/... + objectInfo150.txt."""
    folder = tmp_path_factory.mktemp('release')
    root = make_synthetic_ade20k(folder, num_train=6, num_val=3, size=48)
    (root / 'objectInfo150.txt').write_text('Idx Ratio Train Val Name\n')
    archive = folder / f'{RELEASE}.zip'
    with zipfile.ZipFile(archive, 'w', zipfile.ZIP_STORED) as zf:
        for path in sorted(root.rglob('*')):
            zf.write(path, path.relative_to(folder))
    return archive


def _run(*args, cwd=None):
    return run_script(REPO / 'tools' / 'prepare_ade20k.py', *args, '--no-progress', cwd=cwd)


def test_zip_is_extracted_checked_and_a_second_run_only_checks(release, tmp_path):
    out = _run(release, '--out', tmp_path / 'data' / 'ade')
    assert out.returncode == 0, out.stderr
    target = tmp_path / 'data' / 'ade' / RELEASE
    assert len(list((target / 'images' / 'training').glob('*.jpg'))) == 6
    assert (target / 'objectInfo150.txt').is_file()
    assert 'training: 6 images, 6 labels (the official release has 20210)' in out.stdout
    assert 'validation: 3 images, 3 labels (the official release has 2000)' in out.stdout
    assert out.stdout.strip().endswith(f'{target}: ready')
    assert not list(target.parent.glob('.*partial*'))
    again = _run(release, '--out', tmp_path / 'data' / 'ade')
    assert again.returncode == 0 and 'already prepared: checked only' in again.stdout


def test_served_zip_is_downloaded_next_to_the_data_and_extracted(release, tmp_path):
    with serve(release.parent) as server:
        url = server.url(release.name)
        target, reports, done = prepare_ade20k(url, tmp_path / 'ade', progress=False)
    assert all(r.ok for r in reports) and [r.images for r in reports] == [6, 3]
    assert (tmp_path / 'ade' / release.name).read_bytes() == release.read_bytes()
    assert url in done and target.is_dir()


def test_interrupted_download_resumes_and_never_extracts_a_partial_zip(release, tmp_path):
    with serve(release.parent) as server:
        server.cut_after = release.stat().st_size // 2
        out = _run(server.url(release.name), '--out', tmp_path / 'ade')
        assert out.returncode == 1 and 'run again to resume' in out.stderr
        assert not (tmp_path / 'ade' / RELEASE).exists() and not (tmp_path / 'ade' / release.name).exists()
        server.cut_after = None
        out = _run(server.url(release.name), '--out', tmp_path / 'ade')
        assert out.returncode == 0, out.stderr
        assert server.requests[-1][1].startswith('bytes=')


def test_extracted_folder_is_linked_not_copied(release, tmp_path):
    with zipfile.ZipFile(release) as zf:
        zf.extractall(tmp_path / 'downloads')
    target, reports, done = prepare_ade20k(tmp_path / 'downloads', tmp_path / 'data' / 'ade', progress=False)
    assert target.is_symlink() and target.resolve() == (tmp_path / 'downloads' / RELEASE).resolve()
    assert all(r.ok for r in reports) and 'linked' in done


def test_truncated_zip_is_one_clear_error_and_nothing_is_left(release, tmp_path):
    cut = tmp_path / 'ADEChallengeData2016.zip'
    cut.write_bytes(release.read_bytes()[:release.stat().st_size // 2])
    out = _run(cut, '--out', tmp_path / 'ade')
    assert out.returncode == 1
    assert out.stderr.strip() == (f'error: {cut} is truncated or not a zip file (File is not a zip file); download '
                                  f'it again (a download by URL resumes where it stopped)')
    assert not (tmp_path / 'ade' / RELEASE).exists() and not list((tmp_path / 'ade').glob('.*'))


def test_damaged_member_removes_the_partial_extraction(release, tmp_path):
    data = bytearray(release.read_bytes())
    with zipfile.ZipFile(release) as zf:
        member = next(m for m in zf.infolist() if m.filename.endswith('.jpg'))
    start = member.header_offset + 30 + len(member.filename) + 100  # inside its stored bytes
    data[start:start + 8] = b'\x00' * 8
    bad = tmp_path / 'bad.zip'
    bad.write_bytes(bytes(data))
    with pytest.raises(DatasetError, match=f'{bad} is damaged: Bad CRC-32.*nothing was extracted'):
        prepare_ade20k(bad, tmp_path / 'ade', progress=False)
    assert not (tmp_path / 'ade' / RELEASE).exists() and not list((tmp_path / 'ade').glob('.*'))


def test_zip_of_something_else_is_refused(tmp_path):
    other = tmp_path / 'cityscapes.zip'
    with zipfile.ZipFile(other, 'w') as zf:
        zf.writestr('leftImg8bit/train/a.png', b'x')
    with pytest.raises(DatasetError, match=f'{other} is not the ADE20K release: it has no files under '
                                           f'{RELEASE}/images/training/.*leftImg8bit/train/a.png'):
        prepare_ade20k(other, tmp_path / 'ade', progress=False)
    assert not (tmp_path / 'ade' / RELEASE).exists()


def test_free_space_is_checked_before_extracting(release, tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, 'disk_usage', lambda path: shutil._ntuple_diskusage(10 << 30, 10 << 30, 1 << 20))
    with pytest.raises(DatasetError, match=r'needs 0\.\d MiB \(\+256\.0 MiB spare\), but .* has 1\.0 MiB free'):
        prepare_ade20k(release, tmp_path / 'ade', progress=False)
    assert not (tmp_path / 'ade' / RELEASE).exists()


def test_out_of_range_labels_are_reported_and_fail(release, tmp_path):
    target, _, _ = prepare_ade20k(release, tmp_path / 'ade', progress=False)
    label = next((target / 'annotations' / 'validation').glob('*.png'))
    mask = cv2.imread(str(label), cv2.IMREAD_UNCHANGED)
    mask[0, 0] = 200
    cv2.imwrite(str(label), mask.astype(np.uint8))
    assert main([str(release), '--out', str(tmp_path / 'ade'), '--no-progress']) == 1
    _, reports, _ = prepare_ade20k(release, tmp_path / 'ade', progress=False)
    assert reports[1].bad_labels == [f'{label}: value 200 > 150 (ADE20KDataset label files hold 0 = ignored, 1..150)']


def test_missing_source_and_non_ade_folder(tmp_path):
    with pytest.raises(DatasetError, match='does not exist: give the ADE20K zip, its URL or an extracted folder'):
        prepare_ade20k(tmp_path / 'nope.zip', tmp_path / 'ade')
    (tmp_path / 'empty').mkdir()
    with pytest.raises(DatasetError, match='is not an extracted ADE20K release'):
        prepare_ade20k(tmp_path / 'empty', tmp_path / 'ade')


def test_damaged_download_is_deleted_so_the_next_run_fetches_it_anew(release, tmp_path):
    www = tmp_path / 'www'
    www.mkdir()
    data = bytearray(release.read_bytes())
    with zipfile.ZipFile(release) as zf:
        member = next(m for m in zf.infolist() if m.filename.endswith('.png'))
    start = member.header_offset + 30 + len(member.filename) + 50
    data[start:start + 8] = b'\xff' * 8
    (www / release.name).write_bytes(bytes(data))
    with serve(www) as server:
        with pytest.raises(DatasetError, match='damaged.*the download was deleted: run again'):
            prepare_ade20k(server.url(release.name), tmp_path / 'ade', progress=False)
        assert not (tmp_path / 'ade' / release.name).exists()
        (www / release.name).write_bytes(release.read_bytes())  # the server has a good copy again
        target, reports, _ = prepare_ade20k(server.url(release.name), tmp_path / 'ade', progress=False)
    assert all(r.ok for r in reports) and target.is_dir()


def test_panoptic_annotations_are_written_as_mmdet_reads_them(tmp_path):
    """--panoptic on an extracted release and an instance tar: mmdet's ADE20KPanopticDataset and
    LoadPanopticAnnotations read back the stuff (semantic map) and the things (instance PNG: red
    the thing class 1-100 in ADE's thing order, green the instance), named as mmdet names them."""
    import tarfile

    from mmdet.datasets import ADE20KPanopticDataset
    from mmengine.registry import DefaultScope
    from PIL import Image
    root = make_synthetic_ade20k(tmp_path / 'src', num_train=2, num_val=1, size=48)   # 48x60 photos
    semantic = np.full((48, 60), 1, np.uint8)        # ADE class 1: wall (stuff)
    semantic[24:] = 4                                # 4: floor (stuff)
    semantic[30:40, 2:12] = 8                        # 8: bed (a thing: no stuff segment)
    semantic[5:15, 30:40] = 13                       # 13: person
    instance = np.zeros((48, 60, 3), np.uint8)
    instance[30:40, 2:12] = (1, 5, 0)                # thing 1 of 100 (bed), instance 5
    instance[5:15, 30:40] = (4, 7, 0)                # thing 4 (person), instance 7
    instances = tmp_path / 'annotations_instance'
    for split in ('training', 'validation'):
        (instances / split).mkdir(parents=True)
        for path in sorted((root / 'annotations' / split).glob('*.png')):
            Image.fromarray(semantic).save(path)
            Image.fromarray(instance).save(instances / split / path.name)
    with tarfile.open(tmp_path / 'annotations_instance.tar', 'w') as tf:
        tf.add(instances, arcname='annotations_instance')
    out = tmp_path / 'data' / 'ade'
    assert main([str(root), '--out', str(out), '--panoptic', str(tmp_path / 'annotations_instance.tar'),
                 '--no-progress', '--no-values']) == 0
    target = out / RELEASE
    assert (target / 'annotations_instance' / 'validation').is_dir()
    assert not list(target.glob('.*partial*'))
    with DefaultScope.overwrite_default_scope('mmdet'):
        dataset = ADE20KPanopticDataset(
            data_root=str(target), ann_file='ade20k_panoptic_val.json', test_mode=True,
            data_prefix=dict(img='images/validation/', seg='ade20k_panoptic_val/'),
            pipeline=[dict(type='LoadImageFromFile'),
                      dict(type='LoadPanopticAnnotations', with_bbox=True, with_mask=True, with_seg=True)])
        sample = dataset[0]
    classes = ADE20KPanopticDataset.METAINFO['classes']
    things = [classes[i] for i in sample['gt_bboxes_labels']]
    assert sorted(things) == ['bed', 'person']
    masks = sample['gt_masks'].masks
    bed = masks[things.index('bed')]
    assert bed.sum() == 100 and bed[30:40, 2:12].all()
    assert sample['gt_bboxes'].tensor[things.index('person')].tolist() == [30, 5, 40, 15]   # x1 y1 x2 y2
    seg = sample['gt_seg_map']
    assert classes[seg[0, 0]] == 'wall' and classes[seg[47, 59]] == 'floor'
    assert classes[seg[35, 5]] == 'bed' and classes[seg[10, 35]] == 'person'
    assert set(np.unique(seg).tolist()) == {classes.index(c) for c in ('wall', 'floor', 'bed', 'person')}
    again = main([str(root), '--out', str(out), '--panoptic', '--no-progress', '--no-values'])
    assert again == 0   # already there: checked, not rewritten
    instance_path = next((instances / 'validation').glob('*.png'))
    (target / 'ade20k_panoptic_val.json').unlink()
    Image.fromarray(instance[:40]).save(target / 'annotations_instance' / 'validation' / instance_path.name)
    with pytest.raises(SystemExit):   # a PNG of another size: one error naming the files, nothing half-written
        main([str(root), '--out', str(out), '--panoptic', '--no-progress', '--no-values'])
    assert not (target / 'ade20k_panoptic_val.json').exists() and not list(target.glob('.*partial*'))


def test_instance_archives_with_the_folders_at_the_top_or_damaged(tmp_path):
    """annotations_instance as a tar whose top holds training/ and validation/ is moved into place whole;
    a truncated tar and a file that is no archive are one error each, with nothing left behind."""
    import tarfile

    from vit5seg.datasets.prepare_ade20k import add_instances
    source = tmp_path / 'src'
    for split in ('training', 'validation'):
        (source / split).mkdir(parents=True)
        (source / split / f'{split}.png').write_bytes(b'png')
    with tarfile.open(tmp_path / 'top.tar', 'w') as tf:
        for split in ('training', 'validation'):
            tf.add(source / split, arcname=split)
    target = tmp_path / 'target'
    target.mkdir()
    assert add_instances(target, tmp_path / 'top.tar').startswith('extracted')
    assert (target / 'annotations_instance' / 'validation' / 'validation.png').read_bytes() == b'png'
    assert not list(target.glob('.*partial*'))
    (tmp_path / 'cut.tar').write_bytes((tmp_path / 'top.tar').read_bytes()[:1100])   # inside the first PNG's header
    (tmp_path / 'notes.tar').write_text('not an archive')
    for name in ('cut.tar', 'notes.tar'):
        other = tmp_path / name.replace('.', '_')
        other.mkdir()
        with pytest.raises(DatasetError, match=f'{name} is damaged or no archive'):
            add_instances(other, tmp_path / name)
        assert list(other.iterdir()) == []
