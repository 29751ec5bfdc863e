"""The in-process transport: the three roles as threads, frames through queues.

Frames still cross as bytes, encoded and decoded exactly as over the network,
so the transcript's sizes are the real ones.  If one role fails, the network is
marked failed and every role waiting on it gets a :class:`~vfl.errors.PeerError`
at once: a failure never leaves the others hanging.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Callable

from vfl.errors import PeerError

_POLL = 0.05


class InProcessNetwork:
    """Queues between every ordered pair of ``roles``."""

    def __init__(self, roles):
        self.roles = tuple(roles)
        self._queues = {(s, r): queue.Queue() for s in self.roles for r in self.roles if s != r}
        self._failure: tuple[str, str] | None = None
        self._lock = threading.Lock()

    def transport(self, role: str) -> "InProcessTransport":
        if role not in self.roles:
            raise ValueError(f"unknown role {role!r}; roles are {self.roles}")
        return InProcessTransport(self, role)

    def fail(self, role: str, reason: str) -> None:
        """Record that ``role`` failed; peers waiting on the network stop."""
        with self._lock:
            if self._failure is None:
                self._failure = (role, reason)

    @property
    def failure(self) -> tuple[str, str] | None:
        return self._failure


class InProcessTransport:
    """One role's end of an :class:`InProcessNetwork`."""

    def __init__(self, network: InProcessNetwork, role: str):
        self.network = network
        self.role = role

    def send(self, receiver: str, frame: bytes) -> None:
        try:
            self.network._queues[(self.role, receiver)].put(bytes(frame))
        except KeyError:
            raise PeerError(f"no link to {receiver!r}") from None

    def recv(self, sender: str, timeout: float | None) -> bytes:
        q = self.network._queues[(sender, self.role)]
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                return q.get(timeout=_POLL)
            except queue.Empty:
                pass
            failure = self.network.failure
            if failure is not None and failure[0] != self.role:
                raise PeerError(f"{failure[0]} failed: {failure[1]}")
            if deadline is not None and time.monotonic() > deadline:
                raise PeerError(f"no message from {sender} within {timeout:g} s")

    def close(self) -> None:
        pass


def run_roles(network: InProcessNetwork, programs: dict[str, Callable[[], object]]) -> dict[str, object]:
    """Run one program per role, each in its own thread; return their results by role.

    The first failure is re-raised (the root cause, not the peers' reactions to it).
    """
    results: dict[str, object] = {}
    errors: list[tuple[float, str, BaseException]] = []

    def run(role, program):
        try:
            results[role] = program()
        except BaseException as exc:  # noqa: BLE001 - reported to the caller below
            errors.append((time.monotonic(), role, exc))
            network.fail(role, f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=run, args=(role, program), name=f"vfl-{role}", daemon=True)
               for role, program in programs.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        errors.sort(key=lambda e: e[0])
        root = next((e for e in errors if not isinstance(e[2], PeerError)), errors[0])
        raise root[2]
    return results
