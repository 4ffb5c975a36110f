"""Failure reasons shared by every provider: HTTP status -> reason, Retry-After, and what
is not a provider's (timeouts, bodies that are not JSON, our own bugs).

Each provider maps its SDK's exceptions in its own file (``classify``) and calls these for
what all providers share; nothing here knows an SDK.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import re
import time
from collections.abc import Mapping, Sequence

from flask_eval.core.errors import FailureReason, JudgeError
from flask_eval.core.redact import redact

#: how much of an error body a failure keeps
BODY_LIMIT = 2000

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


#: the standard ways an HTTP answer says when to come back (a provider may add its own)
RESET_HEADERS = ("x-ratelimit-reset-requests", "x-ratelimit-reset-tokens")


def retry_after(
    headers: Mapping[str, str] | None, reset_headers: Sequence[str] = RESET_HEADERS
) -> float | None:
    """Seconds to wait, from Retry-After(-ms), else the latest of ``reset_headers``."""
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
    resets = [d for k in reset_headers if k in lower and (d := _duration(lower[k])) is not None]
    return max(resets) if resets else None


def from_status(
    status: int,
    detail: str,
    headers: Mapping[str, str] | None = None,
    body: str = "",
    reset_headers: Sequence[str] = RESET_HEADERS,
) -> JudgeError:
    """The reason of an HTTP error status, the same for every provider: the one table
    that maps a provider's answer to a failure reason (body kept, truncated, redacted)."""
    body = redact(body or "")[:BODY_LIMIT]
    wait = retry_after(headers, reset_headers)
    if status == 429:
        return JudgeError(FailureReason.RATE_LIMITED, detail, body, wait)
    if status in (401, 403):
        return JudgeError(FailureReason.AUTH, detail, body)
    if status in (408, 409) or status >= 500:
        return JudgeError(FailureReason.PROVIDER_ERROR, detail, body, wait)
    return JudgeError(FailureReason.REFUSED, detail, body)  # 400, 404, 422: not retried


def not_json(body: str) -> JudgeError:
    """An HTTP 200 whose body is not the provider's JSON (an HTML page from a proxy)."""
    return JudgeError(
        FailureReason.PROVIDER_ERROR,
        "the provider answered HTTP 200 with a body that is not its JSON format",
        redact(body or "")[:BODY_LIMIT],
    )


def malformed(what: str, body: str) -> JudgeError:
    """An HTTP 200 whose JSON is not the provider's answer (a list, a message without
    content, a completion without choices): ``what`` says what is wrong, the body is
    kept (redacted, truncated) and the call may be retried."""
    return JudgeError(
        FailureReason.PROVIDER_ERROR,
        f"the provider answered HTTP 200 with JSON that is not an answer: {what}",
        redact(body or "")[:BODY_LIMIT],
    )


def describe(exc: BaseException) -> str:
    """``module.Class: message`` of an exception, redacted and clipped."""
    name = type(exc).__name__
    module = type(exc).__module__.split(".")[0]
    return redact(f"{module}.{name}: {exc}")[:500]


def classify_common(exc: BaseException) -> JudgeError:
    """What every provider shares: our own errors, timeouts, non-JSON bodies; anything
    else is a bug of ours (``internal``). Providers map their SDK's errors first."""
    if isinstance(exc, JudgeError):
        return exc
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return JudgeError(FailureReason.TIMEOUT, "no answer before the timeout")
    if isinstance(exc, json.JSONDecodeError):
        return not_json(exc.doc)
    return JudgeError(FailureReason.INTERNAL, describe(exc))
