"""The live view's screen (`flask-eval status --watch`): Rich tables of a
``flask_eval.app.progress.LiveView``."""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table

from flask_eval.app.progress import LiveView, RunLive
from flask_eval.report.document import cost_text


def start() -> Live:
    """A started Live display on stdout (redrawn by each ``update``)."""
    display = Live(console=Console(), auto_refresh=False, transient=False)
    display.start()
    return display


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def _run(run: RunLive) -> Table:
    cost = cost_text(run.cost, dict.fromkeys(run.unpriced, "no price"))
    state = "finished" if run.finished else f"{run.pending} left"
    table = Table(title=f"run {run.run}: {run.done}/{run.total} done, {run.failed} failed, "
                  f"{state}; {cost}", title_justify="left")  # fmt: skip
    for column in ("judge", "done", "failed", "in flight", "judg/s", "calls/s", "ETA",
                   "tokens in/out", "cost", "batches"):  # fmt: skip
        table.add_column(column, justify="left" if column == "judge" else "right")
    for j in run.judges:
        reasons = ", ".join(f"{r} {n}" for r, n in j.failed_by_reason.items())
        table.add_row(
            j.judge, f"{j.done}/{j.total}", f"{j.failed}" + (f" ({reasons})" if reasons else ""),
            str(j.in_flight), f"{j.judgments_per_s:.1f}", f"{j.calls_per_s:.1f}", _eta(j.eta_s),
            f"{j.prompt_tokens}/{j.completion_tokens}",
            "unknown" if j.judge in run.unpriced else f"${j.cost:.4f}", str(j.open_batches),
        )  # fmt: skip
    for detail in run.halts:
        table.caption = (table.caption or "") + detail
    return table


def view(live: LiveView) -> RenderableType:
    """The screen of one refresh."""
    workers = Table(title=f"{len(live.workers)} live worker(s)", title_justify="left")
    for column in ("worker", "host", "pid", "queue", "seen", "in flight", "calls"):
        workers.add_column(column, justify="left" if column in ("worker", "host", "queue")
                           else "right")  # fmt: skip
    for w in live.workers:
        workers.add_row(w.name, w.host, str(w.pid), w.queue, f"{w.seen_s:.0f}s ago",
                        str(w.in_flight), str(w.calls))  # fmt: skip
    return Group(*(_run(r) for r in live.runs), workers)
