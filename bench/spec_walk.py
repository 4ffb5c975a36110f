"""The walk of a judge's spec from `flask-eval run` to the provider call.

Runs one small in-process run (the shipped examples, one judge on the simulator) under a
profiler and records every call of a function of the package that receives the judge: an
argument that is the judge's spec string, an object whose ``spec`` is it, or a container
or dataclass holding one (three levels deep). The calls on the thread that ran the
command are the producer side; the calls on the executor's threads up to the first
call into the provider's SDK are the worker side. For each side it prints the stops
(calls), the files they cross, the hand-offs from one file to another and the returns to a
file already left. The worker side is the executor's threads (named ``flask-eval-...``);
the producer side is the rest, and ends where the run's calls are handed to the
transport (``dispatch_open``):

    PYTHONPATH=$PWD .venv/bin/python -m bench.spec_walk [--list]

The count depends on the code only (the run is the same each time); ``--list`` prints
each stop as ``file:function``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("core", "rubrics", "storage", "report", "producer", "workers", "simulator", "app")
PACKAGE_DIRS = tuple(str(ROOT / d) + os.sep for d in (*LAYERS, "viewer", "flask_eval"))
SIMULATOR = str(ROOT / "simulator") + os.sep
CUT = "dispatch_open"  # the producer hands the run's calls to its transport
EXAMPLES = ROOT / "flask_eval" / "examples"


@dataclass
class Walk:
    """The stops of one side, in call order."""

    stops: list[tuple[str, str]] = field(default_factory=list)  # (file, function)

    def files(self) -> int:
        return len({f for f, _ in self.stops})

    def hops(self) -> int:
        """Hand-offs from one file to another."""
        return sum(a[0] != b[0] for a, b in zip(self.stops, self.stops[1:], strict=False))

    def returns(self) -> int:
        """Changes of file to one the walk had already left."""
        seen: set[str] = set()
        back = 0
        previous = None
        for f, _ in self.stops:
            if f != previous:
                if f in seen:
                    back += 1
                seen.add(f)
                previous = f
        return back


def _carries(value: Any, spec: str, depth: int = 3) -> bool:
    if isinstance(value, str):
        return value == spec
    if getattr(value, "spec", None) == spec:
        return True
    if depth == 0:
        return False
    if isinstance(value, dict):
        return any(_carries(v, spec, depth - 1) for v in value.values())
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_carries(v, spec, depth - 1) for v in list(value)[:64])
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return any(
            _carries(getattr(value, f.name, None), spec, depth - 1)
            for f in dataclasses.fields(value)
        )
    return False


class Tracer:
    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.producer = Walk()
        self.worker = Walk()
        self.sdk_reached = False
        self.dispatched = False

    def __call__(self, frame: FrameType, event: str, _arg: Any) -> None:
        on_main = not threading.current_thread().name.startswith("flask-eval-")
        if event != "call" or (self.sdk_reached and not on_main):
            return
        path = frame.f_code.co_filename
        if not on_main and "openai" + os.sep in path and "site-packages" in path:
            caller = frame.f_back
            if caller is not None and caller.f_code.co_filename.startswith(PACKAGE_DIRS):
                self.sdk_reached = True
            return
        if not path.startswith(PACKAGE_DIRS) or path.startswith(SIMULATOR):
            return
        code = frame.f_code
        args = [frame.f_locals.get(n) for n in code.co_varnames[: code.co_argcount]]
        args += [frame.f_locals.get(n) for n in code.co_varnames[code.co_argcount :][:4]]
        if on_main and code.co_name == CUT:
            self.dispatched = True
        if on_main and self.dispatched:
            return
        if any(_carries(a, self.spec) for a in args):
            walk = self.producer if on_main else self.worker
            walk.stops.append((os.path.relpath(path, ROOT), code.co_name))


@contextmanager
def _profiled(tracer: Tracer) -> Iterator[None]:
    threading.setprofile(tracer)
    sys.setprofile(tracer)
    try:
        yield
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


def walk() -> tuple[Walk, Walk]:
    from click.testing import CliRunner

    from flask_eval.cli import main
    from flask_eval.simulator.config import SimConfig
    from flask_eval.simulator.testing import running_simulator

    with tempfile.TemporaryDirectory() as tmp, running_simulator(SimConfig(seed=1)) as sim:
        spec = f"openai/sim-gpt@{sim.openai_base_url}"
        env = {
            "FLASK_EVAL_DATABASE_URL": f"sqlite:///{tmp}/walk.db",
            "OPENAI_API_KEY": "sk-walk",
        }
        args = [
            "run",
            "--instances",
            str(EXAMPLES / "instances.jsonl"),
            "--responses",
            f"model_a={EXAMPLES / 'model_a.jsonl'}",
            "--judge",
            spec,
            "--run",
            "walk",
            "--limit",
            "1",
            "--quiet",
        ]
        tracer = Tracer(spec)
        with _profiled(tracer):
            result = CliRunner().invoke(main, args, env=env, prog_name="flask-eval")
        if result.exit_code != 0:
            raise SystemExit(f"the run failed (exit {result.exit_code}): {result.output}")
    return tracer.producer, tracer.worker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print each stop")
    listing = parser.parse_args().list
    producer, worker = walk()
    for side, w in (("producer", producer), ("worker", worker)):
        print(
            f"{side}: {len(w.stops)} stops in {w.files()} files, {w.hops()} hand-offs "
            f"({w.returns()} returns to a file already left)"
        )
        if listing:
            for f, fn in w.stops:
                print(f"  {f}:{fn}")


if __name__ == "__main__":
    main()
