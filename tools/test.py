#!/usr/bin/env python
"""Test a checkpoint: python tools/test.py CONFIG CHECKPOINT [--work-dir W] [--show-dir D] [--tta] ..."""
import vit5seg  # noqa: F401
from vit5seg.engine.launch import run_tool, test

if __name__ == '__main__':
    run_tool(test)
