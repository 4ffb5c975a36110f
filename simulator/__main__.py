"""``python -m flask_eval.simulator --port 8765 --latency-ms 200 ...`` (the options of
`flask-eval simulate`: simulator/options.py)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from .config import SimConfig
from .options import OPTIONS, Option, config_of, description
from .serving import run


def _bounded(option: Option) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if (option.low is not None and value < option.low) or (
            option.high is not None and value > option.high
        ):
            raise argparse.ArgumentTypeError(f"{value} is not in [{option.low}, {option.high}]")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m flask_eval.simulator", description=description())
    for o in OPTIONS:
        if o.flag:
            p.add_argument(o.name, action="store_true", help=o.help)
        elif o.repeat:
            p.add_argument(o.name, action="append", default=[], metavar=o.metavar, help=o.help)
        else:
            kind = _bounded(o) if o.low is not None or o.high is not None else o.type
            p.add_argument(o.name, type=kind, default=o.default, choices=o.choices, help=o.help)
    return p


def config_from_args(args: argparse.Namespace) -> SimConfig:
    return config_of(vars(args))


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = config_from_args(args)
    except ValueError as exc:
        parser.error(str(exc))
    run(config, args.host, args.port)


if __name__ == "__main__":
    main()
