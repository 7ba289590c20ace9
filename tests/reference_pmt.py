"""An independent, deliberately plain PMT ("PMT: Plain Mask Transformer", arXiv 2603.25398),
written from the definitions in tue-mps/pmt (image/models/pmt.py, pmd.py, layers.py, utils.py);
the oracle of tests/test_models_pmt.py, as reference_eomt.py is EoMT's.

It shares no code with vit5seg, mmseg or mmcv. It keeps upstream's token order (queries, the
encoder's prefix tokens (cls, registers), then the patches), upstream's rotate-half RoPE on the
patches only, and upstream's parameter names (``bn.i``, ``decoder.q``, ``decoder.blocks.i`` as
transformers' ``DINOv3ViTLayer``, ``decoder.lateral_projections.i``, ``decoder.scalers.i``,
``decoder.decoder_norm``, ``decoder.upscale``, ``decoder.mask_head``, ``decoder.class_head``), so a
release is its state dict under ``network.``. The encoder is frozen: it runs in eval mode.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from reference_eomt import RefScaleBlock


def rope_cos_sin(grid, head_dim, base=100.0, scale=1.0):
    """DINOv3's RoPE for the patches (transformers' DINOv3ViTRopePositionEmbedding, PMT's own copy):
    patch centres in [-1, 1] per axis (times ``scale``), angle 2 pi c / base ** (4k / D), the h angles
    then the w angles, tiled twice (rotate-half layout). (h*w, D) cos and sin."""
    h, w = grid
    ch, cw = (torch.arange(0.5, h) / h) * 2 - 1, (torch.arange(0.5, w) / w) * 2 - 1
    coords = torch.stack(torch.meshgrid(ch, cw, indexing='ij'), dim=-1).reshape(-1, 2) * scale
    inv_freq = 1 / base ** torch.arange(0, 1, 4 / head_dim)
    angles = (2 * math.pi * coords[:, :, None] * inv_freq[None, None]).flatten(1, 2).tile(2)
    return angles.cos(), angles.sin()


def rotate_patches(x, cos, sin):
    """Rotate-half RoPE on the last h*w tokens of (B, heads, N, D); the prefix is left as it is."""
    n = cos.shape[0]
    prefix, p = x[:, :, :-n], x[:, :, -n:]
    half = torch.cat([-p[..., p.shape[-1] // 2:], p[..., :p.shape[-1] // 2]], dim=-1)
    return torch.cat([prefix, p * cos + half * sin], dim=2)


class RefAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj = nn.Linear(dim, dim), nn.Linear(dim, dim, bias=False)
        self.v_proj, self.o_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)


class RefLayerScale(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.lambda1 = nn.Parameter(torch.ones(dim))


class RefMlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.up_proj, self.down_proj = nn.Linear(dim, hidden), nn.Linear(hidden, dim)


class RefLayer(nn.Module):
    """transformers' DINOv3ViTLayer as PMT builds it: LayerNorm (eps 1e-5), no key bias, LayerScale 1."""

    def __init__(self, dim, hidden, heads):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attention = RefAttention(dim, heads)
        self.layer_scale1, self.layer_scale2 = RefLayerScale(dim), RefLayerScale(dim)
        self.mlp = RefMlp(dim, hidden)

    def forward(self, x, mask, cos_sin):
        a = self.attention
        y = self.norm1(x)
        B, N, C = y.shape
        split = lambda t: t.view(B, N, a.heads, C // a.heads).transpose(1, 2)   # noqa: E731
        q, k, v = split(a.q_proj(y)), split(a.k_proj(y)), split(a.v_proj(y))
        if cos_sin is not None:
            q, k = rotate_patches(q, *cos_sin), rotate_patches(k, *cos_sin)
        attn = (q @ k.transpose(-2, -1)) * (C // a.heads) ** -0.5
        if mask is not None:
            attn = attn.masked_fill(~mask[:, None], float('-inf'))
        y = (attn.softmax(-1) @ v).transpose(1, 2).reshape(B, N, C)
        x = x + self.layer_scale1.lambda1 * a.o_proj(y)
        return x + self.layer_scale2.lambda1 * self.mlp.down_proj(F.gelu(self.mlp.up_proj(self.norm2(x))))


class RefPMD(nn.Module):
    def __init__(self, dim, hidden, heads, levels, num_classes, num_q, num_blocks, patch=16):
        super().__init__()
        self.num_q = num_q
        self.lateral_projections = nn.ModuleList(
            [nn.Sequential(nn.Linear(dim, dim // 2), nn.GELU(), nn.Linear(dim // 2, dim)) for _ in range(levels)])
        self.scalers = nn.ParameterList([nn.Parameter(torch.ones(dim)) for _ in range(levels)])
        self.q = nn.Embedding(num_q, dim)
        self.blocks = nn.ModuleList([RefLayer(dim, hidden, heads) for _ in range(num_blocks)])
        self.decoder_norm = nn.LayerNorm(dim)
        self.upscale = nn.Sequential(*[RefScaleBlock(dim) for _ in range(max(1, int(math.log2(patch)) - 2))])
        self.mask_head = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim), nn.GELU(),
                                       nn.Linear(dim, dim))
        self.class_head = nn.Linear(dim, num_classes + 1)


class RefPMT(nn.Module):
    """PMT over a frozen reference encoder (``embed``, ``block``, ``final_norm``; tokens [cls,
    patches, registers]); ``own_rope``: PMT's own tables (an encoder that is not DINOv3)."""

    def __init__(self, encoder, dim, heads, indices, num_classes, num_q, num_blocks, hidden=None, registers=0,
                 own_rope=False, patch=16):
        super().__init__()
        self.encoder, self.indices, self.registers, self.own_rope = encoder, list(indices), registers, own_rope
        self.heads, self.patch, self.num_q = heads, patch, num_q
        self.bn = nn.ModuleList([nn.BatchNorm1d(dim) for _ in indices])
        self.decoder = RefPMD(dim, hidden or 4 * dim, heads, len(indices), num_classes, num_q, num_blocks, patch)
        self.scale = 1.0

    def train(self, mode=True):
        super().train(mode)
        self.encoder.eval()   # frozen
        return self

    def features(self, img):
        """The encoder's final-normed tokens at the indices, in upstream's order [cls, registers, patches]."""
        with torch.no_grad():
            x, grid = self.encoder.embed(img)
            out = []
            for i in range(max(self.indices) + 1):
                x = self.encoder.block(i, x, grid)
                if i in self.indices:
                    y = self.encoder.final_norm(x)
                    n = grid[0] * grid[1]
                    out.append(torch.cat([y[:, :1], y[:, 1 + n:], y[:, 1:1 + n]], dim=1))
        return out, grid

    def predict(self, x, grid):
        d, (h, w) = self.decoder, grid
        x = d.decoder_norm(x)
        q = x[:, :self.num_q]
        patches = x[:, -h * w:].transpose(1, 2).reshape(x.shape[0], -1, h, w)
        return d.class_head(q), torch.einsum('bqc,bchw->bqhw', d.mask_head(q), d.upscale(patches))

    def attention_mask(self, mask_logits, grid, num_tokens, prob):
        """upstream's _attn_mask: True where allowed; a query sees a patch where its mask logit,
        bilinearly resized to the grid, is > 0; rows opened with probability 1 - prob."""
        B, Q, (h, w) = mask_logits.shape[0], self.num_q, grid
        mask = torch.ones(B, num_tokens, num_tokens, dtype=torch.bool)
        rows = (F.interpolate(mask_logits, size=(h, w), mode='bilinear') > 0).flatten(2)
        if prob < 1:
            rows = rows | (torch.rand(B, Q) > prob)[..., None]
        mask[:, :Q, num_tokens - h * w:] = rows
        return mask

    def forward(self, img, probs=None):
        levels, grid = self.features(img)
        head_dim = levels[0].shape[-1] // self.heads
        self.scale = 1.0
        if self.own_rope and self.training:   # PMT's own tables: one coordinate scale in [1/2, 2] per step
            self.scale = torch.empty(1).uniform_(-math.log(2.0), math.log(2.0)).exp()
        cos_sin = rope_cos_sin(grid, head_dim, scale=self.scale)
        d = self.decoder
        x = 0
        for bn, proj, scaler, level in zip(self.bn, d.lateral_projections, d.scalers, levels):
            level = bn(level.transpose(1, 2)).transpose(1, 2)
            x = x + (level + proj(level)) * scaler
        x = torch.cat([d.q.weight[None].expand(x.shape[0], -1, -1), x], dim=1)
        predictions = []
        for i, block in enumerate(d.blocks):
            mask = None
            if probs is not None:
                predictions.append(self.predict(x, grid))
                if probs[i] > 0:
                    mask = self.attention_mask(predictions[-1][1], grid, x.shape[1], probs[i])
            x = block(x, mask, cos_sin)
        predictions.append(self.predict(x, grid))
        return predictions, grid

    def semantic(self, img):
        """Per-pixel class scores (B, K, H, W), as EoMT's: masks upsampled to the patch-padded image,
        cut to it, sigmoid, times the class probabilities without no-object, summed over queries."""
        (H, W), p = img.shape[-2:], self.patch
        [(class_logits, mask_logits)], (h, w) = self.forward(img)
        masks = F.interpolate(mask_logits, size=(h * p, w * p), mode='bilinear', align_corners=False)
        masks = masks[..., :H, :W].sigmoid()
        return torch.einsum('bqhw,bqk->bkhw', masks, class_logits.softmax(-1)[..., :-1])

    def release(self):
        """The decoder-only release, as tue-mps/pmt scripts/convert_ckpt.py writes it."""
        sd = {f'network.{k}': v for k, v in self.state_dict().items() if not k.startswith('encoder.')}
        sd['network.decoder.attn_mask_probs'] = torch.zeros(len(self.decoder.blocks))
        return {'state_dict': sd}


def eval_semantic(ref, photo, size=512, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)):
    """EoMT's (and PMT's) semantic eval_step on a uint8 RGB photo (3, H, W), written from
    training/lightning_module.py: the short side to ``size`` with PIL's bilinear (sides rounded),
    ceil(long / size) windows of size x size spread evenly along the long side, each window's
    per-pixel class scores, averaged where windows overlap, bilinear to the photo: (K, H, W)."""
    import numpy as np
    from PIL import Image
    H, W = photo.shape[-2:]
    factor = max(size / H, size / W)
    h, w = round(H * factor), round(W * factor)
    img = torch.from_numpy(np.array(Image.fromarray(photo.permute(1, 2, 0).numpy()).resize((w, h), Image.BILINEAR)))
    img = img.permute(2, 0, 1).float() / 255
    img = (img - torch.tensor(mean).view(3, 1, 1)) / torch.tensor(std).view(3, 1, 1)
    long = max(h, w)
    n = math.ceil(long / size)
    overlap = n * size - long
    step = overlap / (n - 1) if overlap > 0 else 0
    total, count = None, torch.zeros(1, h, w)
    with torch.no_grad():
        for j in range(n):
            start = int(j * (size - step))
            window = img[:, start:start + size] if h > w else img[:, :, start:start + size]
            scores = ref.semantic(window[None])[0]
            if total is None:
                total = torch.zeros(scores.shape[0], h, w)
            if h > w:
                total[:, start:start + size] += scores
                count[:, start:start + size] += 1
            else:
                total[:, :, start:start + size] += scores
                count[:, :, start:start + size] += 1
    return F.interpolate((total / count)[None], size=(H, W), mode='bilinear')[0]
