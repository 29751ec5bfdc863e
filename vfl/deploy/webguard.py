"""What every HTTP face of a party (``vfl serve``, ``vfl board``) shares at its boundary.

* :func:`is_loopback` — whether an address is this machine only: a face without a
  credential listens nowhere else;
* :func:`read_token_file` / :func:`check_token` — a bearer token from a file only its owner
  may read (never from the command line, which ``ps`` shows to every user);
* :class:`Boundary` — an ASGI middleware that answers only requests whose ``Host`` names
  this service (an IP address, ``localhost``, this machine's names, or a name the operator
  allowed: a page on another site that rebinds its DNS name to this address is refused, 421)
  and puts the security headers on every response (no framing, no referrer, no sniffing, and
  a content-security policy allowing this origin's scripts and styles only).  A service that asks every
  request for a bearer token may leave the ``Host`` check to its reverse proxy (which passes its upstream's
  name): a rebinding page holds no token.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import re
import socket
import stat
from pathlib import Path

from vfl.errors import ConfigurationError
from vfl.transport.network import port_number  # noqa: F401  (the faces' one port check, as the federation's)

#: A token's shortest length, and its alphabet (RFC 6750's b64token).
MIN_TOKEN = 16
_TOKEN = re.compile(r"^[A-Za-z0-9._~+/-]+=*\Z")

#: On every response of a party's HTTP faces.
SECURITY_HEADERS = [
    (b"content-security-policy", b"default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                                 b"img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; "
                                 b"frame-ancestors 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-content-type-options", b"nosniff"),
    (b"cross-origin-resource-policy", b"same-origin"),
]


def digest(token: bytes) -> bytes:
    return hashlib.sha256(token).digest()


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine only (``127.0.0.1``, ``::1``, ``localhost``, a name resolving only there)."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except (OSError, UnicodeError):
        return False
    return bool(addresses) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses)


def check_token(token: str, where: str) -> str:
    if len(token) < MIN_TOKEN or not _TOKEN.match(token):
        raise ConfigurationError(
            f"{where}: a token must be at least {MIN_TOKEN} characters of letters, digits and '-._~+/' (then '=' "
            "padding); make one with: python -c \"import secrets; print(secrets.token_urlsafe(32))\"")
    return token


def read_token_file(path: Path, where: str) -> str:
    """The token in ``path``, refused (naming ``where``) if the file is missing, readable by others or invalid."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        text = str(path)
        if os.sep not in text and len(text) >= MIN_TOKEN and _TOKEN.match(text):   # a token given for its file?
            raise ConfigurationError(f"{where}: no such file, and what was given looks like a token itself (not "
                                     "shown): give the path of a file (mode 0600) holding the token") from None
        raise ConfigurationError(f"{where}: no file {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"{where}: cannot read {path}: {exc}") from None
    if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigurationError(f"{where}: {path} may be read by other users of this machine (mode "
                                 f"{stat.S_IMODE(mode):04o}); make it the owner's only: chmod 600 {path}")
    return check_token(text.strip(), f"{where} ({path})")


def host_names(extra=()) -> set[str]:
    """The names a ``Host`` header may give besides an IP address: ``localhost``, this machine's, ``extra``."""
    names = {"localhost", *(n.lower() for n in extra)}
    for name in (socket.gethostname(), socket.getfqdn()):
        if name:
            names.add(name.lower())
    return names


def host_allowed(host: str | None, names: set[str]) -> bool:
    """Whether a ``Host`` header (``name[:port]``, ``[v6]:port``) names this service."""
    if not host:
        return False
    host = host.strip().lower()
    if host.startswith("["):
        literal = host[1:host.find("]")] if "]" in host else ""
    else:
        literal = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    try:
        ipaddress.ip_address(literal)
        return True                     # an address: a DNS rebinding needs a name
    except ValueError:
        return literal.rstrip(".") in names


class Boundary:
    """ASGI middleware: the ``Host`` check and the security headers (see the module's docstring)."""

    def __init__(self, app, names: set[str], service: str, check_host: bool = True):
        self.app, self.names, self.service, self.check_host = app, set(names), service, check_host

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
        if self.check_host and not host_allowed(host, self.names):
            body = (f"{self.service} answers requests for this machine's addresses and names only; Host "
                    f"{host[:100]!r} is not one of them (a page of another site, through DNS rebinding?). An "
                    "operator allows a name with --allow-host NAME").encode()
            await send({"type": "http.response.start", "status": 421,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                    (b"content-length", str(len(body)).encode()), *SECURITY_HEADERS]})
            await send({"type": "http.response.body", "body": body})
            return None

        async def secured(message):
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers") or []}
                message = dict(message, headers=[*(message.get("headers") or []),
                                                 *(h for h in SECURITY_HEADERS if h[0] not in present)])
            await send(message)

        return await self.app(scope, receive, secured)
