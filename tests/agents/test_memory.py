"""`peak_rss_gb`: a process's own peak, not its parent's."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from agents.memory import huge_pages_available, peak_rss_gb

GLIBC_LINUX = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
"""Where mallopt's mmap threshold, malloc_trim and /proc exist."""
needs_glibc = pytest.mark.skipif(not GLIBC_LINUX, reason="mallopt's mmap threshold and /proc are glibc Linux's")

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
    from agents.memory import release_memory

    assert release_memory() is GLIBC_LINUX


ALLOCATOR_CHILD = """
import sys

import torch

from agents.memory import tune_allocator

tuned = tune_allocator(None if sys.argv[1] == "glibc" else 1 << 20)
again = tune_allocator()  # the first call decides


def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024


torch.ones(16 * 2**20 // 4)  # allocated and freed at once: freeing a 16 MB block raises glibc's own threshold to 16 MB
base = rss_mb()
blocks = [torch.ones(4 * 2**20 // 4) for _ in range(24)]  # 96 MB, in 4 MB tensors
pin = torch.ones(2**20 // 4)  # allocated after them, so the heap cannot shrink past them
held = rss_mb() - base
del blocks
print(tuned, again, held, rss_mb() - base)
"""


def _child_env(**env: str) -> dict[str, str]:
    """This environment without glibc's own threshold setting (which would win over `tune_allocator`) and
    without huge pages (which a trainer built earlier in this process may have asked for)."""
    return {k: v for k, v in os.environ.items() if k not in ("MALLOC_MMAP_THRESHOLD_", "THP_MEM_ALLOC_ENABLE")} | env


def _allocator_child(mode: str, env: dict | None = None) -> tuple[bool, bool, float, float]:
    out = subprocess.run([sys.executable, "-c", ALLOCATOR_CHILD, mode], capture_output=True, text=True, check=True, env=_child_env(**(env or {})))
    tuned, again, held, kept = out.stdout.split()
    return tuned == "True", again == "True", float(held), float(kept)


@needs_glibc
def test_tuned_allocator_hands_freed_tensors_back_where_glibc_alone_keeps_them():
    tuned, again, held, kept = _allocator_child("glibc")
    assert (tuned, again) == (False, False)  # tune_allocator(None) first: glibc's behaviour for the process
    assert held > 90 and kept > 80, (held, kept)  # freed but still resident: the heap keeps it
    tuned, again, held, kept = _allocator_child("tuned")
    assert (tuned, again) == (True, True)
    assert held > 90 and kept < 10, (held, kept)  # each 4 MB tensor had its own mapping, returned when freed


@needs_glibc
def test_an_mmap_threshold_in_the_environment_wins():
    tuned, _, _, _ = _allocator_child("tuned", {"MALLOC_MMAP_THRESHOLD_": "131072"})
    assert tuned is False


ARITHMETIC_CHILD = """
import hashlib
import sys

import torch

from agents.memory import tune_allocator

if sys.argv[1] == "huge":
    from agents.memory import ask_huge_pages

    ask_huge_pages()
tuned = tune_allocator(None if sys.argv[1] == "glibc" else 1 << 20)
from agents.models import TinyModelConfig, build_tiny_model
from agents.train.setup import make_optimizer

torch.set_num_threads(1)
torch.manual_seed(0)
model, _ = build_tiny_model(TinyModelConfig())
optimizer, _ = make_optimizer(model, 1e-3, 1)
ids = torch.randint(5, 100, (8, 128))  # logits of 2 MB: over the tuned threshold, under glibc's raised one
for _ in range(2):
    optimizer.zero_grad(set_to_none=True)
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
digest = hashlib.sha256()
for tensor in model.state_dict().values():
    digest.update(tensor.detach().numpy().tobytes())
print(tuned, digest.hexdigest())
"""


def test_the_allocator_changes_no_arithmetic():
    # Where memory comes from must not change a single bit of a training step.
    def run(mode: str) -> list[str]:
        return subprocess.run([sys.executable, "-c", ARITHMETIC_CHILD, mode], capture_output=True, text=True, check=True,
                              env=_child_env()).stdout.split()

    (glibc_tuned, glibc), (tuned_tuned, tuned), (_, huge) = run("glibc"), run("tuned"), run("huge")
    assert glibc_tuned == "False"
    assert tuned_tuned == str(GLIBC_LINUX)
    assert glibc == tuned == huge  # huge pages neither


def test_a_threshold_under_a_page_is_a_config_error():
    from agents.train import TrainConfig
    from searchgym.errors import ConfigError

    with pytest.raises(ConfigError, match="malloc_mmap_threshold must be 0 .* or at least 4096"):
        TrainConfig(malloc_mmap_threshold=100)
    assert TrainConfig().malloc_mmap_threshold == 1 << 20  # the tuned allocator unless asked otherwise
    assert TrainConfig(malloc_mmap_threshold=0).malloc_mmap_threshold == 0  # glibc's own (what the CLI can say)


HUGE_CHILD = """
import os
import subprocess
import sys

from agents.memory import ask_huge_pages, huge_pages_in_effect

if sys.argv[1] == "tensor-first":
    import torch

    torch.ones(1)  # torch reads its switch at the process's first CPU tensor
asked = ask_huge_pages()
child = subprocess.run([sys.executable, "-c", "from agents.memory import huge_pages_in_effect; print(huge_pages_in_effect())"],
                       capture_output=True, text=True, check=True).stdout.strip()
print(asked, huge_pages_in_effect(), child, os.environ.get("THP_MEM_ALLOC_ENABLE"))
"""


def _huge_child(mode: str, **env: str) -> list[str]:
    return subprocess.run([sys.executable, "-c", HUGE_CHILD, mode], capture_output=True, text=True, check=True,
                          env=_child_env(**env)).stdout.split()


needs_thp = pytest.mark.skipif(not huge_pages_available(),
                               reason="the kernel has no transparent huge pages (/sys/kernel/mm/transparent_hugepage/enabled)")


@needs_thp
def test_huge_pages_reach_the_process_and_the_processes_it_starts():
    # Asked before the first tensor: torch asks for huge pages for its large tensors here and in a process started later.
    assert _huge_child("fresh") == ["True", "True", "True", "1"]
    # Asked after one: too late for this process (torch read its switch), not for the processes it starts.
    assert _huge_child("tensor-first") == ["True", "False", "True", "1"]


@needs_thp
def test_a_huge_pages_setting_in_the_environment_wins():
    assert _huge_child("fresh", THP_MEM_ALLOC_ENABLE="0") == ["False", "False", "False", "0"]


