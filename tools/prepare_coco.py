#!/usr/bin/env python
"""Put COCO 2017 where the panoptic and instance configs read it:
    python tools/prepare_coco.py [FOLDER|URL] --out data/coco"""
import sys

from vit5seg.datasets.prepare_coco import main

if __name__ == '__main__':
    sys.exit(main())
