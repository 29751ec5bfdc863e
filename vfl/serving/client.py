"""A Python client of the label party's scoring API (:mod:`vfl.serving.api`), over httpx.

::

    from vfl.serving.client import ScoringClient

    with ScoringClient("http://127.0.0.1:8080", token=scoring_token) as client:
        result = client.score(["10023", "10024"])             # {"model_version": ..., "results": [...]}
        client.health()                                       # every party's state
    with ScoringClient("http://127.0.0.1:8080", token=admin_token) as admin:
        admin.reload("4")                                     # every party switches to model version 4

A request the service refuses, or a round that failed as a whole, raises
:class:`ScoringError` with the HTTP status and the service's error (its ``code``,
the ``party`` at fault and its ``message``); an id that could not be scored is
not an exception but its own result, with an ``error``.
"""

from __future__ import annotations

import httpx

from vfl.errors import VFLError


class ScoringError(VFLError):
    """The service answered with an error: ``status`` (HTTP), ``code``, ``party`` and the message."""

    def __init__(self, status: int, code: str, message: str, party: str | None = None):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.party = status, code, party


class ScoringClient:
    """Scores ids with a running ``vfl serve`` label party.

    Parameters
    ----------
    url : str
        The service's base URL (``http://127.0.0.1:8080``, or the reverse proxy's ``https://...``).
    timeout : float
        Seconds for each HTTP call (a reload waits for its answer: see :meth:`reload`).
    headers : dict, optional
        Sent with every call (a reverse proxy's own header, say).
    token : str, optional
        The bearer token the service asks for (:mod:`vfl.serving.auth`): the scoring token to score, the
        admin token to reload.
    verify : bool or str
        TLS verification of an ``https`` URL (``True``, or a CA bundle's path).
    """

    def __init__(self, url: str, timeout: float = 30.0, headers: dict | None = None, verify=True,
                 token: str | None = None):
        headers = dict(headers or {})
        if token is not None:
            headers["Authorization"] = f"Bearer {token.strip()}"
        self._http = httpx.Client(base_url=url.rstrip("/"), timeout=timeout, headers=headers, verify=verify)

    def score(self, ids, features=None, deadline_ms: int | None = None) -> dict:
        """``{"model_version", "results"}``: one result per id, in order."""
        body: dict = {"ids": list(ids)}
        if features is not None:
            body["features"] = list(features)
        if deadline_ms is not None:
            body["deadline_ms"] = deadline_ms
        return self._call("POST", "/score", body)

    def health(self) -> dict:
        """The service's health (also when degraded: then ``status`` says so)."""
        response = self._http.get("/health")
        if response.status_code in (200, 503):
            return response.json()
        raise _error(response)

    def reload(self, version: str) -> dict:
        """Have every party switch to model ``version``: ``{"model_version", "previous"}``.

        Waits for the answer however long the switch takes (with private queries a refresh
        rebuilds every feature party's table: minutes for 10^6 rows; the service bounds its own
        waits and answers 503/504 naming the party that did not make it).
        """
        return self._call("POST", "/admin/reload", {"version": str(version)}, wait=True)

    def _call(self, method: str, path: str, body: dict, wait: bool = False) -> dict:
        timeout = httpx.Timeout(self._http.timeout.connect, read=None, write=self._http.timeout.write,
                                pool=self._http.timeout.pool) if wait else httpx.USE_CLIENT_DEFAULT
        response = self._http.request(method, path, json=body, timeout=timeout)
        if response.status_code == 200:
            return response.json()
        raise _error(response)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "ScoringClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _error(response: httpx.Response) -> ScoringError:
    try:
        error = response.json().get("error") or {}
    except ValueError:
        error = {}
    return ScoringError(response.status_code, str(error.get("code", "http_error")),
                        str(error.get("message", response.text[:200])), error.get("party"))
