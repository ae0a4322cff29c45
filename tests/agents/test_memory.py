"""`peak_rss_gb`: a process's own peak, not its parent's."""

from __future__ import annotations

import subprocess
import sys

from agents.memory import peak_rss_gb


def test_peak_rss_grows_with_an_allocation_and_a_child_starts_from_its_own():
    before = peak_rss_gb()
    assert before > 0
    block = bytearray(300 * 2**20)
    block[:: 4096] = b"x" * len(block[:: 4096])  # touch every page so it is resident
    assert peak_rss_gb() >= before + 0.25
    child = subprocess.run([sys.executable, "-c", "from agents.memory import peak_rss_gb; print(peak_rss_gb())"],
                           capture_output=True, text=True, check=True)
    # A fresh interpreter holds far less than this process after the 300 MB block.
    assert 0 < float(child.stdout) < peak_rss_gb() - 0.2
    del block
