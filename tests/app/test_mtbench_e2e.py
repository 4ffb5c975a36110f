"""MT-Bench end to end, as a user runs it, through Redis and real worker processes against
the simulator over HTTP:

1. `flask-eval generate`: three simulated models, one per provider (OpenAI, Anthropic,
   Gemini wire formats), answer MT-Bench's 80 two-turn questions (``question.jsonl`` as
   it is): 480 calls; each turn-2 answer says (simulator/generate.py) that its request
   carried the digest of the same model's own turn-1 answer; the FastChat model answers
   written load back as the run's responses.
2. `flask-eval run` with the `mt-bench` protocol and `--reference-answers`: all 160 turns
   of the three models judged 1-10 by one judge on MT-Bench's one `overall` rating (480
   calls, 240 of them turn 2); exactly the math, reasoning and coding turns (180 calls)
   are judged with a reference (the simulated judge's explanation says when it was shown
   one); a rerun makes no call.
3. `--pairwise all` with the `mt-bench` protocol, every pair of models in both orders, on
   all 160 turns (960 calls): done, with ties (``[[C]]``).
4. The single run's report has per-turn and per-category (MT-Bench's 8 categories, as
   capabilities) rows and its MT-Bench section, the pairwise run's MT-Bench section has
   turn 1, turn 2 and both pooled; FastChat's own ``show_result.py``
   (tests/upstream/fastchat, unmodified) on `export --format fastchat` gives the same
   per-model scores, to 1e-9 (turn 1, turn 2 and Average; win, loss, tie and rates).
5. Batch judges (`batch: true`) on the three providers' batch APIs judge 10
   conversations (every 8th question, both turns) of the three models: 180 calls, every
   one through its provider's batch API and submitted once; the turn-2 requests (90)
   carried the conversation (the judge's answer opens with ``Grading turn: 2``, and the
   simulator counts them in ``conversation_turns``).

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

from flask_eval.core.conversations import split_turn_id
from flask_eval.simulator import generate as sim_generate
from flask_eval.simulator.answer import REFERENCE_NOTE, TURN_LINE
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import SimHandle, running_simulator
from tests.app.test_fastchat_export import show_result, tables
from tests.conftest import REPO
from tests.helpers import cli_env, flask_eval, wait_done, workers
from tests.workers.test_batch_lane import sim_batches

DATA = Path(os.environ.get("FLASK_EVAL_MTBENCH_DATA", REPO.parent / "shared" / "mtbench-data"))
QUESTIONS = DATA / "question.jsonl"
REFERENCES = DATA / "reference_answer" / "gpt-4.jsonl"
#: the models under test: name -> (provider, simulated model, level)
MODELS = {
    "m-openai": ("openai", "sim-a", 2.0),
    "m-anthropic": ("anthropic", "sim-b", 3.5),
    "m-gemini": ("gemini", "sim-c", 4.5),
}
CATEGORIES = (
    "writing",
    "roleplay",
    "reasoning",
    "math",
    "coding",
    "extraction",
    "stem",
    "humanities",
)
TOL = 1e-9
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


def _inputs(questions: Path, answers: dict[str, Path], references: Path) -> list[str]:
    args = ["--instances", str(questions), "--reference-answers", str(references)]
    for name, path in answers.items():
        args += ["--responses", f"{name}={path}"]
    return args


def _export(env: dict[str, str], run: str) -> list[dict[str, Any]]:
    out = flask_eval("export", run, env=env).stdout
    return [json.loads(line) for line in out.splitlines() if line]


def _check_references(rows: list[dict[str, Any]], category: dict[str, str]) -> None:
    """Exactly the math, reasoning and coding turns were judged with a reference: the
    simulated judge's explanation opens with REFERENCE_NOTE when its prompt showed one."""
    for r in rows:
        conversation, turn = split_turn_id(r["instance_id"])
        shown = r["raw"].startswith(
            f"{TURN_LINE} 2\n\n{REFERENCE_NOTE}" if turn == 2 else REFERENCE_NOTE
        )
        assert shown == (category[conversation] in WITH_REFERENCE), r
        # turn 2 was judged with the conversation shown, and the judge told to grade turn 2
        assert r["raw"].startswith(f"{TURN_LINE} 2\n") == (turn == 2), r


def _fastchat(
    env: dict[str, str], run: str, tmp_path: Path, mode: str
) -> dict[str, list[list[str]]]:
    """FastChat's show_result.py, unmodified, on the run's `export --format fastchat`."""
    out = flask_eval("export", run, "--format", "fastchat", "--judge", "mt", env=env).stdout
    path = tmp_path / f"mt_{run}.jsonl"
    path.write_text(out, encoding="utf-8")
    return tables(show_result("--mode", mode, "--input-file", str(path)))


def _check_single_scores(section: dict[str, Any], printed: dict[str, list[list[str]]]) -> None:
    first = {r[0]: float(r[2]) for r in printed["First turn"] if len(r) == 3}
    second = {r[0]: float(r[2]) for r in printed["Second turn"] if len(r) == 3}
    average = {r[0]: float(r[1]) for r in printed["Average"] if len(r) == 2}
    ours = {s["model"]: s for s in section["single"]}
    assert set(ours) == set(first) == set(second) == set(average) == set(MODELS)
    for model, s in ours.items():
        assert s["n"] == 160 and s["n_excluded"] == 0
        assert s["turns"]["1"]["mean"] == pytest.approx(first[model], abs=TOL)
        assert s["turns"]["2"]["mean"] == pytest.approx(second[model], abs=TOL)
        assert s["average"] == pytest.approx(average[model], abs=TOL)


def _check_pair_scores(section: dict[str, Any], printed: dict[str, list[list[str]]]) -> None:
    rows = {r[0]: r[1:] for r in printed["pairwise"] if len(r) == 7}
    ours = {p["model"]: p for p in section["pairwise"] if p["turn"] == "all"}
    assert set(ours) == set(rows) == set(MODELS)
    for model, p in ours.items():
        win, loss, tie, win_rate, loss_rate, adjusted = rows[model]
        assert (p["win"], p["loss"], p["tie"]) == (int(win), int(loss), int(tie))
        assert p["win"] + p["loss"] + p["tie"] == 2 * 160  # two opponents, every turn
        assert p["win_rate"] == pytest.approx(float(win_rate), abs=TOL)
        assert p["loss_rate"] == pytest.approx(float(loss_rate), abs=TOL)
        assert p["win_rate_adjusted"] == pytest.approx(float(adjusted), abs=TOL)
    assert sum(p["tie"] for p in ours.values()) > 0


def _check_report(env: dict[str, str], run: str) -> dict[str, Any]:
    """Per-turn and per-category rows and the MT-Bench section, in JSON and in text."""
    report = json.loads(flask_eval("report", run, "--format", "json", env=env).stdout)
    rows = report["rows"]
    turns = {(r["model"], r["key"]): r["n"] for r in rows if r["dimension"] == "turn"}
    assert turns == {(m, k): 80 for m in MODELS for k in ("1", "2")}
    categories = {(r["model"], r["key"]): r["n"] for r in rows if r["dimension"] == "capability"}
    assert categories == {(m, c): 20 for m in MODELS for c in CATEGORIES}
    text = flask_eval("report", run, env=env).stdout
    assert "  Turns\n" in text and "  Capabilities\n" in text and "\nMT-Bench\n" in text
    section: dict[str, Any] = report["mtbench"]
    return section


def _subset(tmp_path: Path, questions: list[dict[str, Any]], every: int) -> tuple[Path, Path]:
    """Every ``every``-th question (and its GPT-4 reference answer, when it has one)."""
    kept = questions[::every]
    ids = {q["question_id"] for q in kept}
    path, refs = tmp_path / "subset.jsonl", tmp_path / "subset-refs.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in kept), encoding="utf-8")
    lines = REFERENCES.read_text(encoding="utf-8").splitlines()
    refs.write_text("".join(x + "\n" for x in lines if json.loads(x)["question_id"] in ids))
    return path, refs


def _batch_judges(path: Path, sim: SimHandle) -> Path:
    specs = {
        "openai": f"openai/mt-batch@{sim.openai_base_url}",
        "anthropic": f"anthropic/mt-batch@{sim.anthropic_base_url}",
        "gemini": f"gemini/mt-batch@{sim.gemini_base_url}",
    }
    entry = "- spec: {spec}\n  name: b-{p}\n  protocol: mt-bench\n  batch: true\n"
    entry += "  batch_max_wait: 0.5\n"
    return _judges_file(path, [entry.format(spec=s, p=p) for p, s in specs.items()])


def test_mt_bench_generated_judged_and_reported_through_workers(
    tmp_path: Path, redis_url: str
) -> None:
    pytest.importorskip("pandas")
    questions = _lines(QUESTIONS)
    category = {str(q["question_id"]): q["category"] for q in questions}
    levels = {m: level for _, m, level in MODELS.values()}
    with running_simulator(SimConfig(generators=levels, generation_tokens=60)) as sim:
        env = cli_env(
            f"sqlite:///{tmp_path / 'ledger.db'}",
            redis_url,
            GEMINI_API_KEY="sk-test-key",
            FLASK_EVAL_BATCH_POLL_SECONDS="0.1",
        )
        judges = _judges_file(
            tmp_path / "judges.yaml",
            [f"- spec: openai/mt-judge@{sim.openai_base_url}\n  name: mt\n  protocol: mt-bench\n"],
        )
        with workers(env, processes=1, in_flight=64, log=tmp_path / "w.log"):
            # 1. generation: 80 questions x 2 turns x 3 models
            answers = _generate(tmp_path, sim, env)
            # 2. single-answer grading, one call per turn, with references where MT-Bench
            # uses them; a rerun makes no call
            single = [*_inputs(QUESTIONS, answers, REFERENCES), "--judges", str(judges)]
            before = sim.stats()
            flask_eval("run", *single, "--run", "single", "--quiet", env=env)
            st = wait_done(env, "single")
            assert st["done"] == st["total"] == st["calls"] == 3 * 160
            after = sim.stats()
            assert after["requests"] - before["requests"] == 3 * 160
            assert after["conversation_turns"] - before["conversation_turns"] == 3 * 80
            again = flask_eval("run", *single, "--run", "single", "--quiet", env=env)
            assert "run single resumed: 0 judge calls dispatched" in again.stderr
            assert sim.stats()["requests"] == after["requests"]
            # 3. pairwise, every pair of models in both orders, with ties
            flask_eval("run", *single, "--pairwise", "all", "--run", "pair", "--quiet", env=env)
            st = wait_done(env, "pair")
            assert st["done"] == st["total"] == 6 * 160
            # 5. batch judges on the three providers' batch APIs, 10 conversations
            subset, refs = _subset(tmp_path, questions, 8)
            batch = _batch_judges(tmp_path / "batch.yaml", sim)
            before = sim.stats()
            args = [*_inputs(subset, answers, refs), "--judges", str(batch), "--run", "batch"]
            flask_eval("run", *args, "--quiet", env=env)
            st = wait_done(env, "batch")
            after = sim.stats()
        sent = {p: sim_batches(sim, p) for p in ("openai", "anthropic", "gemini")}
    # 1-2. every turn judged, exactly the math, reasoning and coding turns with a reference
    rows = _export(env, "single")
    assert len(rows) == 3 * 160 and {r["status"] for r in rows} == {"done"}
    assert {r["skill"] for r in rows} == {"overall"}  # MT-Bench's one rating per turn
    _check_references(rows, category)
    assert sum(r["raw"].find(REFERENCE_NOTE) >= 0 for r in rows) == 3 * 30 * 2
    # 3. ties among the verdicts (score 3: [[C]])
    verdicts = Counter(r["score"] for r in _export(env, "pair"))
    assert set(verdicts) == {1, 2, 3} and verdicts[3] > 0
    # 4. the reports, and FastChat's show_result.py on our exports
    _check_single_scores(_check_report(env, "single"), _fastchat(env, "single", tmp_path, "single"))
    pair_report = json.loads(flask_eval("report", "pair", "--format", "json", env=env).stdout)
    pair_section = pair_report["mtbench"]
    by_turn = Counter(p["turn"] for p in pair_section["pairwise"])
    assert by_turn == {1: 3, 2: 3, "all": 3}  # per turn, and both turns pooled
    text = flask_eval("report", "pair", env=env).stdout
    assert "pairwise, turn 1" in text and "pairwise, turn 2" in text
    _check_pair_scores(pair_section, _fastchat(env, "pair", tmp_path, "pairwise-all"))
    # 5. every batch judgment done through its provider's batch API, turn 2 with the
    # conversation shown
    calls = 10 * 2 * 3  # conversations x turns x models, per judge
    assert st["done"] == st["total"] == st["calls"] == st["batch_calls"] == 3 * calls
    for provider, seen in sent.items():
        assert len(seen["calls"]) == calls and set(seen["calls"].values()) == {1}, provider
    assert after["conversation_turns"] - before["conversation_turns"] == 3 * calls // 2
    batched = _export(env, "batch")
    assert {r["judge"] for r in batched} == {"b-openai", "b-anthropic", "b-gemini"}
    _check_references(batched, category)
