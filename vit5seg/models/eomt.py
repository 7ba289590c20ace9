"""EoMT on ViT-5 / DeiT-III: the backbone is the segmentor ("Your ViT is Secretly an Image
Segmentation Model", Kerssies et al., CVPR 2025; tue-mps/eomt models/eomt.py).

Learned queries join the token sequence before the last ``num_blocks`` blocks; every
prediction (class logits over K + 1 with no-object, mask logits) is read from the tokens
through the backbone's final norm by :class:`EoMTHead`. While training, each of those
blocks also gets a prediction from its input, which (a) is supervised and (b) restricts
each query to the patches inside its predicted mask, a restriction each query drops with
probability 1 - P_i; ``EoMTMaskAnnealingHook`` (vit5seg.engine) takes P_i from 1 to 0. At
inference there is no mask and one head pass.

Token order inside the last blocks: ``[queries (Q), cls, patches (h*w), registers (R)]``;
the queries get identity RoPE rows, so they are not rotated.
"""
import math
from typing import List, NamedTuple, Optional, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmcv.ops import point_sample
from mmengine.dist import all_reduce
from mmengine.structures import InstanceData
from mmseg.models.decode_heads.decode_head import BaseDecodeHead
from mmseg.models.segmentors import EncoderDecoder
from mmseg.models.utils import get_uncertain_point_coords_with_randomness
from mmseg.registry import MODELS
from mmseg.utils import MatchMasks, seg_data_to_instance_data
from timm.layers import LayerNorm2d

from .backbones.vit5 import ViT5
from .layers import prepend_identity_rows


class EoMTFeatures(NamedTuple):
    """What :meth:`EoMTEncoderDecoder.extract_feat` hands the head: one (class, mask)
    prediction per supervised point (training: the input of each of the last blocks, then
    the output; inference: the output only), the input's size and its patch grid."""
    class_logits: List[torch.Tensor]    # each (B, Q, K + 1)
    mask_logits: List[torch.Tensor]     # each (B, Q, 4h, 4w) for patch 16
    input_size: Tuple[int, int]         # (H, W) of the image the backbone saw
    padded_size: Tuple[int, int]        # (h * patch, w * patch): what the masks cover


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


@MODELS.register_module()
class EoMTHead(BaseDecodeHead):
    """The queries, their class and mask predictors, and the mask-classification loss.

    Args:
        in_channels: the backbone's width.
        num_classes: K; the class head predicts K + 1 (the last: no object).
        num_queries: Q learned queries (100 for ADE20K).
        num_blocks: the last ``num_blocks`` backbone blocks see the queries.
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
        # P_i of each masked block, first block first; set every iteration by EoMTMaskAnnealingHook
        self.mask_probs = [1.0] * num_blocks
        self.train_cfg = train_cfg
        if train_cfg:
            self.match_masks = MatchMasks(num_points=train_cfg['num_points'], num_queries=num_queries,
                                          num_classes=num_classes, assigner=train_cfg['assigner'])
        names = [loss.loss_name for loss in self._losses()]
        if sorted(names) != ['loss_cls_ce', 'loss_mask_ce', 'loss_mask_dice']:
            raise ValueError(f'EoMTHead needs three losses named loss_cls_ce, loss_mask_ce and loss_mask_dice, '
                             f'got {names}')

    def _losses(self) -> Sequence[nn.Module]:
        return self.loss_decode if isinstance(self.loss_decode, nn.ModuleList) else [self.loss_decode]

    def predict_tokens(self, x: torch.Tensor, grid: Tuple[int, int]) -> Tuple[torch.Tensor, torch.Tensor]:
        """Normalised tokens (B, Q + 1 + h*w + R, C) -> class logits (B, Q, K + 1) and mask
        logits (B, Q, s*h, s*w), s = ``mask_scale``."""
        B, (h, w) = x.shape[0], grid
        q = x[:, :self.num_queries]
        patches = x[:, self.num_queries + 1:self.num_queries + 1 + h * w]            # (B, h*w, C)
        patch_map = patches.transpose(1, 2).reshape(B, -1, h, w)
        masks = torch.einsum('bqc,bchw->bqhw', self.mask_mlp(q), self.upscale(patch_map))
        return self.class_head(q), masks

    def forward(self, inputs: EoMTFeatures) -> Tuple[torch.Tensor, torch.Tensor]:
        """The last prediction: class logits (B, Q, K + 1), mask logits (B, Q, 4h, 4w)."""
        return inputs.class_logits[-1], inputs.mask_logits[-1]

    def predict(self, inputs: EoMTFeatures, batch_img_metas: List[dict], test_cfg) -> torch.Tensor:
        """Per-pixel class scores (B, K, H, W) at the input's size: each query's mask
        probability times its class probabilities without no-object, summed over queries."""
        class_logits, mask_logits = self.forward(inputs)
        (B, Q), (H, W) = class_logits.shape[:2], inputs.input_size
        # the masks cover the patch-padded image: upsample to it, then cut the padding off
        masks = F.interpolate(mask_logits, size=inputs.padded_size, mode='bilinear', align_corners=False)
        masks = masks[..., :H, :W].sigmoid_().reshape(B, Q, H * W)    # in place: (B, Q, H, W) is large
        probs = class_logits.softmax(-1)[..., :-1]                     # (B, Q, K)
        return torch.bmm(probs.transpose(1, 2), masks).view(B, -1, H, W)

    def loss(self, inputs: EoMTFeatures, batch_data_samples, train_cfg) -> dict:
        """mmseg's semantic targets: one mask per class present (ignored pixels in none)."""
        return self.loss_targets(inputs, seg_data_to_instance_data(self.ignore_index, batch_data_samples))

    def loss_targets(self, inputs: EoMTFeatures, gts: List[InstanceData]) -> dict:
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
        last = len(inputs.class_logits) - 1
        for i, (cls, masks) in enumerate(zip(inputs.class_logits, inputs.mask_logits)):
            prefix = '' if i == last else f'm{i}.'
            for name, value in self.loss_by_feat(cls, masks, gts).items():
                losses[prefix + name] = value
        return losses

    def loss_by_feat(self, class_logits: torch.Tensor, mask_logits: torch.Tensor,
                     gts: List[InstanceData]) -> dict:
        """One prediction's losses: Hungarian matching on uniformly sampled points, then the
        class CE over all queries (no-object for unmatched ones) and the mask BCE and dice
        on uncertainty-sampled points of the matched masks, normalised by the number of
        target masks over all ranks."""
        cfg = self.train_cfg
        # matching and losses in float32 whatever the autocast (costs decide an assignment)
        with torch.autocast(class_logits.device.type, enabled=False):
            class_logits, mask_logits = class_logits.float(), mask_logits.float()
            labels, mask_targets, mask_weights, num_masks = self.match_masks.get_targets(
                class_logits.detach(), mask_logits.detach(), gts)
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


def _run_block(blk: nn.Module, x: torch.Tensor, rope: Optional[torch.Tensor], attn_mask: Optional[torch.Tensor],
               use_cp: bool) -> torch.Tensor:
    return blk.forward_cp(x, rope, attn_mask) if use_cp else blk(x, rope, attn_mask)


@torch.compiler.disable  # random and set per step: outside any graph, as upstream
def _drop_rows(rows: torch.Tensor, prob: float) -> torch.Tensor:
    """Each query's mask row (B, Q, h*w), fully opened with probability 1 - prob."""
    if prob >= 1:
        return rows
    return rows | (torch.rand(*rows.shape[:2], 1, device=rows.device) >= prob)


class EoMTCore:
    """EoMT's forward over ``self.backbone`` (a :class:`ViT5`) and ``self.decode_head`` (an
    :class:`EoMTHead`): the one implementation behind mmseg's :class:`EoMTEncoderDecoder`
    and mmdet's ``EoMT`` detector (vit5seg.models.eomt_det). Both keep the two parts under
    these names, so one checkpoint loads in either."""

    _compiled = None  # (block, prediction) made on first use with model.backbone.compile

    def check_eomt_parts(self):
        bb, head = self.backbone, self.decode_head
        if not isinstance(bb, ViT5) or not isinstance(head, EoMTHead):
            raise TypeError(f'{type(self).__name__} needs a ViT5 backbone and an EoMTHead, got '
                            f'{type(bb).__name__} and {type(head).__name__}')
        if not bb.final_norm:
            raise ValueError('EoMT reads every prediction through the backbone\'s final norm: set '
                             'model.backbone.final_norm=True')
        if head.in_channels != bb.embed_dims:
            raise ValueError(f'decode_head.in_channels={head.in_channels} differs from the backbone width '
                             f'{bb.embed_dims}')
        if not 1 <= head.num_blocks <= bb.num_layers:
            raise ValueError(f'decode_head.num_blocks={head.num_blocks} must be within 1..{bb.num_layers} '
                             f'(the backbone\'s blocks)')
        if head.patch_size != bb.patch_size:
            raise ValueError(f'decode_head.patch_size={head.patch_size} differs from the backbone\'s '
                             f'{bb.patch_size}')
        self._compiled = None

    def __getstate__(self):
        # compiled functions' caches belong to this instance: a copy (EMA, pickling) compiles its own
        state = self.__dict__.copy()
        state['_compiled'] = None
        return state

    def _block_and_prediction(self):
        """The two functions the forward runs per block: eager, or compiled with
        ``model.backbone.compile``'s arguments. Upstream compiles the whole model; here each
        block with its queries and mask, and each prediction, is one graph, shared by every
        block of the same kind (graphs: the blocks without queries, those with a mask,
        those with queries and no mask, each for training and inference), so no step
        recompiles: the per-step mask probabilities and the random drop stay outside."""
        if self.backbone.compile_cfg is None:
            return _run_block, self._predict
        if self._compiled is None:
            self._compiled = (torch.compile(_run_block, **self.backbone.compile_cfg),
                              torch.compile(self._predict, **self.backbone.compile_cfg))
        return self._compiled

    def _predict(self, x: torch.Tensor, grid: Tuple[int, int]) -> Tuple[torch.Tensor, torch.Tensor]:
        return self.decode_head.predict_tokens(self.backbone.norm(x), grid)

    def attention_mask(self, mask_logits: torch.Tensor, grid: Tuple[int, int], prob: float,
                       num_tokens: int) -> torch.Tensor:
        """(B, 1, N, N) boolean, True where attention is allowed: a query sees a patch only
        inside its predicted mask (logits > 0 at the patch grid); with probability 1 - prob
        a query's row is fully open again; every other pair is open."""
        Q = self.decode_head.num_queries
        B, (h, w) = mask_logits.shape[0], grid
        inside = F.interpolate(mask_logits.detach(), size=(h, w), mode='bilinear', align_corners=False) > 0
        mask = torch.ones(B, num_tokens, num_tokens, dtype=torch.bool, device=mask_logits.device)
        mask[:, :Q, Q + 1:Q + 1 + h * w] = _drop_rows(inside.flatten(2), prob)   # (B, Q, h*w)
        return mask[:, None]

    def extract_feat(self, inputs: torch.Tensor) -> EoMTFeatures:
        bb, head = self.backbone, self.decode_head
        B, (H, W) = inputs.shape[0], inputs.shape[-2:]
        compiled = bb.compile_cfg is not None
        x, grid, rope = bb.embed(inputs, real_rope=compiled)  # (B, 1 + h*w + R, C); inductor: real RoPE
        run_block, predict = self._block_and_prediction()
        first = bb.num_layers - head.num_blocks
        supervise = self.training
        use_cp = bb.with_cp and self.training and torch.is_grad_enabled()
        class_logits, mask_logits = [], []
        for i, blk in enumerate(bb.blocks):
            attn_mask = None
            if i == first:
                x = torch.cat([head.queries.weight[None].expand(B, -1, -1).to(x.dtype), x], dim=1)
                rope = None if rope is None else prepend_identity_rows(rope, head.num_queries)
            if i >= first and supervise:
                cls, masks = predict(x, grid)
                class_logits.append(cls)
                mask_logits.append(masks)
                prob = head.mask_probs[i - first]
                if prob > 0:
                    attn_mask = self.attention_mask(masks, grid, prob, x.shape[1])
            x = run_block(blk, x, rope, attn_mask, use_cp)
        cls, masks = predict(x, grid)
        class_logits.append(cls)
        mask_logits.append(masks)
        h, w = grid
        return EoMTFeatures(class_logits, mask_logits, (H, W), (h * bb.patch_size, w * bb.patch_size))


@MODELS.register_module()
class EoMTEncoderDecoder(EoMTCore, EncoderDecoder):
    """mmseg's EncoderDecoder whose "features" are EoMT's predictions (see the module
    docstring); predict, whole and slide inference, loss and the tools work unchanged.

    Needs a :class:`ViT5` backbone with ``final_norm=True`` (every prediction goes through
    its final norm), an :class:`EoMTHead` of the backbone's width, no neck and no
    auxiliary head.
    """

    def __init__(self, backbone: dict, decode_head: dict, **kwargs):
        if kwargs.get('neck') or kwargs.get('auxiliary_head'):
            raise ValueError('EoMTEncoderDecoder takes no neck and no auxiliary head: the queries of its '
                             'decode_head read the backbone tokens directly')
        super().__init__(backbone=backbone, decode_head=decode_head, **kwargs)
        self.check_eomt_parts()


__all__ = ['EoMTCore', 'EoMTEncoderDecoder', 'EoMTFeatures', 'EoMTHead', 'ScaleUp']
