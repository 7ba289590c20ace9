#!/usr/bin/env python
"""Segment images, folders, globs or videos: tools/infer.py CONFIG CHECKPOINT INPUT [INPUT ...] --out-dir DIR"""
from vit5seg.apis.infer import main
from vit5seg.engine.launch import run_tool

if __name__ == '__main__':
    run_tool(main)
