"""`python -m searchgym.integrations.openenv --id SearchQA-Synthetic-v0 --port 8000 [--env-arg KEY=VALUE ...]`:
serve a searchgym env to OpenEnv clients (one env per WebSocket session). Binds 127.0.0.1 unless
`--host` and `--allow-remote` say otherwise."""

from __future__ import annotations

import argparse
import logging
import sys

from searchgym.cli.fields import field_doc
from searchgym.errors import ConfigError
from searchgym.integrations.openenv.server import ServeConfig, serve


def build_parser() -> argparse.ArgumentParser:
    d = ServeConfig()
    p = argparse.ArgumentParser(prog="python -m searchgym.integrations.openenv", description=__doc__.split("\n\n")[0])
    p.add_argument("--id", dest="env_id", default=d.env_id, help=field_doc(ServeConfig, "env_id"))
    p.add_argument("--env-arg", dest="env_args", action="append", default=[], metavar="KEY=VALUE",
                   help=field_doc(ServeConfig, "env_args") + " Repeatable.")
    p.add_argument("--host", default=d.host, help=field_doc(ServeConfig, "host"))
    p.add_argument("--allow-remote", action="store_true", help=field_doc(ServeConfig, "allow_remote"))
    p.add_argument("--port", type=int, default=d.port, help=field_doc(ServeConfig, "port"))
    p.add_argument("--max-sessions", type=int, default=d.max_sessions, help=field_doc(ServeConfig, "max_sessions"))
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    try:
        config = ServeConfig(env_id=args.env_id, env_args=tuple(args.env_args), host=args.host, allow_remote=args.allow_remote,
                             port=args.port, max_sessions=args.max_sessions)
        serve(config, log_level=args.log_level)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
