"""The live view's screen (`flask-eval status --watch`): Rich tables of a
``flask_eval.app.progress.LiveView``, drawn as one frame per refresh.

On a terminal each frame replaces the last in place (Rich's ``Live``; the cursor stays
visible, and the last frame stays on the screen however the view ends: finished,
Ctrl-C, SIGTERM or SIGHUP, an error); anywhere else (a pipe, a file, ``TERM=dumb``)
each frame is printed after the last, so that what is read while a run goes on is
never blank.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from flask_eval.app.progress import LiveView, RunLive
from flask_eval.report.document import cost_text

#: signals that end the view as Ctrl-C does (the screen put back), with exit 128 + N
ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Ended(Exception):
    """The view was ended by ``signum`` (one of :data:`ENDING_SIGNALS`)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def ended_by_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise :class:`Ended` in the view's loop (by default they would
    kill the process with the terminal's cursor hidden); the handlers are put back after."""

    def end(signum: int, _frame: FrameType | None) -> None:
        raise Ended(signum)

    saved = {sig: signal.signal(sig, end) for sig in ENDING_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


class Screen:
    """Where the frames go: drawn in place on a terminal, else one after the other."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console()
        in_place = self.console.is_terminal and not self.console.is_dumb_terminal
        self.live = Live(console=self.console, auto_refresh=False) if in_place else None
        if self.live is not None:
            self.live.start()
            # Live hides the cursor while it draws; shown again at once, so that a view cut
            # off where nothing can put it back (`script` or ssh killed, SIGKILL) never
            # leaves the terminal without one: the frames are drawn over it, as watch(1) does
            self.console.show_cursor(True)

    def draw(self, frame: RenderableType) -> None:
        """Show ``frame`` now (never held back until the view ends)."""
        if self.live is not None:
            self.live.update(frame, refresh=True)
        else:
            self.console.print(frame)
            self.console.file.flush()

    def close(self) -> None:
        """On a terminal: the last frame left on the screen, the cursor shown again."""
        if self.live is not None:
            with contextlib.suppress(OSError):  # a terminal gone (SIGHUP): nothing to put back
                self.live.stop()


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def _run(run: RunLive) -> Table:
    cost = cost_text(run.cost, dict.fromkeys(run.unpriced, "no price"))
    state = "finished" if run.finished else f"{run.pending} left"
    table = Table(
        title=f"run {run.run}: {run.done}/{run.total} done, {run.failed} failed, {state}; {cost}",
        title_justify="left",
    )
    for column in (
        "judge",
        "done",
        "failed",
        "in flight",
        "judg/s",
        "calls/s",
        "ETA",
        "tokens in/out",
        "cost",
        "batches",
    ):
        table.add_column(column, justify="left" if column == "judge" else "right")
    for j in run.judges:
        reasons = ", ".join(f"{r} {n}" for r, n in j.failed_by_reason.items())
        table.add_row(
            j.judge,
            f"{j.done}/{j.total}",
            f"{j.failed}" + (f" ({reasons})" if reasons else ""),
            str(j.in_flight),
            f"{j.judgments_per_s:.1f}",
            f"{j.calls_per_s:.1f}",
            _eta(j.eta_s),
            f"{j.prompt_tokens}/{j.completion_tokens}",
            "unknown" if j.judge in run.unpriced else f"${j.cost:.4f}",
            str(j.open_batches),
        )
    for detail in run.halts:
        table.caption = (table.caption or "") + detail
    return table


def _deleted(run: RunLive) -> Text:
    return Text(f"run {run.run}: deleted (`flask-eval runs delete`) while it was watched")


def view(live: LiveView, interval: float, waiting_for: str | None = None) -> RenderableType:
    """The screen of one refresh: when it was read and how often, each run (or what the
    view waits for while there is none), the live workers."""
    workers = Table(title=f"{len(live.workers)} live worker(s)", title_justify="left")
    for column in ("worker", "host", "pid", "queue", "seen", "in flight", "calls"):
        workers.add_column(
            column, justify="left" if column in ("worker", "host", "queue") else "right"
        )
    for w in live.workers:
        workers.add_row(
            w.name,
            w.host,
            str(w.pid),
            w.queue,
            f"{w.seen_s:.0f}s ago",
            str(w.in_flight),
            str(w.calls),
        )
    head = Text(
        f"flask-eval status --watch: updated {live.at}, every {interval:g} s (Ctrl-C to stop)",
        style="dim",
    )
    if live.runs:
        return Group(head, *(_deleted(r) if r.deleted else _run(r) for r in live.runs), workers)
    wait = f"run {waiting_for} does not exist yet" if waiting_for else "no unfinished run yet"
    return Group(head, Text(f"{wait}: waiting for it to start"), workers)
