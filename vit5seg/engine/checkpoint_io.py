"""How the mmengine Runner writes and reads checkpoints here.

- Writes are atomic: a checkpoint goes to ``<name>.tmp`` and is renamed over the
  target only once complete, so a run killed mid-save leaves the previous file whole.
- Reads of local files and of http(s) URLs (``load_from``, ``tools/test.py URL``, any
  ``Pretrained`` init) go through :func:`vit5seg.models.checkpoint.read_checkpoint`
  (``weights_only`` unpickling, one clear error for truncated or code-carrying files;
  a URL is downloaded once into torch's hub cache by :mod:`vit5seg.hub`, where
  mmengine's own http loader would unpickle it fully);
  ``allow_unsafe_loading(True)`` (``--allow-unsafe``) is the explicit, warned opt-out.
- :func:`latest_complete_checkpoint` is what ``--resume`` (auto) picks: the newest
  checkpoint in the work dir that is whole, not just what ``last_checkpoint`` names.
- A checkpoint must fit its model: a tensor whose shape differs from the model's is an
  error (:class:`CheckpointShapeError`) wherever mmengine loads one (``load_from``, resume,
  mmseg's ``init_model``, ``MMSegInferencer``, a ``Pretrained`` init). mmengine's loader skips
  such a tensor with a warning and runs on with its random initial values; a 134-row class
  head in a 150-class model then predicts noise. A checkpoint that holds less than half of the
  model's tensors is an error too (:class:`CheckpointFitError`): another model's file ran its
  random weights. Fewer missing and unexpected keys stay mmengine's warnings (a start without
  its class head, a backbone's tensors within a segmentor's file).
"""
import os
import os.path as osp
import re
import warnings
import zipfile
from typing import Optional

import torch

from ..models.checkpoint import CheckpointError, first_of, read_checkpoint, shape_mismatches
from ..models.convert import load_converted
from ..models.mask_classification.releases import describe_release

_allow_unsafe = False


def allow_unsafe_loading(enabled: bool) -> None:
    """Let the Runner unpickle arbitrary objects (for trusted files only)."""
    global _allow_unsafe
    _allow_unsafe = bool(enabled)
    if enabled:
        warnings.warn('unsafe checkpoint loading is on (--allow-unsafe): a checkpoint can run '
                      'any code while it loads; use it only for files you trust', stacklevel=2)


def atomic_torch_save(obj, filename: str) -> None:
    """torch.save to ``filename`` so that readers only ever see a complete file."""
    tmp = f'{filename}.tmp'
    os.makedirs(osp.dirname(osp.abspath(filename)), exist_ok=True)
    try:
        with open(tmp, 'wb') as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, filename)
    finally:
        if osp.exists(tmp):
            os.remove(tmp)


def _is_local(filename: str) -> bool:
    return '://' not in str(filename)


def _wrap_save_checkpoint(save_checkpoint):
    def save_checkpoint_atomically(checkpoint, filename, file_client_args=None, backend_args=None):
        if _is_local(filename) and file_client_args is None and not backend_args:
            return atomic_torch_save(checkpoint, str(filename))
        return save_checkpoint(checkpoint, filename, file_client_args, backend_args)
    save_checkpoint_atomically.__wrapped__ = save_checkpoint
    return save_checkpoint_atomically


# Both loaders take mmengine's arguments and return what its own would; a file that cannot
# be read raises the builtin error torch.load would (read_checkpoint's errors subclass it).
# Named as mmengine names its loaders: its log line reads the backend from name[10:].

def load_from_local(filename, map_location=None):
    """The CheckpointLoader scheme for local paths (mmengine's calls plain torch.load)."""
    return read_checkpoint(osp.expanduser(filename), allow_unsafe=_allow_unsafe, map_location=map_location)


def load_from_http(filename, map_location=None, model_dir=None, progress=os.isatty(0)):
    """The CheckpointLoader scheme for http(s) URLs: cached download (into ``model_dir``
    when given, as mmengine's), then a local read."""
    return read_checkpoint(filename, allow_unsafe=_allow_unsafe, map_location=map_location, folder=model_dir,
                           progress=progress)


def load_from_hub(filename, map_location=None):
    """The CheckpointLoader scheme for Hugging Face Hub ids (``hf://OWNER/NAME[@REVISION][/FILE]``):
    through huggingface_hub's cache, and converted once where the file is a release or transformers'
    model (:func:`vit5seg.models.convert.load_converted`)."""
    return load_converted(filename, map_location=map_location or 'cpu', allow_unsafe=_allow_unsafe)


class CheckpointShapeError(CheckpointError):
    """A checkpoint tensor whose shape differs from the model's."""


def _unwrapped(module):
    from mmengine.model import BaseTTAModel, is_model_wrapper
    while is_model_wrapper(module) or isinstance(module, BaseTTAModel):
        module = module.module
    return module


class CheckpointFitError(CheckpointError):
    """A checkpoint that holds less than half of the model's tensors: another model's."""


def check_shares_the_model(own: dict, state_dict: dict, model_name: str) -> None:
    """Half the model's tensors or more must come from the checkpoint. mmengine loads whatever
    keys match and warns about the rest, so a checkpoint of another model (or a backbone file
    under other names) runs its random initial values: tools/test.py printed mIoU 0.03 and
    exited 0. A fine-tuning start without its class head (``--drop-head``) still fits."""
    shared = len(set(own) & set(state_dict))
    if 2 * shared >= len(own):
        return
    what = ('shares no tensor with' if not shared else
            f'holds {shared} of the {len(own)} tensors of')
    raise CheckpointFitError(f'the checkpoint {what} {model_name} ({len(state_dict)} tensors, {len(own)} in the '
                             f'model; at least half must load): it is the checkpoint of another model, or of '
                             f'this one under other names (convert it: tools/convert_checkpoint.py)')


def _is_video_model(model) -> bool:
    try:
        from mmdet.models.mot import BaseMOTModel   # mmdet's base of its video (tracking) models
    except ImportError:   # no mmdet: no video model either
        return False
    return isinstance(model, BaseMOTModel)


def check_release_task(model, meta) -> None:
    """An image release given to a video model, or a video release (VidEoMT's) to a model whose decoder carries
    nothing from frame to frame, is refused: the tensors fit either way (VidEoMT is EoMT plus its query
    updater), so mmengine would load it and run the other task's rule without a word (a random query updater,
    or none)."""
    info = meta.get('release') if isinstance(meta, dict) else None
    if not isinstance(info, dict):
        return
    from mmseg.registry import MODELS
    name = info.get('decoder', 'EoMT')
    article = 'an' if name[0] in 'AEIOU' else 'a'
    what = f'the checkpoint is {article} {name} release ({info.get("task") or "a task of no known kind"})'
    if getattr(MODELS.get(f'{name}Decoder'), 'carries_state', False):   # the release's decoder says
        decoder = getattr(model, 'decoder', None)
        if not getattr(decoder, 'carries_state', False):
            has = ('has no query decoder' if decoder is None else
                   f'decodes with {type(decoder).__name__}, which carries nothing from one frame to the next')
            raise CheckpointFitError(f'{what} for video, and {type(model).__name__} {has}: give it a video config '
                                     f'(VideoMaskClassifier, docs/video.md)')
    elif _is_video_model(model):
        raise CheckpointFitError(f'{what} for images, and {type(model).__name__} is a video model: give it an '
                                 f'image config, or a video release')


def _wrap_load_state_dict(load_state_dict):
    def load_state_dict_of_fitting_shapes(module, state_dict, strict=False, logger=None):
        model = _unwrapped(module)
        own = model.state_dict()
        mismatched = shape_mismatches(own, state_dict)
        if mismatched:
            raise CheckpointShapeError(f'the checkpoint does not fit {type(model).__name__}: {len(mismatched)} '
                                       f'tensor(s) of other shapes: ' + '; '.join(first_of(mismatched)))
        check_shares_the_model(own, state_dict, type(model).__name__)
        return load_state_dict(module, state_dict, strict, logger)
    load_state_dict_of_fitting_shapes.__wrapped__ = load_state_dict
    return load_state_dict_of_fitting_shapes


def _wrap_load_checkpoint_to_model(load_checkpoint_to_model):
    def load_checkpoint_to_fitting_model(model, checkpoint, *args, **kwargs):
        check_release_task(_unwrapped(model), checkpoint.get('meta') if isinstance(checkpoint, dict) else None)
        try:
            return load_checkpoint_to_model(model, checkpoint, *args, **kwargs)
        except CheckpointShapeError as e:
            meta = checkpoint.get('meta') if isinstance(checkpoint, dict) else None
            release = describe_release(meta) if isinstance(meta, dict) else None
            if release is None:
                raise
            raise CheckpointShapeError(f'{e}. {release}') from None
    load_checkpoint_to_fitting_model.__wrapped__ = load_checkpoint_to_model
    return load_checkpoint_to_fitting_model


_ITER_CKPT = re.compile(r'^(iter|epoch)_(\d+)\.pth$')


def latest_complete_checkpoint(work_dir: str) -> Optional[str]:
    """The newest ``iter_N.pth`` / ``epoch_N.pth`` in ``work_dir`` that reads back whole.

    ``last_checkpoint`` is tried first; a file that is missing, truncated or written by
    an older non-atomic save is passed over for the next newest.
    """
    if not osp.isdir(work_dir):
        return None
    candidates = []
    pointer = osp.join(work_dir, 'last_checkpoint')
    if osp.isfile(pointer):
        with open(pointer) as f:
            named = f.read().strip()
        if named:
            candidates.append(named)
    numbered = [(int(m.group(2)), name) for name in os.listdir(work_dir) if (m := _ITER_CKPT.match(name))]
    candidates += [osp.join(work_dir, name) for _, name in sorted(numbered, reverse=True)]
    for path in candidates:
        problem = _incomplete(path)
        if problem is None:
            return path
        warnings.warn(f'not resuming from {path}: {problem}', stacklevel=2)
    return None


def _incomplete(path: str) -> Optional[str]:
    # torch.save writes a zip whose directory comes last: a cut-off file has none.
    # Checking it costs a few reads, not a load of the whole (optimizer-sized) file.
    if not osp.isfile(path):
        return 'missing'
    try:
        with zipfile.ZipFile(path) as zf:
            zf.namelist()
    except (zipfile.BadZipFile, OSError) as e:
        return f'truncated or not a checkpoint ({e})'
    return None


def install() -> None:
    import mmengine.infer.infer as infer_mod
    import mmengine.runner.checkpoint as ckpt_mod
    import mmengine.runner.runner as runner_mod
    from mmengine.runner.checkpoint import CheckpointLoader
    if not hasattr(runner_mod.save_checkpoint, '__wrapped__'):
        wrapped = _wrap_save_checkpoint(ckpt_mod.save_checkpoint)
        ckpt_mod.save_checkpoint = wrapped
        runner_mod.save_checkpoint = wrapped
    if not hasattr(ckpt_mod.load_state_dict, '__wrapped__'):
        # every loader of mmengine calls the module's load_state_dict (weight_init imports it at call time)
        ckpt_mod.load_state_dict = _wrap_load_state_dict(ckpt_mod.load_state_dict)
        wrapped = _wrap_load_checkpoint_to_model(ckpt_mod._load_checkpoint_to_model)
        for module in (ckpt_mod, runner_mod, infer_mod):  # each imported it by name
            module._load_checkpoint_to_model = wrapped
    CheckpointLoader.register_scheme(prefixes='', loader=load_from_local, force=True)
    CheckpointLoader.register_scheme(prefixes=['http://', 'https://'], loader=load_from_http, force=True)
    CheckpointLoader.register_scheme(prefixes=['hf://'], loader=load_from_hub, force=True)


__all__ = ['CheckpointFitError', 'CheckpointShapeError', 'allow_unsafe_loading', 'atomic_torch_save',
           'check_shares_the_model', 'install', 'latest_complete_checkpoint', 'load_from_hub', 'load_from_local',
           'load_from_http']
