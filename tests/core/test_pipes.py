"""A standard stream whose reader went away (`| tee` ended by the same Ctrl-C) takes the
closed pipe in its stride: the write succeeds, and every later one goes to the null
device (the end to end promise: tests/app/test_interrupt.py)."""

from __future__ import annotations

import io
import os
import sys

import pytest

from flask_eval.core.pipes import ForgivingFile, outlive_readers


def test_a_write_to_a_closed_pipe_is_taken_in_stride() -> None:
    read, write = os.pipe()
    try:
        text = io.TextIOWrapper(
            io.BufferedWriter(ForgivingFile(write, "w", closefd=False)),
            encoding="utf-8",
            line_buffering=True,
        )
        text.write("read\n")
        assert os.read(read, 100) == b"read\n"
        os.close(read)  # the reader is gone
        text.write("progress 10%\n")  # BrokenPipeError before
        text.write("summary\n")
        text.flush()
        assert os.path.realpath(f"/proc/self/fd/{write}") == os.devnull
    finally:
        os.close(write)


def test_an_unbuffered_stream_stays_unbuffered(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``python -u`` / PYTHONUNBUFFERED (as the tests and many supervisors run it),
    each line written to the wrapped stream reaches the reader at once, not at exit: a
    waiting command's hints are read while it waits."""
    read, write = os.pipe()
    stream = io.TextIOWrapper(
        io.FileIO(write, "w", closefd=False), encoding="utf-8", write_through=True
    )
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(sys, "__stderr__", stream)
    try:
        outlive_readers()
        assert sys.stderr is not stream
        print("no worker alive", file=sys.stderr)  # no flush: a line, then waiting
        os.set_blocking(read, False)
        assert os.read(read, 100) == b"no worker alive\n"
    finally:
        os.close(read)
        os.close(write)
