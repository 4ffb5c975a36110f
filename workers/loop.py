"""One persistent event loop per process, in a daemon thread.

Celery has no asyncio pool. Creating a loop per task (``asyncio.run``) breaks SDK
clients reused across loops ("Event loop is closed"), so each worker process keeps one
loop for its whole life, and task threads submit coroutines to it. The loop is created
lazily and re-created in a forked child (the parent's thread does not survive a fork).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_pid: int | None = None


def get_loop() -> asyncio.AbstractEventLoop:
    global _loop, _pid
    with _lock:
        if _loop is None or _pid != os.getpid() or _loop.is_closed():
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def _run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            threading.Thread(target=_run, name="flask-eval-loop", daemon=True).start()
            ready.wait()
            _loop, _pid = loop, os.getpid()
        return _loop


def run_sync(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coro`` on the process loop and wait for its result from this thread."""
    return asyncio.run_coroutine_threadsafe(coro, get_loop()).result(timeout)
