"""An independent, deliberately plain EoMT ("Your ViT is Secretly an Image Segmentation
Model", Kerssies et al., CVPR 2025), written from the paper and the definitions in
tue-mps/eomt (models/eomt.py, training/); the oracle of tests/test_models_eomt_reference.py, as reference_vit5.py is
the backbone's.

It shares no code with vit5seg, mmseg or mmcv: the ViT-5 blocks are reference_vit5's, the
DeiT-III ones are timm's parameters run by an attention written out here; point sampling
is bilinear interpolation written by hand; matching is scipy's linear_sum_assignment on
costs written from their definitions. Parameter names follow the authors' EoMT (``q``,
``class_head``, ``mask_head``, ``upscale.i.conv1/conv2/norm``).
"""
import math

import numpy as np

import timm
import torch
import torch.nn as nn
import torch.nn.functional as F
from scipy.optimize import linear_sum_assignment

from reference_vit5 import pad_to_patches, resize_pos_embed


class RefDeiT3(nn.Module):
    """DeiT-III from timm's parameters (LayerNorm, qkv bias, LayerScale, patch-only
    pos_embed, no registers), with the same interface as RefViT5: ``embed``, ``block``
    (optionally with queries in front and a boolean attention mask), ``final_norm``."""

    def __init__(self, dim, depth, heads, img_size=224, patch=16):
        super().__init__()
        self.vit = timm.models.vision_transformer.VisionTransformer(
            img_size=img_size, patch_size=patch, embed_dim=dim, depth=depth, num_heads=heads, no_embed_class=True,
            init_values=1e-4, num_classes=10)
        self.grid, self.heads, self.patch = img_size // patch, heads, patch

    def randomize(self, seed=0):
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in self.vit.parameters():
                p.add_(0.1 * torch.randn(p.shape, generator=g))
        return self

    def embed(self, img):
        x = self.vit.patch_embed.proj(pad_to_patches(img, self.patch))      # (B, C, h, w)
        B, C, h, w = x.shape
        x = x.flatten(2).transpose(1, 2) + resize_pos_embed(self.vit.pos_embed, self.grid, (h, w))
        return torch.cat([self.vit.cls_token.expand(B, -1, -1), x], dim=1), (h, w)

    def block(self, i, x, grid, n_queries=0, mask=None):
        blk = self.vit.blocks[i]
        y = blk.norm1(x)
        B, N, C = y.shape
        q, k, v = blk.attn.qkv(y).view(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        attn = (q @ k.transpose(-2, -1)) * (C // self.heads) ** -0.5
        if mask is not None:
            attn = attn.masked_fill(~mask[:, None], float('-inf'))
        y = (attn.softmax(-1) @ v).transpose(1, 2).reshape(B, N, C)
        x = x + blk.ls1.gamma * blk.attn.proj(y)
        return x + blk.ls2.gamma * blk.mlp.fc2(F.gelu(blk.mlp.fc1(blk.norm2(x))))

    def final_norm(self, x):
        return self.vit.norm(x)

    def forward_features(self, img):
        x, grid = self.embed(img)
        for i in range(len(self.vit.blocks)):
            x = self.block(i, x, grid)
        return self.final_norm(x)


class RefScaleBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.conv1 = nn.ConvTranspose2d(dim, dim, kernel_size=2, stride=2)
        self.conv2 = nn.Conv2d(dim, dim, kernel_size=3, padding=1, groups=dim, bias=False)
        self.norm = nn.Module()
        self.norm.weight, self.norm.bias = nn.Parameter(torch.ones(dim)), nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        x = self.conv2(F.gelu(self.conv1(x)))
        # LayerNorm over the channels of each pixel
        mean = x.mean(1, keepdim=True)
        var = ((x - mean) ** 2).mean(1, keepdim=True)
        x = (x - mean) / torch.sqrt(var + 1e-6)
        return x * self.norm.weight[:, None, None] + self.norm.bias[:, None, None]


class RefEoMT(nn.Module):
    """EoMT over a reference backbone: Q queries join before the last ``num_blocks``
    blocks; each prediction reads the final-normed tokens."""

    def __init__(self, backbone, dim, depth, num_classes, num_q, num_blocks, patch=16):
        super().__init__()
        self.backbone, self.depth, self.num_q, self.num_blocks, self.patch = backbone, depth, num_q, num_blocks, patch
        self.q = nn.Embedding(num_q, dim)
        self.class_head = nn.Linear(dim, num_classes + 1)
        self.mask_head = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim), nn.GELU(),
                                       nn.Linear(dim, dim))
        self.upscale = nn.Sequential(*[RefScaleBlock(dim) for _ in range(max(1, int(math.log2(patch)) - 2))])

    def predict(self, x, grid):
        """Final-normed tokens -> (class logits (B, Q, K+1), mask logits (B, Q, 4h, 4w))."""
        Q, (h, w) = self.num_q, grid
        x = self.backbone.final_norm(x)
        q = x[:, :Q]
        patches = x[:, Q + 1:Q + 1 + h * w].transpose(1, 2).reshape(x.shape[0], -1, h, w)
        return self.class_head(q), torch.einsum('bqc,bchw->bqhw', self.mask_head(q), self.upscale(patches))

    def attention_mask(self, mask_logits, grid, num_tokens, prob):
        """True where attention is allowed: a query sees a patch only where its mask
        logit, bilinearly resized to the patch grid, is positive; each query's row opens
        fully with probability 1 - prob (one torch.rand(B, Q) draw per masked block)."""
        B, Q, (h, w) = mask_logits.shape[0], self.num_q, grid
        mask = torch.ones(B, num_tokens, num_tokens, dtype=torch.bool)
        inside = F.interpolate(mask_logits, size=(h, w), mode='bilinear', align_corners=False) > 0
        rows = inside.flatten(2)
        if prob < 1:
            rows = rows | (torch.rand(B, Q) > prob)[..., None]
        mask[:, :Q, Q + 1:Q + 1 + h * w] = rows
        return mask

    def forward(self, img, probs=None):
        """Training (``probs``: P_i per masked block): every supervised prediction, the
        inputs of the masked blocks then the output. Inference (None): the output's only."""
        x, grid = self.backbone.embed(img)
        first = self.depth - self.num_blocks
        predictions = []
        for i in range(self.depth):
            mask = None
            if i == first:
                x = torch.cat([self.q.weight[None].expand(x.shape[0], -1, -1), x], dim=1)
            if i >= first and probs is not None:
                predictions.append(self.predict(x, grid))
                if probs[i - first] > 0:
                    mask = self.attention_mask(predictions[-1][1], grid, x.shape[1], probs[i - first])
            x = self.backbone.block(i, x, grid, self.num_q if i >= first else 0, mask)
        predictions.append(self.predict(x, grid))
        return predictions, grid

    def semantic(self, img):
        """Per-pixel class scores (B, K, H, W): the masks, bilinearly upsampled to the
        patch-padded image and cut to the image, through a sigmoid, times the class
        probabilities without no-object, summed over the queries."""
        (H, W), p = img.shape[-2:], self.patch
        [(class_logits, mask_logits)], (h, w) = self.forward(img)
        masks = F.interpolate(mask_logits, size=(h * p, w * p), mode='bilinear', align_corners=False)
        masks = masks[..., :H, :W].sigmoid()
        return torch.einsum('bqhw,bqk->bkhw', masks, class_logits.softmax(-1)[..., :-1])


def sample_points(maps, points):
    """Bilinear values of maps (N, H, W) at points (N, P, 2), (x, y) in [0, 1] over the
    whole map (pixel centres at (i + 0.5) / size), zero outside."""
    N, H, W = maps.shape
    x, y = points[..., 0] * W - 0.5, points[..., 1] * H - 0.5
    x0, y0 = x.floor(), y.floor()
    out = torch.zeros(points.shape[:2], dtype=maps.dtype)
    n = torch.arange(N)[:, None].expand_as(x)
    for dx in (0, 1):
        for dy in (0, 1):
            xi, yi = x0 + dx, y0 + dy
            weight = (1 - (x - xi).abs()) * (1 - (y - yi).abs())
            inside = (xi >= 0) & (xi < W) & (yi >= 0) & (yi < H)
            value = maps[n, yi.clamp(0, H - 1).long(), xi.clamp(0, W - 1).long()]
            out = out + torch.where(inside, weight * value, torch.zeros_like(value))
    return out


def semantic_targets(labels, ignore_index=255):
    """(H, W) label map -> (class ids, (G, H, W) float masks): one mask per class present."""
    classes = [int(c) for c in torch.unique(labels) if int(c) != ignore_index]
    return torch.tensor(classes, dtype=torch.long), torch.stack([(labels == c).float() for c in classes]) \
        if classes else torch.zeros(0, *labels.shape)


def match(class_logits, mask_logits, labels, masks, points, weights=(2.0, 5.0, 5.0)):
    """Hungarian matching of one image: cost = w_cls * -p(class) + w_bce * BCE + w_dice *
    dice, both mask costs at the same ``points`` (P, 2) of every query and target.
    Returns (query indices, target indices)."""
    w_cls, w_bce, w_dice = weights
    Q, G = class_logits.shape[0], labels.shape[0]
    pred = sample_points(mask_logits, points[None].expand(Q, -1, -1))          # (Q, P)
    tgt = sample_points(masks, points[None].expand(G, -1, -1))                 # (G, P)
    cost_class = -class_logits.softmax(-1)[:, labels]
    bce = torch.stack([torch.stack([F.binary_cross_entropy_with_logits(pred[q], tgt[g]) for g in range(G)])
                       for q in range(Q)])
    prob = pred.sigmoid()
    dice = 1 - (2 * prob @ tgt.T + 1) / (prob.sum(-1)[:, None] + tgt.sum(-1)[None] + 1)
    cost = w_cls * cost_class + w_bce * bce + w_dice * dice
    rows, cols = linear_sum_assignment(cost.detach().numpy())
    return rows, cols


def losses(class_logits, mask_logits, batch_labels, padded, match_points, loss_points, num_classes,
           no_object=0.1, weights=(2.0, 5.0, 5.0)):
    """:func:`target_losses` with semantic targets: one mask per class of each (H, W) label map."""
    return target_losses(class_logits, mask_logits, [semantic_targets(labels) for labels in batch_labels], padded,
                         match_points, loss_points, num_classes, no_object, weights)


def target_losses(class_logits, mask_logits, batch_targets, padded, match_points, loss_points, num_classes,
                  no_object=0.1, weights=(2.0, 5.0, 5.0)):
    """One prediction's weighted losses ``cls`` (cross entropy over every query, no-object
    weighted ``no_object``, a weighted mean), ``bce`` and ``dice`` (of each matched mask at
    its ``loss_points``: BCE averaged over the points, dice with +1 smoothing; both summed
    over the masks and divided by the number of target masks, at least 1): EoMT's
    MaskClassificationLoss for any task.

    ``batch_targets``: per image (class ids (G,), float masks (G, H, W)) of the unpadded image;
    the masks cover the ``padded`` (h * patch, w * patch) image, so targets are zero beyond the
    image. ``match_points``: per image with targets, (P, 2); ``loss_points``: (M, P, 2) for
    the matched masks in (image, query) order."""
    B, Q = class_logits.shape[:2]
    target_classes = torch.full((B, Q), num_classes, dtype=torch.long)
    pairs = []
    match_points = iter(match_points)
    for b, (classes, masks) in enumerate(batch_targets):
        if not len(classes):
            continue
        H, W = masks.shape[-2:]
        masks = F.pad(masks, (0, padded[1] - W, 0, padded[0] - H))
        rows, cols = match(class_logits[b], mask_logits[b], classes, masks, next(match_points), weights)
        target_classes[b, rows] = classes[cols]
        pairs += [(mask_logits[b, r], masks[c]) for r, c in sorted(zip(rows, cols))]
    class_weight = torch.ones(num_classes + 1)
    class_weight[-1] = no_object
    w = class_weight[target_classes.flatten()]
    ce = F.cross_entropy(class_logits.flatten(0, 1), target_classes.flatten(), reduction='none')
    out = {'cls': weights[0] * (w * ce).sum() / w.sum()}
    num_masks = max(len(pairs), 1)
    bce = dice = torch.zeros(())
    for (logits, target), points in zip(pairs, loss_points):
        pred = sample_points(logits[None], points[None])[0]
        tgt = sample_points(target[None], points[None])[0]
        bce = bce + F.binary_cross_entropy_with_logits(pred, tgt)
        prob = pred.sigmoid()
        dice = dice + 1 - (2 * (prob * tgt).sum() + 1) / (prob.sum() + tgt.sum() + 1)
    out['bce'] = weights[1] * bce / num_masks
    out['dice'] = weights[2] * dice / num_masks
    return out


def panoptic_targets(segments, infos):
    """EoMT's panoptic training targets (datasets/coco_panoptic.py, transforms.py): one mask per
    segment of the (H, W) segment-index map (-1 void), crowd segments dropped. ``infos``: per
    segment index (class, iscrowd)."""
    kept = [(k, c) for k, (c, crowd) in enumerate(infos) if not crowd and (segments == k).any()]
    if not kept:
        return torch.zeros(0, dtype=torch.long), torch.zeros(0, *segments.shape)
    return (torch.tensor([c for _, c in kept], dtype=torch.long),
            torch.stack([(segments == k).float() for k, _ in kept]))


class RefDinoV2(RefDeiT3):
    """DINOv2 with 4 registers as EoMT builds it from timm (``vit_*_patch14_reg4_dinov2`` at
    patch 16): timm's parameters, tokens [cls, patches, registers] (attention does not see
    the order), LayerScale, the same blocks as RefDeiT3."""

    def __init__(self, dim, depth, heads, img_size=(64, 64), patch=16):
        nn.Module.__init__(self)
        self.vit = timm.models.vision_transformer.VisionTransformer(
            img_size=img_size, patch_size=patch, embed_dim=dim, depth=depth, num_heads=heads, no_embed_class=True,
            reg_tokens=4, init_values=1.0, num_classes=0)
        self.grid, self.heads, self.patch = (img_size[0] // patch, img_size[1] // patch), heads, patch

    def embed(self, img):
        """Positions resized as Meta's _reg models resize them (bicubic, antialias, to the
        grid); none at the img_size, where upstream's EoMT runs."""
        x = self.vit.patch_embed.proj(pad_to_patches(img, self.patch))       # (B, C, h, w)
        B, C, h, w = x.shape
        pos = self.vit.pos_embed
        if (h, w) != self.grid:
            pos = pos.reshape(1, *self.grid, C).permute(0, 3, 1, 2)
            pos = F.interpolate(pos, size=(h, w), mode='bicubic', antialias=True, align_corners=False)
            pos = pos.permute(0, 2, 3, 1).reshape(1, h * w, C)
        x = x.flatten(2).transpose(1, 2) + pos
        return torch.cat([self.vit.cls_token.expand(B, -1, -1), x, self.vit.reg_token.expand(B, -1, -1)], dim=1), (h, w)


class RefDinoV3(nn.Module):
    """DINOv3 run on transformers' ``DINOv3ViTModel`` parameters (q/k/v/o projections, no key
    bias, LayerScale ``lambda1``), its RoPE written from Meta's RopePositionEmbedding: patch
    centres in [-1, 1] per axis, angle 2 pi c / base ** (2k / (D/2)), rotate-half pairs,
    patches only. Tokens [cls, patches, registers]."""

    def __init__(self, hf_model, heads, patch=16, base=100.0, rescale=2.0):
        super().__init__()
        self.hf, self.heads, self.patch, self.base, self.rescale = hf_model, heads, patch, base, rescale
        self.layers = hf_model.layer if hasattr(hf_model, 'layer') else hf_model.model.layer
        self.scale = 1.0

    def embed(self, img):
        e = self.hf.embeddings
        x = F.conv2d(pad_to_patches(img, self.patch), e.patch_embeddings.weight, e.patch_embeddings.bias,
                     stride=self.patch)
        B, C, h, w = x.shape
        x = x.flatten(2).transpose(1, 2)
        # training: one log-uniform coordinate scale in [1/r, r] per forward, drawn here as
        # transformers' augment_patches_center_coordinates draws it
        self.scale = 1.0
        if self.training and self.rescale:
            self.scale = torch.empty(1).uniform_(-math.log(self.rescale), math.log(self.rescale)).exp()
        return torch.cat([e.cls_token.expand(B, -1, -1), x, e.register_tokens.expand(B, -1, -1)], dim=1), (h, w)

    def rope(self, x, grid, start):
        h, w = grid
        D = x.shape[-1]
        ch, cw = (torch.arange(0.5, h) / h) * 2 - 1, (torch.arange(0.5, w) / w) * 2 - 1
        coords = torch.stack(torch.meshgrid(ch, cw, indexing='ij'), dim=-1).reshape(-1, 2) * self.scale   # (h*w, 2)
        periods = self.base ** (2 * torch.arange(D // 4, dtype=torch.float32) / (D // 2))
        angles = (2 * math.pi * coords[:, :, None] / periods).reshape(h * w, D // 2).repeat(1, 2)   # (h*w, D)
        p = x[:, :, start:start + h * w]
        half = torch.cat([-p[..., D // 2:], p[..., :D // 2]], dim=-1)
        rotated = p * angles.cos() + half * angles.sin()
        return torch.cat([x[:, :, :start], rotated, x[:, :, start + h * w:]], dim=2)

    def block(self, i, x, grid, n_queries=0, mask=None):
        layer = self.layers[i]
        a = layer.attention
        y = layer.norm1(x)
        B, N, C = y.shape
        split = lambda t: t.view(B, N, self.heads, C // self.heads).transpose(1, 2)   # noqa: E731
        q, k, v = split(a.q_proj(y)), split(a.k_proj(y)), split(a.v_proj(y))
        q, k = self.rope(q, grid, n_queries + 1), self.rope(k, grid, n_queries + 1)
        attn = (q @ k.transpose(-2, -1)) * (C // self.heads) ** -0.5
        if mask is not None:
            attn = attn.masked_fill(~mask[:, None], float('-inf'))
        y = (attn.softmax(-1) @ v).transpose(1, 2).reshape(B, N, C)
        x = x + layer.layer_scale1.lambda1 * a.o_proj(y)
        m = layer.mlp
        return x + layer.layer_scale2.lambda1 * m.down_proj(F.gelu(m.up_proj(layer.norm2(x))))

    def final_norm(self, x):
        return self.hf.norm(x)

    def forward_features(self, img):
        x, grid = self.embed(img)
        for i in range(len(self.layers)):
            x = self.block(i, x, grid)
        return self.final_norm(x)


# --- panoptic and instance evaluation, written from EoMT's eval_step --------------------------------------
# (tue-mps/eomt training/mask_classification_panoptic.py and _instance.py)

def resize_and_pad(img, size):
    """EoMT's evaluation input from a uint8 RGB photo (3, H, W): the long side to ``size``
    (PIL's bilinear on the uint8 image, sides rounded), zeros below and to the right up to
    size x size. Returns the padded uint8 image and the resized (h, w)."""
    from PIL import Image
    H, W = img.shape[-2:]
    factor = min(size / H, size / W)
    h, w = round(H * factor), round(W * factor)
    resized = torch.from_numpy(np.array(Image.fromarray(img.permute(1, 2, 0).numpy()).resize((w, h), Image.BILINEAR)))
    out = torch.zeros(3, size, size, dtype=torch.uint8)
    out[:, :h, :w] = resized.permute(2, 0, 1)
    return out, (h, w)


def logits_on_photo(mask_logits, size, resized, photo):
    """Mask logits (Q, h', w') -> (Q, H, W): bilinear to the padded square, the resized
    image's part cut out, bilinear to the photo's size."""
    x = F.interpolate(mask_logits[None], size=(size, size), mode='bilinear', align_corners=False)
    x = x[..., :resized[0], :resized[1]]
    return F.interpolate(x, size=photo, mode='bilinear', align_corners=False)[0]


def panoptic_map(mask_logits, class_logits, stuff_classes, mask_thresh=0.8, overlap_thresh=0.8):
    """Per-pixel (class, segment) of (Q, H, W) mask and (Q, K + 1) class logits: queries with
    a class (not no-object) scoring above ``mask_thresh``; each pixel to the query of the
    highest score x mask probability; a query's segment is where it wins and its mask
    probability is >= 0.5, kept if the area it wins is >= ``overlap_thresh`` of its mask's;
    one segment per stuff class. Void: class K, segment -1."""
    K = class_logits.shape[-1] - 1
    scores, classes = class_logits.softmax(-1).max(-1)
    H, W = mask_logits.shape[-2:]
    cls_map = torch.full((H, W), K, dtype=torch.long)
    seg_map = torch.full((H, W), -1, dtype=torch.long)
    keep = (classes != K) & (scores > mask_thresh)
    if not keep.any():
        return cls_map, seg_map
    probs = mask_logits[keep].sigmoid()
    winner = (scores[keep][:, None, None] * probs).argmax(0)
    stuff_segment, next_id = {}, 0
    for k, c in enumerate(classes[keep].tolist()):
        mask = probs[k] >= 0.5
        wins = winner == k
        final = mask & wins
        if mask.sum() == 0 or wins.sum() == 0 or final.sum() == 0 or wins.sum() / mask.sum() < overlap_thresh:
            continue
        if c in stuff_classes and c in stuff_segment:
            seg_map[final], cls_map[final] = stuff_segment[c], c
            continue
        if c in stuff_classes:
            stuff_segment[c] = next_id
        seg_map[final], cls_map[final] = next_id, c
        next_id += 1
    return cls_map, seg_map


def top_instances(mask_logits, class_logits, top_k=100):
    """EoMT's instance predictions: the top ``top_k`` (query, class) pairs by class
    probability (no-object left out), masks where the logits are > 0, score = class
    probability x the mean mask probability inside the mask. Sorted by score."""
    probs = class_logits.softmax(-1)[:, :-1]
    K = probs.shape[-1]
    top, index = probs.flatten().topk(top_k)
    masks_logits = mask_logits[index // K]
    masks = masks_logits > 0
    inside = (masks_logits.sigmoid() * masks).flatten(1).sum(1) / (masks.flatten(1).sum(1) + 1e-6)
    scores = top * inside
    order = scores.argsort(descending=True)
    return masks[order], (index % K)[order], scores[order]
