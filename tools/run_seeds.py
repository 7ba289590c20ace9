#!/usr/bin/env python
"""One training per seed: python tools/run_seeds.py CONFIG --seeds 0 1 2 [--gpus 8] [--launcher pytorch|slurm|none]
[--work-root W] [--name NAME] [--print] [train.py args]"""
from vit5seg.engine.seeds import main

if __name__ == '__main__':
    main()
