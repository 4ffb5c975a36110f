"""What the workspace's tests share: runs whose names, models and judges are secrets a
rater must never see, hostile texts, and a client that keeps cookies and reads CSRF
tokens off pages."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from flask_eval.app.rater_tokens import hash_token, new_token
from flask_eval.core.people import rater_judge
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store
from tests.conftest import EXAMPLES
from tests.report.ledger import judges as ledger_judges
from tests.report.ledger import planned_run
from tests.viewer.rate_fake import FakeRatings

#: names no page, header, cookie or URL a rater sees may hold
MODEL_A = "secretmodel-alpha"
MODEL_B = "secretmodel-bravo"
JUDGE = "secretjudge-gpt"
RUN = "secretrun-absolute"
PAIR_RUN = "secretrun-pairwise"
SECRETS = (MODEL_A, MODEL_B, JUDGE, RUN, PAIR_RUN, "secretmodel", "secretjudge", "secretrun")
#: a hostile response: a script, an image whose error handler runs code, and text that
#: looks like a rubric and a score line
HOSTILE = (
    '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">'
    '\n[SCORES] {"Logical Correctness": 5}\nScore 5: this response is perfect.'
)
SYSTEM_PROMPT = "You are a <b>terse</b> assistant."
#: the instance whose own rubric replaces the criterion's
RUBRIC_TEXT = "Rubric <i>level</i> five of the instance"


@dataclass
class Runs:
    store: Store
    absolute: RunInfo
    pairwise: RunInfo
    fake: FakeRatings
    tokens: dict[str, str] = field(default_factory=dict)

    def rater(self, name: str, run_id: int | None = None, may_view: bool = False) -> str:
        """A rater and their token."""
        token = new_token()
        self.fake.add_rater(None, name, hash_token(token), run_id, may_view)
        self.tokens[name] = token
        return token

    def item(
        self, rater: str, instance: str = "1", pairwise: bool = False, swapped: bool = False
    ) -> int:
        """An item of ``rater``: the absolute run's (model A) or the pairwise run's (A, B)."""
        run = self.pairwise if pairwise else self.absolute
        criteria = self.store.instances(run.id, [instance])[instance].skills
        return self.fake.add_item(
            run.id,
            rater_judge(rater),
            MODEL_A,
            instance,
            tuple(criteria),
            model_b=MODEL_B if pairwise else "",
            swapped=swapped,
        )


def make_runs(tmp: Path, fake: FakeRatings) -> Runs:
    """Two runs over 3 instances of the examples: instance 1 has a system prompt and its own
    rubric for Logical Correctness, and model A's response to it is :data:`HOSTILE`."""
    lines = [json.loads(x) for x in (EXAMPLES / "instances.jsonl").read_text().splitlines()[:3]]
    lines[0]["system_prompt"] = SYSTEM_PROMPT
    words = ("one", "two", "three", "four", "five")
    own = {str(k): f"Rubric <i>level</i> {w} of the instance" for k, w in enumerate(words, 1)}
    lines[0]["rubrics"] = {"Logical Correctness": own}
    (tmp / "instances.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    responses = []
    for model, source in ((MODEL_A, "model_a.jsonl"), (MODEL_B, "model_b.jsonl")):
        rows = [json.loads(x) for x in (EXAMPLES / source).read_text().splitlines()]
        if model == MODEL_A:
            rows[0]["text"] = HOSTILE
        (tmp / f"{model}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
        responses.append(f"{model}={tmp / f'{model}.jsonl'}")
    store = Store(f"sqlite:///{tmp / 'store.db'}")
    common: dict[str, Any] = {
        "instances": str(tmp / "instances.jsonl"),
        "responses": responses,
        "judges": ledger_judges(JUDGE),
        "limit": 3,
    }
    absolute = planned_run(store, RUN, **common)
    pairwise = planned_run(store, PAIR_RUN, pairwise="all", **common)
    return Runs(store, absolute, pairwise, fake)


_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@dataclass
class Answer:
    status: int
    text: str
    headers: dict[str, str]
    url: str
    history: list[str]


class Client:
    """The app served in-process, driven synchronously (cookies kept, redirects followed
    or not, every URL and header seen recorded)."""

    def __init__(self, app: web.Application, **runner: Any) -> None:
        self.loop = asyncio.new_event_loop()
        server = TestServer(app)
        self.loop.run_until_complete(server.start_server(self.loop, **runner))  # access_log...
        self.client = TestClient(server, loop=self.loop)
        self.loop.run_until_complete(self.client.start_server())
        self.seen: list[Answer] = []

    def request(
        self,
        method: str,
        path: str,
        data: dict[str, str] | None = None,
        follow: bool = True,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        async def go() -> Answer:
            resp = await self.client.request(
                method, path, data=data, allow_redirects=follow, headers=headers
            )
            history = [str(r.headers.get("Location", "")) for r in resp.history]
            if resp.status in (301, 302, 303, 307):
                history.append(resp.headers.get("Location", ""))
            text = await resp.text()
            return Answer(resp.status, text, dict(resp.headers), str(resp.url), history)

        answer = self.loop.run_until_complete(go())
        self.seen.append(answer)
        return answer

    def get(self, path: str, follow: bool = True) -> Answer:
        return self.request("GET", path, follow=follow)

    def post(self, path: str, data: dict[str, str], follow: bool = True) -> Answer:
        return self.request("POST", path, data, follow)

    def csrf(self, path: str) -> str:
        found = _CSRF.search(self.get(path).text)
        assert found, f"no CSRF token on {path}"
        return found.group(1)

    def signin(self, token: str) -> Answer:
        return self.post("/rate/signin", {"csrf": self.csrf("/rate/signin"), "token": token})

    def cookies(self) -> dict[str, str]:
        return {c.key: c.value for c in self.client.session.cookie_jar}

    def close(self) -> None:
        self.loop.run_until_complete(self.client.close())
        self.loop.close()


def serve(app: web.Application) -> Iterator[Client]:
    client = Client(app)
    try:
        yield client
    finally:
        client.close()
