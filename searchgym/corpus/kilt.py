"""The KILT knowledge source (`kilt_knowledgesource.json`: one Wikipedia page per line) as passages.

A page is `{wikipedia_id, wikipedia_title, text: [paragraph, ...], anchors, categories, ...}` (the Hugging
Face `kilt_wikipedia` export writes `text` as `{paragraph: [...]}`). Each paragraph becomes one document
with id `kilt_doc_id(wikipedia_id, index)`, the id KILT's provenance ranges name (see
`searchgym.data.kilt`), and the page title. Paragraph 0 (the page title itself), section headings
(`Section::::...`) and empty paragraphs are not documents; the other paragraphs keep their index, so the
ids still match the provenance.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from searchgym.corpus.corpus import Document
from searchgym.errors import DataError

_HEADING = "Section::::"


def kilt_doc_id(wikipedia_id: str, paragraph: int) -> str:
    """The document id of paragraph `paragraph` of KILT page `wikipedia_id`.

    >>> kilt_doc_id("45267196", 1)
    '45267196_1'
    """
    return f"{wikipedia_id}_{paragraph}"


def is_kilt_page(obj: Mapping[str, Any]) -> bool:
    """Whether a corpus record is a KILT knowledge-source page (rather than one passage)."""
    return "wikipedia_id" in obj and isinstance(obj.get("text"), (list, Mapping))


def kilt_page_documents(obj: Mapping[str, Any], path: Path, where: str) -> list[Document]:
    """The documents of one knowledge-source page (see the module docstring)."""
    page = obj["wikipedia_id"]
    if isinstance(page, bool) or not isinstance(page, (str, int)) or not str(page).strip():
        raise DataError("a KILT page's 'wikipedia_id' must be a non-empty string or integer", path=path, record=where)
    title = obj.get("wikipedia_title", obj.get("title", ""))
    if not isinstance(title, str):
        raise DataError("a KILT page's 'wikipedia_title' must be a string", path=path, record=where)
    text = obj["text"]
    paragraphs = text.get("paragraph") if isinstance(text, Mapping) else text
    if not isinstance(paragraphs, list) or not all(isinstance(p, str) for p in paragraphs):
        raise DataError("a KILT page's 'text' must be a list of paragraph strings", path=path, record=where)
    page_id, heading = str(page).strip(), title.strip()
    docs = []
    for i, paragraph in enumerate(paragraphs):
        body = paragraph.strip()
        if not body or body.startswith(_HEADING) or (i == 0 and body == heading):
            continue
        docs.append(Document(kilt_doc_id(page_id, i), title, body))
    return docs
