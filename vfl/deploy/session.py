"""A party's connection to the federation: the links, the hellos, and the checks before any protocol runs.

:class:`Session` opens party ``role``'s mutual-TLS links to its peers (a feature
party: only the label party and the coordinator), exchanges the ``hello`` with
the fingerprint of the shared settings, and on a failure tells the peers why
(:func:`abort_reason`) and closes every link.  The checks between data parties
that run before training live here too: the salted row-id digest
(:func:`check_rows`); every party's column count (:func:`share_columns`) and the
accumulated-equations rule (:func:`check_equations`) are the linear run's
(:mod:`vfl.runs.linear`), here with the counts read from the hellos.
"""

from __future__ import annotations

import hmac
import json
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from vfl.deploy.jsonfile import write_private_csv
from vfl.errors import (ComputeError, ConfigurationError, DataError, DivergenceError, HandshakeError, PeerError,
                        PeerStopped, ProtocolError, VFLError)
from vfl.deploy.align import private_intersection
from vfl.deploy.checkpoint import RUN_ID
from vfl.deploy.config import FederationConfig
from vfl.deploy.data import PartyData, is_salt, new_salt
from vfl.deploy.narration import Narrator
from vfl.deploy.progress import Progress
from vfl.protocols import TWO_PARTY, Roster
from vfl.runs.linear import check_equations  # noqa: F401 - the pipeline's and the tests' name for it
from vfl.runs.linear import share_columns as share_columns_run
from vfl.transport import Endpoint, Transcript
from vfl.transport.message import parse_json, quote
from vfl.transport.network import DEFAULT_LINGER, NetworkTransport
from vfl.transport.tls import ca_name, certificate_role, issuer_name, load_certificate, pin_problem, signed_by


def check_own_certificate(config: FederationConfig, name: str) -> None:
    """Refuse early, with a local error, a certificate that names another party, that another CA signed than the
    one expected for it, that is not the one its fingerprint pins, or that a revocation list names."""
    certificate = load_certificate(config.party(name).certificate)
    named = certificate_role(certificate)
    if named != name:
        raise ConfigurationError(f"party {name}: the certificate {config.party(name).certificate} is "
                                 f"party {named}'s; peers would refuse it")
    tls = config.tls(name)
    ca_path = tls.ca_for(name)
    ca = load_certificate(ca_path)
    if not signed_by(certificate, ca):
        whose = f"the CA pinned for {name}" if config.party(name).ca is not None else "the federation's CA"
        raise ConfigurationError(f"party {name}: the certificate {config.party(name).certificate} is signed by the CA "
                                 f"{issuer_name(certificate)}, not by {whose} {ca_path}, {ca_name(ca)}; "
                                 "peers would refuse it: use the ca.pem and the certificates of one `vfl certs` run")
    problem = pin_problem(certificate, name, tls)
    if problem:
        raise ConfigurationError(f"party {name}: the certificate {config.party(name).certificate}: {problem}; "
                                 f"peers would refuse it (see {config.path})")


#: The command each task runs, for messages.
_COMMANDS = {"train": "vfl party", "predict": "vfl predict", "align": "vfl align"}


class Session:
    """Party ``role``'s connection to the federation, for one task ("train" or "predict").

    ``role`` is the party's name in the federation file; it links to its peers
    only (a feature party: the label party and the coordinator).  Use as a
    context manager: on an exception the peers are told why, and every link is
    closed on exit.
    """

    def __init__(self, config: FederationConfig, role: str, task: str, narrator: Narrator | None = None,
                 progress: Progress | None = None):
        config.party(role)  # no such party: a ConfigurationError naming the file
        self.config, self.role, self.task = config, role, task
        self.roster = config.roster
        self.narrator = narrator
        self.progress = progress
        self.transcript = Transcript()
        #: the training run's id, as the label party gives it in its hello (None before, and in other tasks)
        self.run_id: str | None = None
        self.transport: NetworkTransport | None = None
        self.endpoint: Endpoint | None = None

    def __enter__(self) -> "Session":
        check_own_certificate(self.config, self.role)
        peers = self.roster.peers(self.role)
        if self.task == "align":      # only the data parties take part: the coordinator has no rows
            peers = tuple(p for p in peers if p != self.roster.coordinator)
        if self.progress is not None:
            self.progress.waiting(peers)
        started = time.monotonic()
        try:
            self.transport = NetworkTransport.connect(self.role, self.config.addresses(),
                                                      self.config.tls(self.role), self.config.network, peers=peers)
        except ConfigurationError as exc:
            if getattr(exc, "address", None) is None:
                raise
            host, port = exc.address
            raise ConfigurationError(f"party {self.role}: another process, perhaps a second "
                                     f"`{_COMMANDS[self.task]} {self.role}`, listens on {host}:{port}; see "
                                     f"[parties.{self.role}] address in {self.config.path}") from None
        if self.progress is not None:
            self.progress.connected(peers, time.monotonic() - started)
        self.endpoint = Endpoint(self.transport, peers, self.transcript, timeout=self.config.timeout,
                                 on_message=self._on_message)
        return self

    def _on_message(self, direction: str, peer: str, message, nbytes: int) -> None:
        if self.narrator is not None:
            self.narrator(direction, peer, message, nbytes)
        if self.progress is not None:
            self.progress.message(direction, peer, message, nbytes)

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is not None and self.endpoint is not None:
            self.endpoint.abort(abort_reason(self.role, exc), party=abort_party(self.role, exc),
                                category=fault_category(exc))
        if self.transport is not None:
            # After a failure, a short linger, ended as soon as the peers close (they stop on reading the
            # abort): closing at once could reset the connections and lose the abort on its way.
            self.transport.close(linger=ABORT_LINGER if exc is not None else DEFAULT_LINGER)

    def hello(self, extra: dict | None = None, run_id: str | None = None) -> dict[str, dict]:
        """Exchange settings fingerprints with every peer (and ``extra`` fields between data parties); return theirs.

        In training the label party gives every peer the run's id (``run_id``,
        :func:`vfl.deploy.checkpoint.run_id`); every party then has :attr:`trained_with`.
        """
        ep = self.endpoint
        shared = self.config.shared(self.task)
        mine = {"fingerprint": self.config.fingerprint(self.task), "shared": json.dumps(shared, sort_keys=True)}
        if run_id is not None:
            mine["run_id"] = run_id
        data_parties = set(self.roster.data_parties)
        for peer in ep.peers:
            fields = dict(mine, **(extra or {})) if {peer, self.role} <= data_parties else mine
            ep.send(peer, "hello", "public", **fields)
        theirs = {}
        for peer in ep.peers:
            message = ep.recv(peer, "hello")
            check_hello(self.role, peer, message)
            if message["fingerprint"] != mine["fingerprint"]:
                raise HandshakeError(f"party {self.role}: settings differ between {self.role} and {peer}: "
                                     f"{differences(shared, message['shared'], self.role, peer)}; every party "
                                     "must use the same [training] and [prediction] settings and the same command")
            theirs[peer] = message.fields
        label = self.roster.label
        self.run_id = run_id if self.role == label else theirs.get(label, {}).get("run_id")
        return theirs

    @property
    def trained_with(self) -> str:
        """What this training's shards carry, and prediction compares: the settings' fingerprint and the run's id."""
        if not isinstance(self.run_id, str) or not RUN_ID.fullmatch(self.run_id):
            raise ProtocolError(f"{self.role}: the label party {self.roster.label} gave no run id in its 'hello' (a "
                                "party on an older vfl?); every party must run the same vfl")
        return f"{self.config.fingerprint('train')}/{self.run_id}"

    def save_transcript(self, path) -> Path:
        return write_private_csv(self.transcript.to_frame(), path, index=False)


#: The fields of a ``hello`` this party reads, and the type each must have (data parties add all but the first two).
_HELLO_FIELDS = {"fingerprint": str, "shared": str, "ids_salt": str, "n_rows": int, "n_columns": int,
                 "trained_with": str, "run_id": str}


def check_hello(role: str, peer: str, message) -> None:
    """Every field of a peer's ``hello`` that is read has its type; else a :class:`ProtocolError` naming the peer.

    Other fields are ignored (never read), so a newer peer may add some.
    """
    problem = None
    for key in ("fingerprint", "shared"):
        if key not in message.fields:
            problem = problem or f"no field {key!r}"
    for key, value in message.fields.items():
        expected = _HELLO_FIELDS.get(key)
        if expected is not None and (not isinstance(value, expected) or isinstance(value, bool)):
            problem = problem or f"field {key!r} must be of type {expected.__name__}"
    if problem:
        raise ProtocolError(f"{role}: waiting for 'hello' from {peer}: {peer} sent a malformed message: {problem}")


def differences(mine: dict, theirs_json: str, me: str, peer: str) -> str:
    try:
        theirs = parse_json(str(theirs_json).encode("utf-8"), "settings", max_depth=4, max_items=1024,
                            max_containers=64)
    except ProtocolError:
        theirs = None
    if not isinstance(theirs, dict):
        return "the peer sent unreadable settings"
    flat_mine, flat_theirs = _flatten(mine), _flatten(theirs)
    keys = sorted(set(flat_mine) | set(flat_theirs))
    diffs = [f"{k if k in flat_mine else quote(k)} = {flat_mine.get(k)!r} at {me}, {quote(flat_theirs.get(k))} at "
             f"{peer}" for k in keys if flat_mine.get(k) != flat_theirs.get(k)]
    return "; ".join(diffs) or "fingerprints differ"


def _flatten(obj: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in obj.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def rows_hello(data: PartyData) -> dict:
    """What data parties add to their hellos to each other: the row count and this run's fresh salt."""
    return {"n_rows": data.n_rows, "ids_salt": new_salt()}


def data_peers(role: str, roster: Roster) -> list[str]:
    """The data parties ``role`` checks rows with: the label party checks with each feature party, and back."""
    return list(roster.features) if role == roster.label else [roster.label]


def check_rows(ep: Endpoint, role: str, data: PartyData, mine: dict, theirs: dict[str, dict],
               roster: Roster = TWO_PARTY) -> None:
    """Each feature party and the label party must hold the same ids: a digest salted with both parties' salts.

    Hub and spoke, like the protocol: the label party compares with every feature
    party, each pair under its own two salts.  The salts travel in the hellos;
    only once both are known does each party send its digest (message
    ``ids_digest``), so no digest can be computed before the run from a guessed
    id set, nor compared with another run's.
    """
    digests = {}
    for peer in data_peers(role, roster):
        salt = theirs.get(peer, {}).get("ids_salt")
        if not is_salt(salt):
            raise ProtocolError(f"party {role}: the hello from {peer} carries no valid salt for the row-id digest")
        digests[peer] = data.ids_digest((mine["ids_salt"], salt))
    for peer, digest in digests.items():
        ep.send(peer, "ids_digest", "public", digest=digest)
    for peer, digest in digests.items():
        received = ep.recv(peer, "ids_digest").fields.get("digest")
        if not isinstance(received, str) or not hmac.compare_digest(received, digest):
            raise DataError(f"party {role}: parties {role} and {peer} hold different row ids ({data.n_rows} rows at "
                            f"{role}, {theirs[peer].get('n_rows')} at {peer}); each CSV must hold the same ids")


def hello_columns(role: str, theirs: dict[str, dict], roster: Roster = TWO_PARTY) -> dict | None:
    """At the label party, each feature party's column count as its hello gave it (``None`` elsewhere)."""
    if role != roster.label:
        return None
    return {peer: theirs.get(peer, {}).get("n_columns") for peer in roster.features}


def share_columns(ep: Endpoint, role: str, data: PartyData, theirs: dict[str, dict],
                  roster: Roster = TWO_PARTY) -> dict[str, int]:
    """Every data party's column count (message ``columns``, :func:`vfl.runs.linear.share_columns`).

    The label party reads each feature party's ``n_columns`` from its hello.
    """
    return share_columns_run(ep, role, len(data.columns), hello_columns(role, theirs, roster), roster)


#: Seconds a party that stops on its own data before joining its peers waits for them, to tell them why.
ANNOUNCE_TIMEOUT = 15.0


@contextmanager
def stops_told(config: FederationConfig, role: str, task: str):
    """Run a party's own checks before it connects; if they fail, it reaches its peers to say why, then fails.

    Without it, a party that stops on its data before it connects leaves its peers waiting out their
    connect timeout, then telling their operators it "never connected".  With it, the party connects
    (waiting at most :data:`ANNOUNCE_TIMEOUT` seconds), sends every peer its ``abort`` (the category of
    the error, no value: :func:`abort_reason`), which each peer reports as the reason it stops, and
    then raises its own error.  Best effort: a peer that cannot be reached is not told.

    Parameters
    ----------
    config : FederationConfig
    role : str
        This party's name.
    task : str
        ``"train"``, ``"predict"`` or ``"align"``: whom the party would have joined.
    """
    try:
        yield
    except DataError as exc:         # its settings are refused at once: those peers would refuse alike
        announce_stop(config, role, task, exc)
        raise


def announce_stop(config: FederationConfig, role: str, task: str, exc: BaseException) -> bool:
    """Connect to the peers of ``task`` with a short timeout and send them this party's ``abort``.

    Returns whether the peers were reached.  Any failure to reach them (not started, refused, the
    party's own certificate unreadable) is swallowed: the party's own error is what it reports.
    """
    network = replace(config.network, connect_timeout=min(config.network.connect_timeout, ANNOUNCE_TIMEOUT))
    session = Session(replace(config, network=network), role, task)
    try:
        session.__enter__()
    except Exception:       # noqa: BLE001 - best effort: nobody to tell
        return False
    try:
        session.__exit__(type(exc), exc, exc.__traceback__)
    except Exception:       # noqa: BLE001
        pass
    return True


#: What stopped a party, as its abort says: the category, and how its peers' errors put it.
CATEGORIES = {"data": "an error in its data", "settings": "an error in its settings",
              "network": "a refused peer or a fault of the network", "system": "a fault of its own machine",
              "interrupted": "its operator's interruption", "internal": "an internal error"}
#: Value-free advice for the kinds of error a peer cannot see the details of.
_HINTS = {"FixedPointOverflowError": "a value outside the fixed-point range: its columns need scaling down, or the "
                                    "training diverges (lower learning_rate)",
          "DivergenceError": "the loss diverged: lower learning_rate, or scale the columns"}
#: Seconds a failing party waits for its peers to take its ``abort`` before it closes its links.
ABORT_LINGER = 1.0


def fault_category(exc: BaseException) -> str:
    """The category (a key of :data:`CATEGORIES`) of what stopped a party.

    A peer's abort that this party passes on keeps the category the first party gave.
    """
    if isinstance(exc, PeerStopped) and exc.category in CATEGORIES:
        return exc.category
    if isinstance(exc, (PeerError, ProtocolError)):
        return "network"
    if isinstance(exc, (ConfigurationError, DivergenceError)):
        return "settings"
    if isinstance(exc, ComputeError) or isinstance(exc, OSError):
        return "system"
    if isinstance(exc, VFLError):
        return "data"
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    return "internal"


def abort_party(role: str, exc: BaseException) -> str:
    """Who stopped first: ``role``, or the party whose abort ``role`` passes on."""
    return exc.party if isinstance(exc, PeerStopped) and exc.party else role


def abort_reason(role: str, exc: BaseException) -> str:
    """What a failing party tells its peers: the party, the category of the cause, and what can be said of it.

    A fault of the federation (a peer gone, refused, a malformed message) is told in
    full.  Messages about this party's data or settings can quote its values (a
    feature, a label, a score), and so can unexpected errors (a ``ValueError`` from
    numpy), so peers learn only the category, the kind of error and value-free
    advice; the full message stays in this party's own output.  A peer's abort that
    made this party stop is passed on as that peer said it.

    Parameters
    ----------
    role : str
    exc : BaseException
        What stopped the party.

    Returns
    -------
    str
        For example ``"party A stopped on an error in its data (DataError); the details stay with A"``.
    """
    if isinstance(exc, PeerStopped) and exc.party and exc.party != role:
        return exc.reason
    kind, category = type(exc).__name__, fault_category(exc)
    if category == "interrupted":
        return f"party {role} was interrupted by its operator"
    if category == "network":
        return f"party {role} stopped on {CATEGORIES[category]}: {kind}: {exc}"
    hint = f": {_HINTS[kind]}" if kind in _HINTS else ""
    return f"party {role} stopped on {CATEGORIES[category]} ({kind}{hint}); the details stay with {role}"


def align_data(session: Session, role: str, data: PartyData, mine: dict, theirs: dict, narrator,
               needed: int, workdir=None) -> tuple[PartyData, dict | None]:
    """The rows to use: the private set intersection (``align = "psi"``), or the same ids checked by digest.

    Returns the rows in the order common to all parties and, with the
    intersection, what it reports (every party's row count and the shared count).
    """
    config = session.config
    if config.align == "same-ids":
        check_rows(session.endpoint, role, data, mine, theirs, config.roster)
        return data, None
    return private_intersection(session.endpoint, config, role, data, needed, narrator, workdir=workdir)


def check_same_training(role: str, roster: Roster, theirs: dict, trained_with: str) -> None:
    """Prediction: every data peer's shard comes from the same training as this party's (their ``hello``)."""
    for peer in data_peers(role, roster):
        if theirs[peer].get("trained_with") != trained_with:
            raise DataError(f"party {role}: the model shards of {role} and {peer} come from different training "
                            "runs (or settings); use the shards one training run wrote")
