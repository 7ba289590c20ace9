"""An independent, deliberately plain re-implementation of ViT-5 from
the ViT-5 paper (arXiv 2602.08071) and its authors' released weights' layout, used only as
the oracle of the equivalence tests.

It shares no code with vit5seg or timm's RoPE: explicit softmax attention, rotations
written out per channel pair, parameters named as the authors' checkpoints.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def rms_norm(x, weight, eps=1e-6):
    x32 = x.float()
    return (x32 / torch.sqrt((x32 * x32).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


def reference_freqs(head_dim, theta):
    k = torch.arange(head_dim // 4, dtype=torch.float64)
    return (theta ** (-(2 * k) / (head_dim / 2))).float()


def reference_rotate(x, rows, cols, ref_rows, ref_cols, freqs):
    """Rotate x (..., n_tokens, D) of a rows x cols grid, row-major, by the spec's rule."""
    D = x.shape[-1]
    pr = torch.arange(rows, dtype=torch.float32) / rows * ref_rows
    pc = torch.arange(cols, dtype=torch.float32) / cols * ref_cols
    row_pos = pr[:, None].expand(rows, cols).reshape(-1)     # (N,)
    col_pos = pc[None, :].expand(rows, cols).reshape(-1)
    out = x.clone()
    for half, pos in ((0, row_pos), (1, col_pos)):
        for k in range(D // 4):
            i = half * D // 2 + 2 * k
            t = pos * freqs[k]
            a, b = x[..., i], x[..., i + 1]
            out[..., i] = a * torch.cos(t) - b * torch.sin(t)
            out[..., i + 1] = b * torch.cos(t) + a * torch.sin(t)
    return out


def pad_to_patches(img, patch):
    """Zero-pad an image at the bottom and right to multiples of the patch."""
    return F.pad(img, (0, -img.shape[-1] % patch, 0, -img.shape[-2] % patch))


def resize_pos_embed(pos, grid, size):
    """(1, grid * grid, C) absolute positions at an (h, w) patch grid: resized as a
    (C, grid, grid) image, bicubic, align_corners=False."""
    if size == (grid, grid):
        return pos
    C = pos.shape[-1]
    pos = pos.reshape(1, grid, grid, C).permute(0, 3, 1, 2)
    return F.interpolate(pos, size=size, mode='bicubic', align_corners=False).permute(0, 2, 3, 1).reshape(1, -1, C)


class RefAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.hd = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim)
        self.q_norm = nn.Module()
        self.q_norm.weight = nn.Parameter(torch.ones(self.hd))
        self.k_norm = nn.Module()
        self.k_norm.weight = nn.Parameter(torch.ones(self.hd))
        self.rope = nn.Module()
        self.rope.register_buffer('freqs', reference_freqs(self.hd, 10000.))
        self.rope_reg = nn.Module()
        self.rope_reg.register_buffer('freqs', reference_freqs(self.hd, 100.))

    def forward(self, x, grid, ref, n_reg, n_queries=0, mask=None):
        """x: [queries (n_queries, EoMT), cls, patches, registers]; mask: (B, N, N), True
        where a token may attend (EoMT's masked attention)."""
        B, N, C = x.shape
        q, k, v = self.qkv(x).view(B, N, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4)
        q, k = rms_norm(q, self.q_norm.weight), rms_norm(k, self.k_norm.weight)
        rows, cols = grid
        g = int(math.sqrt(n_reg))
        Q = n_queries
        rotated = []
        for t in (q, k):
            queries, cls = t[:, :, :Q], t[:, :, Q:Q + 1]
            patches, regs = t[:, :, Q + 1:Q + 1 + rows * cols], t[:, :, Q + 1 + rows * cols:]
            patches = reference_rotate(patches, rows, cols, ref, ref, self.rope.freqs)
            regs = reference_rotate(regs, g, g, g, g, self.rope_reg.freqs)
            rotated.append(torch.cat([queries, cls, patches, regs], dim=2))  # queries: no rotation
        q, k = rotated
        attn = (q @ k.transpose(-2, -1)) * self.hd ** -0.5
        if mask is not None:
            attn = attn.masked_fill(~mask[:, None], float('-inf'))
        x = attn.softmax(-1) @ v
        return self.proj(x.transpose(1, 2).reshape(B, N, C))


class RefMlp(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class RefBlock(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1, self.norm2 = nn.Module(), nn.Module()
        self.norm1.weight = nn.Parameter(torch.ones(dim))
        self.norm2.weight = nn.Parameter(torch.ones(dim))
        self.attn, self.mlp = RefAttention(dim, heads), RefMlp(dim)
        self.gamma_1 = nn.Parameter(1e-4 * torch.ones(dim))
        self.gamma_2 = nn.Parameter(1e-4 * torch.ones(dim))

    def forward(self, x, grid, ref, n_reg, n_queries=0, mask=None):
        x = x + self.gamma_1 * self.attn(rms_norm(x, self.norm1.weight), grid, ref, n_reg, n_queries, mask)
        return x + self.gamma_2 * self.mlp(rms_norm(x, self.norm2.weight))


class RefViT5(nn.Module):
    """The authors' model as the spec describes it; ``forward_features`` returns the
    final normalized tokens [cls, patches, registers]."""

    def __init__(self, dim, depth, heads, img_size=224, patch=16, n_reg=4, num_classes=1000):
        super().__init__()
        self.grid = img_size // patch
        self.n_reg = n_reg
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.reg_token = nn.Parameter(torch.zeros(1, n_reg, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, self.grid ** 2, dim))
        self.patch_embed = nn.Module()
        self.patch_embed.proj = nn.Conv2d(3, dim, patch, patch)
        self.blocks = nn.ModuleList(RefBlock(dim, heads) for _ in range(depth))
        self.norm = nn.Module()
        self.norm.weight = nn.Parameter(torch.ones(dim))
        self.head = nn.Linear(dim, num_classes)

    def randomize(self, seed=0):
        """Random values everywhere (LayerScale and norms too) so every weight matters."""
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in self.named_parameters():
                scale = 0.5 if ('gamma' in name) else 0.2
                base = 1.0 if name.endswith('norm1.weight') or name.endswith('norm2.weight') \
                    or 'q_norm' in name or 'k_norm' in name or name == 'norm.weight' else 0.0
                p.copy_(base + scale * torch.randn(p.shape, generator=g))
        return self

    def embed(self, img):
        """Tokens [cls, patches + pos, registers] and the patch grid; an image that is not
        a multiple of the patch is zero-padded at the bottom and right first."""
        x = self.patch_embed.proj(pad_to_patches(img, self.patch_embed.proj.kernel_size[0]))  # (B, C, h, w)
        B, C, h, w = x.shape
        x = x.flatten(2).transpose(1, 2) + resize_pos_embed(self.pos_embed, self.grid, (h, w))
        x = torch.cat([self.cls_token.expand(B, -1, -1), x, self.reg_token.expand(B, -1, -1)], dim=1)
        return x, (h, w)

    def block(self, i, x, grid, n_queries=0, mask=None):
        return self.blocks[i](x, grid, self.grid, self.n_reg, n_queries, mask)

    def final_norm(self, x):
        return rms_norm(x, self.norm.weight)

    def forward_features(self, img):
        x, (h, w) = self.embed(img)
        for blk in self.blocks:
            x = blk(x, (h, w), self.grid, self.n_reg)
        return rms_norm(x, self.norm.weight)
