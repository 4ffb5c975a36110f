"""Paid answers waiting for the database, on local disk.

While the database is away, a worker keeps every paid answer and outcome it could not
write in memory (its write-behind retries) and also here, one JSON Lines file per spill,
fsynced, so that not even a kill -9 during an outage loses what was paid for. A file
records which database it belongs to (a one-way tag of its URL) and is replayed into that
database only: by the worker once the write succeeded (it is then deleted), or by the
next worker process that starts on the same host and database.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import uuid
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from flask_eval.core.errors import Status
from flask_eval.storage.records import CallRecord, Outcome, as_stored
from flask_eval.storage.store import Store

log = logging.getLogger("flask_eval.worker")


def database_tag(url: str) -> str:
    """Which database a spool file belongs to, without holding its URL (or password)."""
    return hashlib.sha256(b"flask-eval/spool\0" + url.encode()).hexdigest()[:16]


class Spool:
    def __init__(self, folder: Path, database_url: str) -> None:
        self.folder = folder
        self.tag = database_tag(database_url)

    def save(self, calls: Sequence[CallRecord], outcomes: Sequence[Outcome]) -> Path:
        """Write one spill durably; returns its file (delete it with :meth:`drop`). What is
        written is cleaned as the ledger keeps it (``storage.records.as_stored``): no secret
        of the environment reaches the worker's disk either."""
        calls, outcomes = as_stored(calls, outcomes)
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self.folder / f"{self.tag}-{os.getpid()}-{uuid.uuid4().hex[:12]}.jsonl"
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            for c in calls:
                f.write(json.dumps({"call": asdict(c)}, ensure_ascii=False) + "\n")
            for o in outcomes:
                f.write(json.dumps({"outcome": {**asdict(o), "status": o.status.value}}) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return path

    @staticmethod
    def drop(path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

    def replay(self, store: Store) -> int:
        """Write every spill of this database left by a process that died; returns the
        paid answers replayed. Each file is taken by renaming it first, so two workers
        starting together never replay one file twice (replays are idempotent anyway)."""
        if not self.folder.is_dir():
            return 0
        replayed = 0
        for path in sorted(self.folder.glob(f"{self.tag}-*.jsonl")):
            if _alive(int(path.name.split("-")[1])):
                continue  # its worker still holds these answers and writes them itself
            mine = path.with_suffix(f".replay-{os.getpid()}")
            try:
                os.rename(path, mine)
            except FileNotFoundError:
                continue  # another worker took it
            calls, outcomes = load(mine)
            try:
                store.write(calls, outcomes)
            except Exception:
                os.rename(mine, path)  # left for the next attempt
                raise
            self.drop(mine)
            replayed += len(calls)
            log.warning("replayed %d paid answers kept on disk during an outage", len(calls))
        return replayed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def load(path: Path) -> tuple[list[CallRecord], list[Outcome]]:
    calls: list[CallRecord] = []
    outcomes: list[Outcome] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            item: dict[str, Any] = json.loads(line)
            if "call" in item:
                calls.append(CallRecord(**item["call"]))
            else:
                data = item["outcome"]
                outcomes.append(Outcome(**{**data, "status": Status(data["status"])}))
    return calls, outcomes
