"""The floor for benchmark (d): the same judge calls made by a bare loop of the OpenAI SDK.

The client is configured as our OpenAI judge configures it (same connection pool limits),
so the comparison measures our machinery, not a different HTTP setup. ``--in-flight``
senders each make one call after another: the cheapest way to keep that many in flight
(a gather of one task per call, behind a semaphore, costs ~13% more CPU per call at
24,000 calls, mostly in the garbage collector scanning the waiting tasks).

Prints JSON {"calls", "cpu_seconds", "wall_seconds"}; the prompts are rendered before
the clock starts, so only the SDK calls are measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import openai

from producer.inputs import load_inputs, parse_responses_arg
from rubrics.prompt import render
from rubrics.skills import load_default
from workers.providers.openai_judge import http_limits


async def main_async(base_url: str, messages: list[list[dict[str, str]]], in_flight: int) -> None:
    http = openai.DefaultAsyncHttpxClient(limits=http_limits(in_flight))  # as our judges
    async with openai.AsyncOpenAI(
        api_key="sk-bench", base_url=base_url, max_retries=0, http_client=http
    ) as client:
        queue = iter(messages)

        async def sender() -> None:  # `in_flight` of these keep that many calls going
            for m in queue:
                await client.chat.completions.create(
                    model="bare", messages=m, max_tokens=1024, temperature=0.0
                )  # type: ignore[arg-type]

        await asyncio.gather(*(sender() for _ in range(in_flight)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--instances", required=True)
    ap.add_argument("--responses", action="append", required=True)
    ap.add_argument("--in-flight", type=int, default=256)
    args = ap.parse_args()
    skills = load_default()
    inputs = load_inputs(
        args.instances, [parse_responses_arg(r) for r in args.responses], skills.names
    )
    by_id = {i.id: i for i in inputs.instances}
    messages = [
        render(
            instruction=by_id[r.instance_id].instruction,
            reference=by_id[r.instance_id].answer,
            response=r.text,
            skills=[skills.get(s) for s in by_id[r.instance_id].skills],
        )
        for rs in inputs.response_sets
        for r in rs.responses
    ]
    cpu0, wall0 = time.process_time(), time.perf_counter()
    asyncio.run(main_async(args.base_url, messages, args.in_flight))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    print(json.dumps({"calls": len(messages), "cpu_seconds": cpu, "wall_seconds": wall}))


if __name__ == "__main__":
    main()
