#!/usr/bin/env python
"""ViT-5 vs DeiT-III over seeds, or ablations vs a reference; see --help.

python tools/compare.py WORK_DIR [WORK_DIR ...] --out DIR [--tolerance 1.0]
python tools/compare.py WORK_DIR [WORK_DIR ...] --reference W_REF [W_REF ...] --out DIR
"""
import sys

import vit5seg  # noqa: F401  (config lookups without pkg_resources)
from vit5seg.analysis.compare import main

if __name__ == '__main__':
    sys.exit(main())
