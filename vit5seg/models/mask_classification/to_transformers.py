"""An EoMT segmentor or detector of this package back to transformers (``convert_checkpoint.py CKPT OUT_DIR
--to transformers``): ``EomtForUniversalSegmentation`` for a DINOv2 backbone,
``EomtDinov3ForUniversalSegmentation`` for DINOv3, written by transformers' own ``save_pretrained`` (config.json,
model.safetensors) with ``EomtImageProcessor``'s config beside them. The renames are
:mod:`.transformers_eomt`'s, run backwards; DINOv3's rotate-half pairs, which this package keeps adjacent,
go back to halves; DINOv2-g's SwiGLU is ``use_swiglu_ffn``. transformers has no class for a ViT-5 or
DeiT-III backbone, nor one for DINOv3's SwiGLU under EoMT's GELU heads.
"""
from pathlib import Path

import torch
from mmengine.config import Config

from ...utils.config_kinds import task_of
from ...utils.state_dicts import StateDict, keys_under
from ..backbones.vit5 import resolve_arch
from ..checkpoint_files import CheckpointError
from ..dinov_layouts import rope_pair_rows

FAMILIES = {'dinov2': 'EomtForUniversalSegmentation', 'dinov3': 'EomtDinov3ForUniversalSegmentation'}


def _halves(value: torch.Tensor, heads: int) -> torch.Tensor:
    """q and k rows of each head from adjacent pairs back to halves (DINOv3's rotate-half order)."""
    C = value.shape[0] // 3
    rows = rope_pair_rows(C, heads)
    out = value.clone()
    for start in (0, C):
        out[start:start + C][rows] = value[start:start + C]
    return out


def _backbone(bb: StateDict, family: str, heads: int) -> StateDict:
    dinov3 = family == 'dinov3'
    patch = 'embeddings.patch_embeddings' + ('' if dinov3 else '.projection')
    out = {'embeddings.cls_token': bb['cls_token'], f'{patch}.weight': bb['patch_embed.proj.weight'],
           f'{patch}.bias': bb['patch_embed.proj.bias'], 'layernorm.weight': bb['norm.weight'],
           'layernorm.bias': bb['norm.bias']}
    if 'reg_token' in bb:
        out['embeddings.register_tokens'] = bb['reg_token']
    if 'pos_embed' in bb:
        out['embeddings.position_embeddings.weight'] = bb['pos_embed'][0]
    for i in range(len({k.split('.')[1] for k in bb if k.startswith('blocks.')})):
        b, o = keys_under(bb, f'blocks.{i}.'), f'layers.{i}.'
        weight, bias = b['attn.qkv.weight'], b.get('attn.qkv.bias')
        if dinov3:
            weight, bias = _halves(weight, heads), None if bias is None else _halves(bias[:, None], heads)[:, 0]
        for name, w in zip('qkv', weight.chunk(3)):
            out[f'{o}attention.{name}_proj.weight'] = w
        if bias is not None:
            for name, v in zip('qkv', bias.chunk(3)):
                if not (dinov3 and name == 'k'):   # DINOv3 has no key bias (kept at zero here)
                    out[f'{o}attention.{name}_proj.bias'] = v
        proj = 'o_proj' if dinov3 else 'out_proj'
        renames = {'attn.proj': f'attention.{proj}', 'norm1': 'norm1', 'norm2': 'norm2'}
        if 'mlp.fc1_g.weight' in b:   # timm's SwiGLU: silu(fc1_g) * fc1_x, transformers' gate and up
            renames.update({'mlp.fc1_g': 'mlp.gate_proj', 'mlp.fc1_x': 'mlp.up_proj', 'mlp.fc2': 'mlp.down_proj'})
        else:
            mlp = ('up_proj', 'down_proj') if dinov3 else ('fc1', 'fc2')
            renames.update({'mlp.fc1': f'mlp.{mlp[0]}', 'mlp.fc2': f'mlp.{mlp[1]}'})
        for ours, theirs in renames.items():
            for suffix in ('weight', 'bias'):
                if f'{ours}.{suffix}' in b:
                    out[f'{o}{theirs}.{suffix}'] = b[f'{ours}.{suffix}']
        out[f'{o}layer_scale1.lambda1'], out[f'{o}layer_scale2.lambda1'] = b['gamma_1'], b['gamma_2']
    return out


def _head(head: StateDict) -> StateDict:
    out = {'query.weight': head['queries.weight'], 'class_predictor.weight': head['class_head.weight'],
           'class_predictor.bias': head['class_head.bias']}
    for i, layer in enumerate((0, 2, 4)):
        for suffix in ('weight', 'bias'):
            out[f'mask_head.fc{i + 1}.{suffix}'] = head[f'mask_mlp.{layer}.{suffix}']
    for key, value in head.items():
        parts = key.split('.')
        if parts[0] == 'upscale':
            name = {'up': 'conv1', 'dw': 'conv2', 'norm': 'layernorm2d'}[parts[2]]
            out[f'upscale_block.block.{parts[1]}.{name}.{parts[3]}'] = value
    return out


def checkpoint_config(obj: dict, source) -> Config:
    """The config a checkpoint was trained with (mmengine's ``meta['cfg']``) or converted for
    (``meta['release']['config']``)."""
    meta = obj.get('meta') or {}
    if meta.get('cfg'):
        return Config.fromstring(meta['cfg'], file_format='.py')
    config = (meta.get('release') or {}).get('config')
    if config:
        from ... import paths
        return Config.fromfile(str(paths.config_path(config.removeprefix('configs/'))))
    raise CheckpointError(f'{source} names no config in its meta (a training\'s meta["cfg"], a converted '
                          f'release\'s meta["release"]["config"]): --to transformers needs the model it is')


def _input_side(cfg: Config, sd: StateDict, patch: int, source) -> int:
    """The square input transformers' EoMT runs at (its masks are reshaped to that grid): the position
    grid's (DINOv2); without one (DINOv3, whose img_size means nothing), the detector's pad size or the
    segmentor's window."""
    pos = sd.get('backbone.pos_embed')
    if pos is not None:
        return round(pos.shape[1] ** 0.5) * patch
    given = (cfg.model.data_preprocessor.get('pad_size') or (cfg.model.get('test_cfg') or {}).get('crop_size')
             or cfg.model.data_preprocessor.get('size'))
    if not given or len(set(given)) != 1:
        raise CheckpointError(f'{source}: its config gives no square input (data_preprocessor.pad_size, '
                              f'test_cfg.crop_size): transformers\' EoMT runs at one image_size')
    return int(given[0])


def to_transformers(obj: dict, out_dir, source) -> str:
    """A checkpoint of an EoMT segmentor or detector on DINOv2 or DINOv3 -> transformers' model folder at
    ``out_dir``; returns the transformers class it is."""
    import transformers
    cfg = checkpoint_config(obj, source)
    bb_cfg, head_cfg = cfg.model.backbone, cfg.model.decode_head
    arch = bb_cfg.get('arch', 'vit5-base')
    family = arch.split('-')[0] if isinstance(arch, str) else 'custom'
    if family not in FAMILIES or cfg.model.get('decoder', {}).get('type', 'EoMTDecoder') != 'EoMTDecoder':
        raise CheckpointError(f'{source}: transformers has no class for EoMT on a {arch!r} backbone (its EoMT '
                              f'classes take DINOv2 and DINOv3 only): --to transformers writes those')
    s = resolve_arch(arch, **{k: bb_cfg.get(k) for k in ('embed_dims', 'num_layers', 'num_heads')})
    s.update({k: bb_cfg[k] for k in ('patch_size', 'img_size', 'norm_eps') if bb_cfg.get(k) is not None})
    hidden = int(s['embed_dims'] * s['mlp_ratio'])
    gated = s['mlp_type'] == 'swiglu'
    if s['mlp_type'] not in ('mlp', 'swiglu'):
        raise CheckpointError(f'{source}: transformers\' EoMT has no {s["mlp_type"]} MLP ({arch})')
    if gated and family == 'dinov3':
        raise CheckpointError(f'{source}: transformers\' EomtDinov3 runs its gated MLP, mask head and upscale with '
                              f'one activation (hidden_act), where DINOv3\'s SwiGLU is SiLU and EoMT\'s heads are '
                              f'GELU ({arch}): it cannot hold this model')
    swiglu = int(hidden * 2 / 3)   # layers.Block's gated width
    if gated and (swiglu + 7) // 8 * 8 != swiglu:
        # EomtSwiGLUFFN rounds the 2/3 width up to a multiple of 8 (as Meta's DINOv2-g), this package does not
        raise CheckpointError(f'{source}: its SwiGLU is {swiglu} wide, which transformers\' '
                              f'EomtSwiGLUFFN rounds up to a multiple of 8: it cannot hold it')
    sd = obj.get('state_dict', obj)
    head = keys_under(sd, 'decode_head.')
    side = _input_side(cfg, sd, s['patch_size'], source)
    sizes = dict(hidden_size=s['embed_dims'], num_hidden_layers=s['num_layers'],
                 num_attention_heads=s['num_heads'], patch_size=s['patch_size'], image_size=side,
                 num_register_tokens=s['num_registers'], layer_norm_eps=s['norm_eps'],
                 num_blocks=head_cfg.num_blocks, num_queries=head['queries.weight'].shape[0],
                 num_labels=head['class_head.weight'].shape[0] - 1)
    classes = ((obj.get('meta') or {}).get('dataset_meta') or {}).get('classes')
    if classes and len(classes) == sizes['num_labels']:
        sizes.update(id2label=dict(enumerate(classes)), label2id={c: i for i, c in enumerate(classes)})
    if family == 'dinov3':
        config = transformers.EomtDinov3Config(intermediate_size=hidden,
                                               rope_parameters=dict(rope_theta=s['rope_theta'], rope_type='default'),
                                               **sizes)
    else:
        config = transformers.EomtConfig(mlp_ratio=int(s['mlp_ratio']), use_swiglu_ffn=gated, **sizes)
    model = getattr(transformers, FAMILIES[family])(config)
    state = _backbone(keys_under(sd, 'backbone.'), family, s['num_heads'])
    state.update(_head(head))
    state['attn_mask_probs'] = torch.zeros(head_cfg.num_blocks)   # annealed: no mask at inference, as EoMT
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.startswith('criterion.')]
    if missing or unexpected:
        raise CheckpointError(f'{source} does not fill transformers\' {FAMILIES[family]}: missing {missing[:6]}, '
                              f'unexpected {unexpected[:6]}')
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    mean, std = cfg.model.data_preprocessor.mean, cfg.model.data_preprocessor.std
    transformers.EomtImageProcessor(image_mean=[m / 255 for m in mean], image_std=[v / 255 for v in std],
                                    **processor_settings(task_of(cfg), side)).save_pretrained(out_dir)
    return FAMILIES[family]


def processor_settings(task: str, side: int) -> dict:
    """``EomtImageProcessor``'s settings for a task, as the Hub's EoMT processors hold them: semantic, the
    short side to ``side`` and windows of it along the long side; panoptic and instance, the long side to
    ``side`` and padded to the square."""
    if task == 'semantic':
        return dict(size=dict(shortest_edge=side, longest_edge=None), do_split_image=True, do_pad=False)
    return dict(size=dict(shortest_edge=side, longest_edge=side), do_split_image=False, do_pad=True)


__all__ = ['FAMILIES', 'checkpoint_config', 'processor_settings', 'to_transformers']
