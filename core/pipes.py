"""Standard output and error that outlive their reader.

``flask-eval run ... 2>&1 | tee log`` and one Ctrl-C: the terminal's SIGINT ends ``tee``
too, and every line written after it (a progress bar's refresh, "interrupted: ...", a
log line, the summary) meets a closed pipe. Python ignores SIGPIPE, so each such write
raises ``BrokenPipeError`` where it happens; raised on the way to waiting for the calls
on the wire, it ended the process before their paid answers were stored.

:func:`outlive_readers` puts the process's standard streams on file objects that take a
closed pipe in their stride: the first write that meets one points the descriptor at the
null device, and that write and every later one succeed, whoever writes (print, click,
tqdm, rich, logging, the interpreter flushing at exit). What the process does is not
changed by where its words go: it drains, stores what it paid for and exits with its own
code.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer


def _to_null(fd: int) -> None:
    """Point ``fd`` at the null device (its reader is gone)."""
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)


class ForgivingFile(io.FileIO):
    """A standard stream's descriptor whose reader may go away."""

    def write(self, data: ReadableBuffer, /) -> int:
        try:
            return super().write(data)
        except OSError as exc:  # BrokenPipeError: EPIPE
            if exc.errno != errno.EPIPE:
                raise
            _to_null(self.fileno())
            return memoryview(data).nbytes  # written, as far as anyone reading can tell


def outlive_readers() -> None:
    """Put ``sys.stdout`` and ``sys.stderr`` on descriptors that survive a closed pipe,
    keeping their encoding and buffering. Streams that are not the interpreter's own
    (a test runner's capture, click's CliRunner) are left as they are. SIGPIPE stays
    ignored (Python's default), so a closed pipe is an error to take in stride, never a
    signal that kills the process."""
    wrapped = False
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None or stream is not getattr(sys, f"__{name}__"):
            continue
        if not isinstance(stream, io.TextIOWrapper):
            continue
        try:
            fd = stream.fileno()
        except (OSError, ValueError):
            continue
        try:
            stream.flush()
        except BrokenPipeError:
            _to_null(fd)
            with contextlib.suppress(OSError):
                stream.flush()  # what it held goes to the null device now
        raw = ForgivingFile(fd, "w", closefd=False)
        # unbuffered as the stream was (python -u, PYTHONUNBUFFERED: each write reaches
        # the reader at once), or buffered as it was
        unbuffered = isinstance(stream.buffer, io.RawIOBase)
        forgiving = io.TextIOWrapper(
            raw if unbuffered else io.BufferedWriter(raw),
            encoding=stream.encoding,
            errors=stream.errors,
            line_buffering=stream.line_buffering,
            write_through=stream.write_through,
        )
        setattr(sys, name, forgiving)
        wrapped = True
    if wrapped and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
