"""A serving party's connections: one runtime owns them, from start to stop, across peers' restarts.

:class:`Runtime` holds the party's :class:`~vfl.transport.service.ServiceTransport`
(mutual TLS to every peer, redialled or re-accepted whenever a peer comes back)
and gives every new link a thread of its own, which

1. exchanges ``serve_hello`` with the peer (:func:`hello`): the fingerprint of
   the model settings (``[training]``, ``[prediction]``, every party's name and
   role); any difference closes the link with an error naming what differs, shown
   in the party's status until a peer with the same settings comes;
2. hands the link, as a :class:`Channel`, to the party's role
   (:mod:`vfl.serving.label`, :mod:`vfl.serving.feature`,
   :mod:`vfl.serving.coordinator`), which answers or asks over it until it fails.

:meth:`Runtime.status` says, per peer, whether it is up and since when, or why not.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import itertools
import json
import logging
import threading
import time

from vfl.errors import HandshakeError, PeerError, ProtocolError, VFLError
from vfl.deploy.session import check_hello, differences, check_own_certificate
from vfl.serving.messages import FIRST_PROTOCOL, PROTOCOL
from vfl.transport.message import Message, decode, encode, parse_json
from vfl.transport.service import ServiceTransport

log = logging.getLogger("vfl.serving")
#: Seconds a new link has for its ``serve_hello``.
HELLO_TIMEOUT = 10.0
_POLL = 0.5


class PeerUnavailable(PeerError):
    """A peer that a round needs is not linked (or its link failed during the round)."""

    def __init__(self, peer: str, why: str):
        super().__init__(f"party {peer} is unavailable: {why}")
        self.peer = peer


class Channel:
    """One live link to ``peer``: named messages, and (at the label party) requests answered by round.

    Parameters
    ----------
    role, peer : str
    link : vfl.transport.network._Link
    send_timeout : float
    """

    def __init__(self, role: str, peer: str, link, send_timeout: float):
        self.role, self.peer, self.link = role, peer, link
        self.send_timeout = send_timeout
        self._pending: dict[int, cf.Future] = {}
        self._lock = threading.Lock()
        self.closed = False
        #: the peer's ``serve_hello`` fields, once exchanged
        self.hello: dict = {}

    def send(self, name: str, kind: str, **fields) -> None:
        self.link.send(encode(Message(name, kind, -1, fields)), self.send_timeout)

    def recv(self, timeout: float) -> Message | None:
        """The next message, or ``None`` if none came within ``timeout``; :class:`PeerError` once the link failed."""
        try:
            frame = self.link.recv(timeout)
        except PeerError:
            if self.link.failure is None:
                return None
            raise
        try:
            return decode(frame)
        except ProtocolError as exc:
            raise ProtocolError(f"{self.peer} sent a malformed message: {exc}") from None

    # -- requests (the label party) ---------------------------------------------------------
    def request(self, round_id: int, name: str, kind: str, **fields) -> cf.Future:
        """Send ``name`` for round ``round_id``; the future gets the answer (a message) or the link's failure."""
        future: cf.Future = cf.Future()
        with self._lock:
            if self.closed:
                future.set_exception(PeerUnavailable(self.peer, "its link closed"))
                return future
            self._pending[round_id] = future
        try:
            self.send(name, kind, round=round_id, **fields)
        except VFLError as exc:
            self.forget(round_id)
            future.set_exception(PeerUnavailable(self.peer, str(exc)))
        return future

    def forget(self, round_id: int) -> None:
        """Stop waiting for round ``round_id`` (it ended): a late answer is dropped."""
        with self._lock:
            self._pending.pop(round_id, None)

    def dispatch(self) -> None:
        """Hand every answer to the request of its round, until the link fails; then fail what still waits."""
        try:
            while True:
                message = self.recv(_POLL)
                if message is None:
                    continue
                round_id = message.fields.get("round")
                with self._lock:
                    future = self._pending.pop(round_id, None) if isinstance(round_id, int) else None
                if future is not None and not future.done():
                    future.set_result(message)
        except VFLError as exc:
            self.close(PeerUnavailable(self.peer, str(exc)))

    def close(self, exc: BaseException) -> None:
        with self._lock:
            self.closed = True
            pending, self._pending = list(self._pending.values()), {}
        for future in pending:
            if not future.done():
                future.set_exception(exc)


def serving_settings(config) -> dict:
    """What every serving party must agree on: the wire protocol (:data:`~vfl.serving.messages.PROTOCOL`), the
    names and roles, the model family and what the rounds' arithmetic depends on: for a linear model the key
    size, fixed point, packing and the declared score bound; for a split network the fixed point.

    Training-only settings (iterations, learning rate...) are left out: a model version
    trained with others is served by the same running parties.
    """
    shared = {"task": "serve", "protocol": PROTOCOL,
              "roles": {name: entry.role for name, entry in sorted(config.parties.items())},
              "model": config.family.model or "linear"}       # the credit pipeline serves a linear model
    if config.family.dealer:
        shared["training"] = {"frac_bits": config.training.frac_bits}
    elif config.family.coordinator:
        t = config.training
        shared["training"] = {"key_bits": t.key_bits, "insecure": t.insecure, "frac_bits": t.frac_bits,
                              "packing": t.packed_prediction, "score_bound": t.score_bound}
    return shared


def serving_coordinator(config) -> str | None:
    """The coordinator the serving parties link to, or None: a linear model's (it decrypts), a split network's
    with two feature parties or more (it deals the masks); trees, and a split network with one feature party,
    are served without one."""
    if not config.family.coordinator or (config.family.dealer and len(config.roster.features) < 2):
        return None
    return config.roster.coordinator


def hello(channel: Channel, config, **extra) -> dict:
    """Exchange ``serve_hello`` with the peer; return its fields.

    Raises
    ------
    HandshakeError
        The peer speaks another serving protocol (another vfl release), or its serving settings differ
        (:func:`serving_settings`; the message lists the differences).
    ProtocolError, PeerError
        A malformed hello, a link that failed, or no hello within :data:`HELLO_TIMEOUT`.
    """
    shared = serving_settings(config)
    text = json.dumps(shared, sort_keys=True, separators=(",", ":"))
    mine = {"fingerprint": hashlib.sha256(text.encode()).hexdigest(), "shared": text}
    channel.send("serve_hello", "public", **mine, **extra)
    message = channel.recv(HELLO_TIMEOUT)
    if message is None:
        raise PeerError(f"{channel.peer} sent no hello within {HELLO_TIMEOUT:g} s")
    if message.name != "serve_hello":
        raise ProtocolError(f"{channel.peer} sent {message.name!r} instead of its hello")
    check_hello(channel.role, channel.peer, message)
    check_protocol(channel.role, channel.peer, message["shared"])
    if message["fingerprint"] != mine["fingerprint"]:
        raise HandshakeError(f"the model settings differ between {channel.role} and {channel.peer}: "
                             f"{differences(shared, message['shared'], channel.role, channel.peer)}; every party "
                             "must serve with the same federation file's parties and [training] key settings")
    return message.fields


def check_protocol(role: str, peer: str, theirs_json: str) -> None:
    """The peer's hello must name this party's :data:`~vfl.serving.messages.PROTOCOL`.

    A hello that names none comes from a release that spoke ``vfl-serve/1``.
    Unreadable settings are left to the fingerprint's comparison.

    Raises
    ------
    HandshakeError
        Naming both protocols: the parties run different vfl releases.
    """
    try:
        theirs = parse_json(str(theirs_json).encode("utf-8"), "settings", max_depth=4, max_items=1024,
                            max_containers=64)
    except ProtocolError:
        return
    if not isinstance(theirs, dict):
        return
    spoken = theirs.get("protocol", FIRST_PROTOCOL)
    if spoken != PROTOCOL:
        spoken = spoken if isinstance(spoken, str) and spoken.isprintable() and len(spoken) <= 64 else "unknown"
        raise HandshakeError(f"party {peer} speaks the serving protocol {spoken} and party {role} {PROTOCOL}: "
                             "they run different vfl releases; run the same release at every serving party")


class Runtime:
    """Party ``role``'s links to its serving peers, kept up for as long as the party runs.

    Parameters
    ----------
    config : FederationConfig
    role : str
        This party's name.
    peers : iterable of str
        Whom it links to: the label party to every other party, a feature party to
        the label party and (linear models) the coordinator, the coordinator to all.
    on_link : callable
        ``on_link(channel)``, in the link's own thread once the hellos agree (see
        :func:`hello`, with ``hello_fields(peer)`` added to this party's hello);
        returns when it is done with the link (the link has failed).
    hello_fields : callable, optional
        ``hello_fields(peer) -> dict``: what this party adds to its hello to ``peer``.
    """

    def __init__(self, config, role: str, peers, on_link, hello_fields=None):
        self.config, self.role, self.peers = config, role, tuple(sorted(peers))
        self.on_link = on_link
        self.hello_fields = hello_fields or (lambda peer: {})
        self._state = {peer: ("down", time.time(), "not connected yet") for peer in self.peers}
        self._lock = threading.Lock()
        self._serial = itertools.count()
        self.transport: ServiceTransport | None = None

    def start(self) -> "Runtime":
        check_own_certificate(self.config, self.role)
        self.transport = ServiceTransport(self.role, self.config.addresses(), self.config.tls(self.role),
                                          self.config.network, peers=self.peers, on_change=self._changed)
        self.transport.start()
        return self

    def _changed(self, peer: str, link) -> None:
        if link is None:
            why = self.transport.errors.get(peer, "its link failed")
            log.warning("party %s: lost %s: %s", self.role, peer, why)
            self._set(peer, "down", why)
            return
        self._set(peer, "connecting", "exchanging hellos")
        threading.Thread(target=self._serve, args=(peer, link), daemon=True,
                         name=f"vfl-serve-{self.role}-{peer}-{next(self._serial)}").start()

    def _serve(self, peer: str, link) -> None:
        channel = Channel(self.role, peer, link, self.config.network.send_timeout)
        try:
            channel.hello = hello(channel, self.config, **self.hello_fields(peer))
            self._set(peer, "up", "")
            self.on_link(channel)
        except VFLError as exc:
            self._set(peer, "down", str(exc))
            channel.close(PeerUnavailable(peer, str(exc)))
            link._fail(PeerError(str(exc)))
        except Exception as exc:  # noqa: BLE001 - a bug must close the link (it relinks), not leave it half-served
            log.exception("party %s: internal error on the link to %s", self.role, peer)
            self._set(peer, "down", f"internal error ({type(exc).__name__}: {exc})")
            link._fail(PeerError(f"internal error serving {peer}"))

    def _set(self, peer: str, state: str, why: str) -> None:
        with self._lock:
            if state == "down" and self._state[peer][0] == "down" and why:
                self._state[peer] = ("down", self._state[peer][1], why)     # still down: keep "since"
            else:
                self._state[peer] = (state, time.time(), why)

    def mark(self, peer: str, state: str, why: str = "") -> None:
        """The role's own word on a peer (e.g. "up" once a feature party loaded the current model)."""
        self._set(peer, state, why)

    def status(self) -> dict[str, dict]:
        """Per peer: ``state`` ("up", "connecting" or "down"), ``since`` (seconds ago) and ``error`` when not up."""
        now = time.time()
        with self._lock:
            state = dict(self._state)
        errors = self.transport.errors if self.transport else {}
        out = {}
        for peer, (what, since, why) in state.items():
            entry = {"state": what, "since_s": round(now - since, 3)}
            if what != "up":
                entry["error"] = why or errors.get(peer, "")
            out[peer] = entry
        return out

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
