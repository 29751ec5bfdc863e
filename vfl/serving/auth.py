"""The label party's HTTP credentials: two bearer tokens, and where the API may listen without them.

=====================  ========================================================================
the scoring token      ``POST /score``; also ``GET /metrics``, ``GET /openapi.json`` and the
                       details of ``GET /health``
the admin token        ``POST /admin/reload``; also ``GET /metrics``, ``GET /openapi.json`` and
                       the details of ``GET /health`` (not ``/score``)
no token               ``GET /health``'s ``status`` only
=====================  ========================================================================

Each token comes from a file (``[serving] token_file`` and ``admin_token_file``,
or ``--token-file`` and ``--admin-token-file``) that only its owner may read
(mode 0600), or from the environment (``VFL_SERVE_TOKEN``,
``VFL_SERVE_ADMIN_TOKEN``); never from the command line itself, which ``ps``
shows to every user of the machine.  A token is at least 16 characters of a
bearer token's alphabet (letters, digits, ``-._~+/``, then ``=`` padding), e.g.
``python -c "import secrets; print(secrets.token_urlsafe(32))"``.  Tokens are
compared in constant time (:func:`hmac.compare_digest` of their SHA-256).

Without any token every endpoint is open, which is allowed only on a loopback
address (:func:`check_bind`); with a scoring token but no admin token,
``/admin/reload`` is off (403).
"""

from __future__ import annotations

import hmac
import os
from dataclasses import dataclass
from pathlib import Path

from vfl.deploy.webguard import MIN_TOKEN, check_token as _check_token, digest as _digest  # noqa: F401
from vfl.deploy.webguard import is_loopback, read_token_file as _read_token
from vfl.errors import ConfigurationError

TOKEN_ENV, ADMIN_TOKEN_ENV = "VFL_SERVE_TOKEN", "VFL_SERVE_ADMIN_TOKEN"
#: The paths each right opens (``/health`` is open to everyone; any other path needs one of the rights).
SCORE, ADMIN = "score", "admin"
_NEEDS = {"/score": {SCORE}, "/admin/reload": {ADMIN}}
_HOW = ("give the API a token: token_file = \"score.token\" in [serving.{role}], --token-file FILE or the "
        "environment variable " + TOKEN_ENV + " (and admin_token_file, --admin-token-file or " + ADMIN_TOKEN_ENV
        + " for /admin/reload); see docs/serving.md")


@dataclass(frozen=True)
class Credentials:
    """The SHA-256 of the scoring and the admin token (None: not configured)."""

    score: bytes | None = None
    admin: bytes | None = None

    @classmethod
    def of(cls, score: str | None = None, admin: str | None = None) -> "Credentials":
        """Credentials from the tokens themselves (checked as :func:`load_credentials` checks them)."""
        for name, token in (("the scoring token", score), ("the admin token", admin)):
            if token is not None:
                _check_token(token, name)
        if admin is not None and score is None:
            raise ConfigurationError("an admin token needs a scoring token too (/score would be open to anyone)")
        if score is not None and score == admin:
            raise ConfigurationError("the admin token must differ from the scoring token (whoever scores could "
                                     "switch the model)")
        return cls(*(None if t is None else _digest(t.encode("ascii")) for t in (score, admin)))

    @property
    def required(self) -> bool:
        """Whether the API asks for tokens at all."""
        return self.score is not None

    def rights(self, authorization: bytes | str | None) -> set[str]:
        """The rights an ``Authorization`` header carries: ``{"score"}``, ``{"admin"}`` or none."""
        if isinstance(authorization, str):
            authorization = authorization.encode("latin-1")
        scheme, _, token = (authorization or b"").strip().partition(b" ")
        given = _digest(token.strip()) if scheme.lower() == b"bearer" else b"\0" * 32
        granted = set()
        for right, digest in ((SCORE, self.score), (ADMIN, self.admin)):
            if digest is not None and hmac.compare_digest(given, digest):    # both compared, every time
                granted.add(right)
        return granted

    def refusal(self, method: str, path: str, authorization: bytes | None) -> tuple[int, str, str] | None:
        """Why a request may not reach ``path``: ``(status, code, message)``, or None when it may."""
        if not self.required or path == "/health":
            return None
        rights = self.rights(authorization)
        needs = _NEEDS.get(path, {SCORE, ADMIN})
        if rights & needs:
            return None
        where = f"{method} {path}"
        if not rights:
            said = "no bearer token" if not authorization else "a bearer token this service does not know"
            return 401, "unauthorized", f"{where} needs a bearer token (header 'Authorization: Bearer TOKEN'); " \
                                        f"the request has {said}"
        if ADMIN in needs and self.admin is None:
            return 403, "forbidden", f"{where} is off: no admin token is configured (admin_token_file in " \
                                     f"[serving], --admin-token-file or {ADMIN_TOKEN_ENV})"
        other = "the admin token" if ADMIN in needs else "the scoring token"
        return 403, "forbidden", f"{where} needs {other}; this token does not open it"


def _token(path: Path | None, variable: str, key: str, role: str, environ) -> str | None:
    value = environ.get(variable)
    if path is not None and value:
        raise ConfigurationError(f"party {role}: the token is given twice, by {key} ({path}) and by the environment "
                                 f"variable {variable}; keep one")
    if path is not None:
        return _read_token(path, f"party {role}: {key}")
    if value:
        return _check_token(value.strip(), f"party {role}: the environment variable {variable}")
    return None


def load_credentials(settings, role: str, environ=None) -> Credentials:
    """The API's :class:`Credentials` from ``settings`` (``token_file``, ``admin_token_file``) or the environment.

    Raises
    ------
    ConfigurationError
        A token file missing, unreadable, readable by others or holding no valid token; a token given both
        ways; an admin token without a scoring token, or equal to it.
    """
    environ = os.environ if environ is None else environ
    score = _token(settings.token_file, TOKEN_ENV, "token_file", role, environ)
    admin = _token(settings.admin_token_file, ADMIN_TOKEN_ENV, "admin_token_file", role, environ)
    try:
        return Credentials.of(score, admin)
    except ConfigurationError as exc:
        raise ConfigurationError(f"party {role}: {exc}") from None


def check_bind(host: str, port: int, credentials: Credentials, role: str) -> None:
    """Refuse an HTTP address beyond this machine for an API without tokens (a :class:`ConfigurationError`)."""
    if not credentials.required and not is_loopback(host):
        raise ConfigurationError(f"party {role}: the HTTP API would listen on {host}:{port}, beyond this machine, "
                                 "and it has no token: anyone who reaches it could score, read the metrics and "
                                 "switch the model. " + _HOW.format(role=role) + "; or listen on 127.0.0.1 behind a "
                                 "reverse proxy")
