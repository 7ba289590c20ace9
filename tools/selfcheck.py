#!/usr/bin/env python
"""Show that a machine is ready to train: environment, checks, figures (see --help)."""
import sys

import vit5seg  # noqa: F401  (compat fixes and registrations first)
from vit5seg.selfcheck import main

if __name__ == '__main__':
    sys.exit(main())
