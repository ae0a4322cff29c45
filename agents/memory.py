"""Process memory figures for metrics and benchmarks."""

from __future__ import annotations

import sys


def peak_rss_gb() -> float:
    """This process's peak resident set size so far, in GB (10^9 bytes); 0.0 where the OS does not say."""
    try:
        import resource
    except ImportError:  # Windows
        return 0.0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports kilobytes, macOS bytes.
    return peak / 1e9 if sys.platform == "darwin" else peak * 1024 / 1e9
