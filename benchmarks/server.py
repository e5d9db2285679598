"""What sharing one websocket service costs: many clients at once against one at a time.

    python -m benchmarks.server [--clients 20] [--turns 3] [--steps 16] [--max-batch 1 8]

The service starts on 127.0.0.1 (a free port) with the shipped models, as ``quicksilver
serve`` would. The same conversations (each client asks ``--turns`` typed questions, one
after another, reading every event) run twice in one process: all clients side by side,
then one client at a time. A turn is timed from sending ``conversation.item.create`` to
``response.done`` (the answer written and all its audio sent). The side-by-side run is
repeated for each ``--max-batch``: the engine's scheduler queues every connection's turns
first come first served and denoises up to that many together, one pass a step for all;
its count of passes shows how much was shared.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

from quicksilver.assistant.config import Settings
from quicksilver.assistant.loading import (
    load_engine,
    load_transcriber_for,
    load_voice,
)
from quicksilver.ui.server.client import text_item
from quicksilver.ui.server.config import ServerConfig
from quicksilver.ui.server.service import Models, Service
from websockets.asyncio.client import connect

QUESTIONS = [
    "what is 17 times 3",
    "what is 12 plus 9",
    "which is bigger, 7 or 12",
    "what is 50 minus 8",
    "how do you spell apple",
    "what is 40 divided by 5",
    "who are you",
]
TURN_TIMEOUT_S = 300.0  # a turn slower than this is a failure, not a figure


async def conversation(url: str, client: int, turns: int) -> list[float]:
    """One client's turns, each timed in seconds; raises if a turn is not completed."""
    latencies = []
    async with connect(url, max_size=None) as websocket:
        json.loads(await asyncio.wait_for(websocket.recv(), TURN_TIMEOUT_S))  # session.created
        for turn in range(turns):
            question = QUESTIONS[(client + turn) % len(QUESTIONS)]
            started = time.perf_counter()
            await websocket.send(json.dumps(text_item(question)))
            while True:
                event = json.loads(await asyncio.wait_for(websocket.recv(), TURN_TIMEOUT_S))
                if event["type"] in ("response.done", "error"):
                    break
            if event["type"] == "error" or event["response"]["status"] != "completed":
                raise RuntimeError(f"client {client}, turn {turn + 1}: {event}")
            latencies.append(time.perf_counter() - started)
    return latencies


async def measure(url: str, clients: int, turns: int, together: bool) -> tuple[list[float], float]:
    """Every turn's latency and the wall time of all of them."""
    started = time.perf_counter()
    if together:
        runs = await asyncio.gather(*(conversation(url, c, turns) for c in range(clients)))
    else:
        runs = [await conversation(url, c, turns) for c in range(clients)]
    return [latency for run in runs for latency in run], time.perf_counter() - started


def row(label: str, latencies: list[float], wall_s: float) -> str:
    p50 = statistics.median(latencies) * 1000
    p95 = statistics.quantiles(latencies, n=20)[-1] * 1000
    rate = len(latencies) / wall_s
    return f"{label:<28}{p50:>9.0f}{p95:>9.0f}{rate:>12.2f}{wall_s:>9.1f}{len(latencies):>7}"


async def run(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    settings = Settings(steps=args.steps)
    models = Models(
        load_engine(settings.model, settings.device),
        load_transcriber_for(settings),
        load_voice(settings.voice),
    )
    print(f"models ready in {time.perf_counter() - started:.1f} s")
    max_clients = max(args.clients, ServerConfig.max_clients)
    rows, passes = [], []
    for max_batch in args.max_batch:
        config = ServerConfig(port=0, max_clients=max_clients, max_batch=max_batch, log=False)
        async with Service(settings, config, models) as service:
            await conversation(service.url, 0, 1)  # warm-up, not counted
            if not rows:
                alone = await measure(service.url, args.clients, args.turns, together=False)
                rows.append(("one client at a time", alone))
            before = service.scheduler.passes
            label = f"{args.clients} together, batch {max_batch}"
            rows.append((label, await measure(service.url, args.clients, args.turns, True)))
            passes.append((label, service.scheduler.passes - before))
    print(
        f"\n{args.clients} clients x {args.turns} typed turns, {args.steps} denoising steps "
        "(turn: question sent to response.done)"
    )
    print(f"{'mode':<28}{'p50 ms':>9}{'p95 ms':>9}{'turns/s':>12}{'wall s':>9}{'turns':>7}")
    for label, figures in rows:
        print(row(label, *figures))
    alone = rows[0][1]
    print("\nagainst one client at a time:")
    for (label, shared), (_, count) in zip(rows[1:], passes, strict=True):
        p50_ratio = statistics.median(shared[0]) / statistics.median(alone[0])
        rate_ratio = (len(shared[0]) / shared[1]) / (len(alone[0]) / alone[1])
        print(f"  {label}: p50 latency {p50_ratio:.2f}x, turns/s {rate_ratio:.2f}x, "
              f"{count} engine passes for {len(shared[0]) * args.steps} steps")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=20, help="connections side by side")
    parser.add_argument("--turns", type=int, default=3, help="typed turns per connection")
    parser.add_argument("--steps", type=int, default=16, help="denoising steps per answer")
    parser.add_argument(
        "--max-batch", type=int, nargs="+", default=[1, 8], metavar="N",
        help="the service's --max-batch, one side-by-side run each (1: a fair queue alone)",
    )  # fmt: skip
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
