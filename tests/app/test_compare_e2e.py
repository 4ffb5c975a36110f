"""`flask-eval compare` as a CI job uses it: simulated models under test answer the
example instances, real `flask-eval run`s judge them against the simulator on SQLite,
and the gate passes an A/A-like pair (the same level, other answers), fails a clearly
weaker model with a JUnit failure, writes a readable Markdown summary, refuses bad input
with one line, exit code 2 and nothing written, and compares a run in progress on what is
finished, counting the rest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage.models import JUDGMENT
from flask_eval.storage.store import Store
from tests.conftest import EXAMPLES
from tests.helpers import cli_env, flask_eval

pytestmark = pytest.mark.e2e
J = JUDGMENT.c

#: BASE's model, an equal one (other answers, the same level) and a weaker one
LEVELS = {"base": 3.5, "twin": 3.5, "worse": 1.5}
SCHEMA = Path(__file__).parents[1] / "data" / "junit-10.xsd"
#: what a CI job runs (``flask-eval`` as a fresh process each time)
CI_SCRIPT = """\
set -u
flask-eval() { "$PYTHON" -m flask_eval "$@"; }
flask-eval compare nightly aa --gate --format junit --out aa.xml 2> aa.err; echo "aa=$?"
flask-eval compare nightly pr --gate --format junit --out pr.xml 2> pr.err; echo "pr=$?"
flask-eval compare nightly pr --format markdown > summary.md; echo "md=$?"
flask-eval compare nightly pr --model nobody --gate --format junit --out nomodel.xml \\
  2> nomodel.err; echo "nomodel=$?"
flask-eval compare nightly other --gate --format junit --out disjoint.xml 2> disjoint.err
echo "disjoint=$?"
"""


def models_file(tmp_path: Path) -> Path:
    lines = [line for name in LEVELS for line in (f"- name: {name}", f"  spec: openai/{name}")]
    path = tmp_path / "models.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_gate_passes_an_equal_model_and_fails_a_weaker_one(
    tmp_path: Path, sqlite_url: str
) -> None:
    xmlschema = pytest.importorskip("xmlschema")
    instances = str(EXAMPLES / "instances.jsonl")
    with running_simulator(SimConfig(generators=LEVELS, generation_tokens=40)) as sim:
        env = cli_env(sqlite_url, OPENAI_BASE_URL=sim.openai_base_url)
        out = tmp_path / "responses"
        flask_eval(
            "generate", "--instances", instances, "--models", str(models_file(tmp_path)),
            "--out", str(out), "--run", "gen", "--quiet", env=env,
        )  # fmt: skip
        for run, model in (("nightly", "base"), ("aa", "twin"), ("pr", "worse")):
            flask_eval(
                "run", "--instances", instances, "--responses", f"m={out / model}.jsonl",
                "--judge", "openai/judge", "--run", run, "--quiet", env=env,
            )  # fmt: skip
        flask_eval(  # a run with no model in common with the others
            "run", "--instances", instances, "--responses", f"other={out / 'base'}.jsonl",
            "--judge", "openai/judge", "--run", "other", "--limit", "3", "--quiet", env=env,
        )  # fmt: skip

    def compare(*args: str) -> tuple[int, str, str]:
        done = flask_eval("compare", *args, env=env, check=False)
        return done.returncode, done.stdout, done.stderr

    # the CI job: real processes, exit codes as a shell sees them
    ci = tmp_path / "ci"
    ci.mkdir()
    (ci / "gate.sh").write_text(CI_SCRIPT)
    shell_env = {**env, "PYTHON": sys.executable, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        ["bash", "gate.sh"], cwd=ci, env=shell_env, capture_output=True, text=True, timeout=240
    )
    codes = dict(line.split("=", 1) for line in done.stdout.split())
    assert codes == {"aa": "0", "pr": "1", "md": "0", "nomodel": "2", "disjoint": "2"}, (
        done.stdout,
        done.stderr,
    )
    # A/A-like: no failure, valid JUnit; the weaker model: a failure on its overall key
    for name in ("aa", "pr"):
        xmlschema.validate(str(ci / f"{name}.xml"), str(SCHEMA))
    aa = ET.parse(ci / "aa.xml").getroot()
    assert aa.tag == "testsuite" and aa.get("failures") == "0" and not aa.findall(".//failure")
    assert int(aa.get("tests", "0")) > 10
    failed = {
        (case.get("classname"), case.get("name"))
        for case in ET.parse(ci / "pr.xml").getroot().iter("testcase")
        if case.find("failure") is not None
    }
    assert ("m.overall", "all") in failed
    # the Markdown summary: headline, regressions first
    lines = (ci / "summary.md").read_text().splitlines()
    assert lines[0].startswith("### :x: REGRESSION: pr vs nightly")
    regressions = lines[lines.index("**Regressions**") : lines.index("**Other tested keys**")]
    assert any(line.startswith("| m | overall | all |") for line in regressions)
    # bad input: one line, nothing written
    for name in ("nomodel", "disjoint"):
        said = (ci / f"{name}.err").read_text().strip().splitlines()
        assert len(said) == 1 and said[0].startswith("error: ")
        assert not (ci / f"{name}.xml").exists()
    assert "no model in common" in (ci / "disjoint.err").read_text()

    # without --gate, the same comparison is a report: exit 0, every figure in JSON
    code, report, _ = compare("nightly", "pr", "--format", "json")
    data = json.loads(report)
    assert code == 0 and data["gate_failed"] and data["regressions"] == len(failed)
    overall = next(r for r in data["rows"] if (r["dimension"], r["key"]) == ("overall", "all"))
    assert overall["effect"] < -1 and overall["n"] == data["rows"][0]["n"]
    reproduced_from_exports(data, env)
    # two models named RUN:MODEL; text output
    code, txt, _ = compare("aa:m", "pr:m")
    assert code == 0 and txt.startswith("REGRESSION: pr:m vs aa:m")
    # more bad input, in process: one line, exit 2, nothing written
    bad = tmp_path / "bad.xml"
    for args in (
        ("nightly:m", "pr:nobody"),
        ("nightly", "gen"),  # a generation run: no scores
        ("nightly", "nosuchrun"),
        ("nightly", "pr", "--judge", "openai/other"),
    ):
        code, out_text, err = compare(*args, "--gate", "--format", "junit", "--out", str(bad))
        assert code == 2 and out_text == "" and len(err.strip().splitlines()) == 1, (args, err)
        assert err.startswith("error: ") and not bad.exists()

    # NEW in progress, with failures: compared on what is finished, the rest counted
    n_pending, n_failed = set_status(
        sqlite_url, "pr", {"1": "pending", "2": "pending", "3": "failed"}
    )
    code, report, _ = compare("nightly", "pr", "--format", "json", "--gate")
    data = json.loads(report)
    (dropped,) = data["dropped"]
    assert (dropped["new_pending"], dropped["new_failed"]) == (n_pending, n_failed)
    assert dropped["base_pending"] == dropped["base_failed"] == 0
    assert any(f"{n_pending:,} of" in n and "run pr is in progress" in n for n in data["notes"])
    after = next(r for r in data["rows"] if (r["dimension"], r["key"]) == ("overall", "all"))
    assert after["n"] == overall["n"] - 3 and code == 1  # still a regression: exit 1


def reproduced_from_exports(data: dict[str, Any], env: dict[str, str]) -> None:
    """The comparison's figures again from `flask-eval export` of both runs, by scipy and
    statsmodels: each skill's and the overall key's paired t-test over instances (the
    per-instance mean of the instance's scores), and Holm over the comparison's family."""
    import pandas as pd
    from scipy import stats
    from statsmodels.stats.multitest import multipletests

    def scores(run: str) -> pd.DataFrame:
        rows = flask_eval("export", run, env=env).stdout.splitlines()
        frame = pd.DataFrame([json.loads(line) for line in rows])
        return frame[frame["status"] == "done"].dropna(subset=["score"])

    both = scores("nightly").merge(
        scores("pr"), on=["model", "judge", "instance_id", "skill"], suffixes=("_b", "_n")
    )
    rows = {(r["dimension"], r["key"]): r for r in data["rows"] if r["model"] == "m"}
    keys = [("overall", "all", both)] + [("skill", k, g) for k, g in both.groupby("skill")]
    for dimension, key, cells in keys:
        units = cells.groupby("instance_id")[["score_b", "score_n"]].mean()
        test = stats.ttest_rel(units["score_n"], units["score_b"])
        low, high = test.confidence_interval(0.95)
        row = rows[(dimension, key)]
        assert row["n"] == len(units)
        assert row["effect"] == pytest.approx(float((units["score_n"] - units["score_b"]).mean()))
        assert row["p_value"] == pytest.approx(float(test.pvalue), rel=1e-9, abs=1e-12)
        assert (row["low"], row["high"]) == pytest.approx((float(low), float(high)))
    family = [r for r in data["rows"] if r["p_value"] is not None]
    holm = multipletests([r["p_value"] for r in family], method="holm")[1]
    assert [r["p_adjusted"] for r in family] == pytest.approx(list(holm), abs=1e-12)
    holm = multipletests([r["p_regression"] for r in family], method="holm")[1]
    assert [r["p_regression_adjusted"] for r in family] == pytest.approx(list(holm), abs=1e-12)


def set_status(database_url: str, run: str, status_of: dict[str, str]) -> tuple[int, int]:
    """Set the status of ``run``'s judgments of some instances (id -> status, score
    cleared); the (pending, failed) rows it changed."""
    store = Store(database_url)
    try:
        info = store.find_run(run)
        assert info is not None
        changed = {"pending": 0, "failed": 0}
        with store.engine.begin() as conn:
            for instance, status in status_of.items():
                stmt = (
                    update(JUDGMENT)
                    .where(J.run_id == info.id, J.instance_id == instance)
                    .values(status=status, score=None)
                )
                changed[status] += conn.execute(stmt).rowcount
        return changed["pending"], changed["failed"]
    finally:
        store.close()
