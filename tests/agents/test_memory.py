"""`peak_rss_gb`: a process's own peak, not its parent's."""

from __future__ import annotations

import subprocess
import sys

from agents.memory import peak_rss_gb

CHILD = """
from agents.memory import peak_rss_gb
before = peak_rss_gb()
block = bytearray(300 * 2**20)
block[::4096] = b"x" * len(block[::4096])  # touch every page so it is resident
print(before, peak_rss_gb())
"""


def test_peak_rss_is_the_process_own_and_grows_with_an_allocation():
    block = bytearray(300 * 2**20)
    block[::4096] = b"x" * len(block[::4096])
    assert peak_rss_gb() >= 0.3  # this process has held the block
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True).stdout.split()
    before, after = float(out[0]), float(out[1])
    # A fresh interpreter starts from its own small peak (getrusage's ru_maxrss would report this process's,
    # which survives fork and exec), and its peak then grows by the block it touched.
    assert 0 < before < 0.2
    assert after >= before + 0.25
    del block


def test_release_memory_trims_the_heap_on_glibc_linux():
    import platform
    import sys

    from agents.memory import release_memory

    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert release_memory() is glibc
