"""The network transport: each pair of roles that talk joined by one mutually authenticated TLS 1.3 link.

Topology
--------
Each role has an address (host, port) and a set of peers: the roles it talks to
(by default every other role; a federation's feature parties talk only to the
label party and the coordinator).  For every linked pair, the role that sorts
*first* dials the other; a role listens only if some peer sorting before it
must reach it.  With roles A, B, C all linked: A dials B and C, B dials C, and B
and C listen.  Dialling retries while the peer is not up yet (connection
refused), until ``connect_timeout``.  A role that is not a peer is refused at
the hello, whatever its certificate.

Handshake
---------
1. TLS 1.3, certificates required on both sides, both signed by the federation
   CA (:mod:`vfl.transport.tls`).
2. Each side reads the peer's role from its verified certificate.  The dialler
   checks it is the role it meant to reach.
3. The dialler sends a hello frame, JSON ``{"vfl": 1, "role": ..., "to": ...}``;
   the listener checks the claimed role is the certificate's, that it is
   expected to dial, not yet connected, and that ``to`` is the listener.  It
   answers ``{"ok": true}`` or ``{"ok": false, "reason": ...}``.  Hellos and
   answers are at most 4096 bytes of strict, flat JSON
   (:func:`vfl.transport.message.parse_json`); anything else is refused.
A refused dialler gets a :class:`~vfl.errors.HandshakeError` at once; a
listener keeps waiting for the genuine peer until ``connect_timeout`` and then
reports what it refused.

The listener hands every accepted connection to its own short-lived thread
(at most 16 at once; more wait in the listen backlog), which must complete the
TLS handshake and the hello within ``handshake_timeout`` (at most what is left
of ``connect_timeout``), however slowly its bytes arrive.  A connection that
never speaks (a port scan, a stalled client) is dropped after that time and
reported as "did not complete the TLS handshake within N s", not as a
certificate problem; it delays no one else.

Frames
------
Every frame is a 4-byte unsigned big-endian length, then that many bytes.  A
length above ``max_frame_bytes`` is a :class:`~vfl.errors.ProtocolError`: the
link is closed and the frame never buffered.  The transport moves bytes only;
what is inside (:mod:`vfl.transport.message`) is the endpoint's business.

Threads
-------
One reader thread per link drains the socket into a per-sender queue, so a
peer's large send never waits on this role's computation, and ``recv(sender,
timeout)`` waits on a queue.  OpenSSL forbids reading and writing one TLS
connection from two threads at once, so after the handshake the sockets are
non-blocking and every TLS read or write holds the link's lock.
"""

from __future__ import annotations

import errno
import json
import queue
import select
import socket
import ssl
import struct
import threading
import time
from dataclasses import dataclass

from vfl.errors import ConfigurationError, HandshakeError, PeerError, ProtocolError
from vfl.transport.message import quote, parse_json
from vfl.transport.tls import (TLSFiles, ca_name, certificate_problem, check_role, client_context, der_certificate,
                               foreign_ca_advice, issuer_name, load_certificate, peer_pin_problem, peer_role,
                               probe_context, server_context, signed_by)

#: Default largest frame accepted: ample for a batch of 2048-bit ciphertexts.
DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024
#: Seconds a normal close waits for the peers to close too (see ``NetworkTransport.close``).
DEFAULT_LINGER = 2.0
#: Seconds an incoming connection has to complete the TLS handshake and send its hello.
DEFAULT_HANDSHAKE_TIMEOUT = 5.0
_LENGTH = struct.Struct(">I")
_HELLO_MAX = 4096
#: Incoming handshakes that run at once, in all and from one address (see ``_accept_all``).
_MAX_HANDSHAKES = 16
_HANDSHAKES_PER_SOURCE = 4
#: Silent connections (accepted, nothing sent yet) kept waiting, in all and from one address; beyond, the
#: oldest is dropped.
_IDLE_TOTAL = 64
_IDLE_PER_SOURCE = 16
#: Seconds a dialler gives its first attempt at a peer even when the connect timeout ran out dialling others.
MIN_ATTEMPT = 1.0
#: Refused connections listed in the error when a peer never connected.
_REFUSALS_SHOWN = 5
_POLL = 0.05
_CHUNK = 1 << 16


def parse_address(text: str) -> tuple[str, int]:
    """``"host:port"`` (``"[::1]:port"`` for IPv6) as ``(host, port)``."""
    host, sep, port = str(text).rpartition(":")
    host = host.strip("[]")
    if not sep or not host:
        raise ConfigurationError(f"invalid address {text!r}: expected host:port")
    return host, port_number(port, f"address {text!r}")


def port_number(text, where: str = "port") -> int:
    """A TCP port, 1 to 65535, or an error naming it as out of range or not a number."""
    text = str(text).strip()
    if not (text.isascii() and text.isdigit()):
        raise ConfigurationError(f"{where}: port {text!r} is not a number")
    if not 0 < int(text) < 65536:
        raise ConfigurationError(f"{where}: port {int(text)} is out of range (1 to 65535)")
    return int(text)


@dataclass(frozen=True)
class NetworkSettings:
    """Timeouts and limits of a :class:`NetworkTransport`.

    Parameters
    ----------
    connect_timeout : float
        Seconds to establish every link (retries included).
    send_timeout : float
        Seconds one send may wait for a peer that does not read.
    max_frame_bytes : int
        Largest frame sent or accepted.
    handshake_timeout : float
        Seconds a listener gives one incoming connection to complete the TLS handshake and
        send its hello (at most what is left of ``connect_timeout``).  Each incoming
        connection is handled in its own thread, so one that stays silent delays nobody.
    """

    connect_timeout: float = 30.0
    send_timeout: float = 60.0
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT

    def __post_init__(self):
        if not (self.connect_timeout > 0 and self.send_timeout > 0 and self.handshake_timeout > 0):
            raise ConfigurationError("network timeouts must be positive")
        if not 0 < self.max_frame_bytes < 2 ** 32:
            raise ConfigurationError(f"max_frame_bytes must be in (0, 2**32), got {self.max_frame_bytes}")


class _Link:
    """One established TLS connection to ``peer``, with its reader thread."""

    def __init__(self, owner: str, peer: str, sock: ssl.SSLSocket, max_frame_bytes: int, on_failure=None):
        self.owner, self.peer = owner, peer
        self.sock = sock
        self.max_frame_bytes = max_frame_bytes
        self.on_failure = on_failure       # called as on_failure(link) once the link has failed
        self.lock = threading.Lock()
        self._sending = threading.Lock()  # one frame at a time: threads that send at once must not interleave
        self._failing = threading.Lock()  # the reader and a sender may both find the link broken
        self.frames: queue.Queue = queue.Queue()
        self.failure: BaseException | None = None
        self.closing = False
        sock.setblocking(False)
        self.thread = threading.Thread(target=self._read_loop, name=f"vfl-{owner}<-{peer}", daemon=True)
        self.thread.start()

    # ---- reading (reader thread only)
    def _read_loop(self) -> None:
        buffer = bytearray()
        try:
            while not self.closing:
                data = self._read_some()
                if data is None:
                    continue
                if not data:
                    where = " in the middle of a frame" if buffer else ""
                    raise PeerError(f"{self.peer} closed the connection{where} (stopped, or was killed)")
                buffer += data
                self._split_frames(buffer)
        except (PeerError, ProtocolError) as exc:
            self._fail(exc)
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError; ValueError: socket closed
            self._fail(PeerError(f"connection to {self.peer} lost: {exc}"))

    def _read_some(self) -> bytes | None:
        with self.lock:
            if self.closing:
                return None
            try:
                return self.sock.recv(_CHUNK)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                pass
        select.select([self.sock], [], [], _POLL)
        return None

    def _split_frames(self, buffer: bytearray) -> None:
        while len(buffer) >= _LENGTH.size:
            (length,) = _LENGTH.unpack_from(buffer)
            if length > self.max_frame_bytes:
                raise ProtocolError(f"{self.peer} sent a frame of {length} bytes, above the maximum of "
                                    f"{self.max_frame_bytes}; connection closed")
            if len(buffer) < _LENGTH.size + length:
                return
            self.frames.put(bytes(buffer[_LENGTH.size:_LENGTH.size + length]))
            del buffer[:_LENGTH.size + length]

    def _fail(self, exc: BaseException) -> None:
        """Record the link's first failure for every later send and receive, and close the socket."""
        with self._failing:
            if self.closing or self.failure is not None:
                return
            self.failure = exc
        self.frames.put(exc)
        self._shutdown()
        if self.on_failure is not None:
            self.on_failure(self)

    # ---- writing (caller's thread)
    def send(self, frame: bytes, timeout: float) -> None:
        with self._sending:
            self._send(frame, timeout)

    def _send(self, frame: bytes, timeout: float) -> None:
        if self.failure is not None:
            raise self._error()
        if self.closing:
            raise PeerError(f"the link to {self.peer} is closed")
        data = memoryview(_LENGTH.pack(len(frame)) + frame)
        deadline = time.monotonic() + timeout
        while data:
            chunk = data[:_CHUNK]
            with self.lock:
                try:
                    sent = self.sock.send(chunk)
                except (ssl.SSLWantWriteError, ssl.SSLWantReadError, BlockingIOError):
                    sent = 0
                except (OSError, ValueError) as exc:
                    raise PeerError(f"connection to {self.peer} lost while sending: {exc}") from None
            data = data[sent:]
            if data and not sent:
                if time.monotonic() > deadline:
                    # Part of a frame may have gone: the stream is unusable, so the link fails.
                    self._fail(PeerError(f"{self.peer} did not take a {len(frame)}-byte frame within "
                                         f"{timeout:g} s"))
                    raise self._error()
                if self.failure is not None:
                    raise self._error()
                select.select([], [self.sock], [], _POLL)

    def _error(self) -> BaseException:
        exc = self.failure
        if exc is None:  # the link was closed by this side while a send was under way
            return PeerError(f"link to {self.peer} closed while sending")
        return type(exc)(str(exc))

    # ---- receiving (caller's thread)
    def recv(self, timeout: float | None) -> bytes:
        try:
            item = self.frames.get(timeout=timeout)
        except queue.Empty:
            raise PeerError(f"no message from {self.peer} within {timeout:g} s") from None
        if isinstance(item, BaseException):
            self.frames.put(item)  # every later receive fails the same way
            raise type(item)(str(item))
        return item

    def begin_close(self) -> None:
        """Stop reading frames, and tell the peer nothing more will come (FIN, after what was sent)."""
        self.closing = True
        if threading.current_thread() is not self.thread:
            self.thread.join(timeout=1.0)
        with self.lock:
            try:
                self.sock.shutdown(socket.SHUT_WR)
            except (OSError, ValueError):
                pass

    def finish_close(self, deadline: float) -> None:
        """Discard what the peer still sends until it closes too (or ``deadline``), then close.

        Closing a socket that holds unread data makes the kernel reset the connection, and a
        reset can destroy data the peer has received but not read yet, such as this party's
        last message.  Hence this lingering close at the normal end of a run.  After a failure
        the transport passes a ``deadline`` already reached, and the socket closes at once.
        """
        while time.monotonic() < deadline:
            with self.lock:
                try:
                    data = self.sock.recv(_CHUNK)
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                    data = None
                except (OSError, ValueError):
                    break
            if data == b"":
                break
            if data is None:
                try:
                    select.select([self.sock], [], [], _POLL)
                except (OSError, ValueError):
                    break
        with self.lock:
            self.sock.close()

    def _shutdown(self) -> None:
        with self.lock:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.sock.close()


#: Connections the kernel queues for the listener before it accepts them: a burst (many silent clients at
#: once, a loaded machine whose acceptor runs late) waits there instead of being refused or timing out.
LISTEN_BACKLOG = 1024


class NetworkTransport:
    """All links of one role: ``send(receiver, frame)``, ``recv(sender, timeout)``, ``close()``.

    Use :meth:`connect`, which returns once a link to every peer is up.

    Parameters
    ----------
    role : str
        This party's role.
    addresses : dict
        ``{role: (host, port)}`` for every role, this one included.
    tls : TLSFiles
        This role's CA, certificate and key.
    settings : NetworkSettings, optional
    peers : iterable of str, optional
        The roles this one exchanges messages with (default: every other role in
        ``addresses``).  Links exist only between peers, and both ends of a link
        must name each other.
    """

    def __init__(self, role: str, addresses: dict, tls: TLSFiles, settings: NetworkSettings | None = None,
                 peers=None):
        self.role = check_role(role)
        self.addresses = {check_role(r): _address(a) for r, a in addresses.items()}
        if role not in self.addresses:
            raise ConfigurationError(f"no address for this party's own role {role!r}")
        if peers is None:
            peers = [r for r in self.addresses if r != role]
        peers = [str(p) for p in peers]
        unknown = sorted(p for p in peers if p not in self.addresses or p == role)
        if unknown:
            raise ConfigurationError(f"{role}: peers {unknown} are not other roles with an address "
                                     f"(roles: {sorted(self.addresses)})")
        self.peers = tuple(sorted(set(peers)))
        self.tls = tls
        self.settings = settings or NetworkSettings()
        self.links: dict[str, _Link] = {}
        self._server_ctx = server_context(tls)
        self._client_ctx = client_context(tls)
        self._refusals: list[str] = []
        self._expected: set[str] = set()   # roles still to dial in (not yet handshaking)
        self._admitting: set[str] = set()  # roles whose hello was accepted, link being made
        self._closed = False
        self._lock = threading.RLock()     # guards links, the two sets above, _refusals and _closed

    @classmethod
    def connect(cls, role: str, addresses: dict, tls: TLSFiles, settings: NetworkSettings | None = None,
                peers=None) -> "NetworkTransport":
        """Build the transport and establish a link to every peer; raise :class:`PeerError` if one fails."""
        transport = cls(role, addresses, tls, settings, peers)
        try:
            transport._establish()
        except BaseException:
            transport.close(linger=0)
            raise
        return transport

    # ---- establishing links
    def _establish(self) -> None:
        self._started = time.monotonic()
        deadline = self._started + self.settings.connect_timeout
        to_dial = [p for p in self.peers if p > self.role]
        to_accept = [p for p in self.peers if p < self.role]
        acceptor, errors = None, []
        if to_accept:
            self._expected = set(to_accept)
            self._listener = self._listen()
            acceptor = threading.Thread(target=self._accept_all, args=(self._listener, deadline, errors),
                                        name=f"vfl-{self.role}-accept", daemon=True)
            acceptor.start()
        for peer in to_dial:
            self._dial(peer, deadline)
        if acceptor is not None:
            acceptor.join()
            self._listener.close()
            if errors:
                raise errors[0]

    def _listen(self) -> socket.socket:
        """The listening socket; an address already in use is a :class:`ConfigurationError` in plain words.

        The error's ``address`` attribute is ``(host, port)``, for the caller to point at its setting.
        """
        host, port = self.addresses[self.role]
        try:
            return socket.create_server((host, port), reuse_port=False, backlog=LISTEN_BACKLOG)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            error = ConfigurationError(f"{self.role}: cannot listen on {host}:{port}: another process listens there "
                                       f"already (perhaps a second copy of {self.role}); stop it, or give "
                                       f"{self.role} another address")
            error.address = (host, port)
            raise error from None

    def _dial(self, peer: str, deadline: float) -> None:
        host, port = self.addresses[peer]
        delay, last, started = 0.05, None, getattr(self, "_started", time.monotonic())
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 and last is not None:     # tried at least once: a peer dialled last gets a chance
                waited = time.monotonic() - started
                raise PeerError(f"{self.role}: connecting: could not reach {peer} at {host}:{port} within "
                                f"{self.settings.connect_timeout:g} s (connect_timeout; {self.role} waited "
                                f"{waited:.1f} s, the last attempt: {last}): {peer} is not listening there yet: "
                                f"not started, or slow to start (start it first, or raise [network] "
                                f"connect_timeout), or its address is wrong")
            try:
                raw = socket.create_connection((host, port), timeout=max(remaining, MIN_ATTEMPT))
                break
            except (ConnectionRefusedError, ConnectionResetError, ConnectionAbortedError, socket.timeout,
                    OSError) as exc:
                last = exc.strerror or str(exc) or type(exc).__name__
                time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
                delay = min(delay * 2, 1.0)
        raw.settimeout(max(0.1, deadline - time.monotonic()))
        sock = raw
        try:
            sock = self._client_ctx.wrap_socket(raw)  # raw is detached: close sock from now on
            role = peer_role(sock)
            if role != peer:
                raise HandshakeError(f"the party at {host}:{port} holds a certificate for {role!r}, not {peer!r}")
            pinned = peer_pin_problem(sock, peer, self.tls)
            if pinned:
                raise HandshakeError(f"refused at the TLS handshake: {pinned}")
            _write_hello(sock, {"vfl": 1, "role": self.role, "to": peer})
            answer = _read_answer(sock, peer, deadline)
        except HandshakeError as exc:
            sock.close()
            raise HandshakeError(f"{self.role}: connecting to {peer}: {exc}") from None
        except ssl.SSLCertVerificationError as exc:
            sock.close()
            raise HandshakeError(f"{self.role}: connecting to {peer} at {host}:{port}: refused at the TLS handshake: "
                                 f"{self._foreign_peer(peer, host, port, deadline, exc)}") from None
        except TimeoutError:
            sock.close()
            raise HandshakeError(f"{self.role}: connecting to {peer} at {host}:{port}: the TLS handshake and hello "
                                 f"did not complete within {self.settings.connect_timeout:g} s") from None
        except (ssl.SSLError, OSError, ValueError) as exc:
            sock.close()
            own = None if _not_tls(exc) else self._own_problem()
            if _not_tls(exc):
                reason = (f"what listens there does not speak TLS ({_not_tls(exc)}): another program has "
                          f"{peer}'s port, or the address of {peer} is wrong")
            elif own:
                reason = own
            elif _unknown_ca(exc):
                reason = f"{self._distrusted(peer)}; give every party the same ca.pem and certificates signed by it"
            else:
                reason = _ssl_reason(exc)
            raise HandshakeError(f"{self.role}: connecting to {peer} at {host}:{port}: refused at the TLS "
                                 f"handshake: {reason}") from None
        if answer["ok"] is not True:
            sock.close()
            own = self._own_problem()
            raise HandshakeError(f"{self.role}: {peer} refused the connection: {answer['reason']}"
                                 + (f"; {own}" if own else ""))
        with self._lock:
            if self._closed:
                sock.close()
                raise PeerError(f"{self.role}: connecting: the transport was closed")
            self._add_link(peer, sock)

    def _foreign_peer(self, peer: str, host: str, port: int, deadline: float,
                      exc: ssl.SSLCertVerificationError) -> str:
        """Why ``peer``'s certificate failed verification, read from it (on a second connection).

        Its dates (expired, not yet valid), or the CA it names; OpenSSL's reason if neither.
        """
        cert = None
        try:
            with socket.create_connection((host, port), timeout=max(0.1, min(5.0, deadline - time.monotonic()))) \
                    as raw, probe_context(self.tls).wrap_socket(raw) as probe:
                cert = der_certificate(probe.getpeercert(binary_form=True) or b"")
        except (OSError, ValueError):
            pass
        if cert is not None and not signed_by(cert, load_certificate(self.tls.ca_for(peer))):
            return (f"its certificate is signed by another CA, {issuer_name(cert)}; "
                    f"{foreign_ca_advice(self.tls, peer)}")
        problem = certificate_problem(cert) if cert is not None else None
        if problem:
            return (f"its certificate {problem}; {peer} needs a certificate valid now, signed by the federation's "
                    "CA (vfl certs), or a machine's clock is wrong")
        return f"its certificate does not verify ({_ssl_reason(exc)}); {foreign_ca_advice(self.tls, peer)}"

    def _own_problem(self) -> str | None:
        """What is wrong with this party's own certificate (dates, role, CA), read from it; ``None`` if nothing.

        Checked when a handshake fails on the peer's side, before guessing at the peer's CA.
        """
        try:
            problem = certificate_problem(load_certificate(self.tls.certificate),
                                          load_certificate(self.tls.ca_for(self.role)), self.role)
        except ConfigurationError:
            return None
        return (f"this party's certificate {self.tls.certificate} {problem}, so peers refuse it: make "
                f"{self.role} a certificate valid now for role {self.role!r}, signed by the federation's CA "
                "(vfl certs)") if problem else None

    def _unverified(self, exc: ssl.SSLCertVerificationError) -> str:
        """Why an incoming certificate failed verification: its dates, by OpenSSL's code, or its CA."""
        if exc.verify_code in _DATE_CODES:
            return (f"its certificate {_DATE_CODES[exc.verify_code]} on this machine's clock, now "
                    f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: the peer needs a certificate valid "
                    "now, or a machine's clock is wrong")
        return (f"its certificate is not signed by this party's CA, {ca_name(load_certificate(self.tls.ca))}: "
                f"{_ssl_reason(exc)}")

    def _distrusted(self, who: str) -> str:
        """``who`` refused this party's certificate as signed by a CA it does not know: name that CA."""
        return (f"{who} does not trust the CA that signed this party's certificate, "
                f"{issuer_name(load_certificate(self.tls.certificate))}: {who} holds another ca.pem")

    def _accept_all(self, listener: socket.socket, deadline: float, errors: list) -> None:
        """Accept connections until every expected role is linked; each handshake runs in its own thread.

        A connection is given a handshake only once it has sent its first bytes (a
        dialling party sends its TLS ClientHello at once). Until then it waits in a
        pool of silent connections, at most ``_IDLE_PER_SOURCE`` from one address and
        ``_IDLE_TOTAL`` in all (beyond, the oldest is dropped), each for at most
        ``handshake_timeout`` seconds. Handshakes run at most ``_MAX_HANDSHAKES`` at
        once and ``_HANDSHAKES_PER_SOURCE`` from one address, each for at most
        ``handshake_timeout``. So neither silent connections (a port scan, a stalled
        client) nor one address's flood of handshakes hold up the genuine peer, and
        every connection dropped is recorded with the reason.
        """
        slots = threading.BoundedSemaphore(_MAX_HANDSHAKES)
        silent: dict[socket.socket, tuple] = {}         # accepted, nothing received yet: (where, accepted at)
        spoken: list[tuple[socket.socket, tuple]] = []  # received bytes, waiting for a handshake slot
        running: dict[str, int] = {}                    # handshakes in flight per source address

        def finished(host: str) -> None:
            with self._lock:
                running[host] -= 1
            slots.release()

        listener.setblocking(False)
        try:
            while True:
                with self._lock:
                    if self._closed:
                        raise PeerError(f"{self.role}: connecting: the transport was closed")
                    if not self._persistent and not self._expected and not self._admitting:
                        return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise PeerError(self._not_connected())
                self._expire_silent(silent)
                for raw, where in list(spoken):     # start every handshake its address and the slots allow
                    with self._lock:
                        busy = running.get(where[0], 0) >= _HANDSHAKES_PER_SOURCE
                    if busy or not slots.acquire(blocking=False):
                        continue
                    spoken.remove((raw, where))
                    with self._lock:
                        running[where[0]] = running.get(where[0], 0) + 1
                    threading.Thread(target=self._admit, args=(raw, where, deadline, finished), daemon=True,
                                     name=f"vfl-{self.role}-handshake-{where[1]}").start()
                readable, _, _ = select.select([listener, *silent], [], [], min(remaining, _POLL))
                for sock in readable:
                    if sock is listener:
                        self._take(listener, silent)
                    else:
                        spoken.append((sock, silent.pop(sock)[0]))
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            errors.append(exc)
        finally:
            for sock in [*silent, *(raw for raw, _ in spoken)]:
                sock.close()

    def _take(self, listener: socket.socket, silent: dict) -> None:
        """Accept one connection into the silent pool, dropping the oldest beyond the bounds."""
        try:
            raw, where = listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        raw.setblocking(True)
        same = [sock for sock, (place, _) in silent.items() if place[0] == where[0]]
        for pool, bound, what in ((same, _IDLE_PER_SOURCE, f"from {where[0]}"), (list(silent), _IDLE_TOTAL, "")):
            if len(pool) >= bound:
                oldest = min(pool, key=lambda sock: silent[sock][1])
                place = silent.pop(oldest)[0]
                oldest.close()
                self._refuse(f"{place[0]}:{place[1]} dropped: it had sent nothing while {bound} silent connections"
                             f"{' ' + what if what else ''} waited (the listener keeps at most that many)")
        silent[raw] = (where, time.monotonic())

    def _expire_silent(self, silent: dict) -> None:
        """Close the silent connections that sent nothing within ``handshake_timeout``."""
        limit = self.settings.handshake_timeout
        now = time.monotonic()
        for sock, (where, since) in list(silent.items()):
            if now - since >= limit:
                del silent[sock]
                sock.close()
                self._refuse(f"{where[0]}:{where[1]} did not complete the TLS handshake within {limit:g} s "
                             "(it sent nothing)")

    def _not_connected(self) -> str:
        with self._lock:
            missing = ", ".join(sorted(self._expected | self._admitting))
            refusals = list(self._refusals)
        text = f"{self.role}: connecting: {missing} never connected to {self.role} within " \
               f"{self.settings.connect_timeout:g} s"
        if refusals:            # something came, and was refused: that is the news
            shown = refusals[:_REFUSALS_SHOWN]
            more = len(refusals) - len(shown)
            text += f"; refused: {'; '.join(shown)}" + (f"; and {more} more" if more else "")
        else:                   # nothing came: perhaps not yet
            waited = time.monotonic() - getattr(self, "_started", time.monotonic())
            text += (f" (connect_timeout; {self.role} waited {waited:.1f} s): not started, or slow to start (start "
                     "it first, or raise [network] connect_timeout), or it dials another address")
        return text

    def _refuse(self, text: str) -> None:
        with self._lock:
            self._refusals.append(text)

    def _admit(self, raw: socket.socket, where, deadline: float, finished) -> None:
        """Handshake with one incoming connection, in its own thread; link it, or record why not.

        ``finished(host)`` gives back its handshake slot.
        """
        origin = f"{where[0]}:{where[1]}"
        limit = max(0.0, min(self.settings.handshake_timeout, deadline - time.monotonic()))
        until = time.monotonic() + limit
        role = sock = None
        try:
            try:
                sock = _server_handshake(self._server_ctx, raw, until)
            except TimeoutError:
                self._refuse(f"{origin} did not complete the TLS handshake within {limit:g} s")
                return
            except ssl.SSLCertVerificationError as exc:
                self._refuse(f"{origin} at the TLS handshake ({self._unverified(exc)})")
                return
            except (ssl.SSLError, OSError, ValueError) as exc:
                own = None if _not_tls(exc) else self._own_problem()
                why = own or (self._distrusted("it") if _unknown_ca(exc) else _incoming_reason(exc))
                self._refuse(f"{origin} at the TLS handshake ({why})")
                return
            try:
                role = self._check_hello(sock, origin, until)
                if role is None:
                    sock.close()
                    return
                _write_hello(sock, {"ok": True})
                with self._lock:
                    self._admitting.discard(role)
                    if self._closed:
                        sock.close()
                        return
                    self._add_link(role, sock)
                    role = None  # linked: nothing to give back
            except TimeoutError:
                sock.close()
                self._refuse(f"{origin} completed the TLS handshake but sent no hello within {limit:g} s")
            except (HandshakeError, ssl.SSLError, OSError, ValueError) as exc:
                sock.close()
                own = None if isinstance(exc, HandshakeError) else self._own_problem()
                self._refuse(f"{origin}: {own or _incoming_reason(exc)}")
        except BaseException as exc:  # noqa: BLE001 - one bad connection must not end the listener
            (sock or raw).close()
            self._refuse(f"{origin}: unexpected {type(exc).__name__} during the handshake")
        finally:
            if role is not None:  # reserved, then the handshake failed: the genuine peer may still come
                with self._lock:
                    self._admitting.discard(role)
                    self._expected.add(role)
            finished(where[0])

    def _check_hello(self, sock: ssl.SSLSocket, origin: str, until: float) -> str | None:
        """Read the dialler's hello and reserve its role; ``None`` (refusal sent and recorded) if refused."""
        try:
            role, reason = peer_role(sock), None
        except HandshakeError as exc:       # answered, so the dialler hears why (a name mismatch...)
            role, reason = None, str(exc).replace("the peer's certificate", "its certificate", 1)
        hello = _read_hello(sock, "it", until)
        if reason is not None:
            pass
        elif not isinstance(hello.get("role"), str) or not isinstance(hello.get("to"), str) or hello.get("vfl") != 1:
            reason = "its hello is not a vfl hello (expected vfl: 1, role and to)"
        elif hello["role"] != role:
            reason = f"it claims role {quote(hello['role'])} but its certificate names {role!r}"
        elif pinned := peer_pin_problem(sock, role, self.tls):     # its pinned CA, fingerprint, revocations
            reason = pinned
        elif hello["to"] != self.role:
            reason = f"it meant to reach {quote(hello['to'])}, not {self.role!r}"
        else:
            with self._lock:
                if self._accepts(role):
                    self._expected.discard(role)
                    self._admitting.add(role)
                    return role
                reason = (f"{role} is already connected" if role in self.links or role in self._admitting
                          else f"{role} is not a role that dials {self.role}")
        _write_hello(sock, {"ok": False, "reason": reason})
        self._refuse(f"{origin}: {reason}")
        return None

    # ---- hooks (a long-lived transport, :mod:`vfl.transport.service`, changes them)
    #: whether the listener keeps accepting after every peer is linked (peers that come back)
    _persistent = False

    def _accepts(self, role: str) -> bool:
        """Whether a dialler of ``role`` (certificate and hello checked) may link now; called under the lock."""
        return role in self._expected

    def _add_link(self, role: str, sock: ssl.SSLSocket) -> None:
        """Link ``role`` over the handshaken ``sock``; called under the lock."""
        self.links[role] = _Link(self.role, role, sock, self.settings.max_frame_bytes)

    # ---- the Transport interface
    def send(self, receiver: str, frame: bytes) -> None:
        """Send one frame to ``receiver``; :class:`PeerError` if the link is gone."""
        if len(frame) > self.settings.max_frame_bytes:
            raise ProtocolError(f"a frame of {len(frame)} bytes for {receiver} is above the maximum "
                                f"of {self.settings.max_frame_bytes}")
        self._link(receiver).send(bytes(frame), self.settings.send_timeout)

    def recv(self, sender: str, timeout: float | None) -> bytes:
        """The next frame from ``sender``; :class:`PeerError` on timeout or if the peer is gone."""
        return self._link(sender).recv(timeout)

    def close(self, linger: float = DEFAULT_LINGER) -> None:
        """Close every link: the peers see the end of the stream after everything sent.

        Parameters
        ----------
        linger : float
            Seconds to wait for the peers to close their ends too, so that a reset cannot
            destroy the last message sent (see ``_Link.finish_close``).  After a failure,
            pass 0: the party then exits at once, and what it sent last (an ``abort``)
            reaches the peers on a best-effort basis.
        """
        with self._lock:
            self._closed = True  # handshakes still under way will not add links
            links = list(self.links.values())
        for link in links:
            link.begin_close()
        deadline = time.monotonic() + linger
        for link in links:
            link.finish_close(deadline)
        listener = getattr(self, "_listener", None)
        if listener is not None:
            listener.close()

    def _link(self, peer: str) -> _Link:
        try:
            return self.links[peer]
        except KeyError:
            raise PeerError(f"no link to {peer!r}; peers are {list(self.peers)}") from None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close(linger=DEFAULT_LINGER if exc_type is None else 0)


def _address(value) -> tuple[str, int]:
    if isinstance(value, str):
        return parse_address(value)
    host, port = value
    return str(host), int(port)


def _server_handshake(ctx: ssl.SSLContext, raw: socket.socket, until: float) -> ssl.SSLSocket:
    """The server side of the TLS handshake on ``raw``, finished by ``until`` or :class:`TimeoutError`.

    Non-blocking with ``select``: the limit holds for the whole handshake, however
    slowly the peer trickles its bytes.
    """
    raw.setblocking(False)
    sock = ctx.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
    try:
        while True:
            try:
                sock.do_handshake()
                return sock
            except ssl.SSLWantReadError:
                waiting = ([sock], [])
            except ssl.SSLWantWriteError:
                waiting = ([], [sock])
            left = until - time.monotonic()
            if left <= 0:
                raise TimeoutError("TLS handshake")
            select.select(*waiting, [], left)
    except BaseException:
        sock.close()
        raise


def _write_hello(sock: ssl.SSLSocket, obj: dict) -> None:
    data = json.dumps(obj).encode()
    sock.sendall(_LENGTH.pack(len(data)) + data)


def _read_hello(sock: ssl.SSLSocket, who: str, until: float) -> dict:
    """A hello frame: a flat JSON object of at most ``_HELLO_MAX`` bytes, or :class:`HandshakeError`."""
    (length,) = _LENGTH.unpack(_read_exact(sock, _LENGTH.size, until))
    if length > _HELLO_MAX:
        raise HandshakeError(f"{who} sent a hello of {length} bytes, above the maximum of {_HELLO_MAX}")
    try:
        obj = parse_json(_read_exact(sock, length, until), "hello", max_depth=1, max_items=16, max_containers=1)
    except ProtocolError as exc:
        raise HandshakeError(f"{who} sent a {exc}") from None  # "... a malformed hello: why"
    if not isinstance(obj, dict):
        raise HandshakeError(f"{who} sent a malformed hello: not a JSON object")
    return obj


def _read_answer(sock: ssl.SSLSocket, peer: str, until: float) -> dict:
    """The listener's answer to this party's hello: ``{"ok": True}`` or ``{"ok": False, "reason": text}``."""
    answer = _read_hello(sock, peer, until)
    if answer.get("ok") is True and set(answer) == {"ok"}:
        return answer
    if answer.get("ok") is False and isinstance(answer.get("reason"), str) and set(answer) == {"ok", "reason"}:
        return {"ok": False, "reason": _printable(answer["reason"][:500])}
    raise HandshakeError(f"{peer} sent a malformed answer to this party's hello")


def _printable(text: str) -> str:
    """``text`` on one line, with control characters escaped: a peer's words reach a terminal."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def _read_exact(sock: ssl.SSLSocket, n: int, until: float) -> bytes:
    data = bytearray()
    while len(data) < n:
        left = until - time.monotonic()
        if left <= 0:
            raise TimeoutError("hello")
        sock.settimeout(left)
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return bytes(data)


#: OpenSSL's reasons for bytes that are no TLS 1.3 handshake, in plain words.
_NOT_TLS = {"HTTP_REQUEST": "it sent a plain HTTP request: a web browser, a health check or curl without https?",
            "HTTPS_PROXY_REQUEST": "it sent an HTTP proxy request",
            "WRONG_VERSION_NUMBER": "its first bytes are not a TLS record: plain HTTP, or another protocol",
            "UNEXPECTED_MESSAGE": "its bytes are not a TLS handshake",
            "UNKNOWN_PROTOCOL": "its first bytes are not a TLS record",
            "RECORD_LAYER_FAILURE": "its bytes are not TLS records",
            "PACKET_LENGTH_TOO_LONG": "its first bytes are not a TLS record",
            "UNSUPPORTED_PROTOCOL": "it speaks an older TLS version; the federation needs TLS 1.3"}


#: OpenSSL's verification codes of a certificate outside its dates (X509_V_ERR_CERT_NOT_YET_VALID, _HAS_EXPIRED).
_DATE_CODES = {9: "is not yet valid", 10: "has expired"}


def _not_tls(exc: BaseException) -> str | None:
    """What the peer spoke instead of TLS 1.3, in plain words, or ``None`` if the failure is something else."""
    return _NOT_TLS.get(getattr(exc, "reason", None) or "") if isinstance(exc, ssl.SSLError) else None


def _unknown_ca(exc: BaseException) -> bool:
    """Whether the peer refused this party's certificate because it does not know the CA that signed it."""
    return isinstance(exc, ssl.SSLError) and exc.reason in ("TLSV1_ALERT_UNKNOWN_CA", "SSLV3_ALERT_BAD_CERTIFICATE")


def _incoming_reason(exc: BaseException) -> str:
    """Why an incoming connection failed, from the listener's side: it may not be a vfl party at all."""
    if _not_tls(exc):
        return f"not TLS: {_not_tls(exc)}"
    if isinstance(exc, (ssl.SSLEOFError, ConnectionError)) or (isinstance(exc, ssl.SSLError)
                                                                and not getattr(exc, "reason", None)):
        return ("it closed the connection during the handshake (not a vfl party, or a party that refused "
                "this party's certificate)")
    return _ssl_reason(exc)


def _ssl_reason(exc: BaseException) -> str:
    """A readable reason for a failed handshake, with a hint where OpenSSL's is terse."""
    if isinstance(exc, ssl.SSLError) and getattr(exc, "reason", None) and not isinstance(exc, ssl.SSLEOFError):
        detail = getattr(exc, "verify_message", None)
        reason = f"{exc.reason}" + (f" ({detail})" if detail else "")
        if "ALERT" in exc.reason:
            reason += ": the peer refused this party's certificate"
        return reason
    if isinstance(exc, (ssl.SSLEOFError, ConnectionError)):
        return ("the peer closed the connection during the handshake without a TLS alert or an answer: its "
                "listener dropped the connection (perhaps while busy with others); its own output says why")
    return str(exc) or type(exc).__name__
