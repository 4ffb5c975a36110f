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
    env |= {"FLASK_EVAL_DATABASE_URL": f"sqlite:///{tmp_path / 'demo.db'}",
            "FLASK_EVAL_BROKER_URL": None}  # fmt: skip
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
