# Transplant: the Gemma 3 block recipe in place of ViT-5's block. Paper (IN-1k, Large at 384):
# Gemma3-style 85.75 vs ViT-5 86.00.
# The paper (arXiv 2602.08071) gives the score, not the variant's parts; this config takes what
# defines a Gemma 3 block and keeps what a language model has no counterpart for:
#   taken: RMSNorm before AND after each branch (sandwich_norm: Gemma's post-attention and
#          post-feed-forward norms), GeGLU MLP (tanh-approximated GELU gate, hidden 2/3 x 4C),
#          QK-norm (Gemma 3's replacement for logit soft-capping, as ViT-5), rotary positions
#          (2D here), no bias in any linear layer of the block, no LayerScale;
#   not taken: Gemma's (1 + w) RMSNorm parameterisation (the same function as w initialised
#          to 1 when norms get no weight decay, as here), the sqrt(C) embedding scale (it
#          belongs to tied token embeddings) and local/global sliding-window attention (a
#          long-context device; a 512x512 crop is 1024 tokens);
#   kept from ViT-5 (vision-only): patch embedding, absolute pos_embed, cls token, 4 registers
#          with their own RoPE.
# Only the full ViT-5 has released weights: pretrain this variant on ImageNet-1k at 224 and
# put it at the path below (or pass model.backbone.init_cfg.checkpoint=PATH); see docs/reproduce.md.
_base_ = ['../vit5_upernet_ade20k.py']
variant = 'gemma3-style'
model = dict(backbone=dict(
    mlp_type='geglu',
    sandwich_norm=True,
    linear_bias=False,
    layer_scale_init=0,
    init_cfg=dict(checkpoint=f'checkpoints/ablations/vit5-base_{variant}_in1k.pth')))
