#!/usr/bin/env python
"""Segment images, folders, globs or videos: tools/infer.py CONFIG CHECKPOINT INPUT [INPUT ...] --out-dir DIR"""
from vit5seg.apis.infer import main

if __name__ == '__main__':
    main()
