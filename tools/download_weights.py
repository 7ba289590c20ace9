#!/usr/bin/env python
"""Fill the weight cache ahead of time: python tools/download_weights.py [ARCH ...|--all] [--dest DIR]"""
from vit5seg.hub import main

if __name__ == '__main__':
    main()
