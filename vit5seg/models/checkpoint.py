"""Read, convert and load backbone checkpoints: a file or URL into a :class:`ViT5`
(``init_cfg=dict(type='Pretrained', checkpoint=...)`` comes here). The public door of the
conversion layers: what a file is (:mod:`.checkpoint_files`), the backbone layouts
(:mod:`.backbone_layouts`); their public names are importable from here too.
"""
from typing import Optional, Tuple

from mmengine.logging import print_log

from .backbone_layouts import (KNOWN_LAYOUTS, check_fits, conversion_options, convert_state_dict,
                               convert_weights, detect_layout, first_of, fit_options, fit_to_model, shape_mismatches)
from .checkpoint_files import (EOMT_BACKBONE_PREFIX, CheckpointError, CheckpointIsDirectory, CheckpointNotFound,
                               NotACheckpoint, StateDict, UnreadableCheckpoint, UnsafeCheckpoint, Weights,
                               extract_state_dict, is_own_layout, keys_under, no_checkpoint_file,
                               read_checkpoint, read_weights, sniff_format)


def convert_checkpoint(path, use_ema: bool = False, allow_unsafe: bool = False, prefix: Optional[str] = None,
                       grid: Optional[Tuple[int, int]] = None, sha256: Optional[str] = None,
                       fit: Optional[dict] = None, **options) -> Tuple[StateDict, str]:
    """File or URL -> (backbone state dict in this package's layout, detected source layout).
    ``grid`` / ``fit``: :func:`fit_to_model`'s arguments; ``options``: convert_state_dict's."""
    return convert_weights(read_weights(path, allow_unsafe, sha256=sha256, use_ema=use_ema, prefix=prefix), path,
                           grid=grid, fit=fit, **options)


def load_pretrained(model, path, use_ema: bool = False, allow_unsafe: bool = False,
                    prefix: Optional[str] = None, sha256: Optional[str] = None) -> str:
    """Load any supported checkpoint (a path or an http(s) URL) into a :class:`ViT5`;
    returns the detected layout."""
    weights = read_weights(path, allow_unsafe, sha256=sha256, use_ema=use_ema, prefix=prefix)
    sd, layout = convert_weights(weights, path, model=model)  # fitted to the model and checked to load whole
    model.load_state_dict(sd, strict=True)
    print_log(f'loaded {layout} checkpoint {path}' + (' (EMA)' if use_ema else ''), logger='current')
    return layout


__all__ = ['EOMT_BACKBONE_PREFIX', 'KNOWN_LAYOUTS', 'CheckpointError', 'CheckpointIsDirectory', 'CheckpointNotFound',
           'NotACheckpoint', 'StateDict', 'UnreadableCheckpoint', 'UnsafeCheckpoint', 'Weights', 'check_fits',
           'conversion_options', 'convert_checkpoint', 'convert_state_dict', 'convert_weights',
           'detect_layout', 'extract_state_dict', 'first_of', 'fit_options', 'fit_to_model',
           'is_own_layout', 'keys_under', 'load_pretrained', 'no_checkpoint_file', 'read_checkpoint', 'read_weights',
           'shape_mismatches', 'sniff_format']
