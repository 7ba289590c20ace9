"""Peak memory on CPU as the benchmarks measure it: the growth of a fresh process's peak RSS,
with glibc's allocator held steady (``STEADY_MALLOC`` in the probe's environment)."""
import json
import os
import resource
import subprocess
import sys
from typing import Optional

# glibc raises its mmap threshold after large frees, so later big buffers come from the
# heap and the peak RSS of the same step varied by 20% between runs (825-1039 MB here);
# a fixed threshold returns every large buffer to the system on free: 778 MB, three of three.
STEADY_MALLOC = {'MALLOC_MMAP_THRESHOLD_': '131072', 'MALLOC_ARENA_MAX': '2'}


def peak_rss_mb() -> float:
    # VmHWM belongs to this process image; ru_maxrss would carry the parent's peak
    # across fork + exec, hiding the growth of a small probe after a big benchmark.
    try:
        with open('/proc/self/status') as f:
            for line in f:
                if line.startswith('VmHWM:'):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def probe_peak_mb(code: str, stdin: Optional[bytes] = None) -> float:
    """Run ``code`` (Python that prints a probe's figure as JSON last) in a fresh interpreter with
    glibc held steady; its figure."""
    out = subprocess.run([sys.executable, '-c', code], input=stdin, capture_output=True, check=True,
                         env={**os.environ, **STEADY_MALLOC})
    return json.loads(out.stdout.decode().strip().splitlines()[-1])
