"""The images a worker sends, kept between messages (docs/design/images.md).

Every judge of every model of an instance sends the instance's images: without a cache a
worker reads the same bytes from the ledger once per message. An image never changes
under its digest (the ledger names it by the SHA-256 of its bytes), so the bytes read are
kept, least recently used first out, within a byte budget; a message's images missing from
the cache are read in one query (``storage.images.run_images``)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Collection

from flask_eval.core.images import Image
from flask_eval.storage.images import run_images
from flask_eval.storage.leasing import WorkerLedger

#: the most image bytes a worker keeps
BUDGET = 256 * 2**20


class ImageCache:
    """Images by (run, digest), their bytes within ``budget``."""

    def __init__(self, store: WorkerLedger, budget: int = BUDGET) -> None:
        self.store = store
        self.budget = budget
        self.reads = 0  # queries made (a test's probe)
        self._kept: OrderedDict[tuple[int, str], Image] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()  # the executor's threads share it

    def images(self, run_id: int, digests: Collection[str]) -> dict[str, Image]:
        """The run's images among ``digests``, by digest (one the run lacks is absent).
        Blocking: run it in a thread."""
        found: dict[str, Image] = {}
        with self._lock:
            for digest in digests:
                kept = self._kept.get((run_id, digest))
                if kept is not None:
                    self._kept.move_to_end((run_id, digest))
                    found[digest] = kept
        missing = [d for d in digests if d not in found]
        if missing:
            read = run_images(self.store, run_id, missing)
            with self._lock:
                self.reads += 1
                for digest, image in read.items():
                    found[digest] = image
                    if (run_id, digest) not in self._kept:
                        self._keep((run_id, digest), image)
        return found

    def _keep(self, key: tuple[int, str], image: Image) -> None:
        if len(image.data) > self.budget:
            return
        self._kept[key] = image
        self._size += len(image.data)
        while self._size > self.budget:
            _, old = self._kept.popitem(last=False)
            self._size -= len(old.data)
