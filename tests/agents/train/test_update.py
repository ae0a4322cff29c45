import torch

from agents.models import build_tiny_model
from agents.rollout.batch import token_logprobs
from agents.train.update import pad_batch


def test_pad_batch_right_pads():
    out = pad_batch([[1, 2, 3], [4]], 0, torch.long)
    assert out.tolist() == [[1, 2, 3], [4, 0, 0]]


def test_selected_positions_match_full_logprobs():
    torch.manual_seed(0)
    model, _ = build_tiny_model()
    ids = torch.randint(0, 200, (2, 12))
    attention = torch.ones_like(ids)
    mask = torch.zeros_like(ids)
    mask[0, 5:9] = 1
    mask[1, 2:4] = 1
    full = token_logprobs(model, ids, attention, temperature=0.7)
    selected = token_logprobs(model, ids, attention, temperature=0.7, positions=mask)
    torch.testing.assert_close(selected, full * mask)
    # Each kept value is a real log-probability: negative, and the full row sums to 1 in probability.
    assert (selected[mask.bool()] < 0).all() and (selected[~mask.bool()] == 0).all()
    logits = model(input_ids=ids, attention_mask=attention).logits
    expected = torch.log_softmax(logits[0, 4] / 0.7, -1)[ids[0, 5]]
    torch.testing.assert_close(selected[0, 5], expected)
