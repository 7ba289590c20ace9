# Transplant: the LLaMA block recipe in place of ViT-5's block. Paper (IN-1k, Large at 384):
# LLaMA-style 85.73 vs ViT-5 86.00.
# The paper (arXiv 2602.08071) gives the score, not the variant's parts; this config takes what
# defines a LLaMA block and keeps what a language model has no counterpart for:
#   taken: pre-norm RMSNorm (as ViT-5), SwiGLU MLP with hidden 2/3 x 4C, rotary positions
#          (2D here, as ViT-5), no bias in any linear layer of the block, no LayerScale,
#          no QK-norm (LLaMA has neither);
#   kept from ViT-5 (vision-only): patch embedding, absolute pos_embed, cls token, 4 registers
#          with their own RoPE.
# Only the full ViT-5 has released weights: pretrain this variant on ImageNet-1k at 224 and
# put it at the path below (or pass model.backbone.init_cfg.checkpoint=PATH); see docs/reproduce.md.
_base_ = ['../vit5_upernet_ade20k.py']
variant = 'llama-style'
model = dict(backbone=dict(
    mlp_type='swiglu',
    linear_bias=False,
    layer_scale_init=0,
    qk_norm=False,
    init_cfg=dict(checkpoint=f'checkpoints/ablations/vit5-base_{variant}_in1k.pth')))
