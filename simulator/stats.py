"""The simulator's counters (``GET /stats``) and its time-weighted mean of requests in
flight (pure, no I/O)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

#: the most requests with images :attr:`Stats.seen_images` lists (the counts go on)
MAX_SEEN_REQUESTS = 10_000


@dataclass
class Stats:
    """Counters served by ``GET /stats``."""

    requests: int = 0
    rate_limited: int = 0
    errors: int = 0
    timeouts: int = 0
    garbage: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: of ``prompt_tokens``: read from the prompt cache, written to it (prompt_cache.py)
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    served: int = 0  # answers with a completion, which a provider bills
    refusals: int = 0
    #: answers to prompts that grade turn 2 or later of a conversation
    conversation_turns: int = 0
    html: int = 0
    unauthorized: int = 0
    #: time-weighted mean of the requests in flight, from the first request on
    mean_in_flight: float = 0.0
    #: the seconds that mean covers (from the first request to now)
    in_flight_seconds: float = 0.0
    #: the same mean from the first request to the last request received, and its seconds
    mean_in_flight_sending: float = 0.0
    sending_seconds: float = 0.0
    #: requests past the line of a server with ``slots`` (all of them without), and the most
    serving: int = 0
    max_serving: int = 0
    #: wall-clock times (epoch seconds) of the first request and of the last answer sent
    first_request_at: float = 0.0
    last_answer_at: float = 0.0
    #: images received (in requests that parsed, live or in a batch) and the prompt
    #: tokens they bill by their provider's rule (``core.image_tokens``)
    images: int = 0
    image_tokens: int = 0
    #: per request received with images (the first :data:`MAX_SEEN_REQUESTS`):
    #: ``{"dialect", "model", "batch", "images": [{"sha256", "media_type", "width",
    #: "height", "size", "brightness", "colours", "tokens"}, ...]}``
    seen_images: list[dict[str, Any]] = field(default_factory=list)

    def saw_images(self, record: dict[str, Any], count: int, tokens: int) -> None:
        """Count a request's ``count`` images billing ``tokens`` and keep its record."""
        self.images += count
        self.image_tokens += tokens
        if len(self.seen_images) < MAX_SEEN_REQUESTS:
            self.seen_images.append(record)

    def reset(self) -> None:
        in_flight, serving = self.in_flight, self.serving
        for name in asdict(self):
            if name == "seen_images":
                self.seen_images = []
                continue
            setattr(self, name, type(getattr(self, name))(0))
        self.in_flight = self.max_in_flight = in_flight
        self.serving = self.max_serving = serving


class InFlight:
    """The time-weighted number of requests in flight (its integral over time), also as
    it stood when the last request arrived (while calls were still being sent, the part
    of a run that says whether a client keeps its calls in flight; the tail after it is
    the last wave, which no client can fill)."""

    def __init__(self) -> None:
        self.start: float | None = None
        self.last = 0.0
        self.area = 0.0
        self.arrived = 0.0  # when the last request arrived
        self.arrived_area = 0.0  # the area then

    def change(self, now: float, before: int, arrival: bool = False) -> None:
        if self.start is None:
            self.start = self.last = now
        self.area += before * (now - self.last)
        self.last = now
        if arrival:
            self.arrived, self.arrived_area = now, self.area

    def while_sending(self) -> tuple[float, float]:
        """(mean in flight, seconds) from the first request to the last one to arrive."""
        if self.start is None or self.arrived <= self.start:
            return 0.0, 0.0
        span = self.arrived - self.start
        return self.arrived_area / span, span

    def mean(self, now: float, current: int) -> tuple[float, float]:
        if self.start is None:
            return 0.0, 0.0
        span = now - self.start
        area = self.area + current * (now - self.last)
        return (area / span if span > 0 else float(current)), span
