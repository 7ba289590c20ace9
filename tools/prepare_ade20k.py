#!/usr/bin/env python
"""Put ADE20K where the configs read it: python tools/prepare_ade20k.py [ZIP|URL|FOLDER] --out data/ade"""
import sys

from vit5seg.datasets.prepare_ade20k import main

if __name__ == '__main__':
    sys.exit(main())
