"""Two scripted agents for `python -m agents.experiments.compare --agent ...`: no model, a few lines each, and a floor
that a trained search agent should clear.

- `first_title` (text in, text out): searches the question, then answers with the first document's title.
  It answers a question about an entity with the entity itself, so it scores about nothing: it shows the
  shape of an agent, not a strategy.
- `NameInFirstDocument` (a class with `act(observation, info)`, one instance per episode): searches the
  question, then answers with the first capitalised name in the first document that is neither that
  document's title nor part of the question. On 1-hop questions of the synthetic world ("Where was X
  born?" over "X was born in Y in 1834 ...") that is often the answer.

    python -m agents.experiments.compare --reference results/learners/results.json --agent agents.experiments.examples.scripted_agent:first_title
    python -m agents.experiments.compare --reference results/learners/results.json --agent agents.experiments.examples.scripted_agent:NameInFirstDocument
"""

from __future__ import annotations

import re

# Doc 1's title and text, in both of the env's document formats: `Doc 1(Title: "X") ...` and `Doc 1(Title: X) ...`.
_FIRST_DOC = re.compile(r'Doc 1\(Title: "?(.*?)"?\) (.*?)(?:\nDoc 2\(|</information>)', re.DOTALL)
_NAME = re.compile(r"[A-Z][a-z]+(?: [A-Z][a-z]+)*")


def _question(prompt: str) -> str:
    """The question at the end of the env's prompt (both of searchgym's templates end in `Question: ...`)."""
    return prompt.rsplit("Question:", 1)[-1].strip()


def first_title(observation: str) -> str:
    """Search the question; once documents are shown, answer with the first one's title."""
    doc = _FIRST_DOC.search(observation)
    if doc is None:
        return f"<search>{_question(observation)}</search>"
    return f"<answer>{doc.group(1)}</answer>"


def name_in_first_document(question: str, observation: str, title: str | None = None) -> str:
    """The answer action for `question` after the search results `observation`: the first capitalised name in
    the first document that is neither in its title nor in the question (the title itself when none is)."""
    doc = _FIRST_DOC.search(observation)
    if doc is None:
        return "<answer>unknown</answer>"
    title = title or doc.group(1)
    names = [n for n in _NAME.findall(doc.group(2)) if n not in title and n not in question]
    return f"<think>The document about {title} names {names[:1]}.</think><answer>{names[0] if names else title}</answer>"


class NameInFirstDocument:
    """Search the question, then answer with the first new name in the first shown document."""

    def __init__(self) -> None:
        self.question = ""

    def act(self, observation: str, info: dict) -> str:
        if "action" not in info:  # the reset: the observation is the prompt
            self.question = _question(observation)
            return f"<think>I will look it up.</think><search>{self.question}</search>"
        shown = info.get("shown") or [{}]
        return name_in_first_document(self.question, observation, shown[0].get("title"))
