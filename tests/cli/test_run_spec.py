"""`run --spec FILE` runs what the flags would: `run --print-spec` writes the spec of the
flags, and the run made from it has the flags' run's fingerprint and stored
configuration; a bad spec file is refused in one line naming file and line, with
nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from flask_eval.core.spec import RunSpec, load_spec
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage.store import Store
from tests.conftest import EXAMPLES
from tests.helpers import cli_env, flask_eval


def flags(tmp_path: Path) -> tuple[str, ...]:
    judges = tmp_path / "judges.yaml"
    judges.write_text("- spec: openai/j\n  price: {input: 1, output: 2}\n")
    return ("--judges", str(judges), *FLAGS)


FLAGS = (
    "--instances",
    str(EXAMPLES / "instances.jsonl"),
    "--responses",
    f"model_a={EXAMPLES / 'model_a.jsonl'}",
    "--responses",
    f"model_b={EXAMPLES / 'model_b.jsonl'}",
    "--mode",
    "skill",
    "--limit",
    "3",
    "--max-cost",
    "5",
    "--no-reference",
)


def test_the_printed_spec_runs_what_the_flags_run(tmp_path: Path, sqlite_url: str) -> None:
    with running_simulator(SimConfig()) as sim:
        env = cli_env(sqlite_url, OPENAI_BASE_URL=sim.openai_base_url)
        given = flags(tmp_path)
        flask_eval("run", *given, "--run", "flags", "--quiet", env=env)
        printed = flask_eval("run", *given, "--run", "spec", "--print-spec", env=env).stdout
        spec_file = tmp_path / "run.yaml"
        spec_file.write_text(printed)
        asked = sim.stats()["requests"]
        flask_eval("run", "--spec", str(spec_file), "--quiet", env=env)
        # the flags' run again, from its spec under its own name: found done
        again = tmp_path / "again.yaml"
        again.write_text(printed.replace("name: spec", "name: flags"))
        resumed = flask_eval("run", "--spec", str(again), "--quiet", env=env)
        assert sim.stats()["requests"] == asked  # the answer cache answered the spec's run
    assert "run flags resumed: 0 judge calls dispatched" in resumed.stderr
    spec = load_spec(str(spec_file))
    assert spec.protocol.mode == "skill" and spec.inputs.reference is False
    assert spec.sampling.limit == 3 and spec.budget.max_cost == 5.0
    assert RunSpec.from_data(spec.to_data()) == spec
    store = Store(sqlite_url)
    try:
        by_flags, by_spec = store.find_run("flags"), store.find_run("spec")
        assert by_flags is not None and by_spec is not None
        assert by_flags.fingerprint == by_spec.fingerprint
        assert by_flags.config == by_spec.config
        assert by_flags.config.to_data()["version"] == by_flags.config.version == 2
    finally:
        store.close()


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ("version: 1\ninputs:\n  instancez: x.jsonl\n", 3, "unknown key 'inputs.instancez'"),
        ("sampling:\n  limit: three\n", 2, "sampling.limit: expected a whole number"),
        ("version: 1\nworkers:\n  judges: openai/j\n", 3, "expected a list of texts"),
        ("version: 1\nsampling: [\n", 3, "invalid YAML"),
        ("version: 7\n", 1, "not a spec version"),
    ],
)
def test_a_bad_spec_is_one_line_naming_file_and_line(
    tmp_path: Path, sqlite_url: str, text: str, line: int, says: str
) -> None:
    spec_file = tmp_path / "bad.yaml"
    spec_file.write_text(text)
    env = cli_env(sqlite_url)
    got = flask_eval("run", "--spec", str(spec_file), env=env, check=False)
    assert got.returncode == 2
    (message,) = got.stderr.splitlines()
    assert message.startswith(f"error: {spec_file}:{line}: ") and says in message
    assert not Path(sqlite_url.removeprefix("sqlite:///")).exists()


def test_flags_beside_a_spec_are_refused(tmp_path: Path, sqlite_url: str) -> None:
    spec_file = tmp_path / "run.yaml"
    spec_file.write_text("version: 1\nworkers:\n  judges: [openai/j]\n")
    got = flask_eval(
        "run", "--spec", str(spec_file), "--mode", "skill", env=cli_env(sqlite_url), check=False
    )
    assert got.returncode == 2
    assert got.stderr.strip() == (
        f"error: --mode is given beside --spec {spec_file}; put it in the spec or leave --spec out"
    )


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (("--pairwise", "baseline:model_a", "--no-swap"), {"pairwise": "baseline:model_a"}),
        (("--samples", "3", "--seed", "9"), {"samples": 3, "seed": 9}),
        (("--mode", "instance", "--run", "named", "--retry-failed"), {"mode": "instance"}),
    ],
)
def test_the_printed_spec_is_the_spec_of_the_flags(
    tmp_path: Path, sqlite_url: str, extra: tuple[str, ...], expected: dict[str, object]
) -> None:
    """Whatever the flags, `--print-spec` prints their spec, which reads back equal,
    and writes nothing."""
    given = flags(tmp_path)
    printed = flask_eval("run", *given, *extra, "--print-spec", env=cli_env(sqlite_url)).stdout
    spec_file = tmp_path / "run.yaml"
    spec_file.write_text(printed)
    spec = load_spec(str(spec_file))
    flat = {
        "pairwise": spec.pairwise.against,
        "samples": spec.sampling.samples,
        "seed": spec.sampling.seed,
        "mode": spec.protocol.mode,
    }
    assert {k: flat[k] for k in expected} == expected
    assert spec.inputs.reference is False and spec.sampling.limit == 3
    assert ("--no-swap" in extra) == (not spec.pairwise.swap)
    assert ("--retry-failed" in extra) == spec.options.retry_failed
    assert not Path(sqlite_url.removeprefix("sqlite:///")).exists()
