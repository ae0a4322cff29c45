"""Process memory figures for metrics and benchmarks."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def peak_rss_gb() -> float:
    """This process's peak resident set size so far, in GB (10^9 bytes); 0.0 where the OS does not say.

    On Linux this is `VmHWM` from /proc/self/status: `getrusage`'s `ru_maxrss` survives `execve`, so a
    child started by a large process would report its parent's peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e9  # kB
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource
    except ImportError:  # Windows
        return 0.0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports kilobytes, macOS bytes.
    return peak / 1e9 if sys.platform == "darwin" else peak * 1024 / 1e9


def _glibc(function: str):
    """The C library's `function` on Linux, or None (another OS, or a C library without it)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes
    import ctypes.util

    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), function)
    except (OSError, AttributeError):
        return None


def release_memory() -> bool:
    """Collect garbage, then hand the C heap's free pages back to the OS (glibc's `malloc_trim`); returns
    whether the trim ran. glibc keeps freed memory for reuse, so a process that dropped a model and its
    optimizer still holds their gigabytes while it goes on (e.g. while other processes train) unless it is
    trimmed: measured here, 3.9 GB resident after freeing SmolLM2-135M and its AdamW states, 0.5 GB after."""
    import gc

    gc.collect()
    trim = _glibc("malloc_trim")  # musl has none
    if trim is None:
        return False
    trim(0)  # its return value only says whether any memory was released
    return True


MMAP_THRESHOLD = 1 << 20
"""Bytes from which glibc serves an allocation with its own mmap, returned to the OS when freed."""

_tuned: bool | None = None


def tune_allocator(threshold: int | None = MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at `threshold` bytes for this process (`mallopt(M_MMAP_THRESHOLD)`); returns
    whether it is in effect. The trainer calls it with `TrainConfig.malloc_mmap_threshold` (1 MiB by default;
    0 or None: `tune_allocator(None)`); the first call decides, so a program that calls `tune_allocator(None)`
    first keeps glibc's own behaviour.

    glibc raises the threshold each time a large block is freed (up to 32 MB), so a model's per-token and
    per-layer tensors move onto the heap, where freed memory stays resident and fragments: the update's peak
    RSS grows by gigabytes. A fixed threshold trades that for page faults on every large allocation: less
    memory and faster decoding, a slower update (measured in docs/experiment-log.md, "Memory and the allocator").
    A `MALLOC_MMAP_THRESHOLD_` in the environment (glibc's own setting) is left to win; elsewhere than glibc
    this does nothing."""
    global _tuned
    if _tuned is not None:
        return _tuned
    _tuned = False
    mallopt = None if threshold is None or "MALLOC_MMAP_THRESHOLD_" in os.environ else _glibc("mallopt")
    if mallopt is None:
        return False
    m_mmap_threshold = -3  # malloc.h
    _tuned = bool(mallopt(m_mmap_threshold, int(threshold)))
    return _tuned
