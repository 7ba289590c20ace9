"""Read, convert and load backbone checkpoints: a file or URL into a :class:`ViT5`
(``init_cfg=dict(type='Pretrained', checkpoint=...)`` comes here). The public door of the
conversion layers: what a file is (:mod:`.checkpoint_files`), the backbone layouts
(:mod:`.backbone_layouts`); their public names are importable from here too.
"""
from typing import Optional, Tuple

from mmengine.logging import print_log

from .backbone_layouts import (EOMT_BACKBONE_PREFIX, KNOWN_LAYOUTS, check_fits, conversion_options,
                               convert_loaded, convert_state_dict, detect_layout, first_of, fit_options, fit_to_model,
                               shape_mismatches)
from .checkpoint_files import (CheckpointError, CheckpointIsDirectory, CheckpointNotFound, NotACheckpoint,
                               StateDict, UnreadableCheckpoint, UnsafeCheckpoint, extract_state_dict, is_own_layout,
                               keys_under, no_checkpoint_file, read_checkpoint, sniff_format)


def convert_checkpoint(path, use_ema: bool = False, allow_unsafe: bool = False, prefix: Optional[str] = None,
                       grid: Optional[Tuple[int, int]] = None, sha256: Optional[str] = None,
                       fit: Optional[dict] = None, **options) -> Tuple[StateDict, str]:
    """File or URL -> (backbone state dict in this package's layout, detected source layout).
    ``grid`` / ``fit``: :func:`fit_to_model`'s arguments; ``options``: convert_state_dict's."""
    return convert_loaded(read_checkpoint(path, allow_unsafe, sha256=sha256), path, use_ema, prefix, grid, fit,
                          **options)


def load_pretrained(model, path, use_ema: bool = False, allow_unsafe: bool = False,
                    prefix: Optional[str] = None, sha256: Optional[str] = None) -> str:
    """Load any supported checkpoint (a path or an http(s) URL) into a :class:`ViT5`;
    returns the detected layout."""
    sd, layout = convert_checkpoint(path, use_ema=use_ema, allow_unsafe=allow_unsafe, prefix=prefix,
                                    grid=model.patch_grid, sha256=sha256, fit=fit_options(model),
                                    **conversion_options(model))
    check_fits(model, sd, source=f'{path} [{layout}]')
    model.load_state_dict(sd, strict=True)
    print_log(f'loaded {layout} checkpoint {path}' + (' (EMA)' if use_ema else ''), logger='current')
    return layout


__all__ = ['EOMT_BACKBONE_PREFIX', 'KNOWN_LAYOUTS', 'CheckpointError', 'CheckpointIsDirectory', 'CheckpointNotFound',
           'NotACheckpoint', 'StateDict', 'UnreadableCheckpoint', 'UnsafeCheckpoint', 'check_fits',
           'conversion_options', 'convert_checkpoint', 'convert_loaded', 'convert_state_dict', 'detect_layout',
           'extract_state_dict', 'first_of', 'fit_options', 'fit_to_model', 'is_own_layout', 'keys_under',
           'load_pretrained', 'no_checkpoint_file', 'read_checkpoint', 'shape_mismatches', 'sniff_format']
