"""The Docker image holds every package the wheel holds: its build stage copies the source
tree (less .dockerignore) and builds the wheel from it, and no package folder, nor any
file of one, is left out (read from the Dockerfile and .dockerignore against the packages
setuptools finds, as pyproject.toml configures it; no Docker needed)."""

from __future__ import annotations

import fnmatch
import json
import os
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from setuptools import find_packages

REPO = Path(__file__).resolve().parent.parent

#: the Dockerfile before the image was built from the wheel: every layer but viewer/
OLD_DOCKERFILE = """\
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md constraints.txt ./
COPY app app
COPY core core
COPY flask_eval flask_eval
COPY producer producer
COPY rubrics rubrics
COPY workers workers
COPY storage storage
COPY report report
COPY simulator simulator
RUN pip install --no-cache-dir -c constraints.txt .
"""


@dataclass
class Stage:
    name: str
    copies: list[list[str]] = field(default_factory=list)  # sources of COPY from the context
    from_stages: list[str] = field(default_factory=list)  # COPY --from=STAGE
    runs: list[str] = field(default_factory=list)


def stages(dockerfile: str) -> list[Stage]:
    """The Dockerfile's stages with their COPY sources and RUN commands."""
    found: list[Stage] = []
    text = dockerfile.replace("\\\n", " ")
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        word = word.upper()
        if word == "FROM":
            parts = rest.split()
            name = parts[2] if len(parts) > 2 and parts[1].upper() == "AS" else str(len(found))
            found.append(Stage(name))
        elif word in ("COPY", "ADD"):
            args = json.loads(rest) if rest.lstrip().startswith("[") else shlex.split(rest)
            flags = [a for a in args if a.startswith("--")]
            paths = [a for a in args if not a.startswith("--")]
            source = next((f.split("=", 1)[1] for f in flags if f.startswith("--from=")), None)
            if source is None:
                found[-1].copies.append(paths[:-1])
            else:
                found[-1].from_stages.append(source)
        elif word == "RUN":
            found[-1].runs.append(rest)
    return found


def ignored(path: str, patterns: list[str]) -> bool:
    """Whether Docker leaves ``path`` (relative, with /) out of the build context: the
    last .dockerignore pattern matching it or a folder above it decides (``!`` keeps)."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    result = False
    for raw in patterns:
        keep = raw.startswith("!")
        pattern = raw.removeprefix("!").strip("/")
        for prefix in prefixes:
            match = fnmatch.fnmatchcase(prefix, pattern)
            if not match and pattern.startswith("**/"):
                tail = pattern[3:]
                match = any(fnmatch.fnmatchcase(p, tail) for p in prefix.split("/")[-1:])
            if match:
                result = not keep
                break
    return result


def copied(path: str, sources: list[list[str]]) -> bool:
    for group in sources:
        for source in group:
            source = source.removeprefix("./").rstrip("/") or "."
            if source == "." or path == source or path.startswith(source + "/"):
                return True
    return False


def package_files() -> list[str]:
    """Every file the wheel is built from: each package setuptools finds (the symbolic
    link into the layer and the layer's files) and its data files, repository-relative."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    include = config["packages"]["find"]["include"]
    data: dict[str, list[str]] = config.get("package-data", {})
    files: list[str] = ["pyproject.toml", "README.md"]
    for package in find_packages(str(REPO), include=include):
        folder = REPO / package.replace(".", "/")
        real = folder.resolve()
        if folder.is_symlink():
            files.append(folder.relative_to(REPO).as_posix())  # the link itself
        assert real.is_relative_to(REPO), f"{package} lives outside the repository"
        globs = ["*.py", *data.get(package, [])]
        for pattern in globs:
            for file in sorted(real.glob(pattern)):
                files.append(file.relative_to(REPO).as_posix())
    return files


def missing_from_the_build(dockerfile: str, dockerignore: str) -> list[str]:
    """The package files the stage that builds the wheel does not receive."""
    built = stages(dockerfile)
    builder = next((s for s in built if any("pip wheel" in r for r in s.runs)), None)
    if builder is None:  # installed straight from the context: the stage that installs
        builder = next(s for s in built if any("pip install" in r for r in s.runs))
    patterns = [
        line.strip()
        for line in dockerignore.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    return [f for f in package_files() if ignored(f, patterns) or not copied(f, builder.copies)]


def test_the_image_is_built_from_every_package_folder() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    dockerignore = (REPO / ".dockerignore").read_text()
    assert missing_from_the_build(dockerfile, dockerignore) == []
    final = stages(dockerfile)[-1]
    builder = next(s for s in stages(dockerfile) if any("pip wheel" in r for r in s.runs))
    # the image installs the wheel that stage built, with the tested versions
    assert builder.name in final.from_stages
    assert any("pip install" in r and ".whl" in r and "-c " in r for r in final.runs)


def test_the_check_sees_a_layer_left_out() -> None:
    """The check is not blind: the old Dockerfile (no viewer/), or a .dockerignore that
    drops a layer, each miss that layer's files."""
    missing = missing_from_the_build(OLD_DOCKERFILE, "")
    assert missing and all(f.startswith("viewer/") for f in missing)
    assert "viewer/server.py" in missing and "viewer/templates/run.html" in missing
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "storage/bundle.py" in missing_from_the_build(dockerfile, ".git\nstorage\n")
    assert "flask_eval/viewer" in missing_from_the_build(dockerfile, "flask_eval/viewer\n")
    assert os.path.islink(REPO / "flask_eval" / "viewer")
