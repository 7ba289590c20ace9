#!/usr/bin/env python
"""Paint samples of a config's dataset: tools/browse_dataset.py CONFIG --out DIR [--phase train|val|test]
[--num N] [--augmented] [--opacity A] [--cfg-options k=v ...]"""
from vit5seg.datasets.browse import main
from vit5seg.engine.launch import run_tool

if __name__ == '__main__':
    run_tool(main)
