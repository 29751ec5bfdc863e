"""One role's view of the federation: send and receive named messages.

Protocol code holds an :class:`Endpoint` and reads as if the peers were local::

    ep.send("B", "u_A", "ciphertext", ciphertexts=..., exponent=32)
    d = ep.recv("B", "d")

The endpoint owns the encoding (:mod:`vfl.transport.message`), the transcript
and the checks: a message that does not decode or has an unexpected name is a
:class:`~vfl.errors.ProtocolError`; a peer that failed, vanished or stayed
silent past the timeout is a :class:`~vfl.errors.PeerError`.  Either names this
role, the peer and the step (the message being sent or awaited), whether it
surfaced while sending or while receiving.  Underneath sits any
:class:`Transport`: in-process queues or TLS.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

import re

from vfl.errors import PeerError, PeerStopped, ProtocolError, VFLError
from vfl.transport.message import Message, decode, encode

ABORT = "abort"
#: Frames read, after a failed send, looking for the peer's ``abort``.
_ABORT_LOOKAHEAD = 64
#: An abort's ``party`` and ``category`` fields: short names, else ignored (a peer's text reaches a terminal).
_ABORT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,62}\Z")


class Transport(Protocol):
    """Moves frames (bytes) between one role and its peers."""

    role: str

    def send(self, receiver: str, frame: bytes) -> None: ...

    def recv(self, sender: str, timeout: float | None) -> bytes: ...

    def close(self) -> None: ...


class Transcript:
    """Every message sent: ``(iteration, sender, receiver, name, kind, bytes)``.

    A run of several models (one-vs-rest) tags each message with the sending
    endpoint's :attr:`Endpoint.model`; the frame then has a ``model`` column (empty
    for the messages outside any model's run).

    With ``keep_payloads=True`` the framed bytes are kept too, so tests can
    decode and inspect everything that crossed the transport.  Every send and
    every receipt is also timed, for :meth:`timings`.

    Parameters
    ----------
    keep_payloads : bool, default=False
    clock : callable, default=time.perf_counter
        Seconds as a float, for :meth:`timings`.
    """

    COLUMNS = ("iteration", "sender", "receiver", "name", "kind", "bytes")

    def __init__(self, keep_payloads: bool = False, clock=time.perf_counter):
        self.keep_payloads = keep_payloads
        self.records: list[tuple] = []
        #: the model index each record was sent under (``None``: outside any model, or a single model)
        self.models: list[int | None] = []
        self.payloads: list[bytes] = []
        self._lock = threading.Lock()
        self._clock = clock
        self._started = clock()
        #: wall-clock seconds (``time.time()``) of its creation and of its last message: the run's span (:meth:`span`)
        self.wall_started = self.wall_last = time.time()
        #: ``(time, role, record index or None)``: a role sent the record, or (None) took a message
        self._events: list[tuple[float, str, int | None]] = []

    def __getstate__(self) -> dict:
        """A copy of the record (a fitted estimator's transcript pickles and deep-copies with it); no lock."""
        with self._lock:
            state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def record(self, message: Message, sender: str, receiver: str, frame: bytes, model: int | None = None) -> None:
        with self._lock:
            self.wall_last = time.time()
            self._events.append((self._clock(), sender, len(self.records)))
            self.records.append((message.iteration, sender, receiver, message.name, message.kind, len(frame)))
            self.models.append(model)
            if self.keep_payloads:
                self.payloads.append(frame)

    def record_receipt(self, role: str) -> None:
        """Note that ``role`` has just taken a message it waited for (see :meth:`timings`)."""
        with self._lock:
            self.wall_last = time.time()
            self._events.append((self._clock(), role, None))

    def span(self) -> tuple[float, float]:
        """When the run it records began (the transcript's creation) and its last message, as ``time.time()``."""
        return self.wall_started, self.wall_last

    def messages(self):
        """``(sender, receiver, Message)`` for every kept payload."""
        return [(r[1], r[2], decode(p)) for r, p in zip(self.records, self.payloads)]

    def to_frame(self):
        import pandas as pd

        frame = pd.DataFrame(self.records, columns=list(self.COLUMNS))
        if any(model is not None for model in self.models):
            frame["model"] = pd.array(self.models, dtype="Int64")
        return frame

    def timings(self):
        """:meth:`to_frame` with ``seconds``: how long the sender worked on each message.

        The wall-clock time from the sender's previous event (a message it sent or
        took, or the start of the transcript) to this send: the work that produced
        the message, such as encrypting the scores it carries or decrypting what it
        returns.  A role's waits for its peers are not counted, as each wait ends
        with a receipt; roles running at once share the machine's cores.  In a
        network run each party's transcript holds its own sends and receipts, so
        it times that party's messages.

        Returns
        -------
        pandas.DataFrame
            The columns of :meth:`to_frame` and ``seconds``.
        """
        with self._lock:
            events = list(self._events)       # in the order they happened: recorded under the lock
            frame = self.to_frame()
        seconds = [float("nan")] * len(frame)
        last: dict[str, float] = {}
        for when, role, index in events:
            if index is not None:
                seconds[index] = when - last.get(role, self._started)
            last[role] = when
        return frame.assign(seconds=seconds)


class Endpoint:
    """Named, typed messages between ``role`` and its ``peers`` over a transport.

    Parameters
    ----------
    transport : Transport
    peers : iterable of str
        The other roles (told when this role aborts).
    transcript : Transcript, optional
    timeout : float, optional
        Seconds to wait for each message; ``None`` waits as long as the transport allows.
    on_message : callable, optional
        Called as ``on_message(direction, peer, message, nbytes)`` for every message
        sent (``"->"``) or received (``"<-"``): narration, progress, logging.
    """

    def __init__(self, transport: Transport, peers, transcript: Transcript | None = None,
                 timeout: float | None = None, on_message=None):
        self.transport = transport
        self.role = transport.role
        self.peers = tuple(peers)
        self.transcript = transcript if transcript is not None else Transcript()
        self.timeout = timeout
        self.on_message = on_message
        #: The training iteration messages are labelled with; protocol code sets it.
        self.iteration = -1
        #: The model (one-vs-rest index) messages are tagged with in the transcript; ``None`` for none.
        self.model: int | None = None

    def send(self, to: str, name: str, kind: str, **fields) -> int:
        """Send a message; returns its size in bytes.

        Raises
        ------
        PeerError
            The link to ``to`` is gone or ``to`` does not take the frame.
        ProtocolError
            The frame is above the transport's maximum size.

        Either error's message names this role, the step ``name`` and the peer ``to``.
        """
        message = Message(name, kind, self.iteration, fields)
        frame = encode(message)
        try:
            self.transport.send(to, frame)
        except (PeerError, ProtocolError) as exc:
            abort = self._pending_abort(to)
            if abort is not None:  # the peer said why it stopped: more useful than "closed the connection"
                raise _stopped(abort, to, f"{self.role}: {to} stopped while {self.role} was sending {name!r}") \
                    from None
            raise _at_step(exc, f"{self.role}: sending {name!r} to {to}") from None
        self.transcript.record(message, self.role, to, frame, self.model)
        if self.on_message:
            self.on_message("->", to, message, len(frame))
        return len(frame)

    def recv(self, frm: str, name: str) -> Message:
        """Wait for the message ``name`` from ``frm``.

        Raises
        ------
        PeerError
            ``frm`` is gone, stayed silent past the timeout, or sent ``abort``.
        ProtocolError
            ``frm`` sent an oversized or malformed frame, or another message than ``name``.

        Either error's message names this role, the step ``name`` and the peer ``frm``.
        """
        try:
            frame = self.transport.recv(frm, self.timeout)
        except (PeerError, ProtocolError) as exc:
            raise _at_step(exc, f"{self.role}: waiting for {name!r} from {frm}") from None
        try:
            message = decode(frame)
        except ProtocolError as exc:
            raise ProtocolError(f"{self.role}: waiting for {name!r} from {frm}: {frm} sent a malformed "
                                f"message: {exc}") from None
        if message.name == ABORT:
            raise _stopped(message, frm, f"{self.role}: {frm} stopped while {self.role} waited for {name!r}")
        if message.name != name:
            raise ProtocolError(f"{self.role}: expected {name!r} from {frm}, got {message.name!r}")
        self.transcript.record_receipt(self.role)
        if self.on_message:
            self.on_message("<-", frm, message, len(frame))
        return message

    def _pending_abort(self, peer: str) -> Message | None:
        """After a failed send: ``peer``'s ``abort`` if it has already arrived, else ``None``.

        A peer that stops sends ``abort`` and closes its links; a send to it can then
        fail before this role reads the ``abort``.  The link is broken either way, so
        whatever ``peer`` sent before its ``abort`` is read and dropped.
        """
        for _ in range(_ABORT_LOOKAHEAD):
            try:
                message = decode(self.transport.recv(peer, 0))
            except Exception:  # nothing more has arrived, the link failed, or a frame did not decode
                return None
            if message.name == ABORT:
                return message
        return None

    def abort(self, reason: str, party: str | None = None, category: str | None = None) -> None:
        """Tell every peer that this role stopped, and why (best effort).

        Parameters
        ----------
        reason : str
            One line, at most 2000 characters are sent.
        party, category : str, optional
            Who stopped first (this role, or the peer whose abort this one passes on) and
            the kind of cause; the receiver's :class:`~vfl.errors.PeerStopped` carries both.
        """
        fields = {"reason": reason[:2000]}
        fields.update({k: v for k, v in (("party", party), ("category", category)) if v is not None})
        frame = encode(Message(ABORT, "public", self.iteration, fields))
        for peer in self.peers:
            try:
                self.transport.send(peer, frame)
            except Exception:  # the peer may be gone already; nothing more to tell it
                pass


def _stopped(abort: Message, peer: str, step: str) -> PeerStopped:
    """The error for a peer's ``abort``: ``step``, then the reason (naming who stopped first, if not ``peer``)."""
    reason = abort.fields.get("reason")
    reason = reason if isinstance(reason, str) and reason.strip() else "no reason given"
    party, category = (abort.fields.get(k) for k in ("party", "category"))
    party = party if isinstance(party, str) and _ABORT_NAME.match(party) else None
    category = category if isinstance(category, str) and _ABORT_NAME.match(category) else None
    passed_on = party is not None and party != peer
    return PeerStopped(f"{step}{', passing on' if passed_on else ''}: {reason}", party or peer, category, reason)


def _at_step(exc: VFLError, step: str) -> VFLError:
    """The same kind of error as ``exc``, its message prefixed with the protocol ``step``.

    Parameters
    ----------
    exc : VFLError
        The transport's error, which names the peer but not what this role was doing.
    step : str
        Who was doing what, e.g. ``"A: sending 'scores' to B"``.

    Returns
    -------
    VFLError
        An instance of ``type(exc)`` (a :class:`~vfl.errors.HandshakeError` stays one).
    """
    return type(exc)(f"{step}: {exc}")
