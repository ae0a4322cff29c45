"""The typed errors searchgym raises.

Every error says what went wrong and what to do about it. Callers catch these classes; they never
inspect message text.
"""

from __future__ import annotations

from pathlib import Path


class SearchGymError(Exception):
    """Base class of every error raised by searchgym."""


class ConfigError(SearchGymError, ValueError):
    """An argument or configuration value is invalid; the message names it and the accepted values."""


class DataError(SearchGymError):
    """A data or corpus file cannot be read. Names the file and, where known, the record."""

    def __init__(self, message: str, *, path: str | Path | None = None, record: int | str | None = None):
        self.path = None if path is None else str(path)
        self.record = record
        where = ""
        if self.path is not None:
            where = f"{self.path}"
            if record is not None:
                where += f", record {record}"
            where += ": "
        super().__init__(where + message)


class IndexIntegrityError(DataError):
    """A file of a persisted index is missing, or differs in size or SHA-256 from what its manifest recorded."""


class DataNotFoundError(DataError):
    """The data an environment needs is not on disk and could not be fetched."""


class RetrievalError(SearchGymError):
    """A retriever failed to answer."""


class RetrievalAnswerError(RetrievalError):
    """A retrieval server answered with something that is not a Search-R1 `/retrieve` response: not JSON,
    JSON nested or sized past what can be read, the wrong shape, or values of the wrong type."""


class RetrievalTimeout(RetrievalError):
    """A retrieval backend did not answer within its timeout."""


class RetrieverRestarting(RetrievalError):
    """The retrieval server's retriever process is being restarted; ask again after `retry_after_s`."""

    def __init__(self, message: str, *, retry_after_s: float = 1.0):
        super().__init__(message)
        self.retry_after_s = retry_after_s


class IndexMismatchError(RetrievalError):
    """A persisted index was built for a different corpus or configuration than the one given."""


class CacheMissError(RetrievalError):
    """A replay-only retrieval cache holds no entry for a query; record it first."""


class BackendError(SearchGymError):
    """A model backend (LLM judge, ranker, policy server) failed after its bounded retries."""


class BackendTimeout(BackendError):
    """A model backend (policy server, LLM API) did not answer within its timeout, after its retries."""


class EpisodeStateError(SearchGymError, RuntimeError):
    """`step` was called when no episode is running (call `reset` first)."""


class BatchError(SearchGymError, ValueError):
    """Data handed to a training or scoring routine does not fit together at run time (tensors of different
    shapes, a trajectory without step infos): a bug in the caller or in the data, not a setting to change."""


class RegistrationError(SearchGymError):
    """A searchgym environment id is already registered with Gymnasium for another entry point or other
    kwargs (another package took the name first)."""


class EnvServerError(SearchGymError):
    """An environment server (an OpenEnv server from `python -m searchgym.integrations.openenv`) could not be
    reached, closed the session, or refused a message; `code` is the server's error code when it answered
    (OpenEnv's `EXECUTION_ERROR`, `VALIDATION_ERROR`, `CAPACITY_REACHED`, ...), None when it did not."""

    def __init__(self, message: str, *, code: str | None = None):
        super().__init__(message)
        self.code = code


class EnvServerTimeout(EnvServerError, TimeoutError):
    """An environment server did not answer within the client's timeout. The session is closed: the
    client's next call opens a new one, so call `reset` again."""
