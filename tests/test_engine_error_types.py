"""The builtin errors an mmseg caller catches, from the loaders vit5seg installs into
mmengine (the quick tier's guard; the slow tier runs mmseg's own unit tests too): a missing
checkpoint is a FileNotFoundError, a fetch that fails an OSError (a 404 from a server on
127.0.0.1 started here, a port where nothing listens), a checkpoint that carries code a
pickle.UnpicklingError, as torch.load and mmengine's own loaders raise them. A cache that
cannot be written is a PermissionError: test_hub.py's read-only mount."""
import pickle

import pytest
import torch
from mmengine.runner import CheckpointLoader

import vit5seg  # noqa: F401  (installs the loaders)
from local_server import closed_port_url, serve


@pytest.fixture()
def torch_home(tmp_path, monkeypatch):
    monkeypatch.setenv('TORCH_HOME', str(tmp_path / 'torch_home'))
    return tmp_path / 'torch_home'


def test_a_missing_checkpoint_is_a_file_not_found_error(tmp_path):
    with pytest.raises(FileNotFoundError, match='missing.pth'):
        CheckpointLoader.load_checkpoint(str(tmp_path / 'missing.pth'), map_location='cpu')


def test_a_failed_fetch_is_an_os_error(tmp_path, torch_home):
    (tmp_path / 'served').mkdir()
    with serve(tmp_path / 'served') as server:
        with pytest.raises(OSError, match='404'):
            CheckpointLoader.load_checkpoint(server.url('nowhere.pth'), map_location='cpu')
    with pytest.raises(OSError, match='cannot download'):
        CheckpointLoader.load_checkpoint(closed_port_url('weights.pth'), map_location='cpu')
    assert not list(torch_home.rglob('*.pth'))  # nothing that looks like a file


class CarriesCode:
    """Any class outside torch's weights-only allow list stands for code in a pickle."""


def test_a_checkpoint_that_carries_code_is_an_unpickling_error(tmp_path):
    path = tmp_path / 'code.pth'
    torch.save(dict(state_dict=dict(w=torch.zeros(1)), extra=CarriesCode()), path)
    with pytest.raises(pickle.UnpicklingError):
        CheckpointLoader.load_checkpoint(str(path), map_location='cpu')


def test_mmengine_names_our_loaders_backends_as_its_own(tmp_path):
    """mmengine logs 'Loads checkpoint by <name[10:]> backend': local and http, as its own."""
    import logging

    from mmengine.logging import MMLogger
    path = tmp_path / 'w.pth'
    torch.save(dict(state_dict=dict(w=torch.zeros(1))), path)
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = MMLogger.get_instance('vit5seg-loaders', log_level='INFO')
    logger.addHandler(handler)
    try:
        CheckpointLoader.load_checkpoint(str(path), map_location='cpu', logger='vit5seg-loaders')
    finally:
        logger.removeHandler(handler)
    assert [r.getMessage() for r in records] == [f'Loads checkpoint by local backend from path: {path}']
    assert CheckpointLoader._get_checkpoint_loader('https://x/w.pth').__name__[10:] == 'http'
