"""The mask-classification core that every query decoder here shares (mmdet's MaskFormer and
tue-mps/eomt ``models/eomt.py`` + ``training/mask_classification_*.py`` are the two anchors).

- :class:`QueryHead`: the queries, the class and mask predictors and the loss with its matching
  (registered also under its first name, ``EoMTHead``, which the configs give);
- :class:`MaskFeatures`: what a decoder hands the head, one prediction per supervised point;
- :class:`EncoderPass`: what a decoder reads of the encoder (its taps);
- :class:`MaskDecoder`: the base of a decoder, which taps the encoder (``encode``) and turns the
  taps into those predictions (``decode``) through the head (EoMT's last blocks: :mod:`.eomt`);
- :class:`MaskClassificationCore`: the forward that the mmseg segmentor (:mod:`.segmentor`)
  and the mmdet detector (:mod:`.detector`) share, with the decoder the config names.

A new decoder is one file with a registered :class:`MaskDecoder` subclass (docs/layout.md).
"""
import math
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmcv.ops import point_sample
from mmengine.dist import all_reduce
from mmengine.structures import InstanceData
from mmseg.models.decode_heads.decode_head import BaseDecodeHead
from mmseg.models.utils import get_uncertain_point_coords_with_randomness
from mmseg.registry import MODELS
from mmseg.utils import MatchMasks, seg_data_to_instance_data
from timm.layers import LayerNorm2d

from ...utils.config_values import defaults_of, flatten
from ..backbones.vit5 import ViT5


class MaskFeatures(NamedTuple):
    """What a decoder hands the head: one (class, mask) prediction per supervised point
    (EoMT, training: the input of each of the last blocks, then the output; inference: the
    output only; the last is the prediction), the input's size and its patch grid; ``state``:
    what the decoder hands its next call where a task carries one (a video task: the output
    queries of one frame for the next), else None."""
    class_logits: List[torch.Tensor]    # each (B, Q, K + 1)
    mask_logits: List[torch.Tensor]     # each (B, Q, 4h, 4w) for patch 16
    input_size: Tuple[int, int]         # (H, W) of the image the backbone saw
    padded_size: Tuple[int, int]        # (h * patch, w * patch): what the masks cover
    state: Optional[object] = None


class EncoderPass(NamedTuple):
    """What a decoder reads of the encoder's pass over a batch (:meth:`MaskDecoder.encode`): its
    taps (each (B, N, C), in the decoder's order), the patch grid, the taps' RoPE table (None
    without RoPE) and the size of the input the encoder saw. A pass shared by several decoders
    (``vit5seg.apis.all_tasks``) hands each the taps it names (:attr:`MaskDecoder.tap_indices`)."""
    taps: List[torch.Tensor]
    grid: Tuple[int, int]
    rope: Optional[torch.Tensor]
    input_size: Tuple[int, int]


class ScaleUp(nn.Module):
    """x2 upsampling of a (B, C, h, w) map: transposed conv, GELU, depthwise 3x3, LayerNorm."""

    def __init__(self, dims: int):
        super().__init__()
        self.up = nn.ConvTranspose2d(dims, dims, kernel_size=2, stride=2)
        self.act = nn.GELU()
        self.dw = nn.Conv2d(dims, dims, kernel_size=3, padding=1, groups=dims, bias=False)
        self.norm = LayerNorm2d(dims)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.dw(self.act(self.up(x))))


@MODELS.register_module(name=['QueryHead', 'EoMTHead'])
class QueryHead(BaseDecodeHead):
    """The queries, their class and mask predictors, and the mask-classification loss: what every
    query decoder reads and writes through (the decoder owns its own state, EoMT's annealed masks).

    Args:
        in_channels: the backbone's width.
        num_classes: K; the class head predicts K + 1 (the last: no object).
        num_queries: Q learned queries (100 for ADE20K).
        num_blocks: the blocks that see the queries and anneal their masks (EoMT: the backbone's
            last ``num_blocks``; PMT: its decoder's blocks).
        patch_size: the backbone's patch; masks are predicted at 4 px (log2(patch) - 2
            x2 steps, at least one).
        loss_decode: three losses named ``loss_cls_ce`` (the class CE, with the
            no-object weight in its ``class_weight``), ``loss_mask_ce`` (sigmoid BCE on
            points) and ``loss_mask_dice`` (mmseg's DiceLoss with ``ignore_index=None``).
        train_cfg: ``num_points``, ``oversample_ratio``, ``importance_sample_ratio``,
            ``assigner`` (mmseg's HungarianAssigner with its costs).
    """

    def __init__(self, in_channels: int, num_classes: int, num_queries: int = 100, num_blocks: int = 4,
                 patch_size: int = 16, train_cfg: Optional[dict] = None, **kwargs):
        kwargs.setdefault('dropout_ratio', 0.)
        kwargs.setdefault('init_cfg', None)  # PyTorch's own init, as EoMT (the base's targets conv_seg)
        super().__init__(in_channels=in_channels, channels=in_channels, num_classes=num_classes, **kwargs)
        del self.conv_seg  # per-pixel classifier of the base class: masks are classified here
        self.num_queries, self.num_blocks, self.patch_size = num_queries, num_blocks, patch_size
        C = in_channels
        self.queries = nn.Embedding(num_queries, C)
        self.class_head = nn.Linear(C, num_classes + 1)
        self.mask_mlp = nn.Sequential(nn.Linear(C, C), nn.GELU(), nn.Linear(C, C), nn.GELU(), nn.Linear(C, C))
        steps = max(1, int(math.log2(patch_size)) - 2)
        self.upscale = nn.Sequential(*[ScaleUp(C) for _ in range(steps)])
        self.mask_scale = 2 ** steps  # mask pixels per patch side
        self.train_cfg = train_cfg
        if train_cfg:
            self.match_masks = MatchMasks(num_points=train_cfg['num_points'], num_queries=num_queries,
                                          num_classes=num_classes, assigner=train_cfg['assigner'])
        names = [loss.loss_name for loss in self._losses()]
        if sorted(names) != ['loss_cls_ce', 'loss_mask_ce', 'loss_mask_dice']:
            raise ValueError(f'QueryHead needs three losses named loss_cls_ce, loss_mask_ce and loss_mask_dice, '
                             f'got {names}')

    @classmethod
    def card_rows(cls, given: dict, prefix: str, cfg):
        """The recipe card's row where the queries' masks are never annealed (no custom hook that
        anneals them: a hook class with ``anneals_masks``), as (section, key, value, where from)."""
        from mmengine.registry import HOOKS
        hooks = [HOOKS.get(h['type']) for h in (cfg.get('custom_hooks') or []) if isinstance(h.get('type'), str)]
        if not any(getattr(h, 'anneals_masks', False) for h in hooks):
            yield 'schedule', 'mask annealing', 'none: the masks stay on (no EoMTMaskAnnealingHook)', 'derived'

    def _losses(self) -> Sequence[nn.Module]:
        return self.loss_decode if isinstance(self.loss_decode, nn.ModuleList) else [self.loss_decode]

    def predict_masks(self, queries: torch.Tensor, patch_map: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Query tokens (B, Q, C) and the patch map (B, C, h, w), both normalised -> class
        logits (B, Q, K + 1) and mask logits (B, Q, s*h, s*w), s = ``mask_scale``."""
        masks = torch.einsum('bqc,bchw->bqhw', self.mask_mlp(queries), self.upscale(patch_map))
        return self.class_head(queries), masks

    def forward(self, inputs: MaskFeatures) -> Tuple[torch.Tensor, torch.Tensor]:
        """The last prediction: class logits (B, Q, K + 1), mask logits (B, Q, 4h, 4w)."""
        return inputs.class_logits[-1], inputs.mask_logits[-1]

    def predict(self, inputs: MaskFeatures, batch_img_metas: List[dict], test_cfg) -> torch.Tensor:
        """Per-pixel class scores (B, K, H, W) at the input's size: each query's mask
        probability times its class probabilities without no-object, summed over queries."""
        class_logits, mask_logits = self.forward(inputs)
        (B, Q), (H, W) = class_logits.shape[:2], inputs.input_size
        # the masks cover the patch-padded image: upsample to it, then cut the padding off
        masks = F.interpolate(mask_logits, size=inputs.padded_size, mode='bilinear', align_corners=False)
        masks = masks[..., :H, :W].sigmoid_().reshape(B, Q, H * W)    # in place: (B, Q, H, W) is large
        probs = class_logits.softmax(-1)[..., :-1]                     # (B, Q, K)
        return torch.bmm(probs.transpose(1, 2), masks).view(B, -1, H, W)

    def loss(self, inputs: MaskFeatures, batch_data_samples, train_cfg) -> dict:
        """mmseg's semantic targets: one mask per class present (ignored pixels in none)."""
        return self.loss_targets(inputs, seg_data_to_instance_data(self.ignore_index, batch_data_samples))

    def loss_targets(self, inputs: MaskFeatures, gts: List[InstanceData]) -> dict:
        """Summed over the supervised predictions; the last one's keys are plain, an earlier
        one's are prefixed ``m{i}.`` for masked block i (0: the first). ``gts``: per image,
        ``labels`` (M,) and 0/1 ``masks`` (M, H, W) over the image or its padded batch
        size; semantic (mmseg), panoptic and instance (mmdet) targets alike."""
        ph, pw = inputs.padded_size
        H, W = gts[0].masks.shape[-2:]
        if (ph, pw) != (H, W):
            # targets cover the image, masks the patch-padded image: pad targets with "no mask"
            gts = [InstanceData(labels=g.labels, masks=F.pad(g.masks, (0, pw - W, 0, ph - H))) for g in gts]
        losses = {}
        for i, (cls, masks) in enumerate(zip(inputs.class_logits, inputs.mask_logits)):
            prefix = self.level_prefix(i, len(inputs.class_logits))
            for name, value in self.loss_by_feat(cls, masks, gts).items():
                losses[prefix + name] = value
        return losses

    @staticmethod
    def level_prefix(i: int, levels: int) -> str:
        """The loss keys' prefix of supervised prediction ``i`` of ``levels``: none for the last (the
        model's prediction), ``m{i}.`` for the input of masked block i."""
        return '' if i == levels - 1 else f'm{i}.'

    def loss_by_feat(self, class_logits: torch.Tensor, mask_logits: torch.Tensor,
                     gts: List[InstanceData]) -> dict:
        """One prediction's losses: Hungarian matching on uniformly sampled points (per image), then
        :meth:`matched_losses`."""
        # matching and losses in float32 whatever the autocast (costs decide an assignment)
        with torch.autocast(class_logits.device.type, enabled=False):
            class_logits, mask_logits = class_logits.float(), mask_logits.float()
            labels, mask_targets, mask_weights, num_masks = self.match_masks.get_targets(
                class_logits.detach(), mask_logits.detach(), gts)
            return self.matched_losses(class_logits, mask_logits, labels, mask_targets, mask_weights, num_masks)

    def matched_losses(self, class_logits: torch.Tensor, mask_logits: torch.Tensor, labels: torch.Tensor,
                       mask_targets: torch.Tensor, mask_weights: torch.Tensor, num_masks: int) -> dict:
        """The losses of predictions (B, Q, K + 1) and (B, Q, h, w) given their matching, as mmseg's
        ``MatchMasks.get_targets`` returns it (``labels`` (B, Q) with K for no object, the matched
        queries' ``mask_targets`` (M, H, W) in (image, query) order, ``mask_weights`` (B, Q) 1 where
        matched, ``num_masks`` the target masks): the class CE over all queries and the mask BCE and
        dice on uncertainty-sampled points of the matched masks, normalised by the number of target
        masks over all ranks. Whoever matches (an image's Hungarian, a clip's) shares these losses."""
        cfg = self.train_cfg
        with torch.autocast(class_logits.device.type, enabled=False):
            class_logits, mask_logits = class_logits.float(), mask_logits.float()
            num_masks = class_logits.new_tensor([num_masks], dtype=torch.float)
            all_reduce(num_masks, op='mean')
            num_masks = num_masks.clamp(min=1).item()
            matched = mask_logits[mask_weights > 0]                  # (M, 4h, 4w)
            if mask_targets.shape[0]:
                with torch.no_grad():
                    coords = get_uncertain_point_coords_with_randomness(
                        matched.unsqueeze(1), None, cfg['num_points'], cfg['oversample_ratio'],
                        cfg['importance_sample_ratio'])                          # (M, P, 2)
                    point_targets = point_sample(mask_targets.unsqueeze(1).float(), coords).squeeze(1)
                point_logits = point_sample(matched.unsqueeze(1), coords).squeeze(1)   # (M, P)
            losses = {}
            for loss in self._losses():
                if loss.loss_name == 'loss_cls_ce':
                    flat = labels.flatten()
                    # a weighted mean over queries, as the reference's weighted cross entropy
                    if loss.class_weight is not None:
                        avg = torch.as_tensor(loss.class_weight, device=flat.device, dtype=torch.float)[flat].sum()
                    else:
                        avg = flat.numel()
                    losses[loss.loss_name] = loss(class_logits.flatten(0, 1), flat, avg_factor=avg)
                elif not mask_targets.shape[0]:
                    losses[loss.loss_name] = matched.sum()  # no target mask: zero, with a gradient
                elif loss.loss_name == 'loss_mask_ce':
                    losses[loss.loss_name] = loss(point_logits, point_targets,
                                                  avg_factor=num_masks * cfg['num_points'])
                else:
                    losses[loss.loss_name] = loss(point_logits, point_targets, avg_factor=num_masks)
        return losses




class MaskDecoder(nn.Module):
    """The base of a query decoder: images -> :class:`MaskFeatures` through ``backbone`` (a
    :class:`ViT5`) and ``head`` (a :class:`QueryHead`: its queries and predictors), which are the
    model's and passed in, so a checkpoint keeps them under ``backbone.*`` and ``decode_head.*``
    whatever the decoder; a decoder's own weights (if any) are the model's ``decoder.*``, and so
    is its own state (EoMT's annealed mask probabilities).

    Two steps, which the segmentor, the detector and a pass shared by several tasks all call:
    :meth:`encode` (the encoder's part: the taps this decoder reads) and :meth:`decode` (those
    taps -> the predictions). ``supervise``: training, where every prediction in the list is
    supervised (the last one is the model's prediction); at inference a decoder may return the
    last one only. ``state``: what the previous call's :class:`MaskFeatures` handed on, for a
    task that carries one from call to call (None otherwise)."""

    #: the encoder blocks whose normed tokens :meth:`encode` taps, in order; None where the
    #: decoder runs inside the encoder (EoMT) and so cannot read another decoder's pass
    tap_indices: Optional[Tuple[int, ...]] = None
    #: the backbone's last blocks that see the queries (EoMT's), which layer decay may leave at the full rate
    encoder_blocks_with_queries: int = 0
    #: P_i of each block with masked attention, first block first: the decoder's own state, set every
    #: iteration by EoMTMaskAnnealingHook (a query sees only its predicted mask with probability P_i)
    mask_probs: List[float] = []
    #: whether :meth:`decode` hands a ``state`` on to the next call (a video task's decoder does)
    carries_state: bool = False

    @classmethod
    def card_rows(cls, given: dict, prefix: str, cfg=None):
        """The recipe card's rows: the arguments a config leaves to this decoder's defaults."""
        for name, value in defaults_of(cls, given).items():
            for key, item in flatten(f'{prefix}.{name}', value):
                yield 'model', key, item, 'default'

    def check_parts(self, backbone: ViT5, head: QueryHead) -> None:
        """Raise where ``backbone`` and ``head`` cannot work with this decoder."""
        if head.in_channels != backbone.embed_dims:
            raise ValueError(f'decode_head.in_channels={head.in_channels} differs from the backbone width '
                             f'{backbone.embed_dims}')
        if head.patch_size != backbone.patch_size:
            raise ValueError(f'decode_head.patch_size={head.patch_size} differs from the backbone\'s '
                             f'{backbone.patch_size}')

    def encode(self, backbone: ViT5, inputs: torch.Tensor) -> EncoderPass:
        """Images (B, 3, H, W) -> the encoder's normed tokens at :attr:`tap_indices`."""
        if self.tap_indices is None:
            raise NotImplementedError(f'{type(self).__name__} names no tap_indices: it must define encode()')
        taps, grid, rope = backbone.normed_tokens(inputs, self.tap_indices)
        return EncoderPass(taps, grid, rope, tuple(inputs.shape[-2:]))

    def shared_pass(self, taps: Dict[int, torch.Tensor], grid: Tuple[int, int], rope: Optional[torch.Tensor],
                    input_size: Tuple[int, int]) -> EncoderPass:
        """What this decoder reads of one encoder pass made for several decoders (``taps``: block ->
        its normed tokens, a superset of :attr:`tap_indices`)."""
        if self.tap_indices is None:
            raise ValueError(f'{type(self).__name__} runs inside the encoder: it cannot read a shared pass')
        return EncoderPass([taps[i] for i in self.tap_indices], grid, rope, tuple(input_size))

    def decode(self, backbone: ViT5, head: QueryHead, encoded: EncoderPass, supervise: bool,
               state: Optional[object] = None) -> MaskFeatures:
        raise NotImplementedError

    def forward(self, backbone: ViT5, head: QueryHead, inputs: torch.Tensor, supervise: bool,
                state: Optional[object] = None) -> MaskFeatures:
        return self.decode(backbone, head, self.encode(backbone, inputs), supervise, state)

    def refuse_state(self, state: Optional[object]) -> None:
        """For a decoder that carries nothing from one call to the next."""
        if state is not None:
            raise ValueError(f'{type(self).__name__} carries no state from one call to the next; a task that '
                             f'hands one on needs a decoder that reads it')


class MaskClassificationCore:
    """The forward of a mask-classification model over ``self.backbone`` (a :class:`ViT5`),
    ``self.decode_head`` (a :class:`QueryHead`) and ``self.decoder`` (a :class:`MaskDecoder`;
    EoMT's by default): the one implementation behind mmseg's ``EoMTEncoderDecoder`` and
    mmdet's ``EoMT`` detector. Both keep the parts under these names, so one checkpoint
    loads in either."""

    DEFAULT_DECODER = dict(type='EoMTDecoder')

    def build_decoder(self, decoder: Optional[dict]) -> None:
        self.decoder = MODELS.build(dict(decoder or self.DEFAULT_DECODER))
        self.check_eomt_parts()

    def check_eomt_parts(self):
        bb, head = self.backbone, self.decode_head
        if not isinstance(bb, ViT5) or not isinstance(head, QueryHead):
            raise TypeError(f'{type(self).__name__} needs a ViT5 backbone and a QueryHead, got '
                            f'{type(bb).__name__} and {type(head).__name__}')
        if not isinstance(self.decoder, MaskDecoder):
            raise TypeError(f'{type(self).__name__}.decoder must be a MaskDecoder, got {type(self.decoder).__name__}')
        self.decoder.check_parts(bb, head)

    def attention_mask(self, mask_logits: torch.Tensor, grid: Tuple[int, int], prob: float,
                       num_tokens: int) -> torch.Tensor:
        """The decoder's masked attention (EoMT's: :meth:`.eomt.EoMTDecoder.attention_mask`)."""
        return self.decoder.attention_mask(self.decode_head, mask_logits, grid, prob, num_tokens)

    def extract_feat(self, inputs: Optional[torch.Tensor], encoded: Optional[EncoderPass] = None,
                     state: Optional[object] = None) -> MaskFeatures:
        """The decoder's predictions for ``inputs``, or from ``encoded`` (an encoder pass already
        made, shared with other decoders); ``state``: the previous call's ``MaskFeatures.state``."""
        if encoded is None:
            encoded = self.decoder.encode(self.backbone, inputs)
        return self.decoder.decode(self.backbone, self.decode_head, encoded, self.training, state)


__all__ = ['EncoderPass', 'MaskClassificationCore', 'MaskDecoder', 'MaskFeatures', 'QueryHead', 'ScaleUp']
