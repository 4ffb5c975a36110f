"""Opening an input file: only regular files, and never a call that can block.

``open()`` on a FIFO blocks until a writer appears (forever, for a user who typed the
wrong path); reading a character device such as ``/dev/zero`` never ends. So the path is
``stat``-ed first and anything but a regular file is refused before it is opened; the
file is then opened non-blocking and checked again with ``fstat``, so a path swapped for
a FIFO between the two calls cannot hang us either.

Every input of a run goes through :func:`open_input` (JSON Lines) or :func:`read_text`
(judges, rubrics and reference files): one place for the rules.

The errors are :class:`core.errors.InputError`, the one error type the CLI
prints as ``error: path[:line]: message`` with exit code 2.
"""

from __future__ import annotations

import codecs
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, TextIO

from flask_eval.core.errors import InputError
from flask_eval.core.text import clip

__all__ = ["MIB", "open_input", "read_text"]

MIB = 1 << 20

_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def _not_regular(mode: int) -> str | None:
    """What kind of file ``mode`` is, when it is not a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory"
    kinds = (
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    kind = next((name for test, name in kinds if test(mode)), "a special file")
    return f"is {kind}, not a regular file"


def open_input(path: str, what: str) -> BinaryIO:
    """Open ``path`` for binary reading if it is a regular file; InputError otherwise.

    ``what`` names the expected content in messages ("a JSON Lines file").
    """
    if "\x00" in path:
        raise InputError(f"invalid path {clip(path)}: it contains a NUL character")
    try:
        kind = _not_regular(os.stat(path).st_mode)
        if kind is not None:
            raise InputError(f"{kind}; expected {what}", path)
        fd = os.open(path, _FLAGS)
    except FileNotFoundError:
        raise InputError("file not found; check the path", path) from None
    except PermissionError:
        raise InputError("cannot read file: permission denied", path) from None
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", path) from None
    try:
        kind = _not_regular(os.fstat(fd).st_mode)
        if kind is not None:
            raise InputError(f"{kind}; expected {what}", path)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_text(path: str, what: str, max_bytes: int) -> str:
    """The whole of a regular UTF-8 file (a leading byte-order mark dropped).

    Files over ``max_bytes`` are refused rather than read: judges and rubric files are
    small, and a limit keeps a wrong path (a log, a dump) from filling the memory.
    """
    with open_input(path, what) as handle:
        try:
            data = handle.read(max_bytes + 1)
        except OSError as exc:
            raise InputError(f"cannot read file: {exc.strerror or exc}", path) from None
    if len(data) > max_bytes:
        size = f"{max_bytes // MIB} MiB" if max_bytes >= MIB else f"{max_bytes} bytes"
        raise InputError(f"file is larger than {size}; expected {what}", path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - data.rfind(b"\n", 0, exc.start)
        raise InputError(
            f"invalid UTF-8 (byte {column} of the line); save the file as UTF-8",
            path,
            line,
        ) from None
    return text.removeprefix(codecs.BOM_UTF8.decode("utf-8"))


@contextmanager
def replaced_whole(path: str | Path) -> Iterator[TextIO]:
    """Write ``path`` whole or not at all: the text goes to ``<path>.part`` (its folder
    made if need be), which replaces ``path`` only once the block ends without an error
    (and is removed if it does not), so a reader never sees half a file."""
    with _part_of(path) as part, part.open("w", encoding="utf-8") as handle:
        yield handle


@contextmanager
def replaced_whole_bytes(path: str | Path) -> Iterator[BinaryIO]:
    """:func:`replaced_whole` for bytes (a compressed file)."""
    with _part_of(path) as part, part.open("wb") as handle:
        yield handle


@contextmanager
def _part_of(path: str | Path) -> Iterator[Path]:
    """``<path>.part``, which replaces ``path`` once the block ends without an error (the
    file written in it closed first) and is removed otherwise."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + ".part")
    try:
        yield part
        os.replace(part, target)
    finally:
        part.unlink(missing_ok=True)
