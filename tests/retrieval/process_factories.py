"""Retriever factories for the retriever process, in a module that imports no part of the HTTP server:
what the child loads to unpickle one is then what it loads itself."""

import sys

from searchgym.corpus import Corpus
from searchgym.retrieval import BM25Retriever
from tests.conftest import TEN_DOCS

WEB_PACKAGES = ("fastapi", "starlette", "uvicorn", "pydantic")


class ReportsModules:
    """rank-bm25 over ten documents, whose `describe()` also says which web packages its process loaded."""

    def __init__(self):
        self.inner = BM25Retriever(Corpus(TEN_DOCS, name="ten"), backend="rank_bm25", cache_dir=False)

    def search(self, queries, k):
        return self.inner.search(queries, k)

    def describe(self):
        loaded = sorted({m.split(".")[0] for m in sys.modules} & set(WEB_PACKAGES))
        return {**self.inner.describe(), "web_packages_loaded": loaded}


def reports_modules() -> ReportsModules:
    return ReportsModules()
