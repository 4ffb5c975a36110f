"""The floor for benchmark (d): the same judge calls made by a bare loop of the OpenAI SDK.

Two loops, as issue 13 asks for both:

- ``--loop gather``: as a plain user writes it: one ``asyncio.gather`` over a task per
  call, behind a semaphore of ``--in-flight``, the SDK's default client;
- ``--loop senders``: ``--in-flight`` senders each make one call after another, with
  the client configured as our OpenAI judge configures it (same connection pool
  limits): the cheapest way to keep that many in flight (the gather's waiting tasks
  cost ~13% more CPU per call at 24,000 calls, mostly in the garbage collector).

And two calls: ``--call create`` is the SDK's typed ``chat.completions.create``, what a
user calls; ``--call post`` is the client's ``post`` of the same JSON body, returning the
HTTP response, which is how our judge calls it (workers/providers/openai_judge.py), so
the floor of our own machinery alone can be read too.

Prints JSON {"calls", "cpu_seconds", "wall_seconds"}; the prompts are rendered before
the clock starts, so only the SDK calls are measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from contextlib import AsyncExitStack
from typing import Any

import httpx2
import openai

from flask_eval.producer.inputs import load_inputs, parse_responses_arg
from flask_eval.rubrics.messages import plain
from flask_eval.rubrics.prompt import render
from flask_eval.rubrics.skills import load_default
from flask_eval.workers.providers.openai_judge import http_limits


async def main_async(
    base_url: str,
    messages: list[list[dict[str, str]]],
    in_flight: int,
    loop: str = "senders",
    call: str = "create",
    anthropic_base_url: str | None = None,
) -> int:
    """Every message to the OpenAI judge (and to the Anthropic one if its base URL is
    given); the number of calls made."""
    # the senders loop uses our judges' pool limits; the plain gather the SDK's default
    pooled = loop == "senders"
    http = openai.DefaultAsyncHttpxClient(limits=http_limits(in_flight)) if pooled else None
    async with AsyncExitStack() as stack:
        client = await stack.enter_async_context(
            openai.AsyncOpenAI(
                api_key="sk-bench", base_url=base_url, max_retries=0, http_client=http
            )
        )
        claude: Any = None
        if anthropic_base_url:
            import anthropic

            limits = anthropic.DefaultAsyncHttpxClient(limits=http_limits(in_flight))
            claude = await stack.enter_async_context(
                anthropic.AsyncAnthropic(
                    api_key="sk-bench",
                    base_url=anthropic_base_url,
                    max_retries=0,
                    http_client=limits if pooled else None,
                )
            )

        async def one(job: tuple[str, list[dict[str, str]]]) -> Any:
            judge, m = job
            if judge == "anthropic":
                system = "\n\n".join(x["content"] for x in m if x["role"] == "system")
                chat = [x for x in m if x["role"] != "system"]
                return await claude.messages.create(
                    model="bare", system=system, messages=chat, max_tokens=1024
                )
            if call == "create":
                return await client.chat.completions.create(
                    model="bare",
                    messages=m,  # type: ignore[arg-type]
                    max_tokens=1024,
                    temperature=0.0,
                )
            body = {"model": "bare", "messages": m, "max_tokens": 1024, "temperature": 0.0}
            raw = await client.post("/chat/completions", cast_to=httpx2.Response, body=body)
            return json.loads(raw.content)

        judges = ["openai", "anthropic"] if claude is not None else ["openai"]
        jobs = [(j, m) for m in messages for j in judges]
        if loop == "gather":
            gate = asyncio.Semaphore(in_flight)

            async def gated(job: tuple[str, list[dict[str, str]]]) -> Any:
                async with gate:
                    return await one(job)

            await asyncio.gather(*(gated(job) for job in jobs))
            return len(jobs)
        queue = iter(jobs)

        async def sender() -> None:  # `in_flight` of these keep that many calls going
            for job in queue:
                await one(job)

        await asyncio.gather(*(sender() for _ in range(in_flight)))
        return len(jobs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--instances", required=True)
    ap.add_argument("--responses", action="append", required=True)
    ap.add_argument("--in-flight", type=int, default=256)
    ap.add_argument("--loop", choices=("senders", "gather"), default="senders")
    ap.add_argument("--call", choices=("create", "post"), default="create")
    ap.add_argument("--anthropic-base-url", help="send every prompt to this judge as well")
    args = ap.parse_args()
    skills = load_default()
    inputs = load_inputs(
        args.instances, [parse_responses_arg(r) for r in args.responses], skills.names
    )
    by_id = {i.id: i for i in inputs.instances}
    messages = [
        plain(  # the bare SDKs take plain text
            render(
                instruction=by_id[r.instance_id].instruction,
                reference=by_id[r.instance_id].answer,
                response=r.text,
                skills=[skills.get(s) for s in by_id[r.instance_id].skills],
            )
        )
        for rs in inputs.response_sets
        for r in rs.responses
    ]
    cpu0, wall0 = time.process_time(), time.perf_counter()
    calls = asyncio.run(
        main_async(
            args.base_url, messages, args.in_flight, args.loop, args.call, args.anthropic_base_url
        )
    )
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    print(json.dumps({"calls": calls, "cpu_seconds": cpu, "wall_seconds": wall}))


if __name__ == "__main__":
    main()
