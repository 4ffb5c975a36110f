"""`flask-eval compare` as a CI job uses it: simulated models under test answer the
example instances, real `flask-eval run`s judge them against the simulator on SQLite,
and the gate passes an A/A-like pair (the same level, other answers), fails a clearly
weaker model with a JUnit failure, writes a readable Markdown summary, and refuses bad
input with one line, exit code 2 and nothing written."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from tests.conftest import EXAMPLES
from tests.helpers import cli_env, flask_eval

pytestmark = pytest.mark.e2e

#: BASE's model, an equal one (other answers, the same level) and a weaker one
LEVELS = {"base": 3.5, "twin": 3.5, "worse": 1.5}
SCHEMA = Path(__file__).parents[1] / "data" / "junit-10.xsd"


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

    def compare(*args: str) -> tuple[int, str, str]:
        done = flask_eval("compare", *args, env=env, check=False)
        return done.returncode, done.stdout, done.stderr

    # A/A-like: the same level answered anew; the gate passes, the JUnit has no failure
    aa_xml = tmp_path / "ci" / "aa.xml"
    code, _, err = compare("nightly", "aa", "--gate", "--format", "junit", "--out", str(aa_xml))
    assert code == 0, err
    xmlschema.validate(str(aa_xml), str(SCHEMA))
    suite = ET.parse(aa_xml).getroot()
    assert suite.tag == "testsuite" and suite.get("failures") == "0"
    assert int(suite.get("tests", "0")) > 10 and not suite.findall(".//failure")
    assert err.splitlines()[0].startswith("OK: aa vs nightly")

    # a clearly weaker model: exit 1, a <failure> on the overall key at least
    pr_xml = tmp_path / "ci" / "pr.xml"
    code, _, err = compare("nightly", "pr", "--gate", "--format", "junit", "--out", str(pr_xml))
    assert code == 1 and "significant regression" in err.splitlines()[-1]
    xmlschema.validate(str(pr_xml), str(SCHEMA))
    failed = {
        (case.get("classname"), case.get("name"))
        for case in ET.parse(pr_xml).getroot().iter("testcase")
        if case.find("failure") is not None
    }
    assert ("m.overall", "all") in failed
    # without --gate, the same comparison is a report: exit 0
    code, report, _ = compare("nightly", "pr", "--format", "json")
    data = json.loads(report)
    assert code == 0 and data["gate_failed"] and data["regressions"] == len(failed)
    overall = next(r for r in data["rows"] if (r["dimension"], r["key"]) == ("overall", "all"))
    assert overall["effect"] < -1 and overall["n"] == data["rows"][0]["n"]

    # the Markdown summary: headline, regressions first
    code, md, _ = compare("nightly", "pr", "--format", "markdown")
    lines = md.splitlines()
    assert code == 0 and lines[0].startswith("### :x: REGRESSION: pr vs nightly")
    assert lines.index("**Regressions**") < lines.index("**Other tested keys**")
    assert "| m | overall | all |" in md
    # two models of one store named RUN:MODEL; text output
    code, txt, _ = compare("aa:m", "pr:m")
    assert code == 0 and txt.startswith("REGRESSION: pr:m vs aa:m")

    # bad input: one line, exit 2, nothing written
    bad = tmp_path / "ci" / "bad.xml"
    for args in (
        ("nightly", "pr", "--model", "nobody"),
        ("nightly:m", "pr:nobody"),
        ("nightly", "gen"),  # a generation run: no scores
        ("nightly", "nosuchrun"),
    ):
        code, out_text, err = compare(*args, "--gate", "--format", "junit", "--out", str(bad))
        assert code == 2 and out_text == "" and len(err.strip().splitlines()) == 1, (args, err)
        assert err.startswith("error: ") and not bad.exists()
