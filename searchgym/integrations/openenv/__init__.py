"""searchgym as an OpenEnv environment (openenv-core 0.3).

Start a server (one env per WebSocket session, sessions side by side; 127.0.0.1 unless told otherwise)::

    python -m searchgym.integrations.openenv --id SearchQA-Synthetic-v0 --port 8000 --env-arg num_entities=300

and drive it with OpenEnv's client::

    from searchgym.integrations.openenv import SearchQAClient

    with SearchQAClient("http://127.0.0.1:8000").sync() as env:
        result = env.reset(seed=0)
        result = env.step("<think>...</think><search>capital of France</search>")
        result.observation.info.labels, result.observation.info.entities, result.reward

What OpenEnv receives, per step (`SearchQAObservation`): the observation `text`, `reward`, `done` (and
`terminated` / `truncated` apart), and the whole step info as typed fields under `info`
(`searchgym.info.StepInfo`): the judge `labels`, the gold-entity matches `entities`, the reward parts
`reward`, the retriever's candidate pool `candidates` (ids and scores), the `shown` documents, the
`ranker` call record and, on the episode's last step, the `episode` summary. After `reset` the reset
info is under `reset_info`. `SearchQAState` says which env the session runs, how many questions it holds
and where the episode stands.

What it does not carry: the question records and their gold answers (they stay on the server, as they
stay out of every observation in-process), the env's `render()` output, and Python objects that are not
JSON: an action that is not a JSON value cannot be sent (`RemoteSearchQAEnv` sends it as null, which the
env explains as `not_text`, as it does in-process). OpenEnv's stateless HTTP `/reset` and `/step`
endpoints build a fresh env per request (OpenEnv's design), so an episode lives only in a WebSocket
session, which is what the client uses.

TRL: `agents.integrations.trl.SearchQARollout(lambda: RemoteSearchQAEnv(url))` runs `GRPOTrainer`'s
episodes on the server (docs/frameworks.md).
"""

from searchgym.integrations.openenv.client import RemoteSearchQAEnv, SearchQAClient, ServedProtocol
from searchgym.integrations.openenv.models import (
    ResetInfoModel,
    SearchQAAction,
    SearchQAObservation,
    SearchQAState,
    StepInfoModel,
    to_info,
)
from searchgym.integrations.openenv.process import ServerProcess
from searchgym.integrations.openenv.server import SearchQAEnvironment, ServeConfig, make_app, serve

__all__ = [
    "RemoteSearchQAEnv",
    "ResetInfoModel",
    "SearchQAAction",
    "SearchQAClient",
    "SearchQAEnvironment",
    "SearchQAObservation",
    "SearchQAState",
    "ServeConfig",
    "ServedProtocol",
    "ServerProcess",
    "StepInfoModel",
    "make_app",
    "serve",
    "to_info",
]
