"""Classify provider errors in one place: SDK exceptions -> JudgeError(reason, ...)."""

from __future__ import annotations

import asyncio
import email.utils
import re
import time
from collections.abc import Mapping

from flask_eval.exceptions import JudgeError
from flask_eval.redact import redact
from storage.models import FailureReason

_DURATION = re.compile(
    r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+)ms)?$"
)


def _duration(value: str) -> float | None:
    """Parse ``x-ratelimit-reset-*`` values such as ``1s``, ``6m0s``, ``250ms``, ``12``."""
    value = value.strip()
    try:
        return float(value)
    except ValueError:
        pass
    m = _DURATION.match(value)
    if not m or not any(m.groups()):
        return None
    h, mins, s, ms = (float(g) if g else 0.0 for g in m.groups())
    return h * 3600 + mins * 60 + s + ms / 1000


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait, from Retry-After(-ms) or the x-ratelimit-reset-* headers."""
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    if "retry-after-ms" in lower:
        try:
            return max(0.0, float(lower["retry-after-ms"]) / 1000)
        except ValueError:
            pass
    if "retry-after" in lower:
        value = lower["retry-after"]
        try:
            return max(0.0, float(value))
        except ValueError:
            try:
                parsed = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                parsed = None
            if parsed is not None:
                return max(0.0, parsed.timestamp() - time.time())
    resets = [
        d
        for k in (
            "x-ratelimit-reset-requests",
            "x-ratelimit-reset-tokens",
            "anthropic-ratelimit-requests-reset",
        )
        if k in lower and (d := _duration(lower[k])) is not None
    ]
    return max(resets) if resets else None


def classify(exc: BaseException) -> JudgeError:
    """Map any exception raised by a provider call to a JudgeError with a fixed reason."""
    if isinstance(exc, JudgeError):
        return exc
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return JudgeError(FailureReason.TIMEOUT, "no answer before the timeout")
    name = type(exc).__name__
    module = type(exc).__module__.split(".")[0]
    detail = redact(f"{module}.{name}: {exc}")[:500]
    if module in ("openai", "anthropic"):
        if "Timeout" in name:
            return JudgeError(FailureReason.TIMEOUT, detail)
        status = getattr(exc, "status_code", None)
        if status is None:  # connection errors, response validation errors
            return JudgeError(FailureReason.PROVIDER_ERROR, detail)
        response = getattr(exc, "response", None)
        headers = dict(response.headers) if response is not None else {}
        body = redact(getattr(response, "text", "") or "")[:2000] if response is not None else ""
        if status == 429:
            return JudgeError(FailureReason.RATE_LIMITED, detail, body, retry_after(headers))
        if status in (401, 403):
            return JudgeError(FailureReason.AUTH, detail, body)
        if status in (408, 409) or status >= 500:
            return JudgeError(FailureReason.PROVIDER_ERROR, detail, body, retry_after(headers))
        return JudgeError(FailureReason.REFUSED, detail, body)
    return JudgeError(FailureReason.INTERNAL, detail)
