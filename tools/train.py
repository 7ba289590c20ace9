#!/usr/bin/env python
"""Train a segmentor: python tools/train.py CONFIG [--work-dir W] [--resume [CKPT]] [--amp] ..."""
import vit5seg  # noqa: F401  (compat fixes and registrations before anything of mmseg loads)
from vit5seg.engine.launch import run_tool, train

if __name__ == '__main__':
    run_tool(train)
