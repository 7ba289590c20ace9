#!/usr/bin/env python
"""Convert backbone checkpoints (ViT-5, DeiT-III, DINOv2, DINOv3) and EoMT releases to the vit5seg layout; see --help."""
from vit5seg.models.convert import main

if __name__ == '__main__':
    main()
