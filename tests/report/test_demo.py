"""`flask-eval demo` shows what FLASK is: the breakdown by skill, ability, domain and
difficulty, compactly, in the terminal (in-process: CliRunner and the in-thread
simulator the demo starts itself)."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from flask_eval.cli import main
from flask_eval.rubrics.skills import load_default

#: the variables the demo sets for its simulator: CliRunner puts them back afterwards
DEMO_ENV = ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")


def test_demo_prints_the_breakdown_compactly(tmp_path: Path) -> None:
    env: dict[str, str | None] = dict.fromkeys(DEMO_ENV)
    env |= {
        "FLASK_EVAL_DATABASE_URL": f"sqlite:///{tmp_path / 'demo.db'}",
        "FLASK_EVAL_BROKER_URL": None,
    }
    result = CliRunner().invoke(main, ["demo"], env=env)
    assert result.exit_code == 0, result.output
    out = result.stdout
    table = out[out.index("Mean by skill, ability, domain and difficulty") :]
    lines = table.splitlines()
    for section in ("Abilities", "Skills", "Domains", "Difficulty"):
        assert f"  {section}" in lines
    skills = load_default()
    for name in (*skills.names, *skills.abilities, "Math", "5 expert level knowledge"):
        row = next(line for line in lines if line.strip().startswith(name))
        values = row[len(row) - 4 * 9 :].split()
        assert len(values) == 4, row  # 2 models x 2 judges
        assert all(re.fullmatch(r"\d\.\d\d|-", v) for v in values), row
    assert "j1 openai/sim-judge-gpt, j2 anthropic/sim-judge-claude" in table
    assert max(len(line) for line in lines) <= 100
    assert len(out.splitlines()) < 90  # compact: the whole demo fits a screen or two


def test_demo_explains_its_call_counts_and_coverage(tmp_path: Path) -> None:
    """The calls planned, dispatched, paid and the requests the simulator saw differ; the
    demo says why, with numbers that add up, and how many instances and judgments each
    model has (model_b answered 25 of the 27 instances)."""
    env: dict[str, str | None] = dict.fromkeys(DEMO_ENV)
    env |= {
        "FLASK_EVAL_DATABASE_URL": f"sqlite:///{tmp_path / 'demo.db'}",
        "FLASK_EVAL_BROKER_URL": None,
    }
    result = CliRunner().invoke(main, ["demo"], env=env)
    assert result.exit_code == 0, result.output
    out = " ".join(result.stdout.split())  # the lines are wrapped
    assert "model_a 27 of 27 instances, 162 judgments" in out
    assert "model_b 25 of 27 instances, 150 judgments" in out
    calls = re.search(r"Calls: (\d+) planned, one per response and judge.*?; (\d+) dispatched", out)
    assert calls is not None and calls.group(1) == calls.group(2) == str((27 + 25) * 2)
    planned = int(calls.group(1))
    paid = re.search(
        r"Paid: (\d+) answers in the ledger: (?:one per call|the (\d+) calls plus "
        r"(\d+) format reminders)",
        out,
    )
    assert paid is not None and int(paid.group(2) or planned) == planned
    assert int(paid.group(1)) == planned + int(paid.group(3) or 0)
    requests = re.search(
        r"Requests: the judges' server saw (\d+) this time: the (\d+) paid "
        r"answers(?: plus (\d+) sent again after a server error)?",
        out,
    )
    assert requests is not None and requests.group(2) == paid.group(1)
    assert int(requests.group(1)) == int(paid.group(1)) + int(requests.group(3) or 0)
