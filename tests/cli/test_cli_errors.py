"""The error contract through the CLI: one line naming file:line, exit 2, nothing written.

Every case of the bad-input corpus (tests/bad_input_cases.py: inputs, flags, judges and
rubric files, settings) runs through `flask-eval run` with a broker configured that nothing
listens on (refused before the broker is contacted), and a sample of them with a real
Redis broker: the database file must not exist afterwards and Redis must hold no key.
Special files (FIFOs, a symlink to /dev/zero, directories) are made here, and the
classes that only PostgreSQL enforces (NUL, over-long values) also run against a real
PostgreSQL database.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from flask_eval.cli import main
from tests.bad_input_cases import (
    BAD,
    CASES,
    CLI_CASES,
    GOOD_A,
    GOOD_INSTANCES,
    JUDGE,
    REPO_ROOT,
    BadCase,
)

ALL_CASES = CASES + CLI_CASES


def invoke(case: BadCase, database_url: str, redis_url: str) -> tuple[int, str]:
    """``flask-eval run`` on a case; ``--no-wait`` so that a case wrongly accepted fails
    fast (exit 0) instead of waiting for workers."""
    args = ["run", *(["--instances", case.instances] if case.instances else [])]
    for r in case.responses:
        args += ["--responses", r]
    judged = any(a in ("--judge", "--judges") for a in case.args)
    args += [*case.args, *([] if judged else ["--judge", JUDGE]), "--no-wait", "--quiet"]
    env = {
        "FLASK_EVAL_DATABASE_URL": database_url,
        "FLASK_EVAL_BROKER_URL": redis_url,
        "OPENAI_API_KEY": "sk-test-key",
        **dict(case.env),
    }
    result = CliRunner().invoke(main, args, env=env)
    return result.exit_code, result.stderr + result.stdout


def assert_refused(case: BadCase, code: int, out: str) -> None:
    assert code == 2, out
    lines = out.strip().splitlines()
    assert len(lines) == 1, out
    expected_prefix = f"error: {case.where}: " if case.where else "error: "
    assert lines[0].startswith(expected_prefix), lines[0]
    assert case.message in lines[0], lines[0]
    assert len(lines[0]) < 600, lines[0]
    for secret in case.absent:
        assert secret not in out, out


def assert_nothing_written(db: Path, redis_url: str) -> None:
    assert not db.exists(), "the database was written"
    assert redis.Redis.from_url(redis_url).dbsize() == 0, "something reached Redis"


#: a broker nothing listens on: a case refused with its own message was refused before
#: the broker was contacted (a contact would fail first, with "cannot reach the broker")
UNREACHABLE_BROKER = "redis://127.0.0.1:1/0"


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.id)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(
    case: BadCase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO_ROOT)
    db = tmp_path / "flask-eval.db"
    code, out = invoke(case, f"sqlite:///{db}", UNREACHABLE_BROKER)
    assert_refused(case, code, out)
    assert not db.exists(), "the database was written"


def test_bad_input_writes_nothing_to_a_real_broker(
    tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end, on a sample of the corpus (one case in 8, each kind of refusal): with a
    real Redis broker configured, nothing reaches it and no database is written."""
    monkeypatch.chdir(REPO_ROOT)
    for n, case in enumerate(ALL_CASES[::8]):
        db = tmp_path / f"flask-eval-{n}.db"
        code, out = invoke(case, f"sqlite:///{db}", redis_url)
        assert_refused(case, code, out)
        assert_nothing_written(db, redis_url)


def test_corpus_is_large_enough() -> None:
    assert len(ALL_CASES) >= 140
    assert len({c.id for c in ALL_CASES}) == len(ALL_CASES)


def _special(kind: str, path: Path) -> str:
    if kind == "fifo":
        os.mkfifo(path)
        return "is a named pipe (FIFO), not a regular file"
    if kind == "dev-zero":
        path.symlink_to("/dev/zero")
        return "is a character device, not a regular file"
    path.mkdir()
    return "is a directory"


def _role_case(role: str, path: str, message: str) -> BadCase:
    if role == "instances":
        return BadCase(role, path, [GOOD_A], path, message)
    if role == "responses":
        return BadCase(role, GOOD_INSTANCES, [GOOD_A, f"broken={path}"], path, message)
    if role == "judges":
        return BadCase(role, GOOD_INSTANCES, [GOOD_A], path, message, ("--judges", path))
    if role in SET_ROLES:  # a file that carries its own instances and responses
        return BadCase(role, "", [], path, message, (f"--{role}", path))
    args = ("--judge", JUDGE, "--rubrics", path)
    return BadCase(role, GOOD_INSTANCES, [GOOD_A], path, message, args)


ROLES = ["instances", "responses", "judges", "rubrics"]
#: the files that carry their instances and responses (--pairwise-set sniffed its
#: format by opening the path: a FIFO hung it)
SET_ROLES = ["pairwise-set", "prometheus-set", "biggen"]


@pytest.mark.timeout(20)  # a FIFO that is opened blocks forever: fail, do not hang
@pytest.mark.parametrize("kind", ["fifo", "directory"])
@pytest.mark.parametrize("role", ROLES + SET_ROLES)
def test_fifos_and_directories_are_refused_before_they_are_opened(
    role: str, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO_ROOT)
    special = tmp_path / f"input-{kind}"
    case = _role_case(role, str(special), _special(kind, special))
    db = tmp_path / "flask-eval.db"
    code, out = invoke(case, f"sqlite:///{db}", UNREACHABLE_BROKER)
    assert_refused(case, code, out)
    assert not db.exists(), "the database was written"


def _limit_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("role", ROLES)
def test_a_symlink_to_a_device_is_refused_before_it_is_read(
    role: str, tmp_path: Path, redis_url: str
) -> None:
    """/dev/zero never ends: reading it fills the memory. The CLI runs as a process
    with a 2 GiB address-space limit, so a regression fails here instead of taking the
    machine down."""
    special = tmp_path / "input-dev-zero"
    case = _role_case(role, str(special), _special("dev-zero", special))
    db = tmp_path / "flask-eval.db"
    judged = any(a in ("--judge", "--judges") for a in case.args)
    args = ["run", "--instances", case.instances]
    for r in case.responses:
        args += ["--responses", r]
    args += [*case.args, *([] if judged else ["--judge", JUDGE]), "--no-wait", "--quiet"]
    env = {
        **os.environ,
        "FLASK_EVAL_DATABASE_URL": f"sqlite:///{db}",
        "FLASK_EVAL_BROKER_URL": redis_url,
        "OPENAI_API_KEY": "sk-test-key",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "flask_eval", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        preexec_fn=_limit_memory,
    )
    assert_refused(case, proc.returncode, proc.stderr + proc.stdout)
    assert_nothing_written(db, redis_url)


#: the classes only PostgreSQL enforces (SQLite stores NUL and any length)
POSTGRES_CLASSES = [
    "nul_in_answer",
    "nul_in_id",
    "response_nul",
    "long_instance_id",
    "response_long_id",
    "surrogate_instruction",
    "judges_long_name",
    "judges_nul",
    "rubrics_long_name.yaml",
    "model_name_too_long",
]


def _pg_rows(url: str) -> dict[str, int]:
    import psycopg

    counts = {}
    with psycopg.connect(url) as conn:
        for table in ("run", "instance", "response", "judgment"):
            exists = conn.execute("SELECT to_regclass(%s)", (f"public.{table}",)).fetchone()
            if exists and exists[0] is not None:
                row = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()
                counts[table] = int(row[0]) if row else 0
    return counts


@pytest.mark.postgres
def test_postgres_only_classes_are_refused_up_front_on_both_databases(
    postgres_url: str, tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NUL and over-long values: the same refusal on PostgreSQL and on SQLite, with no
    run row on PostgreSQL and no SQLite file afterwards."""
    monkeypatch.chdir(REPO_ROOT)
    by_id = {c.id: c for c in ALL_CASES}
    for case_id in POSTGRES_CLASSES:
        case = by_id[case_id]
        code, out = invoke(case, postgres_url, redis_url)
        assert_refused(case, code, out)
        assert all(n == 0 for n in _pg_rows(postgres_url).values()), (case_id, out)
        db = tmp_path / f"{case_id}.db"
        code, out = invoke(case, f"sqlite:///{db}", redis_url)
        assert_refused(case, code, out)
        assert_nothing_written(db, redis_url)


def _run_env(tmp_path: Path, **env: str) -> dict[str, str]:
    return {"FLASK_EVAL_DATABASE_URL": f"sqlite:///{tmp_path / 'r.db'}", **env}


def _one_line(args: Sequence[str], env: dict[str, str]) -> str:
    """The whole output of a command that must fail with exit 2 and one error line."""
    result = CliRunner().invoke(main, list(args), env=env)
    out = result.stderr + result.stdout
    assert result.exit_code == 2, out
    assert len([line for line in out.splitlines() if line.startswith("error: ")]) == 1, out
    assert "Traceback" not in out, out
    return out


def test_passwords_in_broker_and_database_urls_are_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker or database that cannot be reached: the error names the URL without its
    password, whether in the userinfo or in the query string."""
    monkeypatch.chdir(REPO_ROOT)
    run = ["run", "--instances", GOOD_INSTANCES, "--responses", GOOD_A, "--judge", JUDGE]
    for broker in (
        "redis://127.0.0.1:1/0?password=hunter2pw",
        "redis://:hunter2pw@127.0.0.1:1/0",
        "redis://user:hunter2pw@127.0.0.1:1/0?socket_timeout=1",
    ):
        out = _one_line([*run, "--no-wait"], _run_env(tmp_path, FLASK_EVAL_BROKER_URL=broker))
        assert "hunter2pw" not in out and "127.0.0.1:1" in out, out
        assert not (tmp_path / "r.db").exists()
    database = "postgresql://flask@127.0.0.1:1/db?connect_timeout=2&password=hunter2pw"
    out = _one_line(["status"], {"FLASK_EVAL_DATABASE_URL": database})
    assert "hunter2pw" not in out, out


def test_in_memory_sqlite_is_refused_by_every_command(tmp_path: Path) -> None:
    for url in ("sqlite://", "sqlite:///:memory:", "sqlite:///file:x?mode=memory&uri=true"):
        out = _one_line(["status"], {"FLASK_EVAL_DATABASE_URL": url})
        assert "in-memory SQLite database is not supported" in out, out


def test_a_judge_named_on_the_command_line_keeps_its_short_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--judge NAME=SPEC` names the judge; without a name it is provider/model (no URL),
    as `--dry-run` prints (nothing is written)."""
    from flask_eval.producer.judge_args import combine

    monkeypatch.chdir(REPO_ROOT)
    named, plain = combine([f"gpt4o={JUDGE}", "openai/other@http://127.0.0.1:9/v1"], [])
    assert (named.name, named.spec) == ("gpt4o", JUDGE)
    assert (plain.name, plain.spec) == ("openai/other", "openai/other@http://127.0.0.1:9/v1")
    query = "openai/m@http://127.0.0.1:9/v1?api-version=2024-06-01"
    assert combine([query], [])[0].spec == query  # '=' in a base URL is not a name
    db = tmp_path / "dry.db"
    result = CliRunner().invoke(
        main,
        [
            *("run", "--instances", GOOD_INSTANCES, "--responses", GOOD_A, "--dry-run"),
            "--judge",
            f"gpt4o={JUDGE}",
        ],
        env={"FLASK_EVAL_DATABASE_URL": f"sqlite:///{db}", "OPENAI_API_KEY": "sk-test-key"},
    )
    assert result.exit_code == 0, result.stderr
    assert "gpt4o" in result.stdout and "127.0.0.1:9" not in result.stdout
    assert not db.exists()


def test_reusing_a_run_name_with_other_inputs_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A conflicting run: exit 2 and the stored run is left as it was."""
    from flask_eval.simulator.testing import running_simulator

    monkeypatch.chdir(REPO_ROOT)
    db = tmp_path / "x.db"
    env = {"FLASK_EVAL_DATABASE_URL": f"sqlite:///{db}", "OPENAI_API_KEY": "sk-test-key"}
    with running_simulator() as sim:
        base = [
            "run",
            "--instances",
            GOOD_INSTANCES,
            "--responses",
            GOOD_A,
            "--run",
            "same",
            "--quiet",
        ]
        first = CliRunner().invoke(
            main, [*base, "--judge", f"openai/a@{sim.openai_base_url}"], env=env
        )
        assert first.exit_code == 0, first.stderr
        before = CliRunner().invoke(main, ["status", "same", "--json"], env=env).stdout
        second = CliRunner().invoke(
            main, [*base, "--judge", f"openai/b@{sim.openai_base_url}"], env=env
        )
    assert second.exit_code == 2
    assert "exists with different inputs" in second.stderr
    assert CliRunner().invoke(main, ["status", "same", "--json"], env=env).stdout == before


def test_unknown_run_and_missing_key_are_clear_errors(tmp_path: Path) -> None:
    env = {"FLASK_EVAL_DATABASE_URL": f"sqlite:///{tmp_path / 'y.db'}"}
    from flask_eval.storage.store import Store

    Store(env["FLASK_EVAL_DATABASE_URL"]).close()  # a store without that run
    result = CliRunner().invoke(main, ["report", "nope"], env=env)
    assert result.exit_code == 2 and "no run named 'nope'" in result.stderr
    args = [
        "run",
        "--instances",
        str(REPO_ROOT / GOOD_INSTANCES),
        "--responses",
        f"a={REPO_ROOT}/flask_eval/examples/model_a.jsonl",
        "--judge",
        "anthropic/claude",
    ]
    result = CliRunner().invoke(
        main, args, env={**env, "ANTHROPIC_API_KEY": "", "ANTHROPIC_BASE_URL": ""}
    )
    assert result.exit_code == 2 and "set ANTHROPIC_API_KEY" in result.stderr


def test_corpus_files_are_all_used() -> None:
    used = {Path(c.instances).name for c in ALL_CASES}
    used |= {Path(arg.partition("=")[2]).name for c in ALL_CASES for arg in c.responses}
    used |= {Path(arg).name for c in ALL_CASES for arg in c.args if arg.startswith(BAD)}
    files = {p.name for p in (REPO_ROOT / BAD).iterdir()}
    assert files <= used, f"corpus files without a case: {sorted(files - used)}"


@pytest.mark.parametrize(
    "args",
    [
        ("status",),
        ("status", "--watch", "--json"),
        ("runs",),
        ("runs", "delete", "r", "--yes"),
        ("export", "r"),
        ("export", "r", "--bundle", "OUT"),
        ("report",),
        ("agreement",),
        ("resume", "r"),
        ("view", "--no-warm"),
    ],
)
def test_a_command_that_reads_refuses_a_store_that_does_not_exist(
    args: tuple[str, ...], tmp_path: Path
) -> None:
    """One line, exit 2, and no empty store made where a store was expected."""
    from tests.helpers import cli_env, flask_eval

    missing = tmp_path / "missing.db"
    env = cli_env(f"sqlite:///{missing}")
    args = tuple(str(tmp_path / "out.bundle") if a == "OUT" else a for a in args)
    out = flask_eval(*args, env=env, check=False)
    assert out.returncode == 2, out.stderr
    assert out.stderr == (
        f"error: no flask-eval store at sqlite:///{missing} (FLASK_EVAL_DATABASE_URL); "
        "`flask-eval run` makes one\n"
    )
    assert not missing.exists() and not (tmp_path / "out.bundle").exists()
