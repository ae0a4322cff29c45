"""Documents, corpora and the corpus file formats (jsonl `contents`, jsonl `title`+`text`, the KILT knowledge
source, DPR tsv)."""

from searchgym.corpus.corpus import Corpus, Document, format_contents, parse_contents, split_contents
from searchgym.corpus.io import iter_corpus_file, load_corpus

__all__ = [
    "Corpus",
    "Document",
    "format_contents",
    "iter_corpus_file",
    "load_corpus",
    "parse_contents",
    "split_contents",
]
