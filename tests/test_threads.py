"""`searchgym.threads`: the physical-core default and the setting applied to torch, numba and BLAS."""

from __future__ import annotations

import os

import pytest

from searchgym.errors import ConfigError
from searchgym.threads import physical_cores, set_threads


def test_physical_cores_is_within_the_allowed_cpus():
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert 1 <= physical_cores() <= allowed


def test_set_threads_applies_to_torch_and_numba():
    torch = pytest.importorskip("torch")
    numba = pytest.importorskip("numba")
    before_torch, before_numba = torch.get_num_threads(), numba.get_num_threads()
    try:
        assert set_threads(1) == 1
        assert torch.get_num_threads() == 1 and numba.get_num_threads() == 1
        assert set_threads(None) == physical_cores() == torch.get_num_threads()
    finally:
        torch.set_num_threads(before_torch)
        numba.set_num_threads(before_numba)


@pytest.mark.parametrize("bad", [0, -2, 1.5, "2", True])
def test_set_threads_refuses_what_is_not_a_positive_integer(bad):
    with pytest.raises(ConfigError, match="threads"):
        set_threads(bad)


def test_train_config_checks_threads():
    pytest.importorskip("torch")
    from agents.train import TrainConfig

    assert TrainConfig(threads=2).threads == 2
    with pytest.raises(ConfigError, match="threads"):
        TrainConfig(threads=0)
