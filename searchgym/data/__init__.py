"""QA records and the loaders for the public benchmark files (HotpotQA, 2Wiki, MuSiQue, NQ, ...)."""

from searchgym.data.hub import fetch_dataset
from searchgym.data.loaders import QADataset, load_dataset_file, load_records
from searchgym.data.records import QARecord

__all__ = ["QADataset", "QARecord", "fetch_dataset", "load_dataset_file", "load_records"]
