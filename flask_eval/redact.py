"""Keep secrets out of the database, logs, reports and error messages."""

from __future__ import annotations

import logging
import os
import re

_SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD)$", re.IGNORECASE)
_KEY_PATTERNS = re.compile(
    r"(sk-[A-Za-z0-9_\-]{8,}|sk-ant-[A-Za-z0-9_\-]{8,}|Bearer\s+[A-Za-z0-9._\-]{8,})"
)
_URL_PASSWORD = re.compile(
    r"(?P<scheme>[a-z][a-z0-9+.\-]*://)(?P<user>[^:/@\s]*):(?P<pw>[^@/\s]+)@"
)


def secret_values() -> list[str]:
    """Values of environment variables that look like secrets (longest first)."""
    values = {v for k, v in os.environ.items() if _SECRET_ENV.search(k) and len(v) >= 6}
    return sorted(values, key=len, reverse=True)


def redact(text: str) -> str:
    """``text`` with API keys, bearer tokens and URL passwords replaced by ``***``."""
    if not text:
        return text
    for value in secret_values():
        text = text.replace(value, "***")
    text = _KEY_PATTERNS.sub("***", text)
    return _URL_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:***@", text)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts every record's final message."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


def install_log_redaction() -> None:
    """Redact secrets from every handler of the root logger (and ones added later)."""
    root = logging.getLogger()
    for handler in root.handlers:
        handler.addFilter(RedactingFilter())
    root.addFilter(RedactingFilter())
