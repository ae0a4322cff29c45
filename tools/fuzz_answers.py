"""Malformed retrieval-server answers: a fuzz surface for `env.step` over an `HTTPRetriever` (run by
`tools.fuzz --surface answers`).

Each case is one HTTP answer to the env's `POST /retrieve`: a Search-R1 response mutated at any depth
(values of every JSON type, huge integers, nesting deeper than the decoder goes, NaN and infinities, lone
surrogate escapes, missing and extra keys, too many or too few result lists, scores and ids and titles of
the wrong type), arbitrary JSON, cut-off JSON, bytes that are not UTF-8, HTML error pages, any status from
200 to 599 with or without a `Retry-After` of any spelling. The answer is served by an in-process httpx
transport, so the client's whole path runs (status handling, retries, decoding, parsing) and nothing
listens on a socket.

Outcomes: `observation:search` (the documents were shown), a `RetrievalError` by class name (the step
raised the env's documented error for a failed search), or a crash: any other exception out of
`env.step`, or a broken step contract.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from tools.fuzz.env import FUZZ_DOCS, FUZZ_RECORDS, _env_contract
from tools.fuzz.outcomes import TIME_LIMIT_S, InputHang, Outcome, time_limit
from tools.fuzz.outcomes import crash as _crash
from tools.fuzz.outcomes import describe_exception as _describe_exception
from tools.fuzz.strategies import RAW_TOKENS, dumps, json_values
from tools.fuzz.strategies import delete_path as _delete
from tools.fuzz.strategies import json_paths as _paths
from tools.fuzz.strategies import set_path as _set


@dataclass(frozen=True)
class AnswerCase:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"AnswerCase({self.status}, {len(self.body)} bytes {self.body[:200]!r}..., {self.headers})"


def _document(draw) -> dict[str, Any]:
    doc = draw(st.sampled_from(FUZZ_DOCS))
    shape = draw(st.sampled_from(["contents", "title_text", "no_id"]))
    if shape == "contents":
        return {"id": doc.id, "contents": f'"{doc.title}"\n{doc.text}'}
    if shape == "title_text":
        return {"id": doc.id, "title": doc.title, "text": doc.text}
    return {"contents": f'"{doc.title}"\n{doc.text}'}


def _valid_answer(draw, queries: int = 1) -> dict[str, Any]:
    scored = draw(st.booleans())
    result = []
    for _ in range(queries):
        docs = [_document(draw) for _ in range(draw(st.integers(0, 5)))]
        result.append([{"document": d, "score": draw(st.floats(0, 50))} for d in docs] if scored else docs)
    return {"result": result}


_WEIRD = st.one_of(json_values(6), st.sampled_from(RAW_TOKENS), st.sampled_from(
    [10**400, -(10**400), "nan", "inf", "-inf", "1e999", True, False, None, "", "\ud800", [], {}, "x" * 10_000]))


@st.composite
def answer_cases(draw) -> AnswerCase:
    kind = draw(st.sampled_from(["mutated", "mutated", "mutated", "deleted", "lists", "json", "raw", "cut", "bytes",
                                 "html", "status"]))
    status, headers = 200, {}
    if kind in ("mutated", "deleted"):
        answer = _valid_answer(draw)
        paths = _paths(answer, depth=5)
        for _ in range(draw(st.integers(1, 3))):
            paths = _paths(answer, depth=5)
            if not paths:
                break
            path = draw(st.sampled_from(paths))
            if kind == "deleted":
                _delete(answer, path)
            else:
                _set(answer, path, draw(_WEIRD))
        body = dumps(answer).encode()
    elif kind == "lists":  # another number of result lists than queries, or the lists in another shape
        body = dumps(_valid_answer(draw, draw(st.integers(0, 3))) if draw(st.booleans()) else
                     {"result": draw(_WEIRD)}).encode()
    elif kind == "json":
        body = dumps(draw(json_values(12))).encode()
    elif kind == "raw":
        text = dumps(_valid_answer(draw))
        at = draw(st.integers(0, len(text)))
        body = (text[:at] + draw(st.sampled_from(RAW_TOKENS)) + text[at:]).encode()
    elif kind == "cut":
        text = dumps(_valid_answer(draw)).encode()
        body = text[: draw(st.integers(0, max(len(text) - 1, 0)))]
    elif kind == "bytes":
        body = draw(st.binary(max_size=300))
    elif kind == "html":
        body = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
    else:
        status = draw(st.integers(200, 599))
        body = draw(st.sampled_from([json.dumps(_valid_answer(draw)).encode(), b'{"detail": "no"}', b"", b"\xff"]))
        if draw(st.booleans()):
            headers["retry-after"] = draw(st.sampled_from(["0", "1", "-1", "nan", "inf", "1e9", "abc", "", "0.05"]))
    return AnswerCase(status, body, headers)


class AnswerHarness:
    """A `SearchQAEnv` over an `HTTPRetriever` whose transport answers each case; every case is one search
    step at the start of an episode."""

    def __init__(self, timeout_s: float = 0.5) -> None:
        import httpx

        from searchgym.envs import SearchQAEnv
        from searchgym.retrieval.http import HTTPRetriever, HTTPRetrieverConfig

        self.case = AnswerCase(200, json.dumps({"result": [[]]}).encode())
        self.retriever = HTTPRetriever(HTTPRetrieverConfig(url="http://fuzz.invalid/retrieve", timeout_s=timeout_s,
                                                           retries=1, backoff_s=0.0))
        self.retriever._http._client = httpx.Client(transport=httpx.MockTransport(self._answer))
        self.env = SearchQAEnv(FUZZ_RECORDS, retriever=self.retriever, judge="gold", top_k=2, candidates=4, max_turns=4,
                               cache_dir=False)

    def _answer(self, request):
        import httpx

        return httpx.Response(self.case.status, headers=self.case.headers, content=self.case.body)

    def run(self, case: AnswerCase) -> Outcome:
        from searchgym.errors import RetrievalError

        self.case = case
        self.env.reset(options={"index": 0})
        try:
            with time_limit(TIME_LIMIT_S):
                obs, reward, terminated, truncated, info = self.env.step("<search>Tiber river</search>")
        except InputHang as e:
            return _crash(str(e))
        except RetrievalError as e:
            return Outcome(type(e).__name__)
        except Exception as e:  # noqa: BLE001 - anything else out of step is what this surface looks for
            return _crash(_describe_exception(e))
        problem = _env_contract(obs, reward, terminated, truncated, info)
        return _crash(f"contract: {problem}") if problem else Outcome(f"observation:{info['action']}")

    def close(self) -> None:
        self.env.close()
        self.retriever.close()

