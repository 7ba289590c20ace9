#!/usr/bin/env python
"""PCA, attention and token-norm pictures of backbones across input sizes; see --help.

python tools/visualize_features.py MODEL [MODEL ...] --images PATH [PATH ...] --sizes 224 512 1024 --out DIR
MODEL: CONFIG:CHECKPOINT (a segmentor's backbone) or ARCH:WEIGHTS (vit5-base:vit5_base_patch16_224.pth).
"""
from vit5seg.analysis.feature_views import main
from vit5seg.engine.launch import run_tool

if __name__ == '__main__':
    run_tool(main)
