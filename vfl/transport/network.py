"""The network transport: every pair of roles joined by one mutually authenticated TLS 1.3 link.

Topology
--------
Each role has an address (host, port).  For every pair of roles, the role that
sorts *first* dials the other; a role listens only if some role sorting before
it must reach it.  With roles A, B, C: A dials B and C, B dials C, and B and C
listen.  Dialling retries while the peer is not up yet (connection refused),
until ``connect_timeout``.

Handshake
---------
1. TLS 1.3, certificates required on both sides, both signed by the federation
   CA (:mod:`vfl.transport.tls`).
2. Each side reads the peer's role from its verified certificate.  The dialler
   checks it is the role it meant to reach.
3. The dialler sends a hello frame, JSON ``{"vfl": 1, "role": ..., "to": ...}``;
   the listener checks the claimed role is the certificate's, that it is
   expected to dial, not yet connected, and that ``to`` is the listener.  It
   answers ``{"ok": true}`` or ``{"ok": false, "reason": ...}``.
A refused dialler gets a :class:`~vfl.errors.HandshakeError` at once; a
listener keeps waiting for the genuine peer until ``connect_timeout`` and then
reports what it refused.

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
from vfl.transport.tls import TLSFiles, check_role, client_context, peer_role, server_context

#: Default largest frame accepted: ample for a batch of 2048-bit ciphertexts.
DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024
#: Seconds a normal close waits for the peers to close too (see ``NetworkTransport.close``).
DEFAULT_LINGER = 2.0
_LENGTH = struct.Struct(">I")
_HELLO_MAX = 4096
_POLL = 0.05
_CHUNK = 1 << 16


def parse_address(text: str) -> tuple[str, int]:
    """``"host:port"`` (``"[::1]:port"`` for IPv6) as ``(host, port)``."""
    host, sep, port = str(text).rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigurationError(f"invalid address {text!r}: expected host:port")
    return host, int(port)


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
    """

    connect_timeout: float = 30.0
    send_timeout: float = 60.0
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES

    def __post_init__(self):
        if not (self.connect_timeout > 0 and self.send_timeout > 0):
            raise ConfigurationError("network timeouts must be positive")
        if not 0 < self.max_frame_bytes < 2 ** 32:
            raise ConfigurationError(f"max_frame_bytes must be in (0, 2**32), got {self.max_frame_bytes}")


class _Link:
    """One established TLS connection to ``peer``, with its reader thread."""

    def __init__(self, owner: str, peer: str, sock: ssl.SSLSocket, max_frame_bytes: int):
        self.owner, self.peer = owner, peer
        self.sock = sock
        self.max_frame_bytes = max_frame_bytes
        self.lock = threading.Lock()
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

    # ---- writing (caller's thread)
    def send(self, frame: bytes, timeout: float) -> None:
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
    """

    def __init__(self, role: str, addresses: dict, tls: TLSFiles, settings: NetworkSettings | None = None):
        self.role = check_role(role)
        self.addresses = {check_role(r): _address(a) for r, a in addresses.items()}
        if role not in self.addresses:
            raise ConfigurationError(f"no address for this party's own role {role!r}")
        self.peers = tuple(sorted(r for r in self.addresses if r != role))
        self.tls = tls
        self.settings = settings or NetworkSettings()
        self.links: dict[str, _Link] = {}
        self._server_ctx = server_context(tls)
        self._client_ctx = client_context(tls)
        self._refusals: list[str] = []
        self._lock = threading.Lock()

    @classmethod
    def connect(cls, role: str, addresses: dict, tls: TLSFiles, settings: NetworkSettings | None = None
                ) -> "NetworkTransport":
        """Build the transport and establish every link; raise :class:`PeerError` if one fails."""
        transport = cls(role, addresses, tls, settings)
        try:
            transport._establish()
        except BaseException:
            transport.close(linger=0)
            raise
        return transport

    # ---- establishing links
    def _establish(self) -> None:
        deadline = time.monotonic() + self.settings.connect_timeout
        to_dial = [p for p in self.peers if p > self.role]
        to_accept = [p for p in self.peers if p < self.role]
        acceptor = None
        if to_accept:
            listener = socket.create_server(self.addresses[self.role], reuse_port=False)
            self._listener = listener
            errors: list[BaseException] = []
            acceptor = threading.Thread(target=self._accept_all, args=(listener, set(to_accept), deadline, errors),
                                        name=f"vfl-{self.role}-accept", daemon=True)
            acceptor.start()
        for peer in to_dial:
            self._dial(peer, deadline)
        if acceptor is not None:
            acceptor.join()
            self._listener.close()
            if errors:
                raise errors[0]

    def _dial(self, peer: str, deadline: float) -> None:
        host, port = self.addresses[peer]
        delay, last = 0.05, None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise PeerError(f"{self.role}: connecting: could not reach {peer} at {host}:{port} within "
                                f"{self.settings.connect_timeout:g} s ({last or 'timed out'})")
            try:
                raw = socket.create_connection((host, port), timeout=remaining)
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
            _write_hello(sock, {"vfl": 1, "role": self.role, "to": peer})
            answer = _read_hello(sock)
        except HandshakeError as exc:
            sock.close()
            raise HandshakeError(f"{self.role}: connecting to {peer}: {exc}") from None
        except (ssl.SSLError, OSError, ValueError) as exc:
            sock.close()
            raise HandshakeError(f"{self.role}: connecting to {peer} at {host}:{port}: refused at the TLS "
                                 f"handshake: {_ssl_reason(exc)}") from None
        if answer.get("ok") is not True:
            sock.close()
            raise HandshakeError(f"{self.role}: {peer} refused the connection: {answer.get('reason', '?')}")
        self.links[peer] = _Link(self.role, peer, sock, self.settings.max_frame_bytes)

    def _accept_all(self, listener: socket.socket, expected: set, deadline: float, errors: list) -> None:
        try:
            while expected:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    missing = ", ".join(sorted(expected))
                    refused = f"; refused: {'; '.join(self._refusals)}" if self._refusals else ""
                    raise PeerError(f"{self.role}: connecting: {missing} did not connect within "
                                    f"{self.settings.connect_timeout:g} s{refused}")
                listener.settimeout(min(remaining, 0.5))
                try:
                    raw, where = listener.accept()
                except socket.timeout:
                    continue
                peer = self._admit(raw, where, expected, deadline)
                if peer is not None:
                    expected.discard(peer)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            errors.append(exc)

    def _admit(self, raw: socket.socket, where, expected: set, deadline: float) -> str | None:
        """Handshake with one incoming connection; the peer's role, or ``None`` if refused."""
        raw.settimeout(max(0.1, min(10.0, deadline - time.monotonic())))
        origin = f"{where[0]}:{where[1]}"
        try:
            sock = self._server_ctx.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError) as exc:
            raw.close()
            self._refusals.append(f"{origin} at the TLS handshake ({_ssl_reason(exc)})")
            return None
        try:
            role = peer_role(sock)
            hello = _read_hello(sock)
            reason = None
            if hello.get("role") != role:
                reason = f"it claims role {hello.get('role')!r} but its certificate names {role!r}"
            elif hello.get("to") != self.role:
                reason = f"it meant to reach {hello.get('to')!r}, not {self.role!r}"
            elif role not in expected:
                reason = (f"{role} is already connected" if role in self.links
                          else f"{role} is not a role that dials {self.role}")
            if reason:
                _write_hello(sock, {"ok": False, "reason": reason})
                sock.close()
                self._refusals.append(f"{origin}: {reason}")
                return None
            _write_hello(sock, {"ok": True})
        except (HandshakeError, ssl.SSLError, OSError, ValueError) as exc:
            sock.close()
            self._refusals.append(f"{origin}: {_ssl_reason(exc)}")
            return None
        self.links[role] = _Link(self.role, role, sock, self.settings.max_frame_bytes)
        return role

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


def _write_hello(sock: ssl.SSLSocket, obj: dict) -> None:
    data = json.dumps(obj).encode()
    sock.sendall(_LENGTH.pack(len(data)) + data)


def _read_hello(sock: ssl.SSLSocket) -> dict:
    (length,) = _LENGTH.unpack(_read_exact(sock, _LENGTH.size))
    if length > _HELLO_MAX:
        raise HandshakeError(f"hello of {length} bytes is too long")
    try:
        obj = json.loads(_read_exact(sock, length))
    except ValueError:
        raise HandshakeError("malformed hello") from None
    if not isinstance(obj, dict):
        raise HandshakeError("malformed hello")
    return obj


def _read_exact(sock: ssl.SSLSocket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return bytes(data)


def _ssl_reason(exc: BaseException) -> str:
    """A readable reason for a failed handshake, with a hint where OpenSSL's is terse."""
    if isinstance(exc, ssl.SSLError) and exc.reason and not isinstance(exc, ssl.SSLEOFError):
        detail = getattr(exc, "verify_message", None)
        reason = f"{exc.reason}" + (f" ({detail})" if detail else "")
        if "ALERT" in exc.reason:
            reason += ": the peer refused this party's certificate"
        return reason
    if isinstance(exc, (ssl.SSLEOFError, ConnectionError)):
        return ("the peer closed the connection during the handshake "
                "(it probably refused this party's certificate)")
    return str(exc) or type(exc).__name__
