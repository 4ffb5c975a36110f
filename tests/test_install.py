"""Reproducible installs: every install path pins the tested versions (constraints.txt),
and constraints.txt pins every dependency the project names, at a version its range takes."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parent.parent


def _pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep, f"constraints.txt: {line!r} is not pinned with =="
            pins[_norm(name.split("[")[0])] = version.strip()
    return pins


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_constraints_pin_every_dependency_within_its_range() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    pins = _pins()
    for spec in wanted:
        req = Requirement(spec)
        name = _norm(req.name)
        assert name in pins, f"{req.name} is not pinned in constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {req.name}=={pins[name]}, outside {req.specifier}"
        )


def test_every_install_path_uses_the_constraints() -> None:
    for path in ("README.md", "Makefile", ".ci/run", "scripts/install-test-tools"):
        lines = (REPO / path).read_text().splitlines()
        installs = [ln for ln in lines if ("pip install" in ln and " -e" in ln) or "pip=(" in ln]
        assert installs, f"{path} installs nothing"
        assert all("-c constraints.txt" in ln for ln in installs), (path, installs)


def test_the_quick_start_installs_what_the_software_needs_and_runs_the_demo() -> None:
    """The README's first command installs the project without the test tools (the dev
    extras), then runs the demo; the test command installs those tools itself."""
    readme = (REPO / "README.md").read_text()
    first = next(ln for ln in readme.splitlines() if "pip install" in ln)
    assert "-e ." in first and "dev" not in first and first.endswith("flask-eval demo")
    assert "scripts/install-test-tools" in (REPO / "scripts" / "test").read_text()


def test_the_distribution_adds_one_import_name(tmp_path: Path) -> None:
    """Installing flask-eval adds `flask_eval` and nothing else to a user's imports: the
    wheel holds the layers (workers, producer, ...) inside the namespace, through the
    symbolic links setuptools follows, with their data files, and no other top-level name."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "--disable-pip-version-check",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("flask_eval-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        top_level = zf.read(next(n for n in names if n.endswith(".dist-info/top_level.txt")))
    tops = {name.split("/", 1)[0] for name in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"flask_eval"}
    assert top_level.decode().split() == ["flask_eval"]
    for layer in ("app", "core", "producer", "report", "rubrics", "simulator", "storage"):
        assert f"flask_eval/{layer}/__init__.py" in names, layer
    for data in (
        "flask_eval/workers/providers/openai_judge.py",
        "flask_eval/rubrics/skills.yaml",
        "flask_eval/core/models.toml",
        "flask_eval/storage/migrations/env.py",
        "flask_eval/storage/migrations/versions/0001_v1.py",
        "flask_eval/examples/instances.jsonl",
    ):
        assert data in names, data
