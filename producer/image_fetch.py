"""Fetching an image URL, only when the user allows it (``--fetch-images``) and only from
the hosts they name (``--image-hosts``): docs/design/images.md, threat model.

* Only ``http`` and ``https``; no credentials in the URL; the host must be on the list
  (exactly, case-insensitively).
* The host is resolved once; every address it resolves to must be public (not loopback,
  private, link-local, multicast, reserved) unless the list names that address itself
  (``--image-hosts 127.0.0.1``). The connection goes to the address checked, with the
  host name sent as ``Host`` and as the TLS server name (certificates are verified
  against it): a DNS answer that changes between the check and the connection (DNS
  rebinding) is never used.
* No proxy from the environment (it would resolve the name itself); no cookies.
* Redirects are followed only to the same scheme, host and port (at most 3); any other
  is refused.
* The size is capped while streaming (a ``Content-Length`` over the cap is refused
  before the body); one timeout bounds connecting and each read.
* The type is what the bytes are (``producer.images``); a ``Content-Type`` naming
  another image type, or text, is refused.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urljoin, urlsplit

import httpx2

from flask_eval.core.text import clip
from flask_eval.producer.image_rules import SVG_REFUSED, ImageOptions, ImageProblem

__all__ = ["fetch_image"]

MAX_REDIRECTS = 3
_HINT = "--fetch-images with --image-hosts HOST,... fetches from the hosts named"


def _host_of(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ImageProblem(f"URL {clip(url)}: only http and https are fetched")
    if parts.username or parts.password:
        raise ImageProblem(f"URL {clip(url)}: credentials in an image URL are not allowed")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        raise ImageProblem(f"URL {clip(url)}: invalid host or port") from None
    if not host:
        raise ImageProblem(f"URL {clip(url)}: no host")
    return scheme, host.lower(), port or (443 if scheme == "https" else 80)


def _resolve(host: str, port: int, allowed: tuple[str, ...]) -> str:
    """The address to connect to: the first the host resolves to, every one of them
    public unless the allowlist names that very address."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ImageProblem(f"host {clip(host)} does not resolve: {exc}") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    for address in addresses:
        ip = ipaddress.ip_address(address.split("%")[0])
        if not ip.is_global and address not in allowed and host not in _literal(allowed):
            raise ImageProblem(
                f"host {clip(host)} resolves to {address}, a non-public address "
                "(loopback, private, link-local, multicast or reserved); name the address "
                "itself in --image-hosts to allow it"
            )
    if not addresses:
        raise ImageProblem(f"host {clip(host)} does not resolve")
    return addresses[0]


def _literal(allowed: tuple[str, ...]) -> set[str]:
    """The allowlist's entries that are IP addresses themselves."""
    found: set[str] = set()
    for entry in allowed:
        try:
            found.add(str(ipaddress.ip_address(entry.strip("[]"))))
        except ValueError:
            continue
    return found


def _claimed(content_type: str | None) -> str | None:
    if not content_type:
        return None
    media = content_type.split(";")[0].strip().lower()
    if media == "image/svg+xml":
        raise ImageProblem(SVG_REFUSED)
    if media.startswith("image/") and media != "image/svg+xml":
        return "image/jpeg" if media == "image/jpg" else media
    if media in ("application/octet-stream", "binary/octet-stream", ""):
        return None
    raise ImageProblem(f"the server says the body is {clip(media, 60)}, not an image")


def fetch_image(url: str, options: ImageOptions) -> tuple[bytes, str | None]:
    """The bytes at ``url`` and the image type the server claims (None: none), within
    the options' limits; ImageProblem for anything refused."""
    if not options.fetch:
        raise ImageProblem(f"image URL {clip(url)} given while fetching is off; {_HINT}")
    allowed = tuple(h.strip().lower() for h in options.hosts if h.strip())
    scheme, host, port = _host_of(url)
    if host not in allowed and host.strip("[]") not in allowed:
        raise ImageProblem(f"image URL {clip(url)}: host {clip(host)} is not in --image-hosts")
    address = _resolve(host.strip("[]"), port, allowed)
    with httpx2.Client(trust_env=False, follow_redirects=False, timeout=options.timeout) as client:
        current = url
        for _ in range(MAX_REDIRECTS + 1):
            found = _get(client, current, address, options.max_bytes)
            if isinstance(found, tuple):
                return found
            target = urljoin(current, found)
            if _host_of(target) != (scheme, host, port):
                raise ImageProblem(
                    f"image URL {clip(url)} redirects to another host or scheme "
                    f"({clip(target)}); redirects are followed on the same host only"
                )
            current = target
    raise ImageProblem(f"image URL {clip(url)}: more than {MAX_REDIRECTS} redirects")


def _get(
    client: httpx2.Client, url: str, address: str, max_bytes: int
) -> tuple[bytes, str | None] | str:
    """One GET of ``url`` at ``address``: (body, claimed type), or a redirect's target."""
    parts = urlsplit(url)
    netloc = f"[{address}]" if ":" in address else address
    if parts.port:
        netloc += f":{parts.port}"
    pinned = parts._replace(netloc=netloc).geturl()
    headers = {
        "Host": parts.netloc.rpartition("@")[2],
        "Accept": "image/*",
        "Accept-Encoding": "identity",  # the bytes as stored: no decompression bomb
    }
    extensions = {"sni_hostname": parts.hostname} if parts.scheme.lower() == "https" else {}
    try:
        with client.stream("GET", pinned, headers=headers, extensions=extensions) as response:
            if response.is_redirect:
                location = response.headers.get("location")
                if not location:
                    raise ImageProblem(f"image URL {clip(url)}: a redirect without a Location")
                return str(location)
            if response.status_code != 200:
                raise ImageProblem(f"image URL {clip(url)}: HTTP {response.status_code}")
            claimed = _claimed(response.headers.get("content-type"))
            length = response.headers.get("content-length")
            if length is not None and length.isdigit() and int(length) > max_bytes:
                raise ImageProblem(
                    f"image URL {clip(url)}: {int(length):,} bytes, more than the "
                    f"{max_bytes:,} allowed (--max-image-mb raises the limit)"
                )
            body = bytearray()
            for chunk in response.iter_raw():
                body += chunk
                if len(body) > max_bytes:
                    raise ImageProblem(
                        f"image URL {clip(url)}: more than the {max_bytes:,} bytes allowed "
                        "(--max-image-mb raises the limit)"
                    )
            return bytes(body), claimed
    except httpx2.TimeoutException:
        raise ImageProblem(f"image URL {clip(url)}: timed out") from None
    except httpx2.HTTPError as exc:
        raise ImageProblem(f"image URL {clip(url)}: {clip(str(exc), 120)}") from None
