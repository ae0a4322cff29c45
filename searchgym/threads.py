"""One thread setting for every compute library the project drives: torch, numba (BM25), FAISS and BLAS.

On a small shared machine the libraries' defaults oversubscribe: each starts as many threads as there are
logical CPUs, OpenMP threads spin while they wait, and two libraries (or two processes) doing that at once
made decoding 8x slower than one thread per core. `set_threads(None)` applies the number of physical cores
this process may use (its CPU affinity and, in a container, its cgroup CPU quota); `set_threads(n)` applies n.

>>> from searchgym.threads import physical_cores, set_threads
>>> physical_cores() >= 1
True
"""

from __future__ import annotations

import logging
import math
import os
import sys
from pathlib import Path

from searchgym.errors import ConfigError

logger = logging.getLogger(__name__)


def _allowed_cpus() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def _cgroup_quota() -> int | None:
    """CPUs granted by a cgroup v2 (`cpu.max`) or v1 (`cfs_quota_us`) quota, rounded up; None when unlimited."""
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            return max(1, math.ceil(int(quota) / int(period)))
        return None
    except (OSError, ValueError):
        pass
    try:
        quota = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read_text())
        period = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read_text())
        return max(1, math.ceil(quota / period)) if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None


def physical_cores() -> int:
    """Physical cores among the CPUs this process may run on (hyper-threads of one core count once),
    capped by the cgroup CPU quota when there is one."""
    cores = set()
    for cpu in _allowed_cpus():
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            cores.add((topology.joinpath("physical_package_id").read_text().strip(), topology.joinpath("core_id").read_text().strip()))
        except OSError:  # no sysfs topology (macOS, some containers): count the logical CPU
            cores.add(("cpu", str(cpu)))
    quota = _cgroup_quota()
    return max(1, min(len(cores), quota) if quota else len(cores))


def check_threads(threads: int | None, what: str = "threads") -> None:
    """Raise ConfigError unless `threads` is a positive integer or None (the physical cores)."""
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ConfigError(f"{what} must be a positive integer or None (the physical cores), got {threads!r}")


def set_threads(threads: int | None = None) -> int:
    """Limit torch, numba, FAISS and the BLAS libraries (through threadpoolctl) to `threads` threads each
    (None: `physical_cores()`), for those installed. Returns the number applied."""
    check_threads(threads)
    n = physical_cores() if threads is None else threads
    applied = []
    try:
        import torch

        torch.set_num_threads(n)
        applied.append("torch")
    except ImportError:
        pass
    try:
        import numba

        # numba refuses more threads than it started its pool with.
        numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
        applied.append("numba")
    except ImportError:
        pass
    if "faiss" in sys.modules or _installed("faiss"):
        try:
            import faiss

            faiss.omp_set_num_threads(n)
            applied.append("faiss")
        except ImportError:
            pass
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=n)  # applies now and stays: the returned object only matters as a context manager
        applied.append("blas")
    except ImportError:
        pass
    logger.debug("threads=%d applied to %s", n, ", ".join(applied) or "nothing")
    return n


def _installed(module: str) -> bool:
    from importlib.util import find_spec

    return find_spec(module) is not None
