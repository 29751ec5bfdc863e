"""Links for a long-lived service: each peer linked whenever it is up, relinked after it comes back.

:class:`~vfl.transport.network.NetworkTransport` links a run's parties once and
fails for good when a peer goes.  A service (``vfl serve``) outlives its peers'
restarts, so :class:`ServiceTransport` keeps the same links (one mutually
authenticated TLS 1.3 connection per linked pair, the same handshake, hello and
frames, the same rule for who dials: of two peers the name that sorts first)
but never gives up on a peer:

* a role it dials is redialled, with a growing pause (``redial`` seconds, from
  the first to the last), whenever its link is down;
* a role that dials it is accepted at any time, by a listener that stays open
  (with the same bounds on silent connections and handshakes); a peer that comes
  back with a valid certificate replaces its old link, which is closed;
* every change is reported to ``on_change(peer, link)``: a new :class:`_Link`
  when the peer is linked, ``None`` when its link failed (the reason is in
  :attr:`ServiceTransport.errors`).

Nothing above the links is kept: whoever uses them (:mod:`vfl.serving`) runs
its own hello on every new link and answers each message on the link it came by.
"""

from __future__ import annotations

import math
import threading
import time

from vfl.errors import HandshakeError, PeerError
from vfl.transport.network import NetworkSettings, NetworkTransport, _Link
from vfl.transport.tls import TLSFiles

#: Pause before redialling a peer: the first, then doubling up to the last (seconds).
DEFAULT_REDIAL = (0.1, 2.0)
#: Seconds one dialling attempt may take (connect, TLS handshake and hello).
_ATTEMPT = 5.0


class ServiceTransport(NetworkTransport):
    """The links of one long-lived party; :meth:`start` returns at once, links come and go.

    Parameters
    ----------
    role, addresses, tls, settings, peers
        As for :class:`~vfl.transport.network.NetworkTransport`.
    on_change : callable, optional
        ``on_change(peer, link)``: ``link`` is the new :class:`_Link`, or ``None`` when
        the peer's link failed.  Called from the transport's threads, under its lock:
        keep it short (start a thread for any work).
    redial : (float, float)
        The first and the longest pause between two attempts to reach a peer.
    """

    _persistent = True

    def __init__(self, role: str, addresses: dict, tls: TLSFiles, settings: NetworkSettings | None = None,
                 peers=None, on_change=None, redial: tuple[float, float] = DEFAULT_REDIAL):
        super().__init__(role, addresses, tls, settings, peers)
        self.on_change = on_change
        self.redial = redial
        #: why each peer is not linked, when it is not (the last failure, in plain words)
        self.errors: dict[str, str] = {peer: "not connected yet" for peer in self.peers}
        self._incoming = {p for p in self.peers if p < self.role}
        self._wake = {p: threading.Event() for p in self.peers if p > self.role}
        self._threads: list[threading.Thread] = []

    def start(self) -> "ServiceTransport":
        """Open the listener (if a peer dials this party) and start dialling; returns at once.

        Raises
        ------
        ConfigurationError
            This party's address is taken (another process listens there).
        """
        if self._incoming:
            self._expected = set(self._incoming)
            self._listener = self._listen()
            self._spawn(self._accept_all, (self._listener, math.inf, []), f"vfl-{self.role}-accept")
        for peer in self._wake:
            self._spawn(self._keep_dialling, (peer,), f"vfl-{self.role}-dial-{peer}")
        return self

    def _spawn(self, target, args, name: str) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def linked(self, peer: str) -> _Link | None:
        """``peer``'s live link, or ``None``."""
        with self._lock:
            link = self.links.get(peer)
        return link if link is not None and link.failure is None else None

    # ---- dialling, again and again
    def _keep_dialling(self, peer: str) -> None:
        first, longest = self.redial
        pause = first
        while not self._closed:
            if self.linked(peer) is not None:
                self._wake[peer].wait(1.0)          # set when the link fails
                self._wake[peer].clear()
                pause = first
                continue
            try:
                self._dial(peer, time.monotonic() + min(_ATTEMPT, self.settings.connect_timeout))
                continue
            except (HandshakeError, PeerError) as exc:
                if self._closed:
                    return
                with self._lock:
                    self.errors[peer] = str(exc)
            except Exception as exc:  # noqa: BLE001 - the dialler must go on whatever one attempt met
                with self._lock:
                    self.errors[peer] = f"{type(exc).__name__}: {exc}"
            self._wake[peer].wait(pause)
            self._wake[peer].clear()
            pause = min(longest, pause * 2)

    # ---- the hooks of NetworkTransport
    def _accepts(self, role: str) -> bool:
        return role in self._incoming and role not in self._admitting

    def _add_link(self, role: str, sock) -> None:
        old = self.links.get(role)
        if old is not None:             # the peer came back before this side saw its old link fail
            old._fail(PeerError(f"{role} connected again; its previous connection was closed"))
        link = _Link(self.role, role, sock, self.settings.max_frame_bytes, on_failure=self._lost)
        self.links[role] = link
        self.errors.pop(role, None)
        if self.on_change is not None:
            self.on_change(role, link)

    def _lost(self, link: _Link) -> None:
        peer = link.peer
        with self._lock:
            if self.links.get(peer) is not link:
                return
            del self.links[peer]
            self.errors[peer] = str(link.failure)
            if peer in self._incoming:
                self._expected.add(peer)
            if self.on_change is not None and not self._closed:
                self.on_change(peer, None)
        if peer in self._wake:
            self._wake[peer].set()

    def close(self, linger: float = 0.0) -> None:
        """Close every link and the listener; the diallers stop."""
        for event in self._wake.values():
            event.set()
        super().close(linger=linger)
