#!/usr/bin/env python
"""Loss and mIoU curves of one or more runs and their loss spikes (see --help)."""
import sys

from vit5seg.analysis.logs import main

if __name__ == '__main__':
    sys.exit(main())
