"""The HTML report: self-contained, every figure inline as SVG and written as a file;
exports; and on a run over the FLASK evaluation set (3 models, 2 simulated judges) the
page renders in headless Chromium without console errors, with the radar chart and the
tables on screen."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner

from flask_eval.cli.report import register
from flask_eval.core.types import DIFFICULTY_LABELS
from flask_eval.report.breakdown import Aggregation, flask_breakdown
from flask_eval.report.document import Report, ranked_models, with_intervals
from flask_eval.report.html import render
from flask_eval.report.svg import RADAR_OVERLAY_MAX, difficulty_curves, radar
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage.store import Store
from tests.helpers import cli_env, flask_eval
from tests.reference import from_records
from tests.report.test_bootstrap import ABILITY, SKILLS, _store_run, random_records

CHROMIUM = os.environ.get("FLASK_EVAL_CHROMIUM", "/usr/bin/chromium")
MODELS = ("gpt4", "alpaca_13b", "vicuna_13b")
SUBSET = 400  # instances of the FLASK set judged here (the full set takes ~50 s)
NS = "{http://www.w3.org/2000/svg}"


def _cli() -> click.Group:
    group = click.Group()
    register(group)
    return group


def _report(args: list[str]) -> str:
    result = CliRunner().invoke(_cli(), ["report", *args, "--quiet"])
    # a run that leaves judgments pending has a partial report: exit 1, said on stderr
    partial = result.exit_code == 1 and "is in progress" in result.stderr
    assert result.exit_code == 0 or partial, result.output
    return result.stdout


def check_self_contained(page: Path, judges: int) -> list[str]:
    """No external resource, no image: every figure an inline SVG, and the same drawing
    written next to the page as an SVG file; returns the figures."""
    text = page.read_text(encoding="utf-8")
    assert "<link" not in text and not re.search(r"<script[^>]*\ssrc=", text)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//|file:)""", text)
    assert "<img" not in text
    figures = re.findall(r"<svg .*?</svg>", text)
    # four figures per judge plus the agreement matrix, each also written as a file
    assert len(figures) == 4 * judges + 1
    files = re.findall(r"<figcaption>[^<]*\(([^()<]+\.svg)\)</figcaption>", text)
    assert len(files) == len(figures) == len(set(files))
    assert sorted(files) == sorted(p.name for p in page.parent.glob("*.svg"))
    assert not list(page.parent.glob("*.png"))
    assert len(list(page.parent.glob("radar-*.svg"))) == judges
    for figure, name in zip(figures, files, strict=True):
        data = (page.parent / name).read_text(encoding="utf-8")
        root = ET.fromstring(data.encode())  # a well-formed file of its own, sized in pixels
        assert data.startswith("<?xml") and root.tag == f"{NS}svg"
        width, height = root.get("viewBox", "").split()[2:]
        assert (root.get("width"), root.get("height")) == (width, height)
        # the file is the page's drawing: only its size attributes differ
        assert re.sub(r'width="[^"]+" height="[^"]+"', "", data.split("\n")[1], count=1) == (
            re.sub(r'width="100%" style="[^"]+"', "", figure, count=1)
        )
    for section in ("Overall", "Skills", "Abilities", "Domains", "Difficulty", "Judge agreement"):
        assert f">{section}</h2>" in text
    return figures


@pytest.mark.e2e
def test_html_report_is_self_contained_and_exports_every_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    store = Store(url)
    _store_run(store, seed=12)
    store.close()
    monkeypatch.setenv("FLASK_EVAL_DATABASE_URL", url)
    out = tmp_path / "html"
    _report(["stats", "--format", "html", "--out", str(out), "--ensemble", "median:2"])
    check_self_contained(out / "report.html", judges=3 + 1)

    csv_dir = tmp_path / "csv"
    _report(["stats", "--format", "csv", "--out", str(csv_dir), "--bootstrap", "100"])
    heads = {p.name: p.read_text().splitlines()[0] for p in csv_dir.glob("*.csv")}
    assert heads["rows.csv"] == "model,judge,dimension,key,mean,n,n_na,n_failed,ci_low,ci_high"
    assert heads["comparisons.csv"].startswith("judge,model_a,model_b,")
    assert heads["agreement.csv"].startswith("judge_a,judge_b,skill,n,pearson,")
    # plain numbers in every file (numpy 2 would repr its scalars as np.float64(2.66...))
    text_fields = {
        "model",
        "judge",
        "dimension",
        "key",
        "model_a",
        "model_b",
        "judge_a",
        "judge_b",
        "skill",
    }
    for name in ("rows.csv", "comparisons.csv", "agreement.csv"):
        records = list(csv.DictReader(io.StringIO((csv_dir / name).read_text())))
        assert records, name
        for record in records:
            for field, value in record.items():
                if field not in text_fields and value != "":
                    float(value)  # raises on anything but a plain number
    stdout_csv = _report(["stats", "--format", "csv", "--bootstrap", "100"])
    assert stdout_csv == (csv_dir / "rows.csv").read_text()
    payload = json.loads(_report(["stats", "--format", "json", "--bootstrap", "100"]))
    assert set(payload) >= {"run", "rows", "comparisons", "agreement", "bootstrap"}
    rows = list(csv.DictReader(io.StringIO(stdout_csv)))
    assert len(payload["rows"]) == len([r for r in rows if r["dimension"] != "progress"])
    table = _report(["stats", "--bootstrap", "100"])
    assert "95% CI" in table and "Paired comparisons" in table
    none = json.loads(_report(["stats", "--format", "json", "--bootstrap", "0"]))
    assert all(r["ci_low"] is None and r["ci_high"] is None for r in none["rows"])


def _judge_data(name: str, spec: str, **sampling: object) -> dict[str, object]:
    """A judge as ``core.types.JudgeConfig.to_data()`` records it in a run config."""
    data: dict[str, object] = {
        "name": name,
        "spec": spec,
        "rpm": None,
        "tpm": None,
        "max_in_flight": None,
        "price": {"input": 2.5, "output": 10.0},
        "max_tokens": None,
        "temperature": None,
        "retry_max_tokens": None,
    }
    return data | sampling


def test_every_report_format_says_how_each_judge_was_sampled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-live-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    config = [
        # a spec never carries a key; if one did, it would be redacted
        _judge_data("openai/a", f"openai/a@http://127.0.0.1:9/v1?k={secret}"),
        _judge_data("anthropic/b", "anthropic/b", max_tokens=2048, temperature=0.7),
    ]
    url = f"sqlite:///{tmp_path / 'j.db'}"
    store = Store(url)
    _store_run(store, seed=4, judge_config=config)
    store.close()
    monkeypatch.setenv("FLASK_EVAL_DATABASE_URL", url)
    table = _report(["stats", "--bootstrap", "50"])
    head = table[: table.index("Leaderboard")]
    assert (
        "openai/a: openai/a@http://127.0.0.1:9/v1?k=***, max_tokens 1024, temperature 0.0" in head
    )
    assert "anthropic/b: anthropic/b, max_tokens 2048, temperature provider default" in head
    payload = json.loads(_report(["stats", "--format", "json", "--bootstrap", "50"]))
    assert payload["judges"] == [
        {
            "name": "openai/a",
            "spec": "openai/a@http://127.0.0.1:9/v1?k=***",
            "max_tokens": 1024,
            "temperature": 0.0,
        },
        {
            "name": "anthropic/b",
            "spec": "anthropic/b",
            "max_tokens": 2048,
            "temperature": "provider default",
        },
    ]
    out = tmp_path / "html"
    # the page's text is under test here; its figures are the previous test's (drawing
    # them would take most of this test's time)
    monkeypatch.setattr("flask_eval.report.html.all_figures", lambda report, progress: [])
    _report(["stats", "--format", "html", "--out", str(out), "--bootstrap", "50"])
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<b>anthropic/b</b>: anthropic/b, max_tokens 2048, temperature provider default" in page
    assert "max_tokens 1024, temperature 0.0" in page
    for text in (table, json.dumps(payload), page):
        assert secret not in text
    assert "price" not in head and "rpm" not in head  # sampling only


def make_report(models: int, judges: tuple[str, ...] = ("j1", "j2")) -> Report:
    """A report of random judgments of ``models`` models, without a store."""
    names = tuple(f"model-{k}" for k in range(models))
    records = random_records(41, instances=60, models=names, judges=judges)
    table = from_records(records)
    rows = with_intervals(Aggregation(table, flask_breakdown(ABILITY)).rows(), {})
    return Report(
        run="r",
        rows=rows,
        models=list(table.models),
        judges=list(table.judges),
        skills=list(SKILLS.names),
        abilities=list(SKILLS.abilities),
        ability_of=ABILITY,
        domains=list(table.domains),
    )


def _texts(figure: str) -> list[str]:
    """The visible texts of an SVG figure (their tooltips left out)."""
    texts = ET.fromstring(figure).iter(f"{NS}text")
    return [(e.text or "") + "".join(c.tail or "" for c in e) for e in texts]


@pytest.mark.parametrize("models", [3, RADAR_OVERLAY_MAX, 8])
def test_radar_runs_from_1_at_the_centre_and_stays_legible(models: int) -> None:
    report = make_report(models)
    root = ET.fromstring(radar(report, "j1"))
    groups = [e for e in root.iter(f"{NS}g") if e.get("class") == "axes"]
    # one chart for a few models; past RADAR_OVERLAY_MAX one small radar per model
    assert len(groups) == (1 if models <= RADAR_OVERLAY_MAX else models)
    for axes in groups:  # a ring per score 1..5: the centre is 1, not 0
        assert len(axes.findall(f"{NS}circle")) == 5
    texts = _texts(radar(report, "j1"))
    assert [t for t in texts if t in {"1", "2", "3", "4", "5"}][:5] == ["1", "2", "3", "4", "5"]
    if models > RADAR_OVERLAY_MAX:
        # small multiples, best first under this judge, each titled with its overall mean
        overall = {
            r.model: r.mean for r in report.rows if r.judge == "j1" and r.dimension == "overall"
        }
        titles = [t for t in texts if t.startswith("model-")]
        best_first = sorted(overall, key=lambda m: -(overall[m] or 0))
        assert titles == [f"{m} ({overall[m]:.2f})" for m in best_first]


def test_difficulty_figure_and_tables_name_flask_levels_and_models_come_best_first() -> None:
    report = make_report(3)
    text = " ".join(_texts(difficulty_curves(report, "j1")))
    for level, label in enumerate(DIFFICULTY_LABELS, start=1):
        assert f"{level} {label}" in text
    page = render(report, [])
    for level, label in enumerate(DIFFICULTY_LABELS, start=1):
        assert f">{level} {label}</td>" in page
    ranked = ranked_models(report.rows, report.models)
    assert ranked != sorted(ranked)  # so that the order below is the ranking's
    overall = page[page.index('id="overall"') : page.index('id="skills"')]
    positions = [overall.index(f">{m}</td>") for m in ranked]
    assert positions == sorted(positions)  # the overall table: best first


def _subset(flask_data: Path, tmp_path: Path, n: int) -> tuple[Path, list[str]]:
    lines = (flask_data / "evaluation_set" / "flask_evaluation.jsonl").read_text().splitlines()
    kept = lines[:n]
    ids = {json.loads(line)["idx"] for line in kept}
    instances = tmp_path / "instances.jsonl"
    instances.write_text("\n".join(kept) + "\n")
    responses = []
    for model in MODELS:
        source = flask_data / "model_output" / "outputs" / f"{model}.jsonl"
        mine = [x for x in source.read_text().splitlines() if json.loads(x)["question_id"] in ids]
        path = tmp_path / f"{model}.jsonl"
        path.write_text("\n".join(mine) + "\n")
        responses.append(f"{model}={path}")
    return instances, responses


def _chromium(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'chromium-profile'}",
            "--enable-logging=stderr",
            "--v=0",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _console_errors(stderr: str) -> list[str]:
    return [
        line
        for line in stderr.splitlines()
        if "Uncaught" in line or "ERROR:CONSOLE" in line or "Not allowed to load" in line
    ]


@pytest.mark.slow
def test_flask_run_report_renders_in_headless_chromium(
    flask_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not (os.path.exists(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        pytest.skip(f"Chromium not installed ({CHROMIUM}); `apt-get install -y chromium`")
    instances, responses = _subset(flask_data, tmp_path, SUBSET)
    url = f"sqlite:///{tmp_path / 'flask.db'}"
    env = cli_env(url)
    with running_simulator(SimConfig(seed=1)) as sim:
        args = ["run", "--instances", str(instances), "--run", "flask", "--quiet"]
        for spec in responses:
            args += ["--responses", spec]
        args += ["--judge", f"openai/sim-a@{sim.openai_base_url}"]
        args += ["--judge", f"anthropic/sim-b@{sim.anthropic_base_url}"]
        flask_eval(*args, env=env, timeout=600)
    monkeypatch.setenv("FLASK_EVAL_DATABASE_URL", url)
    out = tmp_path / "report"
    _report(["flask", "--format", "html", "--out", str(out)])
    page = out / "report.html"
    check_self_contained(page, judges=2)

    shot = tmp_path / "report.png"
    result = _chromium([f"--screenshot={shot}", "--window-size=1400,3000", page.as_uri()], tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert not _console_errors(result.stderr), _console_errors(result.stderr)
    dom = _chromium(["--dump-dom", page.as_uri()], tmp_path)
    assert dom.returncode == 0 and not _console_errors(dom.stderr)
    loaded = re.search(r'data-figures="(\d+)/(\d+)"', dom.stdout)
    assert loaded and loaded.group(1) == loaded.group(2) == str(4 * 2 + 1)
    assert "<table>" in dom.stdout and "radar-01-" in dom.stdout

    from PIL import Image

    pixels = np.asarray(Image.open(shot).convert("RGB"), dtype=np.int16)
    assert pixels.shape == (3000, 1400, 3)
    # the radar chart is on screen: the models' line colours (tab10 blue, orange, green)
    for rgb in ((31, 119, 180), (255, 127, 14), (44, 160, 44)):
        assert (np.abs(pixels - rgb).sum(axis=2) < 30).sum() > 200, rgb
    # and so is text of the tables: many dark pixels in the top part of the page
    assert (pixels[:1500].sum(axis=2) < 150).sum() > 5000
    keep = os.environ.get("FLASK_EVAL_ARTIFACTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / "report-screenshot.png")
        shutil.copytree(out, Path(keep) / "report", dirs_exist_ok=True)
