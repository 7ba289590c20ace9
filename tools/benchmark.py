#!/usr/bin/env python
"""Benchmark the ViT5 backbone against mmseg's ViT, timm's DeiT-III / RoPE ViT and the naive path, and EoMT's whole
prediction against transformers' (--peer transformers); see --help."""
import vit5seg  # noqa: F401
from vit5seg.benchmark.cli import main

if __name__ == '__main__':
    main()
