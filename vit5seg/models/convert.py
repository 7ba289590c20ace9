"""Command-line conversion of backbone checkpoints and EoMT releases (``tools/convert_checkpoint.py``).

:func:`convert_file` is conversion's top: it reads each file once (:mod:`.checkpoint_files`),
asks the format rows which one it is and has that row convert it (:mod:`.formats`: the release
tables or the backbone layouts below it), and writes the result.
"""
import argparse
import ast
import os
import re
from pathlib import Path
from typing import Optional

import torch

from ..hf_hub import snapshot_revision
from ..hub import DownloadError, resolve, sha256sum
from . import formats
from .checkpoint_files import CheckpointError, is_own_layout, model_folder_weights, read_checkpoint, read_weights
from .mask_classification.releases import describe_release
from .mask_classification.to_transformers import to_transformers


def parse_arch(text: str):
    """A preset name, or a dict literal such as "{'embed_dims': 64, 'num_layers': 2, 'num_heads': 2}"."""
    text = text.strip()
    return ast.literal_eval(text) if text.startswith('{') else text


# the tensors whose shape is the class count: mmseg's decode heads' classifier (UperNet's and the FCN
# auxiliary's conv_seg, also in a cascade's list of heads), EoMT's class head, Mask2Former's class embedding.
# Mask queries, mask MLPs and everything else are kept: a fine-tuning start for another class count.
CLASS_TENSORS = re.compile(r'(?:^|\.)(?:conv_seg|class_head|cls_embed)\.')


def without_class_head(sd: dict) -> tuple:
    """(the state dict without the class-dependent tensors, their keys)."""
    dropped = sorted(k for k in sd if k.startswith(('decode_head.', 'auxiliary_head.')) and CLASS_TENSORS.search(k))
    return {k: v for k, v in sd.items() if k not in dropped}, dropped


def convert_file(src, dst, arch=None, use_ema=False, img_size=None, allow_unsafe=False, prefix=None,
                 sha256=None, delta_to=None, meta_out: Optional[dict] = None, drop_head: bool = False) -> str:
    """Convert ``src`` to this package's layout at ``dst``; with ``arch``, first check
    that a ``ViT5(arch=arch, img_size=img_size)`` loads it. The file's format is the one row of
    :data:`.formats.FORMATS` that claims it (an EoMT release becomes a whole segmentor checkpoint;
    ``delta_to``: the pretrained backbone a delta release is added to, or PMT's frozen encoder).
    ``drop_head``: a segmentor checkpoint (or a release, converted first) without its
    class-dependent tensors (:func:`without_class_head`), for fine-tuning to another class
    count. Returns the source layout (``meta_out``: updated with the file's meta). Nothing is
    written when anything fails."""
    model = None
    if arch is not None:
        from .backbones.vit5 import ViT5
        with torch.device('meta'):  # shapes only, no memory
            model = ViT5(arch=arch, img_size=img_size)
    weights = read_weights(src, allow_unsafe, sha256=sha256, use_ema=use_ema, prefix=prefix)
    row, (sd, layout, extra) = formats.convert(weights, formats.Request(str(src), model, img_size, delta_to, allow_unsafe,
                                                                drop_head, arch))
    if drop_head:  # the classes it named are not the new model's: no dataset_meta, the release noted as the base
        sd, dropped = without_class_head(sd)
        if not dropped:
            raise CheckpointError(f'--drop-head: {src} has no class-dependent head tensor (conv_seg, class_head, '
                                  f'cls_embed) to drop')
        obj = weights.obj
        extra = dict(dropped_head=dropped, fine_tuned_from=extra.get('release') or
                     {k: v for k, v in dict(obj.get('meta') or {}).items() if k in ('dataset_meta', 'source')})
    if weights.local is not None:   # a Hub id: the commit it resolved to, pinned
        extra = dict(extra, source_revision=snapshot_revision(weights.local))
    meta = dict(source=str(src), source_format=row.name, source_layout=layout, ema=use_ema,
                arch=repr(arch) if arch is not None else None, vit5seg_layout=1, **extra)
    Path(dst).parent.mkdir(parents=True, exist_ok=True)
    torch.save({'state_dict': sd, 'meta': meta}, dst)
    if meta_out is not None:
        meta_out.update(meta)
    return layout


def conversion_cache() -> Path:
    """Where checkpoints converted for loading are kept: ``$XDG_CACHE_HOME/vit5seg/converted``."""
    return Path(os.environ.get('XDG_CACHE_HOME') or Path.home() / '.cache') / 'vit5seg' / 'converted'


def _digest(local: Path) -> str:
    """The sha256 of a weights file; huggingface_hub's cache names each file's blob by it (its ETag)."""
    blob = local.resolve().name
    return blob if re.fullmatch(r'[0-9a-f]{64}', blob) else sha256sum(local)


def load_converted(src, map_location='cpu', allow_unsafe: bool = False):
    """The checkpoint at ``src`` (a path, URL or Hub id; a transformers model folder too) as this
    package's checkpoint: itself where it is one (converted or trained here), else converted once, into
    :func:`conversion_cache` under the source weights' sha256, and read from there after."""
    local = Path(resolve(src))
    weights_file = model_folder_weights(local) if local.is_dir() else local
    if weights_file is None:
        return read_checkpoint(local)   # the error a folder without weights gets
    dst = conversion_cache() / f'{_digest(weights_file)}.pth'
    if dst.is_file():
        return read_checkpoint(dst, map_location=map_location)
    if not local.is_dir():
        obj = read_checkpoint(local, allow_unsafe, map_location=map_location)
        if is_own_layout(obj, None):
            return obj
    partial = dst.with_name(f'{dst.name}.{os.getpid()}.partial')
    convert_file(src, partial, allow_unsafe=allow_unsafe)
    os.replace(partial, dst)   # a conversion killed halfway never looks complete
    return read_checkpoint(dst, map_location=map_location)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description='Convert a backbone checkpoint (the authors\' ViT-5; DeiT-III from Facebook or timm; DINOv2 '
                    'and DINOv3 from Meta, timm or Hugging Face transformers) into the vit5seg backbone layout, '
                    'which loads with init_cfg=dict(type="Pretrained", checkpoint=DST); or an EoMT release '
                    '(tue-mps/eomt\'s pytorch_model.bin, or transformers\' EomtForUniversalSegmentation) into a '
                    'segmentor checkpoint for configs/eomt/, which '
                    'loads with mmseg\'s init_model and tools/test.py.')
    parser.add_argument('src', help='source checkpoint (.pth, .bin or .safetensors), a transformers model folder '
                                    '(config.json beside its weights), an http(s) URL (downloaded once into the torch '
                                    'hub cache) or a Hugging Face Hub id hf://OWNER/NAME[@REVISION][/FILE] (through '
                                    'the Hugging Face cache); the layout is detected')
    parser.add_argument('dst', help='where to write the converted .pth (with --to transformers: a folder)')
    parser.add_argument('--arch', type=parse_arch, default=None,
                        help='check the result against this backbone: a preset (vit5-base, dinov3-large, ...) or '
                             'a dict literal of sizes/switches; mismatches are listed and nothing is written')
    parser.add_argument('--delta-to', metavar='BASE', default=None,
                        help='an EoMT delta release (its DINOv3 models): the pretrained DINOv3 weights it was '
                             'trained from (Meta, timm or transformers layout, a file or URL), added to the delta; '
                             'a PMT release (decoder only): the frozen DINOv3 it was trained on, its encoder')
    parser.add_argument('--drop-head', action='store_true',
                        help='write a segmentor checkpoint (a training\'s, a converted release, or an EoMT release '
                             'converted first) without the tensors whose shape is its class count (conv_seg, '
                             'class_head, cls_embed), to fine-tune on a dataset of other classes with load_from')
    parser.add_argument('--to', choices=['transformers'], default=None,
                        help='transformers: write an EoMT model trained or converted here (DINOv2 or DINOv3 backbone) '
                             'as transformers\' EomtForUniversalSegmentation / EomtDinov3ForUniversalSegmentation '
                             'folder at DST (config.json, model.safetensors, the image processor\'s config)')
    parser.add_argument('--ema', action='store_true', help='take the weights under model_ema instead of model')
    parser.add_argument('--img-size', type=int, default=None,
                        help='resize pos_embed to this pretraining size (e.g. 384), by the --arch preset\'s rule '
                             '(DINOv2\'s resize for dinov2-*); default: keep it')
    parser.add_argument('--sha256', help='expected sha256 of SRC (or a prefix of 8+ hex digits)')
    parser.add_argument('--prefix', default=None, help='only keys under this prefix (e.g. "backbone.")')
    parser.add_argument('--allow-unsafe', action='store_true',
                        help='allow full unpickling for files that need it (runs code in the file: trusted '
                             'sources only)')
    args = parser.parse_args(argv)
    if args.to == 'transformers':
        try:
            written = to_transformers(read_checkpoint(args.src, args.allow_unsafe, sha256=args.sha256), args.dst,
                                      args.src)
        except (CheckpointError, DownloadError) as e:
            parser.exit(1, f'error: {e}\n')
        print(f'wrote {args.src} as transformers\' {written} -> {args.dst} (from_pretrained reads it)')
        return
    meta = {}
    try:
        layout = convert_file(args.src, args.dst, arch=args.arch, use_ema=args.ema, img_size=args.img_size,
                              allow_unsafe=args.allow_unsafe, prefix=args.prefix, sha256=args.sha256,
                              delta_to=args.delta_to, meta_out=meta, drop_head=args.drop_head)
    except (CheckpointError, DownloadError) as e:
        parser.exit(1, f'error: {e}\n')
    print(f'converted {args.src} ({layout} layout{", EMA" if args.ema else ""}) -> {args.dst}')
    release = describe_release(meta)
    if release:
        print(release)
    for note in meta.get('notes', ()):
        print(f'note: {note}')
    if meta.get('dropped_head'):
        print(f'dropped {len(meta["dropped_head"])} class-dependent tensors ({", ".join(meta["dropped_head"])}): '
              f'fine-tune with --cfg-options load_from={args.dst}')
