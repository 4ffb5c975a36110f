"""`flask-eval report RUN --calibrate PEOPLE` on a real SQLite store: a simulated judge,
a rater's labels imported with `raters import` and the same labels as a reference file;
the section in text and JSON, the sample check, `--suggest-labels` read back with its
probabilities, and bad input (one line, exit 2)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from tests.app.test_people_only_run import river_instances
from tests.helpers import cli_env, flask_eval

pytestmark = pytest.mark.e2e

SKILLS = ("Factuality", "Readability")
MODELS = ("m1", "m2")
N = 24


def inputs(tmp_path: Path) -> list[str]:
    instances = river_instances(tmp_path / "instances.jsonl", range(N), SKILLS)
    args = ["--instances", str(instances)]
    for model in MODELS:
        path = tmp_path / f"{model}.jsonl"
        path.write_text(
            "".join(
                json.dumps({"question_id": i, "text": f"{model}: city {i} lies on a river."}) + "\n"
                for i in range(N)
            )
        )
        args += ["--responses", f"{model}={path}"]
    return args


def label(model: str, i: int, skill: str) -> int:
    return 1 + (i * 3 + len(skill) + MODELS.index(model)) % 5


def labelled_cells() -> list[tuple[str, int, str]]:
    """Every second instance, both models and skills."""
    return [(m, i, s) for m in MODELS for i in range(0, N, 2) for s in SKILLS]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], Path]:
    tmp_path = tmp_path_factory.mktemp("calibrate")
    env = cli_env(f"sqlite:///{tmp_path / 'ledger.db'}")
    with running_simulator(SimConfig(seed=4)) as sim:
        judges = tmp_path / "judges.yaml"
        judges.write_text(
            f"- spec: openai/sim-gpt@{sim.openai_base_url}\n  name: sim\n"
            "- spec: human/panel\n  raters: [alice, bob]\n  per_item: 1\n"
        )
        for name, order in (("c", "random"), ("d", "disagreement")):
            ran = flask_eval(
                "run",
                *inputs(tmp_path),
                "--judges",
                str(judges),
                "--run",
                name,
                "--human-first",
                order,
                "--quiet",
                env=env,
            )
            assert ran.returncode == 0, ran.stderr
    ratings = tmp_path / "ratings.csv"
    ratings.write_text(
        "model,instance,criterion,score,rater\n"
        + "".join(f"{m},{i},{s},{label(m, i, s)},alice\n" for m, i, s in labelled_cells())
        + f"m1,1,{SKILLS[0]},N/A,alice\n"
    )
    for name in ("c", "d"):
        imported = flask_eval("raters", "import", str(ratings), "--run", name, env=env)
        assert imported.returncode == 0, imported.stderr
    return env, tmp_path


def test_calibrated_to_a_rater_in_text_json_and_html(run: tuple[dict[str, str], Path]) -> None:
    env, tmp_path = run
    text = flask_eval("report", "c", "--quiet", "--calibrate", "human/alice", env=env)
    assert text.returncode in (0, 1), text.stderr
    assert "Calibrated to human/alice" in text.stdout
    assert "sim on m1:" in text.stdout and "sim on m2:" in text.stdout
    assert "uniform random sample" in text.stdout
    doc = json.loads(
        flask_eval("report", "c", "--format", "json", "--calibrate", "human/alice", env=env).stdout
    )
    section = doc["calibration"]
    assert section["people"] == "human/alice"
    overall = {r["model"]: r for r in section["rows"] if r["dimension"] == "overall"}
    assert set(overall) == set(MODELS)
    for model, row in overall.items():
        labels = [label(m, i, s) for m, i, s in labelled_cells() if m == model]
        assert row["labelled"] == len(labels)
        assert row["people"] == pytest.approx(sum(labels) / len(labels))
        assert row["unlabelled"] == N * len(SKILLS) - len(labels)
        assert row["low"] <= row["estimate"] <= row["high"]
    dims = {r["dimension"] for r in section["rows"]}
    assert {"overall", "skill", "ability", "domain", "difficulty"} <= dims
    # the panel and everyone name the same labels here (bob rated nothing)
    panel = json.loads(
        flask_eval("report", "c", "--format", "json", "--calibrate", "panel", env=env).stdout
    )["calibration"]
    assert panel["rows"] == section["rows"]
    # alice rated half of her queue: with a random queue order, no warning on the order
    assert not any("--human-first" in n for n in section["notes"])
    assert any("said N/A to 1" in n for n in section["notes"])
    page = flask_eval(
        "report",
        "c",
        "--quiet",
        "--format",
        "html",
        "--out",
        str(tmp_path / "html"),
        "--calibrate",
        "human/alice",
        "--bootstrap",
        "0",
        env=env,
    )
    assert page.returncode in (0, 1), page.stderr
    html = (tmp_path / "html" / "report.html").read_text()
    assert "Calibrated to human/alice" in html and "<table id='calibration'>" in html


def test_a_queue_ordered_by_disagreement_and_not_finished_is_warned_about(
    run: tuple[dict[str, str], Path],
) -> None:
    env, _ = run
    out = flask_eval("report", "d", "--quiet", "--calibrate", "human/alice", env=env)
    assert "WARNING: the raters' queues were ordered by the judges' disagreement" in " ".join(
        out.stdout.split()
    )


def test_the_same_labels_as_a_reference_file_with_probabilities(
    run: tuple[dict[str, str], Path],
) -> None:
    env, tmp_path = run
    ref = tmp_path / "labels.csv"
    ref.write_text(
        "model,instance_id,skill,score,probability\n"
        + "".join(f"{m},{i},{s},{label(m, i, s)},0.5\n" for m, i, s in labelled_cells())
    )
    doc = json.loads(
        flask_eval(
            "report",
            "c",
            "--format",
            "json",
            "--reference",
            f"gold={ref}",
            "--calibrate",
            "gold",
            env=env,
        ).stdout
    )
    rows = doc["calibration"]["rows"]
    alice = json.loads(
        flask_eval("report", "c", "--format", "json", "--calibrate", "human/alice", env=env).stdout
    )["calibration"]["rows"]
    # equal probabilities: the same labels and counts as the rater's own, estimates alike
    assert [r["people"] for r in rows] == pytest.approx([r["people"] for r in alice])
    assert [r["labelled"] for r in rows] == [r["labelled"] for r in alice]
    assert [r["unlabelled"] for r in rows] == [r["unlabelled"] for r in alice]
    for weighed, plain in zip(rows, alice, strict=True):
        assert plain["low"] - 0.5 <= weighed["estimate"] <= plain["high"] + 0.5
    assert any("probability" in n for n in doc["calibration"]["notes"])


def test_suggested_labels_are_a_template_read_back_with_probabilities(
    run: tuple[dict[str, str], Path],
) -> None:
    env, tmp_path = run
    template = tmp_path / "todo.csv"
    out = flask_eval(
        "report",
        "c",
        "--quiet",
        "--format",
        "json",
        "--calibrate",
        "human/alice",
        "--suggest-labels",
        "10",
        "--labels-file",
        str(template),
        env=env,
    )
    assert "to label in" in out.stderr
    rows = list(csv.DictReader(io.StringIO(template.read_text())))
    assert rows and all(r["score"] == "" for r in rows)
    labelled = {(m, str(i), s) for m, i, s in labelled_cells()}
    assert not any((r["model"], r["instance_id"], r["skill"]) in labelled for r in rows)
    assert all(0 < float(r["probability"]) <= 1 for r in rows)
    for r in rows:
        r["score"] = "3"
    filled = tmp_path / "filled.csv"
    with filled.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    back = flask_eval(
        "report",
        "c",
        "--format",
        "json",
        "--reference",
        f"new={filled}",
        "--calibrate",
        "new",
        env=env,
        check=False,
    )
    if back.returncode == 2:  # too few drawn for any key: said in one line
        assert len(back.stderr.strip().splitlines()) == 1
    else:
        notes = json.loads(back.stdout)["calibration"]["notes"]
        assert any("probability" in n for n in notes)


@pytest.mark.parametrize(
    ("choice", "said"),
    [("nobody", "unknown people; choose one of"), ("human/bob", "no labels from human/bob")],
)
def test_bad_people_are_one_line_exit_2(
    run: tuple[dict[str, str], Path], choice: str, said: str
) -> None:
    env, _ = run
    out = flask_eval("report", "c", "--quiet", "--calibrate", choice, env=env, check=False)
    assert out.returncode == 2
    assert said in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    if choice == "nobody":
        assert "human/alice" in out.stderr and "panel" in out.stderr


def test_pairwise_win_rates_calibrated_to_a_rater(tmp_path: Path) -> None:
    """A pairwise run: a judge's verdicts in the ledger, a rater's imported; the section
    has the pair's calibrated win rate and says why ratings are not calibrated."""
    from flask_eval.storage.store import Store
    from tests.app.test_raters_io import make_run, set_scores

    db = tmp_path / "pw.db"
    store = Store(f"sqlite:///{db}")
    run = make_run(store, 30, pairs=[("alpha", "beta")], judges=("memory/j1",))
    set_scores(
        store,
        run.id,
        "memory/j1",
        {(str(i), c): 1 + i % 3 for i in range(30) for c in ("Factuality", "Harmlessness")},
    )
    store.close()
    env = cli_env(f"sqlite:///{db}")
    text = "model,model_b,instance,criterion,score,rater\n" + "".join(
        f"alpha,beta,{i},{c},{('A', 'B', 'tie')[(i // 2) % 3]},alice\n"
        for i in range(0, 30, 2)
        for c in ("Factuality", "Harmlessness")
    )
    ratings = tmp_path / "p.csv"
    ratings.write_text(text)
    flask_eval("raters", "import", str(ratings), "--run", "r1", env=env)
    doc = json.loads(
        flask_eval("report", "r1", "--format", "json", "--calibrate", "human/alice", env=env).stdout
    )
    section = doc["calibration"]
    (row,) = section["rows"]
    assert row["model"] == "alpha vs beta" and row["judge"] == "memory/j1"
    assert row["labelled"] == 30 and row["unlabelled"] == 30
    assert 0 <= row["people"] <= 1 and row["low"] <= row["estimate"] <= row["high"]
    assert any("not calibrated" in n for n in section["notes"])


def test_suggested_labels_queued_for_a_rater_weigh_their_ratings(
    run: tuple[dict[str, str], Path],
) -> None:
    """`--suggest-labels` -> `raters queue` -> the rater's ratings -> `--calibrate
    human/NAME --label-probabilities FILE`: the ratings weighed by the template's
    probabilities."""
    env, tmp_path = run
    template = tmp_path / "carol.csv"
    flask_eval(
        "report",
        "c",
        "--quiet",
        "--format",
        "json",
        "--suggest-labels",
        "16",
        "--labels-file",
        str(template),
        "--seed",
        "5",
        env=env,
    )
    cells = list(csv.DictReader(io.StringIO(template.read_text())))
    assert cells
    queued = flask_eval("raters", "queue", "c", str(template), "--rater", "carol", env=env)
    assert f"queued {len(cells)} cells" in queued.stderr
    status = flask_eval("status", "c", env=env).stdout
    assert "waiting" in status
    ratings = tmp_path / "carol-ratings.csv"
    ratings.write_text(
        "model,instance,criterion,score,rater\n"
        + "".join(
            f"{c['model']},{c['instance_id']},{c['skill']},"
            f"{label(c['model'], int(c['instance_id']), c['skill'])},carol\n"
            for c in cells
        )
    )
    imported = flask_eval("raters", "import", str(ratings), "--run", "c", env=env)
    assert f"{len(cells)} stored" in imported.stderr
    out = flask_eval(
        "report",
        "c",
        "--format",
        "json",
        "--calibrate",
        "human/carol",
        "--label-probabilities",
        str(template),
        env=env,
        check=False,
    )
    if out.returncode == 2:  # too few cells drawn for any key
        assert len(out.stderr.strip().splitlines()) == 1
        return
    notes = json.loads(out.stdout)["calibration"]["notes"]
    assert any("weighed by 1 / the probability" in n for n in notes)
    assert not any("have no probability" in n for n in notes)


def test_a_template_cell_not_in_the_run_is_file_line_exit_2(
    run: tuple[dict[str, str], Path],
) -> None:
    env, tmp_path = run
    bad = tmp_path / "bad.csv"
    bad.write_text(
        "model,instance_id,skill,score,probability\nm1,0,Factuality,,0.5\nm9,0,Factuality,,0.5\n"
    )
    out = flask_eval("raters", "queue", "c", str(bad), "--rater", "dave", env=env, check=False)
    assert out.returncode == 2
    assert f"{bad}:3:" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert "human/dave" not in flask_eval("raters", "export", "--run", "c", env=env).stdout
