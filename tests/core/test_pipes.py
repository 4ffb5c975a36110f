"""A standard stream whose reader went away (`| tee` ended by the same Ctrl-C) takes the
closed pipe in its stride: the write succeeds, and every later one goes to the null
device (the end to end promise: tests/app/test_interrupt.py)."""

from __future__ import annotations

import io
import os

from flask_eval.core.pipes import ForgivingFile


def test_a_write_to_a_closed_pipe_is_taken_in_stride() -> None:
    read, write = os.pipe()
    try:
        text = io.TextIOWrapper(io.BufferedWriter(ForgivingFile(write, "w", closefd=False)),
                                encoding="utf-8", line_buffering=True)  # fmt: skip
        text.write("read\n")
        assert os.read(read, 100) == b"read\n"
        os.close(read)  # the reader is gone
        text.write("progress 10%\n")  # BrokenPipeError before
        text.write("summary\n")
        text.flush()
        assert os.path.realpath(f"/proc/self/fd/{write}") == os.devnull
    finally:
        os.close(write)
