"""`Document` and `Corpus`: the passages an environment retrieves from."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from searchgym.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Document:
    """One retrievable passage."""

    id: str
    """Unique within its corpus."""
    title: str
    """The page or entity the passage belongs to; may be empty."""
    text: str
    """The passage body, without the title."""
    title_quoted: bool = True
    """Whether `contents` writes the title in double quotes. wiki-18 quotes nearly every title, but about
    one passage in eight of FlashRAG's copy has a bare title line; keeping which lets `contents` give back
    the line a Search-R1 server would send, and Search-R1's observation text show it."""

    @property
    def contents(self) -> str:
        """The Search-R1 / FlashRAG form: the title on the first line (quoted unless it came bare), then
        the text."""
        return format_contents(self.title, self.text, quoted=self.title_quoted)


def format_contents(title: str, text: str, *, quoted: bool = True) -> str:
    """Render `title` and `text` as wiki-18's `contents` field: `"Title"\\ntext` (`Title\\ntext` unquoted)."""
    return f'"{title}"\n{text}' if quoted else f"{title}\n{text}"


def split_contents(contents: str) -> tuple[str, str, bool]:
    """Split a wiki-18 `contents` field into (title, text, whether the title was in double quotes).

    The first line is the title, usually wrapped in double quotes. A `contents` without a newline has no
    title.
    """
    head, sep, rest = contents.partition("\n")
    if not sep:
        return "", contents.strip(), True
    title = head.strip()
    if len(title) >= 2 and title[0] == '"' and title[-1] == '"':
        return title[1:-1], rest.strip(), True
    return title, rest.strip(), False


def parse_contents(contents: str) -> tuple[str, str]:
    """Split a wiki-18 `contents` field into (title, text); see `split_contents`."""
    title, text, _ = split_contents(contents)
    return title, text


class ContentHasher:
    """SHA-256 over documents' ids, titles and texts, fed one document at a time: `Corpus.content_hash`
    and the streaming index builder use this one definition, so an index's recorded corpus hash and a
    loaded corpus's hash agree by construction."""

    def __init__(self) -> None:
        self._h = hashlib.sha256()

    def update(self, doc: Document) -> None:
        h = self._h
        h.update(doc.id.encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
        h.update(doc.title.encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
        h.update(doc.text.encode("utf-8", "surrogatepass"))
        if not doc.title_quoted:
            # Marked only when bare, so that the hashes (and cached indexes) of quoted corpora stay as they were.
            h.update(b"\x1d")
        h.update(b"\x1e")

    def hexdigest(self) -> str:
        return self._h.hexdigest()


class Corpus(Sequence[Document]):
    """An ordered, immutable collection of documents with unique ids.

    >>> corpus = Corpus([Document("d1", "Paris", "Paris is the capital of France.")])
    >>> corpus.get("d1").title
    'Paris'
    """

    def __init__(self, documents: Iterable[Document], *, name: str = "corpus"):
        self._docs: list[Document] = list(documents)
        self.name = name
        self._index: dict[str, int] = {}
        for i, doc in enumerate(self._docs):
            if doc.id in self._index:
                raise ConfigError(f"corpus {name!r}: duplicate document id {doc.id!r} (positions {self._index[doc.id]} and {i})")
            self._index[doc.id] = i
        self._hash: str | None = None

    def __len__(self) -> int:
        return len(self._docs)

    def __getitem__(self, i):  # type: ignore[override]
        return self._docs[i]

    def __iter__(self) -> Iterator[Document]:
        return iter(self._docs)

    @property
    def documents(self) -> Sequence[Document]:
        """The documents in corpus order (do not mutate); indexing it skips `__getitem__`'s overhead in
        retrieval loops that touch tens of thousands of documents per second."""
        return self._docs

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._index

    def get(self, doc_id: str) -> Document:
        """The document with id `doc_id`; KeyError if absent."""
        return self._docs[self._index[doc_id]]

    def position(self, doc_id: str) -> int:
        """The document's position in corpus order (the row of its index entry)."""
        return self._index[doc_id]

    @property
    def content_hash(self) -> str:
        """SHA-256 over every document's id, title and text, in order; keys indexes and caches."""
        if self._hash is None:
            h = ContentHasher()
            for doc in self._docs:
                h.update(doc)
            self._hash = h.hexdigest()
        return self._hash

    def __repr__(self) -> str:
        return f"Corpus(name={self.name!r}, documents={len(self)})"
