import pytest
import torch

from agents.core import broadcast_round_advantages, drop_rollouts, rollout_drop_mask
from searchgym.errors import BatchError


def test_drop_mask_defaults_to_overlong_only():
    overlong = [False, True, False]
    format_error = [True, False, False]
    assert rollout_drop_mask(overlong, format_error).tolist() == [False, True, False]
    assert rollout_drop_mask(overlong, format_error, drop_format_error=True).tolist() == [True, True, False]
    assert rollout_drop_mask(overlong, drop_overlong=False).tolist() == [False, False, False]


def test_drop_rollouts_zeroes_rows_and_keeps_dtype():
    mask = torch.tensor([[0, 1, 1], [1, 1, 0], [1, 0, 1]], dtype=torch.uint8)
    out = drop_rollouts(mask, [False, True, False])
    assert out.dtype == torch.uint8
    assert out.tolist() == [[0, 1, 1], [0, 0, 0], [1, 0, 1]]
    with pytest.raises(BatchError, match="one flag per rollout"):
        drop_rollouts(mask, [True])


def test_round_advantages_fill_their_spans_only():
    # row 0: rounds at [1, 3) and [5, 7) with advantages 2 and -1; row 1: one round at [0, 2) with 0.5
    out = broadcast_round_advantages([[2.0, -1.0], [0.5]], [[(1, 3), (5, 7)], [(0, 2)]], seq_len=8)
    assert out.tolist() == [
        [0.0, 2.0, 2.0, 0.0, 0.0, -1.0, -1.0, 0.0],
        [0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    ]


@pytest.mark.parametrize(
    "advs, spans, message",
    [
        ([[1.0, 2.0]], [[(0, 2)]], "2 round advantages for 1"),
        ([[1.0, 2.0]], [[(0, 3), (2, 4)]], "non-overlapping"),
        ([[1.0]], [[(3, 9)]], "inside the sequence"),
        ([[1.0]], [[(2, 1)]], "start <= end"),
        ([[1.0], [1.0]], [[(0, 1)]], "2 trajectories"),
    ],
)
def test_bad_spans_raise(advs, spans, message):
    with pytest.raises(BatchError, match=message):
        broadcast_round_advantages(advs, spans, seq_len=8)
