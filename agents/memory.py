"""Process memory figures for metrics and benchmarks."""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager, nullcontext
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


def check_mmap_threshold(threshold: int | None, name: str = "malloc_mmap_threshold") -> None:
    """Raise `ConfigError` unless `threshold` is None or 0 (glibc's own behaviour) or at least a page."""
    if threshold and threshold < 4096:
        from searchgym.errors import ConfigError

        raise ConfigError(f"{name} must be 0 (glibc's own behaviour) or at least 4096 bytes (a page), got {threshold}")


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


HUGE_PAGES_ENV = "THP_MEM_ALLOC_ENABLE"
"""PyTorch's own switch: with it set to 1, torch asks the kernel to back each CPU allocation of 2 MB or more
with transparent huge pages (`madvise(MADV_HUGEPAGE)`: the allocation's 2 MB-aligned stretches get them; torch
aligns it on a 4 KB page). Read once, at the process's first CPU tensor."""


def huge_pages_available() -> bool:
    """Whether the kernel gives transparent huge pages to memory that asks for them (Linux with THP not `never`)."""
    try:
        return "[never]" not in Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return False


def ask_huge_pages() -> bool:
    """Ask torch to back its large CPU tensors with transparent huge pages (`HUGE_PAGES_ENV`); returns whether
    this call asked. The trainer calls it (`TrainConfig.huge_pages`, on by default), and so do the CLIs that
    compute with a model, before their first tensor.

    With glibc's mmap threshold fixed (`tune_allocator`), every large tensor is a fresh mapping that the kernel
    fills one 4 KB page at a time: the float32 update of the cpu preset took 21 M page faults and a quarter of
    its CPU time in the kernel. A 2 MB page is one fault for 512 small ones: 7 M faults, 17-18% kernel time and an
    update 0.98-1.18x as fast over three pairs, at the same peak memory (docs/experiment-log.md, "Huge pages for
    torch's tensors" and the entry after it).

    It reaches this process only before its first CPU tensor (`huge_pages_in_effect` tells), and every process
    it starts afterwards (the learners side by side, a benchmark's children) through the environment. An explicit
    `THP_MEM_ALLOC_ENABLE` in the environment (0 turns it off) wins; where the kernel has no transparent huge
    pages this does nothing. It changes no arithmetic: only which pages hold the tensors."""
    if HUGE_PAGES_ENV in os.environ or not huge_pages_available():
        return False
    os.environ[HUGE_PAGES_ENV] = "1"
    return True


def huge_pages_in_effect() -> bool:
    """Whether this process's torch asks for huge pages for its large CPU tensors: the memory of a fresh 4 MB
    tensor carries the kernel's `hg` flag (`madvise(MADV_HUGEPAGE)`) in /proc/self/smaps. False where there is
    no such file (not Linux)."""
    import torch

    block = torch.empty(4 << 20, dtype=torch.uint8)
    address = block.data_ptr()
    try:
        text = Path("/proc/self/smaps").read_text()
    except OSError:
        return False
    inside = False
    for line in text.splitlines():
        head = line.split(" ", 1)[0]
        if "-" in head and not head.endswith(":"):  # a mapping's first line: start-end perms offset dev inode path
            start, _, end = head.partition("-")
            try:
                inside = int(start, 16) <= address < int(end, 16)
            except ValueError:
                inside = False
        elif inside and line.startswith("VmFlags:"):
            return "hg" in line.split()[1:]
    return False


class Parking:
    """Named groups of tensors (a model's weights, an optimizer's states, a frozen KL reference) that wait in
    a file while what runs does not read them, and come back bit for bit when it does.

    A trainer with two models holds both models' weights, both optimizers' states and both references, but
    each phase of a step reads only some of them: rollouts the weights, the policy's update the policy's
    weights, states and reference, the second model's update its own (`OptimConfig.park_idle`). `keep(names)`
    makes exactly the named groups resident: every other group's tensors are written to
    `directory/<group>.bin` and replaced by empty ones (a parameter keeps its identity: its `.data` is
    swapped, so optimizers and tied weights still find it), and parked groups that are named are read back.
    A `frozen` group (a reference nothing updates) is written once and afterwards only freed and read.

    What a parked group holds must not be used until it is kept again: a forward pass over a parked model
    fails on its empty weights, and an optimizer step over parked states fails the same way, rather than
    computing with anything else.
    """

    def __init__(self, directory: str | Path, groups: dict[str, tuple[list, list]], frozen: tuple[str, ...] = ()):
        """`groups`: name -> (modules, optimizers) whose parameters and buffers, and state tensors, it holds;
        None entries are left out (a learner without a KL has no reference)."""
        self.directory = Path(directory)
        self.groups = {name: ([m for m in modules if m is not None], [o for o in optimizers if o is not None])
                       for name, (modules, optimizers) in groups.items()}
        self.frozen = set(frozen)
        self._parked: dict[str, list[tuple[object, object, tuple, object]]] = {}
        """Parked group -> (holder, key, shape, dtype) per tensor, in file order; key None: a parameter or buffer."""
        self._written: set[str] = set()
        """Frozen groups whose file holds their tensors."""
        self._dropped: set[str] = set()
        """Groups that were parked when `close` deleted their files."""
        self.seconds = 0.0
        """Time spent writing and reading, in all."""
        self.bytes_moved = 0
        """Bytes written and read, in all."""

    @property
    def parked(self) -> tuple[str, ...]:
        return tuple(self._parked)

    def parked_gb(self) -> float:
        """GB (10^9 bytes) now waiting in files."""
        return sum(_nbytes(shape, dtype) for records in self._parked.values() for *_, shape, dtype in records) / 1e9

    def keep(self, *names: str) -> None:
        """Make the named groups resident and park every other one."""
        unknown = set(names) - set(self.groups)
        if unknown:
            raise KeyError(f"no parking group {sorted(unknown)}; groups: {sorted(self.groups)}")
        if self._dropped & set(names):
            raise RuntimeError(f"parked groups {sorted(self._dropped & set(names))} were dropped by close()")
        start = time.perf_counter()
        for name in self.groups:
            if name not in names and name not in self._parked:
                self._park(name)
        freed = any(name not in names for name in self.groups)
        for name in names:
            if name in self._parked:
                self._restore(name)
        if freed:
            release_memory()
        self.seconds += time.perf_counter() - start

    def keep_all(self) -> None:
        self.keep(*self.groups)

    def group_of(self, holder) -> str | None:
        """The group holding `holder` (one of its modules or optimizers), or None."""
        for name, (modules, optimizers) in self.groups.items():
            if any(holder is m for m in modules) or any(holder is o for o in optimizers):
                return name
        return None

    @contextmanager
    def resident(self, holder):
        """While the block runs, the group holding `holder` is resident (as it is, if it was); a group that was
        parked waits again afterwards, without being written again: its file still holds it. What a checkpoint
        does, one model or optimizer at a time, so that reading it back costs one group's memory, not all."""
        name = self.group_of(holder)
        if name is None or name not in self._parked:
            yield
            return
        start = time.perf_counter()
        self._restore(name, keep_file=True)
        self.seconds += time.perf_counter() - start
        try:
            yield
        finally:
            start = time.perf_counter()
            self._park(name, write=False)
            release_memory()
            self.seconds += time.perf_counter() - start

    def close(self) -> None:
        """Delete the files (a killed run's too): parked groups are dropped (keeping one afterwards raises),
        resident ones stay."""
        for name in [*self._parked, *self._written]:
            self._path(name).unlink(missing_ok=True)
        for left in self.directory.glob("*.bin") if self.directory.is_dir() else ():
            left.unlink(missing_ok=True)
        self._dropped = set(self._parked)
        self._parked.clear()
        self._written.clear()
        try:
            self.directory.rmdir()
        except OSError:
            pass

    def _tensors(self, name: str):
        """(holder, key, tensor) of every tensor of a group, each once: key None for a parameter or buffer (its
        `.data` is swapped), else the key of an optimizer state dict."""
        import torch

        seen: set[int] = set()
        modules, optimizers = self.groups[name]
        for module in modules:
            for tensor in [*module.parameters(), *module.buffers()]:
                if id(tensor) not in seen and tensor.numel() > 0:
                    seen.add(id(tensor))
                    yield tensor, None, tensor
        for optimizer in optimizers:
            for state in optimizer.state.values():
                for key, value in state.items():
                    if torch.is_tensor(value) and value.numel() > 1 and id(value) not in seen:  # a scalar step count stays
                        seen.add(id(value))
                        yield state, key, value

    def _path(self, name: str) -> Path:
        return self.directory / (name.replace("/", "--") + ".bin")

    def _park(self, name: str, write: bool | None = None) -> None:
        """Free a group's tensors, writing them to its file first unless `write` is False (default: unless it is a
        frozen group already written)."""
        import torch

        records = []
        write = name not in self._written if write is None else write
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self._path(name), "wb") if write else nullcontext() as f:
            for holder, key, tensor in list(self._tensors(name)):
                shape, dtype, device = tuple(tensor.shape), tensor.dtype, tensor.device
                if write:
                    data = tensor.detach().to("cpu").contiguous()
                    f.write(memoryview(data.view(-1).view(torch.uint8).numpy()))
                    self.bytes_moved += data.numel() * data.element_size()
                empty = torch.empty(0, dtype=dtype, device=device)
                if key is None:
                    holder.data = empty
                else:
                    holder[key] = empty
                records.append((holder, key, shape, (dtype, device)))
        if name in self.frozen:
            self._written.add(name)
        self._parked[name] = records

    def _restore(self, name: str, keep_file: bool = False) -> None:
        import torch

        records = self._parked.pop(name)
        with open(self._path(name), "rb") as f:
            for holder, key, shape, (dtype, device) in records:
                data = torch.empty(shape, dtype=dtype)
                view = data.view(-1).view(torch.uint8).numpy()
                if f.readinto(memoryview(view)) != view.nbytes:
                    raise OSError(f"{self._path(name)}: parked tensors of {name!r} are cut short")
                self.bytes_moved += view.nbytes
                data = data.to(device)
                if key is None:
                    holder.data = data
                else:
                    holder[key] = data
        if name not in self.frozen and not keep_file:
            self._path(name).unlink()


def _nbytes(shape: tuple, dtype_device) -> int:
    import math

    return math.prod(shape) * dtype_device[0].itemsize
