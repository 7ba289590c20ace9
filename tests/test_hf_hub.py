"""Hugging Face Hub ids (``hf://OWNER/NAME[@REVISION][/FILE]``, issue #59) through huggingface_hub, against
a Hub served from 127.0.0.1 (``HF_ENDPOINT``; tests/local_server.py): its cache under ``HF_HOME`` (a file
there is not fetched again), ``HF_HUB_OFFLINE``, a gated repository's token (never printed), the commit
pinned in the converted file; a release converted once for loading, then read from the conversion cache;
``tools/infer.py hf://ID photo.jpg`` as the whole command."""
import contextlib
import importlib
import json
import os
import subprocess
import sys

import cv2
import numpy as np
import pytest
import torch
from local_server import serve_hub

from conftest import REPO, run_script
from test_models_transformers_eomt import hf_model
from vit5seg.hf_hub import HubError, parse_hub_id

TOKEN = 'hf_test_token_never_printed'


def _process(tool, *args, env):
    """The tool in a process of its own, as a user starts it with ``env``."""
    return subprocess.run([sys.executable, str(REPO / 'tools' / tool), *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=env['HOME'], timeout=600)


@contextlib.contextmanager
def _hub_settings(env):
    """``env`` as a new process would see it: huggingface_hub reads HF_HOME, HF_ENDPOINT and HF_HUB_OFFLINE once,
    when it is imported, so its constants are read again here, and again from the test's environment after
    (saves a new interpreter's 7 s of imports per tool run; the tests whose point is a user's process keep one)."""
    from huggingface_hub import close_session, constants
    before = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    importlib.reload(constants)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(before)
        importlib.reload(constants)
        close_session()   # its pooled connections went to this test's server


def _run(tool, *args, env):
    """The tool run in this process with ``env`` (conftest.run_script), as :func:`_process` would run it."""
    with _hub_settings(env):
        return run_script(REPO / 'tools' / tool, *args, cwd=env['HOME'], env=env)


@pytest.fixture
def hub_env(tmp_path):
    """The environment of a user whose Hugging Face cache and conversion cache are fresh folders."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(('HF_', 'HUGGINGFACE'))}
    env.update(HOME=str(tmp_path / 'home'), HF_HOME=str(tmp_path / 'hf_home'), XDG_CACHE_HOME=str(tmp_path / 'cache'),
               HF_HUB_DISABLE_TELEMETRY='1', PYTHONPATH=str(REPO / 'tests'),
               HF_HUB_OFFLINE='1')   # no request leaves this machine: a served Hub sets HF_ENDPOINT and '0'

    (tmp_path / 'home').mkdir()
    return env


def test_ids_parse_and_a_bad_one_says_how_to_write_one():
    assert parse_hub_id('hf://tue-mps/coco_panoptic_eomt_large_640') == ('tue-mps/coco_panoptic_eomt_large_640',
                                                                          None, None)
    assert parse_hub_id('hf://o/n@v1.0/sub/model.safetensors') == ('o/n', 'v1.0', 'sub/model.safetensors')
    for bad in ('hf://', 'hf://owner', 'hf://owner/', 'hf://o/n@', 'hf://o/n//f'):
        with pytest.raises(HubError, match=r'no Hub id: write hf://OWNER/NAME\[@REVISION\]\[/FILE\]'):
            parse_hub_id(bad)


@pytest.mark.slow
def test_convert_from_the_hub_pins_the_commit_offline_reads_the_cache_and_gated_needs_the_token(tmp_path, hub_env):
    model = hf_model('eomt')
    model.save_pretrained(tmp_path / 'repo')
    with serve_hub({'tue-mps/tiny_eomt': tmp_path / 'repo'}, token=TOKEN) as hub:
        env = dict(hub_env, HF_ENDPOINT=hub.endpoint, HF_HUB_OFFLINE='0')
        refused = _run('convert_checkpoint.py', 'hf://tue-mps/tiny_eomt', tmp_path / 'a.pth', env=env)
        assert refused.returncode == 1 and refused.stderr.count('\n') == 1, refused.stderr
        assert 'hf://tue-mps/tiny_eomt: it is gated' in refused.stderr and 'HF_TOKEN' in refused.stderr
        done = _process('convert_checkpoint.py', 'hf://tue-mps/tiny_eomt', tmp_path / 'a.pth',
                        env=dict(env, HF_TOKEN=TOKEN))   # a user's process: the token is printed nowhere
        assert done.returncode == 0, done.stderr
        assert TOKEN not in done.stdout + done.stderr
        commit = hub.repos['tue-mps/tiny_eomt'][1]
        fetched = [path for method, path, *_ in hub.requests if method == 'GET']
        assert fetched == ['/tue-mps/tiny_eomt/resolve/main/config.json',
                           '/tue-mps/tiny_eomt/resolve/main/model.safetensors']
    meta = torch.load(tmp_path / 'a.pth', weights_only=True)['meta']
    assert meta['source'] == 'hf://tue-mps/tiny_eomt' and meta['source_revision'] == commit
    snapshot = tmp_path / 'hf_home' / 'hub' / 'models--tue-mps--tiny_eomt' / 'snapshots' / commit
    assert (snapshot / 'model.safetensors').is_file() and (snapshot / 'config.json').is_file()
    # the server is gone: offline, the cache answers, at the pinned commit too; what it lacks is one error
    offline = hub_env
    for source in ('hf://tue-mps/tiny_eomt', f'hf://tue-mps/tiny_eomt@{commit}/model.safetensors'):
        again = _run('convert_checkpoint.py', source, tmp_path / 'b.pth', env=offline)
        assert again.returncode == 0, again.stderr
        b = torch.load(tmp_path / 'b.pth', weights_only=True)
        a = torch.load(tmp_path / 'a.pth', weights_only=True)
        assert all(torch.equal(a['state_dict'][k], b['state_dict'][k]) for k in a['state_dict'])
    missing = _run('convert_checkpoint.py', 'hf://tue-mps/other', tmp_path / 'c.pth', env=offline)
    assert missing.returncode == 1 and 'hf://tue-mps/other: it is not in the Hugging Face cache' in missing.stderr
    assert not (tmp_path / 'c.pth').exists()


def _init_model_logits(repo, env):
    """Our init_model from the Hub id (its settings ``env``'s), and its logits against the transformers model
    saved in the folder the Hub serves: (class, mask, largest)."""
    import transformers
    from test_models_transformers_eomt import logits_against_transformers, small_config
    from vit5seg.apis import init_model
    with _hub_settings(env):
        ours = init_model(small_config('dinov2-large_eomt_ade20k.py'), 'hf://someone/tiny', device='cpu').eval()
    theirs = transformers.EomtForUniversalSegmentation.from_pretrained(repo).eval()
    return [float(v) for v in logits_against_transformers(theirs, ours)]


@pytest.mark.slow
def test_init_model_takes_a_hub_id_and_converts_it_once(tmp_path, hub_env):
    """mmengine's loader (init_model, load_from) reads ``hf://`` through huggingface_hub, converts the
    transformers model once into the conversion cache and gives transformers' logits."""
    hf_model('eomt').save_pretrained(tmp_path / 'repo')
    with serve_hub({'someone/tiny': tmp_path / 'repo'}) as hub:
        online = dict(hub_env, HF_ENDPOINT=hub.endpoint, HF_HUB_OFFLINE='0')
        done = _init_model_logits(tmp_path / 'repo', online)
    converted = list((tmp_path / 'cache' / 'vit5seg' / 'converted').iterdir())
    assert len(converted) == 1 and converted[0].suffix == '.pth'
    stamp = converted[0].stat().st_mtime_ns
    again = _init_model_logits(tmp_path / 'repo', hub_env)
    assert converted[0].stat().st_mtime_ns == stamp   # offline, read from the conversion cache
    for cls, masks, largest in (done, again):
        assert largest > 1 and cls < 1e-4 and masks < 1e-4, (cls, masks, largest)


def _pretrained_by_hub_id(repo, dim, depth, env) -> float:
    """A DINOv3 backbone whose init_cfg checkpoint is a Hub id (its settings ``env``'s), against transformers'
    DINOv3 saved in the folder the Hub serves: the largest difference of the patch tokens on a non-square input."""
    import transformers
    from test_models_dinov import hf_patch_tokens, image, patch_tokens
    from vit5seg.models.backbones.vit5 import ViT5
    model = ViT5(arch='dinov3-large', embed_dims=dim, num_layers=depth, num_heads=2,
                 init_cfg=dict(type='Pretrained', checkpoint='hf://facebook/dinov3-tiny'))
    with _hub_settings(env):
        model.init_weights()
    theirs = transformers.DINOv3ViTModel.from_pretrained(repo).eval()
    x = image(96, 128)
    return float((patch_tokens(model.eval(), x) - hf_patch_tokens(theirs, x, 5)).abs().max())


@pytest.mark.slow
def test_the_delta_to_weights_and_a_backbones_pretrained_come_by_hub_id_from_a_gated_repository(tmp_path, hub_env):
    """EoMT's DINOv3 releases are deltas to Meta's DINOv3, which the Hub keeps gated in transformers' layout:
    ``--delta-to hf://...`` adds the release to it (its commit pinned in the meta), and a backbone's
    ``init_cfg`` checkpoint loads it by id, each with the user's token."""
    from test_models_eomt_release import DEPTH, DINOV3_DIM, dinov3_delta_release, predicts_as_upstream, small_config
    ref, pretrained = dinov3_delta_release(tmp_path)
    pretrained.save_pretrained(tmp_path / 'repo')
    with serve_hub({'facebook/dinov3-tiny': tmp_path / 'repo'}, token=TOKEN) as hub:
        env = dict(hub_env, HF_ENDPOINT=hub.endpoint, HF_HUB_OFFLINE='0', HF_TOKEN=TOKEN)
        done = _run('convert_checkpoint.py', tmp_path / 'pytorch_model.bin', tmp_path / 'converted.pth',
                    '--delta-to', 'hf://facebook/dinov3-tiny', env=env)
        assert done.returncode == 0, done.stderr
        assert TOKEN not in done.stdout + done.stderr
        assert _pretrained_by_hub_id(tmp_path / 'repo', DINOV3_DIM, DEPTH, env) < 1e-5
    meta = torch.load(tmp_path / 'converted.pth', weights_only=True)['meta']
    assert meta['delta_to'] == dict(source='hf://facebook/dinov3-tiny', revision=hub.repos['facebook/dinov3-tiny'][1])
    predicts_as_upstream(small_config('dinov3-large_eomt_ade20k.py', DINOV3_DIM), tmp_path / 'converted.pth', ref)


@pytest.mark.slow
def test_infer_with_a_hub_id_alone_is_the_whole_command(tmp_path, hub_env):
    """EoMT-S on DINOv2 for COCO panoptic at 640 (random weights, as transformers saves it): the release
    table gives its config, and the photo's panoptic outputs are written."""
    # as EoMT-S is (configs/eomt/dinov2-small_eomt_coco-panoptic-640.py): 6 heads, queries in the last 3 blocks
    hf_model('eomt', num_labels=133, dim=384, depth=12, side=640, queries=200, perturbed=False, heads=6,
             blocks=3).save_pretrained(tmp_path / 'repo')
    photo = tmp_path / 'home' / 'photo.jpg'
    cv2.imwrite(str(photo), np.random.default_rng(0).integers(0, 256, (300, 420, 3), dtype=np.uint8))
    with serve_hub({'tue-mps/coco_panoptic_eomt_small_640': tmp_path / 'repo'}) as hub:
        done = _process('infer.py', 'hf://tue-mps/coco_panoptic_eomt_small_640', photo, '--out-dir', 'out',
                        '--no-progress', env=dict(hub_env, HF_ENDPOINT=hub.endpoint, HF_HUB_OFFLINE='0'))
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / 'home' / 'out'
    assert (out / 'panoptic' / 'photo.png').is_file() and (out / 'overlays' / 'photo.jpg').is_file()
    assert [a['file_name'] for a in json.loads((out / 'panoptic.json').read_text())['annotations']] == ['photo.png']
    unknown = _run('infer.py', 'hf://tue-mps/coco_panoptic_eomt_small_640', photo, '--out-dir', 'out',
                   env=dict(hub_env, XDG_CACHE_HOME=str(tmp_path / 'other_cache')))
    assert unknown.returncode == 0, unknown.stderr[-2000:]   # offline: the Hub cache, converted again


@pytest.mark.slow   # huggingface_hub waits 1 s before each of its retries
def test_bad_hub_input_is_one_line_and_an_interrupted_download_is_resumed_never_taken_as_complete(tmp_path, hub_env):
    """A repository or revision the Hub does not have is one line, exit 1. A dropped connection is retried
    (huggingface_hub tries 5 times more within a call, from where it was for a file over its 10 MB chunk);
    one that drops every time is one error line, and nothing looks done: no converted file, no file in the
    cache's snapshot, no partial blob (huggingface_hub 2.x downloads to a temporary name of its own). The next
    call fetches it, and the converted tensors are the served file's."""
    model = hf_model('eomt')
    model.save_pretrained(tmp_path / 'repo')
    repos = {'tue-mps/tiny_eomt': tmp_path / 'repo', 'tue-mps/other_eomt': tmp_path / 'repo'}
    with serve_hub(repos, cuts={'model.safetensors': 1}) as hub:
        env = dict(hub_env, HF_ENDPOINT=hub.endpoint, HF_HUB_OFFLINE='0')
        for source, says in (('hf://nobody/nothing', 'hf://nobody/nothing: no such repository (or it is private'),
                             ('hf://tue-mps/tiny_eomt@v9', "hf://tue-mps/tiny_eomt@v9: the repository has no "
                                                           "revision 'v9'")):
            done = _run('convert_checkpoint.py', source, tmp_path / 'a.pth', env=env)
            assert done.returncode == 1 and done.stderr.count('\n') == 1 and says in done.stderr, done.stderr
        resumed = _run('convert_checkpoint.py', 'hf://tue-mps/tiny_eomt', tmp_path / 'a.pth', env=env)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        ranges = [r for method, path, _, r in hub.requests if method == 'GET' and path.endswith('model.safetensors')]
        assert len(ranges) == 2, ranges   # dropped, then fetched again within the call
        hub.cuts['model.safetensors'] = 6
        cut = _run('convert_checkpoint.py', 'hf://tue-mps/other_eomt', tmp_path / 'b.pth', env=env)
        # huggingface_hub's own retry warnings come first; the error is one line, the last
        errors = [line for line in cut.stderr.splitlines() if line.startswith('error:')]
        assert cut.returncode == 1 and len(errors) == 1 and cut.stderr.splitlines()[-1] == errors[0], cut.stderr
        assert errors[0].startswith('error: hf://tue-mps/other_eomt: the download of model.safetensors was '
                                    'interrupted (') and errors[0].endswith('nothing of it is kept: run the same command again to fetch it'), errors
        cache = tmp_path / 'hf_home' / 'hub' / 'models--tue-mps--other_eomt'
        assert not (tmp_path / 'b.pth').exists() and not list(cache.glob('snapshots/*/model.safetensors'))
        assert [p.name for p in (cache / 'blobs').iterdir()] == [(cache / 'snapshots').glob('*/config.json')
                                                                 .__next__().resolve().name]
        again = _run('convert_checkpoint.py', 'hf://tue-mps/other_eomt', tmp_path / 'b.pth', env=env)
        assert again.returncode == 0, again.stderr[-2000:]
    from safetensors.torch import load_file
    served = load_file(tmp_path / 'repo' / 'model.safetensors')
    for name in ('a.pth', 'b.pth'):
        converted = torch.load(tmp_path / name, weights_only=True)['state_dict']
        assert torch.equal(converted['decode_head.class_head.weight'], served['class_predictor.weight'])
