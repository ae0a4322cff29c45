"""The discrete action space can express the synthetic world's oracle: the right search, then the answer."""

import gymnasium as gym

import searchgym  # noqa: F401  (registers the ids)
from searchgym.wrappers import DiscreteCandidateActions
from searchgym.wrappers.candidates import normalize


def _oracle_run(hops: int, questions: int, num_entities: int = 600) -> tuple[float, float, float]:
    """(share of questions whose oracle search is a slot at reset, share whose gold answer is an answer slot
    after that search, oracle EM in the discrete space)."""
    env = DiscreteCandidateActions(gym.make("SearchQA-Synthetic-v0", num_entities=num_entities, hops=hops, split="test",
                                            num_questions=questions, cache_dir=False))
    base = env.unwrapped
    search_ok = answer_ok = em = 0
    for i in range(questions):
        env.reset(options={"index": i})
        record = base.record
        turns = base.world.oracle_trajectory(record)
        first = env.slot_for(turns[0])
        search_ok += first is not None
        if first is None:
            continue
        for turn in turns[:-1]:  # the searches; a later one that no slot matches falls back to the question
            slot = env.slot_for(turn)
            env.step(0 if slot is None else slot)
        golds = {normalize(a) for a in record.answers}
        answer_ok += any(p is not None and normalize(p) in golds for p in env.slot_phrases()["answer"])
        slot = env.slot_for(turns[-1])
        *_, info = env.step(env.config.search_slots if slot is None else slot)
        em += info["episode"]["em"]
    return search_ok / questions, answer_ok / questions, em / questions


def test_one_hop_oracle_is_choosable():
    search_rate, answer_rate, em = _oracle_run(hops=1, questions=80)
    # Measured: 1.0, 1.0, 1.0 (the oracle's "NAME KEYWORD" query maps to the slot of NAME, whose three
    # passages are the three shown). A few misses would be tolerable; most would mean broken extraction.
    assert search_rate >= 0.95 and answer_rate >= 0.95 and em >= 0.95


def test_two_hop_oracle_is_choosable():
    search_rate, answer_rate, em = _oracle_run(hops=2, questions=40)
    assert search_rate >= 0.95 and answer_rate >= 0.9 and em >= 0.9
