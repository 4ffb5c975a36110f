"""The state of one simulator app (its settings, random stream, counters, limits and
prompt cache), apart from its request handlers (``simulator.server.Simulator``) so that
the batch endpoints (``simulator.batch_store`` and the ``batches_*`` modules), which the
server routes, use it without importing the server."""

from __future__ import annotations

import asyncio
import random

from .config import SimConfig
from .limits import SlidingWindow
from .prompt_cache import PromptCache
from .stats import InFlight, Stats
from .wire import Dialect, ParsedRequest


class SimState:
    """What one simulator app holds across requests."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.stats = Stats()
        self.rpm = SlidingWindow(config.rpm) if config.rpm is not None else None
        self.tpm = SlidingWindow(config.tpm) if config.tpm is not None else None
        self.flight = InFlight()
        self.slots = asyncio.Semaphore(config.slots) if config.slots is not None else None
        self.prompt_cache = PromptCache(config.cache_prefixes)

    def saw(self, dialect: Dialect, parsed: ParsedRequest, batch: bool = False) -> None:
        """Record the images of a request received (``GET /stats``: ``images``,
        ``image_tokens``, ``seen_images``); ``batch``: it came in a batch."""
        if not parsed.images:
            return
        record = {
            "dialect": dialect,
            "model": parsed.model,
            "batch": batch,
            "images": [image.to_data() for image in parsed.images],
        }
        self.stats.saw_images(record, len(parsed.images), parsed.image_tokens)
