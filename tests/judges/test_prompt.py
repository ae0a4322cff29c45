import pytest

from searchgym.judges.prompt import SYSTEM_PROMPT, MalformedReply, build_messages, parse_reply, render_trace
from tests.judges.helpers import BRIDGE, doc, req, rnd

R0 = rnd("capital of Italy", "d1", thinking="I need the capital of Italy.")
R1 = rnd("Rome river", "d7", thinking="Rome is the capital.")


@pytest.mark.parametrize(
    "reply, expected",
    [
        ('{"analysis": "ok", "retrieval_reward": 1, "thinking_reward": 1}', (1, 1, "ok")),
        ('```json\n{"analysis": "a", "thinking_reward": 0, "retrieval_reward": 1}\n```', (1, 0, "a")),
        ('Sure! Here it is:\n```\n{"analysis": "b", "retrieval_reward": 0, "thinking_reward": 0}\n``` bye', (0, 0, "b")),
        ('Text first {"analysis": "has } brace", "retrieval_reward": 1.0, "thinking_reward": 0} trailing', (1, 0, "has } brace")),
        ('{"analysis": "x", "retrieval_reward": 1, "thinking_reward": 1, "extra": 3}', (1, 1, "x")),
    ],
)
def test_parse_accepts_the_object_in_any_wrapping(reply, expected):
    assert parse_reply(reply) == expected


@pytest.mark.parametrize(
    "reply, why",
    [
        ("", "empty"),
        ("   ", "empty"),
        ("I think both are fine: 1 and 1", "not JSON"),
        ('{"analysis": "x", "retrieval_reward": true, "thinking_reward": 1}', "retrieval_reward"),
        ('{"analysis": "x", "retrieval_reward": 1, "thinking_reward": "1"}', "thinking_reward"),
        ('{"analysis": "x", "retrieval_reward": 2, "thinking_reward": 1}', "retrieval_reward"),
        ('{"analysis": "x", "retrieval_reward": 0.5, "thinking_reward": 1}', "retrieval_reward"),
        ('{"retrieval_reward": 1, "thinking_reward": 1}', "analysis"),
        ('{"analysis": "x", "retrieval_reward": 1}', "thinking_reward"),
        ('[{"analysis": "x"}]', "retrieval_reward"),  # the object inside is read, and lacks the labels
        ('"just a string"', "JSON object"),
        ('{"analysis": "cut off', "not JSON"),
        (None, "empty"),
    ],
)
def test_parse_rejects_malformed(reply, why):
    with pytest.raises(MalformedReply, match=why):
        parse_reply(reply)


def test_trace_marks_only_the_latest_round_and_numbers_documents():
    text = render_trace(req(BRIDGE, R1, R0))
    assert text.startswith("Question: Which river flows through the capital of Italy?")
    assert text.count("latest round") == 2  # the agent turn and its information
    assert text.index("Agent (round 1)") < text.index("Agent (round 2, latest round)")
    assert "<search>Rome river</search>" in text and "Doc 1 (Title: Tiber)" in text
    empty = render_trace(req(BRIDGE, rnd("nothing")))
    assert "(no documents)" in empty


def test_long_documents_are_cut():
    long = doc("l", "Long", "word " * 1000)
    text = render_trace(req(BRIDGE, rnd("q", long)), max_doc_chars=50)
    assert "word word" in text and len(text) < 400 and text.rstrip().endswith("...")


def test_messages_carry_the_rules():
    messages = build_messages(req(BRIDGE, R0))
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == SYSTEM_PROMPT
    for rule in ("latest round", "same title", "similar", "rephrased", "retrieval_reward", "thinking_reward", "analysis"):
        assert rule in SYSTEM_PROMPT
