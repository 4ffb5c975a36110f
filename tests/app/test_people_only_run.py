"""A run whose only workers are people (a judges file with just a panel): it plans their
items and ends at once, `status` and `report` work before any rating, and the report shows
the People section once ratings are imported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select

from flask_eval.core.errors import Status
from flask_eval.storage.models import JUDGMENT
from flask_eval.storage.store import Store
from tests.helpers import cli_env, flask_eval

pytestmark = pytest.mark.e2e

J = JUDGMENT.c
SKILLS = ("Factuality", "Readability")
RATERS = ("alice", "bob")
N = 6


def river_instances(path: Path, ids: range, skills: tuple[str, ...] = SKILLS) -> Path:
    """An instances file of ``ids``, each judged on ``skills``, at ``path``."""
    path.write_text(
        "".join(
            json.dumps(
                {
                    "idx": i,
                    "instruction": f"Which river flows through city number {i}?",
                    "answer": f"The river of city {i} is the Lantern river.",
                    "skill": list(skills),
                    "domain": ["Humanities"],
                    "difficulty": "simple lifestyle knowledge",
                }
            )
            + "\n"
            for i in ids
        )
    )
    return path


def inputs(tmp_path: Path) -> list[str]:
    """``--instances`` and ``--responses`` of N instances and one model ``m``."""
    instances = river_instances(tmp_path / "instances.jsonl", range(1, N + 1))
    responses = tmp_path / "m.jsonl"
    responses.write_text(
        "".join(
            json.dumps({"question_id": i, "text": f"City {i} lies on a river."}) + "\n"
            for i in range(1, N + 1)
        )
    )
    return ["--instances", str(instances), "--responses", f"m={responses}"]


def people_rows(database_url: str, run: str) -> list[tuple[str, str, str, str]]:
    """(judge, instance, criterion, status) of the run's rows, sorted."""
    store = Store(database_url)
    try:
        info = store.find_run(run)
        assert info is not None
        stmt = select(J.judge, J.instance_id, J.criterion, J.status).where(J.run_id == info.id)
        with store.engine.connect() as conn:
            return sorted((str(a), str(b), str(c), str(d)) for a, b, c, d in conn.execute(stmt))
    finally:
        store.close()


def test_a_run_of_people_only_plans_their_items_and_reports_their_ratings(
    tmp_path: Path,
) -> None:
    database_url = f"sqlite:///{tmp_path / 'people.db'}"
    env = cli_env(database_url)
    judges = tmp_path / "people.yaml"
    judges.write_text("- spec: human/panel\n  raters: [alice, bob]\n  per_item: 2\n")

    ran = flask_eval("run", *inputs(tmp_path), "--judges", str(judges), "--run", "p", env=env)
    assert ran.returncode == 0
    assert "people: 0 ratings done, 0 flagged, 24 waiting" in ran.stdout

    # every item of both raters waits in the ledger, and nothing else is there
    expected = sorted(
        (f"human/{rater}", str(i), skill, Status.WAITING.value)
        for rater in RATERS
        for i in range(1, N + 1)
        for skill in SKILLS
    )
    assert people_rows(database_url, "p") == expected

    status = flask_eval("status", "p", env=env).stdout
    assert "people: 0 ratings done, 0 flagged, 24 waiting" in status

    before = flask_eval("report", "p", "--quiet", env=env)
    assert before.returncode == 0
    assert "People" not in before.stdout
    assert "nothing to report yet" in before.stderr
    as_json = json.loads(flask_eval("report", "p", "--format", "json", env=env).stdout)
    assert as_json["rows"] == [] and as_json["judges"] == []

    ratings = tmp_path / "ratings.csv"
    ratings.write_text(
        "model,instance,criterion,score,rater\n"
        + "".join(
            f"m,{i},{skill},{1 + (i + k) % 5},{rater}\n"
            for k, rater in enumerate(RATERS)
            for i in range(1, N + 1)
            for skill in SKILLS
        )
    )
    imported = flask_eval("raters", "import", str(ratings), "--run", "p", env=env)
    assert "24 ratings, 24 stored, 0 already in the ledger" in imported.stderr
    assert {row[3] for row in people_rows(database_url, "p")} == {Status.DONE.value}

    status = flask_eval("status", "p", env=env).stdout
    assert "people: 24 ratings done, 0 flagged, 0 waiting" in status
    report = flask_eval("report", "p", "--quiet", env=env).stdout
    assert "\nPeople\n" in report
    # an item of the section: a (model, instance, criterion)
    assert "2 raters (alice, bob): 12 items rated, 12 of them by two raters or more" in report
    assert "Agreement among people" in report
