"""`OptimConfig.park_idle`: tensors a phase does not read wait in files and come back bit for bit
(`agents.memory.Parking`), so a run computes the same numbers in less memory."""

from __future__ import annotations

import math

import pytest
import torch

from agents.learners import CoSearchConfig
from agents.memory import Parking
from agents.models import TinyModelConfig, build_tiny_model
from agents.train.trainer import Trainer
from searchgym.errors import ConfigError
from tests.agents.train.test_trainer import tiny_config


def _stepped():
    """A tiny model after one AdamW step (so the optimizer holds states), and a frozen copy of it."""
    import copy

    model, tokenizer = build_tiny_model(TinyModelConfig(seed=0))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.tensor([tokenizer.encode("a search for the answer")])
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return model, optimizer, copy.deepcopy(model).eval(), ids


def _snapshot(model, optimizer):
    weights = {n: p.detach().clone() for n, p in model.named_parameters()}
    states = [{k: v.clone() for k, v in s.items()} for s in optimizer.state.values()]
    return weights, states


def _same(model, optimizer, snapshot) -> bool:
    weights, states = snapshot
    same_weights = all(torch.equal(p, weights[n]) for n, p in model.named_parameters())
    same_states = all(torch.equal(v, before[k]) for s, before in zip(optimizer.state.values(), states) for k, v in s.items())
    return same_weights and same_states


def test_parked_tensors_are_freed_and_come_back_bit_for_bit(tmp_path):
    model, optimizer, reference, ids = _stepped()
    snapshot = _snapshot(model, optimizer)
    expected = reference(input_ids=ids).logits
    parking = Parking(tmp_path / "parked", {"weights": ([model], []), "optimizer": ([], [optimizer]), "reference": ([reference], [])},
                      frozen=("reference",))
    parking.keep("weights")
    assert set(parking.parked) == {"optimizer", "reference"}
    assert all(v.numel() <= 1 for s in optimizer.state.values() for v in s.values())  # only the scalar step counts stay
    assert all(p.numel() == 0 for p in reference.parameters())
    states_gb = sum(v.numel() * v.element_size() for s in snapshot[1] for v in s.values() if v.numel() > 1) / 1e9
    reference_gb = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()]) / 1e9  # the same shapes
    assert parking.parked_gb() == pytest.approx(states_gb + reference_gb, rel=1e-9)
    with pytest.raises(RuntimeError):  # a parked model computes nothing rather than something else
        reference(input_ids=ids)

    parking.keep("optimizer", "reference")  # the weights wait now; the others come back
    assert parking.parked == ("weights",) and all(p.numel() == 0 for p in model.parameters())
    parking.keep_all()
    assert parking.parked == ()
    assert _same(model, optimizer, snapshot)
    assert torch.equal(reference(input_ids=ids).logits, expected)
    # Parameters keep their identity: the optimizer steps the restored weights.
    assert {id(p) for g in optimizer.param_groups for p in g["params"]} == {id(p) for p in model.parameters()}


def test_a_frozen_group_is_written_once(tmp_path):
    model, optimizer, reference, _ = _stepped()
    parking = Parking(tmp_path / "parked", {"weights": ([model], []), "reference": ([reference], [])}, frozen=("reference",))
    ref_bytes = sum(t.numel() * t.element_size() for t in [*reference.parameters(), *reference.buffers()])
    parking.keep("weights")
    first = parking.bytes_moved
    assert first == ref_bytes
    parking.keep_all()
    assert parking.bytes_moved == 2 * ref_bytes  # read back
    assert (tmp_path / "parked" / "reference.bin").exists()  # kept for the next time
    parking.keep("weights")
    assert parking.bytes_moved == 2 * ref_bytes  # freed, not written again
    parking.keep_all()
    parking.close()
    assert not (tmp_path / "parked").exists()


def test_resident_brings_one_group_back_for_a_block_and_lets_it_wait_again_unwritten(tmp_path):
    model, optimizer, reference, _ = _stepped()
    snapshot = _snapshot(model, optimizer)
    parking = Parking(tmp_path / "parked", {"weights": ([model], []), "optimizer": ([], [optimizer]), "reference": ([reference], [])})
    parking.keep("weights")
    written = parking.bytes_moved
    state_bytes = sum(v.numel() * v.element_size() for s in snapshot[1] for v in s.values() if v.numel() > 1)
    with parking.resident(optimizer):
        assert set(parking.parked) == {"reference"}  # the other parked group stays parked
        assert all(torch.equal(v, snapshot[1][0][k]) for k, v in next(iter(optimizer.state.values())).items())
    assert set(parking.parked) == {"optimizer", "reference"}
    assert parking.bytes_moved == written + state_bytes  # read once, not written again
    with parking.resident(model):  # resident already: nothing moves
        pass
    assert parking.bytes_moved == written + state_bytes
    parking.keep_all()
    assert _same(model, optimizer, snapshot)


def test_close_drops_what_waits_and_keeps_what_is_resident(tmp_path):
    model, optimizer, reference, _ = _stepped()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    parking = Parking(tmp_path / "parked", {"weights": ([model], []), "optimizer": ([], [optimizer])})
    parking.keep("weights")
    parking.close()
    assert not (tmp_path / "parked").exists()
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())
    with pytest.raises(RuntimeError, match="dropped"):
        parking.keep("optimizer")
    with pytest.raises(KeyError, match="no parking group"):
        parking.keep("nothing")


def test_a_file_cut_short_is_an_error(tmp_path):
    model, optimizer, reference, _ = _stepped()
    parking = Parking(tmp_path / "parked", {"weights": ([model], []), "optimizer": ([], [optimizer])})
    parking.keep("weights")
    path = tmp_path / "parked" / "optimizer.bin"
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(OSError, match="cut short"):
        parking.keep_all()


def _comparable(history):
    return [{k: v for k, v in m.items() if not k.startswith(("time/", "perf/"))} for m in history]


@pytest.mark.parametrize("checkpoint_every", [0, 1])
def test_cosearch_parked_computes_what_it_computes_resident(tmp_path, checkpoint_every):
    """Both models, their optimizers and their KL references: the same metrics and weights, bit for bit,
    whether idle tensors wait in files or not (checkpoints read everything back first)."""
    runs = {}
    for park in (False, True):
        learner = CoSearchConfig(ranker_cold_start_steps=1, kl_coef=0.01)
        trainer = Trainer(tiny_config(tmp_path / str(park), learner=learner, checkpoint_every=checkpoint_every,
                                      optim={"park_idle": park, "cold_start_steps": 1, "cold_start_batch": 2}))
        assert trainer.reference is not None and trainer.second_model.reference is not None
        history = trainer.run()
        if park:
            assert all(m["perf/parked_gb"] > 0 and m["time/park_s"] >= 0 for m in history)
            # A checkpoint reads back one group at a time, for its own write: afterwards the same groups wait.
            assert set(trainer.parking.parked) == {"policy/optimizer", "policy/reference", "second/optimizer", "second/reference"}
            trainer.parking.keep_all()  # to compare the references too
        weights = {f"{name}.{n}": p.detach().clone() for name, m in trainer.models.items() for n, p in m.named_parameters()}
        metrics = trainer.evaluate(4)
        if park:  # an evaluation reads the weights only: the optimizers' states and the references wait
            assert set(trainer.parking.parked) == {"policy/optimizer", "policy/reference", "second/optimizer", "second/reference"}
        trainer.close()
        assert not (tmp_path / str(park) / "run" / "parked").exists()
        runs[park] = (_comparable(history), weights, metrics, _checkpoint(tmp_path / str(park) / "run"))
    (h0, w0, e0, c0), (h1, w1, e1, c1) = runs[False], runs[True]
    assert h0 == h1 and e0 == e1
    assert w0.keys() == w1.keys() and all(torch.equal(w0[k], w1[k]) for k in w0)
    assert all(math.isfinite(m["loss/policy"]) for m in h1)
    # The newest checkpoint holds the same tensors: weights, both references, both optimizers' states.
    assert c0.keys() == c1.keys() and {"policy.safetensors", "reference.safetensors", "ranker_reference.safetensors",
                                       "policy.optim.pt", "ranker.optim.pt"} <= c0.keys()
    for name in c0:
        assert c0[name].keys() == c1[name].keys() and all(torch.equal(c0[name][k], c1[name][k]) for k in c0[name]), name


def _checkpoint(run) -> dict[str, dict[str, torch.Tensor]]:
    """The newest checkpoint's tensors, by file and key (optimizer states flattened)."""
    from safetensors.torch import load_file

    from agents.train.checkpoint import list_checkpoints

    newest = list_checkpoints(run / "checkpoints")[-1]
    out = {p.name: load_file(p) for p in newest.glob("*.safetensors")}
    for p in newest.glob("*.optim.pt"):
        state = torch.load(p, weights_only=False)["optimizer"]["state"]
        out[p.name] = {f"{i}.{k}": v for i, s in state.items() for k, v in s.items() if torch.is_tensor(v)}
    return out


def test_parking_a_single_model_run_changes_nothing_but_its_memory(tmp_path):
    runs = {}
    for park in (False, True):
        trainer = Trainer(tiny_config(tmp_path / str(park), learner="grpo", checkpoint_every=0, optim={"park_idle": park}))
        history = trainer.run()
        runs[park] = (_comparable(history), {n: p.detach().clone() for n, p in trainer.model.named_parameters()})
        trainer.close()
    assert runs[False][0] == runs[True][0]
    assert all(torch.equal(runs[False][1][n], runs[True][1][n]) for n in runs[False][1])


def test_parking_is_refused_where_it_cannot_hold(tmp_path):
    with pytest.raises(ConfigError, match="park_idle"):
        tiny_config(tmp_path, learner="grpo", device="cuda", optim={"park_idle": True})
