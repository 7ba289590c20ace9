#!/usr/bin/env python
"""Convert ViT-5 / DeiT-III checkpoints to the vit5seg layout; see --help."""
from vit5seg.models.convert import main

if __name__ == '__main__':
    main()
