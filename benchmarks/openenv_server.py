"""Env steps/s through the OpenEnv server, against the same episodes in-process.

A server (`python -m searchgym.integrations.openenv`, in a child process on loopback) serves
`SearchQA-Synthetic-v0`; `--sessions` OpenEnv clients (`SearchQAClient`, one WebSocket session each,
all in this process's event loop) play episodes side by side. Every episode is the same scripted agent's:
reset to a question by index, search with the question's text, answer its gold answer (two steps). The
in-process reference plays the same episodes, in the same order, on one `gym.make` env in this process.
Prints, in one run: each side's steps, seconds and env steps/s (steps are `step` calls; the time of the
resets between them counts; the sessions' envs are built before the clock starts, as the in-process one is), the errors the clients met, the ratio served / in-process, the machine's
cores and load average, and whether the served rate meets `--target`.

    python -m benchmarks.openenv_server [--sessions 16] [--episodes 1000] [--num-entities 300] [--target 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

import gymnasium as gym

from agents.experiments.progress import phase

ENV_ID = "SearchQA-Synthetic-v0"


def scripted_turns(record) -> list[str]:
    """The agent every episode plays: one search with the question's text, then the gold answer."""
    return [f"<think>I should look this up.</think><search>{record.question}</search>",
            f"<think>Found it.</think><answer>{record.answers[0]}</answer>"]


def in_process(env_kwargs: dict, order: list[int], bar) -> tuple[int, float]:
    """Steps taken and seconds, playing `order`'s questions on one in-process env."""
    env = gym.make(ENV_ID, **env_kwargs)
    records = env.unwrapped.records
    steps = 0
    start = time.perf_counter()
    for index in order:
        env.reset(options={"index": index})
        for text in scripted_turns(records[index]):
            env.step(text)
            steps += 1
        bar.update(1)
    seconds = time.perf_counter() - start
    env.close()
    return steps, seconds


async def served(url: str, records, order: list[int], sessions: int, bar) -> tuple[int, float, list[str]]:
    """Steps taken, seconds and errors, playing `order`'s questions over `sessions` client sessions (each
    takes the next question when its episode ends). The sessions are opened, and their envs built on the
    server, before the clock starts: building an env is a session's start-up cost, not a step's."""
    from searchgym.integrations.openenv import SearchQAClient

    queue = list(reversed(order))
    errors: list[str] = []
    steps = 0

    async def play(client: SearchQAClient) -> None:
        nonlocal steps
        while queue:
            index = queue.pop()
            try:
                await client.reset(options={"index": index})
                for text in scripted_turns(records[index]):
                    await client.step(text)
                    steps += 1
            except Exception as e:  # noqa: BLE001 - every failure is counted and shown, none stops the run
                errors.append(f"{type(e).__name__}: {e}")
            bar.update(1)

    clients = [SearchQAClient(url) for _ in range(sessions)]
    try:
        await asyncio.gather(*(client.state() for client in clients))  # a round trip: the session's env exists
        start = time.perf_counter()
        await asyncio.gather(*(play(client) for client in clients))
        seconds = time.perf_counter() - start
    finally:
        await asyncio.gather(*(client.close() for client in clients), return_exceptions=True)
    return steps, seconds, errors


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=16, help="concurrent OpenEnv sessions")
    p.add_argument("--episodes", type=int, default=1000, help="episodes on each side (two steps each)")
    p.add_argument("--num-entities", type=int, default=300, help="the synthetic world's size")
    p.add_argument("--target", type=float, default=200.0, help="served env steps/s to reach")
    args = p.parse_args(argv)
    if args.sessions < 1 or args.episodes < 1:
        p.error("--sessions and --episodes must be >= 1")
    from searchgym.integrations.openenv import ServerProcess

    env_kwargs = {"num_entities": args.num_entities, "cache_dir": False}
    probe = gym.make(ENV_ID, **env_kwargs)
    records = probe.unwrapped.records
    order = [i % len(records) for i in range(args.episodes)]
    load_before = os.getloadavg()
    with phase(f"[openenv_server] in-process, {args.episodes} episodes", total=args.episodes, unit="ep") as bar:
        local_steps, local_s = in_process(env_kwargs, order, bar)
    with ServerProcess(ENV_ID, env_kwargs, max_sessions=args.sessions) as server:
        with phase(f"[openenv_server] OpenEnv, {args.sessions} sessions, {args.episodes} episodes", total=args.episodes, unit="ep") as bar:
            steps, seconds, errors = asyncio.run(served(server.url, records, order, args.sessions, bar))
    load_after = os.getloadavg()
    local_rate, rate = local_steps / local_s, steps / seconds
    print(f"machine: {os.cpu_count()} cores; load average (1, 5, 15 min) {' '.join(f'{x:.2f}' for x in load_before)} before, "
          f"{' '.join(f'{x:.2f}' for x in load_after)} after")
    print(f"in-process env: {local_steps} steps in {local_s:.2f} s: {local_rate:.0f} env steps/s")
    print(f"OpenEnv over loopback, {args.sessions} sessions: {steps} steps in {seconds:.2f} s: {rate:.0f} env steps/s, "
          f"{len(errors)} errors")
    for error in errors[:5]:
        print(f"  error: {error}")
    print(f"ratio served / in-process: {rate / local_rate:.3f}")
    print(f"target >= {args.target:.0f} served env steps/s with 0 errors: {'met' if rate >= args.target and not errors else 'not met'}")
    return 0


if __name__ == "__main__":
    from searchgym.cli.run import run_main

    raise SystemExit(run_main(main))
