"""Keep secrets out of the database, logs, reports and error messages.

:func:`redact` is the one function every message and log line goes through (the CLI's
error line, :class:`RedactingFilter` on every log handler, the workers' failure details).
It hides:

* the values of environment variables whose names look like secrets
  (``OPENAI_API_KEY``, ``*_TOKEN``, ``*_PASSWORD``, ...);
* API keys and bearer tokens by their shape (``sk-...``, ``Bearer ...``);
* the password of any URL's userinfo (``redis://:pw@host``, ``postgresql://u:pw@h/db``);
* the value of any URL query parameter whose name looks like a credential
  (``redis://h:6379/0?password=pw``, ``https://h/v1?api_key=k``): see
  :func:`looks_like_credential`, which ``workers.judge.JudgeSpec`` also uses to refuse
  such a parameter in a judge's base URL.

What a judge writes goes through :func:`redact_known` instead, on its way into the ledger
(``storage.records.as_stored``, applied by every write of the store, whichever way
the answer came: a live call, a provider batch, the worker's spool): only the exact
values of the environment's secrets (a proxy that echoes the request's ``Authorization``
header puts the key in a paid answer), never the shapes, which a judge may quote from the
response it judges. A judge's key variable is secret whatever its name
(:func:`secret_variable`).

Redaction runs on every log line, so the secret values are cached: the environment is
re-read only when it changed (see :func:`secret_values`).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence

__all__ = [
    "RedactingFilter",
    "install_log_redaction",
    "looks_like_credential",
    "redact",
    "redact_known",
    "secret_values",
    "secret_variable",
]

_SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD)$", re.IGNORECASE)
#: an API key by its shape (``sk-...``, ``sk-ant-...``) where it starts a word: not the
#: ``sk-`` inside a word, such as the worker's own node name ``flask-eval-PID-0@host``
#: (Celery's "flask-eval-12-0@vm ready" is a host name, never a credential)
_KEY_PATTERNS = re.compile(r"((?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{8,}|Bearer\s+[A-Za-z0-9._\-]{8,})")
#: userinfo with a password: everything up to the last '@' before the host is hidden
_URL_PASSWORD = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^:/@\s]*):(?P<pw>[^/\s?#]+)@"
)
#: words that make a query parameter (or a form field) a credential
_CREDENTIAL_WORDS = ("key", "token", "secret", "passw", "pwd", "credential", "signature", "session")
_CREDENTIAL_EXACT = frozenset({"sig", "pass", "pw", "auth", "authorization", "code", "jwt"})
#: ``?name=value`` / ``&name=value`` / ``;name=value`` in a URL's query string
_QUERY_PARAM = re.compile(r"(?P<lead>[?&;](?P<name>[^=&;#\s?]{1,100})=)(?P<value>[^&;#\s'\"<>]+)")


def looks_like_credential(name: str) -> bool:
    """Whether a query parameter called ``name`` probably carries a secret.

    Matches ``api_key``, ``key``, ``apikey``, ``access_token``, ``password``, ``sig``,
    ``X-Amz-Signature``, ...; not ``api-version`` or ``model``.
    """
    folded = re.sub(r"[^a-z0-9]", "", name.lower())
    return folded in _CREDENTIAL_EXACT or any(word in folded for word in _CREDENTIAL_WORDS)


class _SecretCache:
    """The secret values of the environment, recomputed only when it changed.

    ``os.environ`` keeps its data in a dict (``_data``); comparing it with a copy taken
    at the last scan is a C-level loop of pointer comparisons (values that did not
    change are the same objects), far cheaper than matching every name against
    :data:`_SECRET_ENV` again on every log line. Any ``os.environ`` change (set, delete,
    ``putenv`` through it) shows up in that dict.
    """

    def __init__(self) -> None:
        self._snapshot: Mapping[object, object] | None = None
        self._values: list[str] = []
        #: variables secret whatever their names (a judge's key variable: ``secret_variable``)
        self.names: set[str] = set()

    @staticmethod
    def _data() -> Mapping[object, object]:
        data: object = getattr(os.environ, "_data", None)
        if isinstance(data, dict):
            return data
        return dict(os.environ.items())

    def forget(self) -> None:
        self._snapshot = None

    def values(self) -> list[str]:
        data = self._data()
        if data != self._snapshot:
            found = {
                v
                for k, v in os.environ.items()
                if (k in self.names or _SECRET_ENV.search(k)) and len(v) >= 6
            }
            self._values = sorted(found, key=len, reverse=True)
            self._snapshot = dict(data)
        return self._values


_CACHE = _SecretCache()


def secret_variable(name: str) -> None:
    """Hide the value of the environment variable ``name`` too, whatever its name (a
    judge's key variable that does not end in KEY or TOKEN)."""
    if name not in _CACHE.names:
        _CACHE.names.add(name)
        _CACHE.forget()  # rescan on the next call


def secret_values() -> list[str]:
    """Values of environment variables that look like secrets (longest first).

    Cached: recomputed only when ``os.environ`` changed since the last call.
    """
    return list(_CACHE.values())


def _hide_param(match: re.Match[str]) -> str:
    if looks_like_credential(match["name"]):
        return f"{match['lead']}***"
    return match.group()


def redact_known(text: str, secrets: Sequence[str] | None = None) -> str:
    """``text`` with the values of the environment's secrets (:func:`secret_values`, the
    judges' API keys among them) replaced by ``***``, and nothing else changed.

    For what a judge wrote (an answer, a refusal): it is read for scores after this, so
    only exact secret values go; the shapes :func:`redact` also hides (``sk-...``,
    ``?token=...``) may be quoted from a response and stay. ``secrets``: those values,
    when the caller took them once for many texts (:func:`secret_values`).
    """
    if not text:
        return text
    for value in _CACHE.values() if secrets is None else secrets:
        if value in text:
            text = text.replace(value, "***")
    return text


def redact(text: str) -> str:
    """``text`` with API keys, bearer tokens and URL credentials replaced by ``***``."""
    if not text:
        return text
    text = _KEY_PATTERNS.sub("***", redact_known(text))
    if "=" in text:
        text = _QUERY_PARAM.sub(_hide_param, text)
    if "@" in text:
        text = _URL_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:***@", text)
    return text


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
