"""Raters' sign-in tokens: made at random, stored only as their SHA-256, compared in
constant time. A token is shown once (``flask-eval raters add``); the store keeps its
hash, so a copy of the store signs no one in. Session cookies are hashed alike."""

from __future__ import annotations

import hashlib
import hmac
import secrets

__all__ = ["hash_token", "new_token", "same"]

#: random bytes of a token (its text is about 43 URL-safe characters)
TOKEN_BYTES = 32


def new_token() -> str:
    """A fresh random token, URL-safe (it travels in a link's fragment)."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def hash_token(token: str) -> str:
    """The SHA-256 of ``token``, in hex: what the store keeps."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def same(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` are equal, in a time that does not depend on where they
    differ."""
    return hmac.compare_digest(
        a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass")
    )
