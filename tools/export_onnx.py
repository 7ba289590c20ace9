#!/usr/bin/env python
"""Export a segmentor to ONNX and check it against PyTorch: python tools/export_onnx.py CONFIG CKPT --out F.onnx"""
import sys

import vit5seg  # noqa: F401  (compat fixes and registrations first)
from vit5seg.deploy.export import main
from vit5seg.engine.launch import run_tool

if __name__ == '__main__':
    sys.exit(run_tool(main))
