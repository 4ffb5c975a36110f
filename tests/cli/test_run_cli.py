"""`flask-eval run`, `resume` and `wait` in-process (CliRunner, the memory judge, SQLite):
naming the model of a data set, prices and budgets, the answer cache in estimates and
endings, what the bar waits for, failure causes and the advice for a local server.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from flask_eval.cli import main
from flask_eval.core.errors import FailureReason, JudgeError
from flask_eval.core.types import Price
from flask_eval.producer import prices
from flask_eval.workers.providers.memory_judge import MemoryJudge, default_answer
from tests.app.test_cost import INPUTS
from tests.bad_input_cases import AUTOJ, BIGGEN_SLASH, PROMETHEUS_SET, REPO_ROOT

CALLS = 27 + 25  # instance mode, one judge


@pytest.fixture
def memory_judge() -> Iterator[type[MemoryJudge]]:
    """The memory judge, its script and counters restored afterwards."""
    script, calls = MemoryJudge.script, MemoryJudge.calls
    MemoryJudge.calls = 0
    yield MemoryJudge
    MemoryJudge.script, MemoryJudge.calls = script, calls  # type: ignore[method-assign]


def invoke(args: Sequence[str], db: Path, **env: str) -> Result:
    return CliRunner().invoke(
        main,
        list(args),
        env={"FLASK_EVAL_DATABASE_URL": f"sqlite:///{db}", "FLASK_EVAL_BROKER_URL": "", **env},
    )


def judges_file(tmp_path: Path, *entries: str) -> str:
    path = tmp_path / "judges.yaml"
    path.write_text("".join(entries))
    return str(path)


def priced_run(tmp_path: Path, db: Path, name: str) -> str:
    """Run the examples with one priced memory judge; its judges file."""
    path = judges_file(tmp_path, "- spec: memory/j\n  price: {input: 1, output: 1}\n")
    first = invoke(["run", *INPUTS, "--judges", path, "--run", name, "--quiet"], db)
    assert first.exit_code == 0, first.output
    return path


# -- naming the model of a file that carries its responses ------------------------------


def test_model_names_the_model_of_a_set_whose_file_or_model_name_is_invalid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO_ROOT)
    db = tmp_path / "m.db"
    for flag, path, models in (
        ("--prometheus-set", PROMETHEUS_SET, ["mt-bench"]),
        ("--biggen", BIGGEN_SLASH, ["llama-2-7b"]),
        ("--pairwise-set", AUTOJ, ["gpt4", "llama"]),
    ):
        named = [a for m in models for a in ("--model", m)]
        result = invoke(["run", flag, path, *named, "--judge", "memory/j", "--dry-run"], db)
        assert result.exit_code == 0, result.output
        for model in models:  # the coverage lines name the models
            assert f"{model}: 1/1 instances answered" in result.stderr, result.stderr
    # a Prometheus set's models are its response sources: the file's name plays no part
    result = invoke(
        ["run", "--prometheus-set", PROMETHEUS_SET, "--judge", "memory/j", "--dry-run"], db
    )
    assert result.exit_code == 0, result.output
    assert "model_a: 1/1 instances answered" in result.stderr, result.stderr
    assert not db.exists()


# -- prices and budgets ----------------------------------------------------------------


def test_dry_run_says_which_judges_have_no_price(tmp_path: Path) -> None:
    path = judges_file(
        tmp_path,
        "- spec: memory/priced\n  price: {input: 2.5, output: 10}\n",
        "- spec: memory/free\n  price: {input: 0, output: 0}\n",
        "- spec: memory/unpriced\n",
    )
    result = invoke(["run", *INPUTS, "--judges", path, "--dry-run"], tmp_path / "d.db")
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines() if line.strip()}
    assert float(rows["memory/priced"][-1]) > 0 and rows["memory/free"][-1] == "0.0000"
    assert rows["memory/unpriced"][-1] == "unknown"
    assert rows["total"][-1] == f">={float(rows['memory/priced'][-1]):.4f}"
    assert "no price for memory/unpriced: the cost of its calls is unknown (not 0)" in (
        result.stdout
    )
    assert not (tmp_path / "d.db").exists()


def test_max_cost_refuses_a_judge_without_a_price_unless_one_is_known(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memory_judge: type[MemoryJudge]
) -> None:
    db = tmp_path / "b.db"
    refused = invoke(["run", *INPUTS, "--judge", "memory/j", "--max-cost", "0.0001"], db)
    assert refused.exit_code == 2 and memory_judge.calls == 0
    assert refused.stderr.startswith(
        "error: --max-cost 0.0001 needs a price for every judge: judge memory/j has none"
    ), refused.stderr
    assert not db.exists()
    # a known price (the price table's entry) applies to the provider's own API only
    monkeypatch.setattr(prices, "KNOWN_PRICES", {"memory/j": Price(100.0, 100.0)})
    dry = invoke(["run", *INPUTS, "--judge", "memory/j", "--max-cost", "1", "--dry-run"], db)
    assert dry.exit_code == 0, dry.output
    total = next(line for line in dry.stdout.splitlines() if line.startswith("total"))
    assert float(total.split()[-3]) > 1  # the total live cost, at the known price
    held = invoke(["run", *INPUTS, "--judge", "memory/j", "--max-cost", "0.5", "--quiet"], db)
    assert held.exit_code == 1 and "stay pending" in held.stderr, held.output
    assert 0 < memory_judge.calls < CALLS
    elsewhere = "memory/j@http://127.0.0.1:9/v1"
    other = invoke(["run", *INPUTS, "--judge", elsewhere, "--max-cost", "1", "--dry-run"], db)
    assert other.exit_code == 2 and "has none" in other.stderr


def test_a_run_given_no_price_again_keeps_its_price_and_resume_checks_the_budget(
    tmp_path: Path, memory_judge: type[MemoryJudge]
) -> None:
    db = tmp_path / "k.db"
    path = priced_run(tmp_path, db, "k")
    again = invoke(
        ["run", *INPUTS, "--judge", "memory/j", "--run", "k", "--quiet", "--max-cost", "5"], db
    )
    assert again.exit_code == 0 and "price" not in again.stderr, again.output
    bare = invoke(["run", *INPUTS, "--judge", "memory/j", "--run", "bare", "--quiet"], db)
    assert bare.exit_code == 0, bare.output
    status = invoke(["status", "bare", "--json"], db).stdout
    refused = invoke(["resume", "bare", "--max-cost", "1"], db)
    assert refused.exit_code == 2 and "judge memory/j has none" in refused.stderr
    assert invoke(["status", "bare", "--json"], db).stdout == status
    priced = invoke(["resume", "bare", "--max-cost", "1", "--judges", path, "--quiet"], db)
    assert priced.exit_code == 0 and "price None ->" in priced.stderr, priced.output


# -- custom criteria: instances need an id and an instruction -----------------------------

CRITERIA = """\
criteria:
  - name: Clarity
    description: Is the answer clear, short, and to the point?
    scores:
      1: Confusing, rambling, or empty.
      2: Hard to follow.
      3: Clear enough.
      4: Clear.
      5: Clear, short, and to the point.
"""


def test_custom_criteria_instances_need_only_an_id_and_an_instruction(
    tmp_path: Path, memory_judge: type[MemoryJudge]
) -> None:
    (tmp_path / "c.yaml").write_text(CRITERIA)
    (tmp_path / "i.jsonl").write_text(
        '{"idx": 1, "instruction": "Say hi."}\n'
        '{"idx": 2, "instruction": "Say bye.", "answer": "Bye."}\n'
    )
    (tmp_path / "r.jsonl").write_text(
        '{"question_id": 1, "text": "Hi."}\n{"question_id": 2, "text": "Bye."}\n'
    )
    args = [
        "run",
        "--instances",
        str(tmp_path / "i.jsonl"),
        "--responses",
        f"m={tmp_path / 'r.jsonl'}",
        "--criteria",
        str(tmp_path / "c.yaml"),
        "--judge",
        "memory/j",
        "--quiet",
    ]
    result = invoke(args, tmp_path / "c.db")
    assert result.exit_code == 0, result.output
    assert memory_judge.calls == 2
    (tmp_path / "i.jsonl").write_text('{"idx": 1}\n')
    missing = invoke(args, tmp_path / "c2.db")
    assert missing.exit_code == 2
    assert (
        "i.jsonl:1: missing field 'instruction' (with --criteria an instance needs idx and "
        "instruction; answer, domain and difficulty are optional)" in missing.stderr
    )


def test_readme_criteria_example_loads_with_commas_in_its_descriptions(tmp_path: Path) -> None:
    """The README's example, as a user copies it, with a comma in a score description."""
    from flask_eval.rubrics.criteria import load_criteria

    readme = (REPO_ROOT / "README.md").read_text()
    block = readme.split("- **Custom criteria** (`--criteria FILE`):", 1)[1]
    block = block.split("```yaml\n", 1)[1].split("```", 1)[0]
    text = "\n".join(line.removeprefix("  ") for line in block.splitlines())
    assert "," in text.split("scores:", 1)[1]
    (tmp_path / "c.yaml").write_text(text)
    criteria = load_criteria(str(tmp_path / "c.yaml"))
    rubric = criteria.get(criteria.names[0]).rubric
    assert sorted(rubric) == [1, 2, 3, 4, 5] and any("," in text for text in rubric.values())


# -- waiting: phases, --timeout, `wait` ---------------------------------------------------


def test_the_start_of_a_run_says_what_it_waits_for(
    tmp_path: Path, memory_judge: type[MemoryJudge]
) -> None:
    answered: list[int] = []

    def slow(messages: Sequence[dict[str, str]]) -> str:  # the first answers come late
        if len(answered) < 2:
            time.sleep(0.5)
        answered.append(1)
        return default_answer(messages)

    memory_judge.script = staticmethod(slow)  # type: ignore[assignment]
    result = invoke(["run", *INPUTS, "--judge", "memory/j", "--in-flight", "2"], tmp_path / "p.db")
    assert result.exit_code == 0, result.output
    assert "run " in result.stderr and f"writing {CALLS * 3:,} judgments to the ledger" in (
        result.stderr
    )
    assert "waiting for the judges' first answers" in result.stderr


def test_timeout_and_wait_need_a_broker(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    timed = invoke(["run", *INPUTS, "--judge", "memory/j", "--timeout", "5"], db)
    assert timed.exit_code == 2 and timed.stderr.startswith("error: --timeout needs a broker")
    assert not db.exists()
    waited = invoke(["wait", "x"], db)
    assert waited.exit_code == 2 and "wait follows a run that workers judge" in waited.stderr


def test_wait_on_a_finished_run_prints_its_summary(
    tmp_path: Path, memory_judge: type[MemoryJudge]
) -> None:
    db = tmp_path / "w.db"
    assert (
        invoke(["run", *INPUTS, "--judge", "memory/j", "--run", "w", "--quiet"], db).exit_code == 0
    )
    result = invoke(["wait", "w", "--quiet"], db, FLASK_EVAL_BROKER_URL="memory://")
    assert result.exit_code == 0, result.output
    assert "Run w\nLeaderboard: overall mean" in result.stdout


# -- endings: the cache, failure causes, local servers ------------------------------------


def test_estimates_and_endings_count_the_calls_the_cache_answers(
    tmp_path: Path, memory_judge: type[MemoryJudge]
) -> None:
    db = tmp_path / "cache.db"
    path = priced_run(tmp_path, db, "first")
    assert memory_judge.calls == CALLS
    assert "answer cache" not in invoke(["status", "first"], db).stdout
    dry = invoke(["run", *INPUTS, "--judges", path, "--run", "second", "--dry-run"], db)
    total = dry.stdout.splitlines()[-2].split()  # the total row, then the cache's line
    assert total[:4] == ["total", str(CALLS * 3), str(CALLS), str(CALLS)], dry.stdout
    assert (
        total[-1] == "0.0000"
        and f"{CALLS} of {CALLS} calls are answered from the answer cache" in dry.stdout
    )
    # without a price, a judge whose every call the cache answers costs exactly nothing
    bare = invoke(["run", *INPUTS, "--judge", "memory/j", "--run", "bare", "--dry-run"], db)
    assert bare.stdout.splitlines()[-2].split()[-1] == "0.0000" and "no price" not in bare.stdout
    second = invoke(["run", *INPUTS, "--judges", path, "--run", "second", "--quiet"], db)
    assert second.exit_code == 0 and memory_judge.calls == CALLS, second.output
    assert (
        f"{CALLS} judge calls dispatched ({CALLS} answered from the answer cache; "
        "estimated $0.0000)" in second.stderr
    )
    assert f"{CALLS} judge calls answered from the answer cache" in second.stdout
    status = invoke(["status", "second"], db).stdout
    assert f"{CALLS} judge calls answered from the answer cache (free)" in status


def test_each_kind_of_failure_says_its_cause_in_one_line(
    tmp_path: Path, memory_judge: type[MemoryJudge]
) -> None:
    def refuse(messages: Sequence[dict[str, str]]) -> str:
        raise JudgeError(FailureReason.AUTH, "401 Incorrect API key provided: sk-wr****ng")

    memory_judge.script = staticmethod(refuse)  # type: ignore[assignment]
    result = invoke(
        ["run", *INPUTS, "--judge", "memory/j", "--quiet"],
        tmp_path / "a.db",
        FLASK_EVAL_HALT_AFTER="0",
    )
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    at = lines.index("Failure causes (one detail each; all in `flask-eval export`):")
    assert (
        lines[at + 1] == f"  auth {CALLS * 3} (memory/j): 401 Incorrect API key provided: "
        "sk-wr****ng"
    )


@pytest.mark.parametrize(
    ("base_url", "advised"),
    [("http://127.0.0.1:8000/v1", True), ("https://api.example.com/v1", False)],
)
def test_timeouts_against_a_local_server_suggest_one_call_at_a_time(
    tmp_path: Path, memory_judge: type[MemoryJudge], base_url: str, advised: bool
) -> None:
    def hang(messages: Sequence[dict[str, str]]) -> str:
        raise JudgeError(FailureReason.TIMEOUT, "no answer within 120 s")

    memory_judge.script = staticmethod(hang)  # type: ignore[assignment]
    result = invoke(
        ["run", *INPUTS, "--judge", f"local=memory/smol@{base_url}", "--quiet"],
        tmp_path / "l.db",
        FLASK_EVAL_HALT_AFTER="0",
        FLASK_EVAL_MAX_ATTEMPTS="1",
    )
    assert result.exit_code == 1
    advice = [line for line in result.stdout.splitlines() if "max_in_flight: 1" in line]
    if not advised:
        assert advice == []
        return
    assert len(advice) == 1, result.stdout
    assert advice[0].startswith(
        f"judge local: {CALLS * 3} judgments timed out against the local server "
        f"{base_url} (timeout 120 s)"
    )
    assert "FLASK_EVAL_JUDGE_TIMEOUT=600" in advice[0]
    assert "flask-eval resume" in advice[0] and "--reason timeout" in advice[0]


def test_is_local() -> None:
    from flask_eval.app.summary import is_local

    local = [
        "http://127.0.0.1:8000/v1",
        "http://localhost:11434/v1",
        "http://[::1]:8000",
        "http://192.168.1.20:8000/v1",
        "http://10.0.0.5/v1",
        "http://gpu.local/v1",
    ]
    remote = [None, "https://api.openai.com/v1", "http://8.8.8.8/v1", "https://x.example/v1"]
    assert all(is_local(url) for url in local)
    assert not any(is_local(url) for url in remote)


def test_with_no_worker_timeout_stops_waiting_and_wait_waits_again(
    tmp_path: Path, redis_url: str
) -> None:
    """A real broker and no worker: `run --timeout` stops waiting (exit 1) and says how to
    go on; `wait` follows the same run, sends nothing, and stops on its own timeout."""
    import redis

    from tests.helpers import cli_env

    env = cli_env(f"sqlite:///{tmp_path / 'r.db'}", redis_url, FLASK_EVAL_STALL_SECONDS="0.5")
    args = ["run", *INPUTS, "--judge", "memory/j", "--run", "nobody", "--timeout", "2"]
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == 1, result.output
    assert "no progress and no worker alive on queue" in result.stderr
    assert "stopped waiting for run nobody (--timeout 2 s): 156 of 156 judgments still open" in (
        result.stderr
    )
    assert "no worker is alive on queue" in result.stderr
    assert "wait again:  flask-eval wait nobody" in result.stderr
    queued = redis.Redis.from_url(redis_url).llen(env["FLASK_EVAL_QUEUE"])
    again = CliRunner().invoke(main, ["wait", "nobody", "--timeout", "1", "--quiet"], env=env)
    assert again.exit_code == 1 and "stopped waiting for run nobody (--timeout 1 s)" in (
        again.stderr
    )
    assert redis.Redis.from_url(redis_url).llen(env["FLASK_EVAL_QUEUE"]) == queued > 0
