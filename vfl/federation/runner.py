"""Run one party of a federation as its own process: connect, check, train or predict, write results.

The role programs of :mod:`vfl.protocols` run unchanged; this module gives them
a :class:`~vfl.transport.network.NetworkTransport` instead of in-process queues,
and surrounds them with what a real deployment needs:

Parties are named in ``federation.toml`` (``A``, ``B``, ``C``, or ``bank``,
``telco``...), each with its role; the names are the transport's role names.
A feature party links only to the label party and the coordinator
(:meth:`vfl.protocols.Roster.peers`).

* at connect, every pair of linked parties exchanges a ``hello`` with the
  fingerprint of the shared settings (each feature party and the label party add
  their row count, column count and a fresh salt, then exchange a digest of
  their row ids under both salts); any difference stops the run with an error
  saying what differs;
* before training, the label party sends every feature party the column count of
  every data party (``columns``), so each data party checks the
  accumulated-equations rule for all of them and refuses with the same message;
* after every epoch, the party writes a checkpoint; with ``resume`` it starts
  after the last epoch every party completed;
* at the end, the data parties write their model shards and every party its
  transcript (the messages it sent); the label party writes the scores of a
  prediction;
* on any failure the party tells its peers why (``abort``, best effort), closes
  its links at once, and the error names the peer and the protocol step.
"""

from __future__ import annotations

import hmac
import json
from pathlib import Path

import numpy as np
import pandas as pd

from vfl.crypto import FixedPoint
from vfl.errors import ConfigurationError, DataError, HandshakeError, PeerError, ProtocolError, VFLError
from vfl.federation.align import min_rows, private_intersection, write_aligned
from vfl.federation.checkpoint import CheckpointStore, read_shard, shard_params, write_json, write_shard
from vfl.federation.compute import uses_compute
from vfl.federation.config import FederationConfig
from vfl.federation.data import PartyData, encode_labels, is_salt, load_csv, new_salt
from vfl.federation.narration import Narrator
from vfl.parties import Coordinator, PartyA, PartyB, class_weights, dp
from vfl.protocols import (TWO_PARTY, Roster, check_gradient_equations, predict_a, predict_b, predict_c, run_a, run_b,
                           run_c)
from vfl.transport import Endpoint, Transcript
from vfl.transport.message import parse_json, quote
from vfl.transport.network import DEFAULT_LINGER, NetworkTransport
from vfl.transport.tls import certificate_role, load_certificate


def check_own_certificate(config: FederationConfig, name: str) -> None:
    """Refuse early, with a local error, a certificate that names another party."""
    named = certificate_role(load_certificate(config.party(name).certificate))
    if named != name:
        raise ConfigurationError(f"party {name}: the certificate {config.party(name).certificate} is "
                                 f"party {named}'s; peers would refuse it")


class Session:
    """Party ``role``'s connection to the federation, for one task ("train" or "predict").

    ``role`` is the party's name in the federation file; it links to its peers
    only (a feature party: the label party and the coordinator).  Use as a
    context manager: on an exception the peers are told why, and every link is
    closed on exit.
    """

    def __init__(self, config: FederationConfig, role: str, task: str, narrator: Narrator | None = None):
        config.party(role)  # no such party: a ConfigurationError naming the file
        self.config, self.role, self.task = config, role, task
        self.roster = config.roster
        self.narrator = narrator
        self.transcript = Transcript()
        self.transport: NetworkTransport | None = None
        self.endpoint: Endpoint | None = None

    def __enter__(self) -> "Session":
        check_own_certificate(self.config, self.role)
        peers = self.roster.peers(self.role)
        if self.task == "align":      # only the data parties take part: the coordinator has no rows
            peers = tuple(p for p in peers if p != self.roster.coordinator)
        self.transport = NetworkTransport.connect(self.role, self.config.addresses(), self.config.tls(self.role),
                                                  self.config.network, peers=peers)
        self.endpoint = Endpoint(self.transport, peers, self.transcript, timeout=self.config.timeout,
                                 on_message=self._on_message)
        return self

    def _on_message(self, direction: str, peer: str, message, nbytes: int) -> None:
        if self.narrator is not None:
            self.narrator(direction, peer, message, nbytes)

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is not None and self.endpoint is not None:
            self.endpoint.abort(abort_reason(self.role, exc))
        if self.transport is not None:
            # After a failure, no lingering close: the party stops within its timeout (the abort
            # above is best effort).  At the normal end, linger so the last message is not lost.
            self.transport.close(linger=0 if exc is not None else DEFAULT_LINGER)

    def hello(self, extra: dict | None = None) -> dict[str, dict]:
        """Exchange settings fingerprints with every peer (and ``extra`` fields between data parties); return theirs."""
        ep = self.endpoint
        shared = self.config.shared(self.task)
        mine = {"fingerprint": self.config.fingerprint(self.task), "shared": json.dumps(shared, sort_keys=True)}
        data_parties = set(self.roster.data_parties)
        for peer in ep.peers:
            fields = dict(mine, **(extra or {})) if {peer, self.role} <= data_parties else mine
            ep.send(peer, "hello", "public", **fields)
        theirs = {}
        for peer in ep.peers:
            message = ep.recv(peer, "hello")
            _check_hello(self.role, peer, message)
            if message["fingerprint"] != mine["fingerprint"]:
                raise HandshakeError(f"party {self.role}: settings differ between {self.role} and {peer}: "
                                     f"{_differences(shared, message['shared'], self.role, peer)}; every party "
                                     "must use the same [training] and [prediction] settings and the same command")
            theirs[peer] = message.fields
        return theirs

    def save_transcript(self, path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.transcript.to_frame().to_csv(path, index=False)
        return path


#: The fields of a ``hello`` this party reads, and the type each must have (data parties add all but the first two).
_HELLO_FIELDS = {"fingerprint": str, "shared": str, "ids_salt": str, "n_rows": int, "n_columns": int,
                 "trained_with": str}


def _check_hello(role: str, peer: str, message) -> None:
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


def _differences(mine: dict, theirs_json: str, me: str, peer: str) -> str:
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


def _data_peers(role: str, roster: Roster) -> list[str]:
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
    for peer in _data_peers(role, roster):
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


def share_columns(ep: Endpoint, role: str, data: PartyData, theirs: dict[str, dict],
                  roster: Roster = TWO_PARTY) -> dict[str, int]:
    """Every data party's column count, in the roster's order: the label party tells the feature parties.

    The label party reads each feature party's ``n_columns`` from its hello and
    sends every feature party the whole list (message ``columns``: the names
    joined by commas, and the counts), since feature parties never talk to each
    other.  Each data party can then check the accumulated-equations rule for
    every party (:func:`check_equations`).

    Raises
    ------
    ProtocolError
        A hello without a column count, or a ``columns`` message that does not list
        every data party once with a positive count, or this party's count wrongly.
    """
    label = roster.label
    if role == label:
        counts = {}
        for peer in roster.features:
            n = theirs.get(peer, {}).get("n_columns")
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise ProtocolError(f"party {role}: the hello from {peer} has no column count")
            counts[peer] = n
        counts[role] = len(data.columns)
        for peer in roster.features:
            ep.send(peer, "columns", "public", parties=",".join(counts),
                    counts=np.array(list(counts.values()), dtype=np.int64))
        return counts
    message = ep.recv(label, "columns")
    names, values = message.fields.get("parties"), message.fields.get("counts")
    problem = None
    if not isinstance(names, str) or names.split(",") != list(roster.data_parties):
        problem = f"it lists the parties {quote(names)}, not {','.join(roster.data_parties)}"
    elif (not isinstance(values, np.ndarray) or values.shape != (len(roster.data_parties),)
          or values.dtype.kind not in "iu" or not (values >= 1).all()):
        problem = "it does not give one positive column count per data party"
    elif int(values[roster.data_parties.index(role)]) != len(data.columns):
        problem = f"it says {role} has {int(values[roster.data_parties.index(role)])} columns, not {len(data.columns)}"
    if problem:
        raise ProtocolError(f"{role}: waiting for 'columns' from {label}: {label} sent a malformed message: {problem}")
    return {name: int(v) for name, v in zip(roster.data_parties, values)}


def check_equations(n_rows: int, columns: dict[str, int], settings, roster: Roster = TWO_PARTY) -> None:
    """The accumulated-equations rule (:func:`~vfl.protocols.check_gradient_equations`) for every data party.

    Every data party runs it on the same column counts, so each refuses with the same message.
    """
    if settings.dp:
        return
    check_gradient_equations(n_rows, settings.batch_size, settings.max_iter, columns, roster.label,
                             settings.fit_intercept)


# --------------------------------------------------------------------------- training

@uses_compute
def train(config: FederationConfig, role: str, data_path=None, workdir=".", resume: bool = False,
          narrate: bool = False, progress: bool = False) -> dict:
    """Run party ``role``'s part of training; write its shard, transcript, and (coordinator) the loss curve.

    ``role`` is the party's name in ``config``.  Returns a summary dict: ``party``
    (the name), ``role`` (``"feature"``, ``"label"`` or ``"coordinator"``), the
    written paths, and ``epochs`` and ``loss_curve`` for the coordinator.
    """
    settings, roster = config.training, config.roster
    kind = config.role_of(role)
    workdir = Path(workdir)
    data = _training_data(config, role, kind, data_path)
    store = CheckpointStore(workdir / "checkpoints", role, config.fingerprint("train"))
    checkpoints = store.load() if resume else {}
    if not resume:
        store.clear()
    narrator = Narrator(role, settings.max_iter) if narrate else None
    bar = _bar(progress, role, settings.max_iter)
    if narrator and checkpoints:
        narrator.say(f"resume: has checkpoints after epochs {sorted(k + 1 for k in checkpoints)}")

    def on_epoch(epoch: int, state: dict) -> None:
        store.save(epoch, state)
        loss = state["loss_curve"][-1] if kind == "coordinator" else None
        if narrator and loss is not None:
            narrator.loss(epoch, loss)
        if bar is not None:
            bar.update(1)
            if loss is not None:
                bar.set_postfix(loss=f"{loss:.5f}")

    try:
        with Session(config, role, "train", narrator) as session:
            extra = dict(rows_hello(data), n_columns=len(data.columns)) if data else None
            theirs = session.hello(extra)
            if data:
                data, alignment = _align(session, config, role, kind, data, extra, theirs, narrator,
                                         min_rows(settings.batch_size, len(data.columns) +
                                                  (kind == "label" and settings.fit_intercept)))
                columns = share_columns(session.endpoint, role, data, theirs, roster)
                check_equations(data.n_rows, columns, settings, roster)
            party, classes = _training_party(config, role, kind, data)
            program = {"feature": run_a, "label": run_b, "coordinator": run_c}[kind]
            batch_loss = {"on_batch_loss": narrator.batch_loss} if kind == "coordinator" and narrator else {}
            result = program(session.endpoint, party, settings, checkpoints or None, on_epoch, roster=roster,
                             **batch_loss)
            summary = {"party": role, "role": kind,
                       "transcript": str(session.save_transcript(workdir / "transcript_train.csv"))}
            if data and alignment:
                summary["alignment"] = alignment
    finally:
        if bar is not None:
            bar.close()
    if kind == "coordinator":
        summary.update(loss_curve=result["loss_curve"], epochs=result["n_iter"], converged=result["converged"])
        write_json(workdir / f"training_{role}.json", summary, private=False)
    else:
        if kind == "label" and settings.dp:
            # with DP every epoch runs (tol is refused), so max_iter epochs were released
            summary["dp_spent"] = [dp.epsilon_spent(party.noise_multiplier, settings.dp_delta, settings.max_iter),
                                   settings.dp_delta]
        summary["model"] = str(write_shard(workdir / f"model_{role}.json", role, kind, settings.objective,
                                           data.columns, party.params, party.fit_intercept,
                                           config.fingerprint("train"), classes,
                                           config.label if kind == "label" else None, initial=party.initial_params))
    store.clear()  # finished: the shard is the result
    return summary


def _training_data(config: FederationConfig, role: str, kind: str, data_path) -> PartyData | None:
    """This party's CSV (none for the coordinator)."""
    if kind == "coordinator":
        if data_path is not None:
            raise ConfigurationError(f"party {role} holds no data (it is the coordinator): leave out --data")
        return None
    if data_path is None:
        raise ConfigurationError(f"party {role} needs its data: --data FILE.csv")
    return load_csv(data_path, role, config.id_column, label=config.label if kind == "label" else None)


def _training_party(config: FederationConfig, role: str, kind: str, data: PartyData | None):
    """The party to train, from its (aligned) rows; and the label classes for the label party."""
    settings = config.training
    if kind == "coordinator":
        return Coordinator(settings.key_bits, settings.insecure, FixedPoint(settings.frac_bits)), None
    if kind == "feature":
        return PartyA(data.features, role=role, columns=data.columns), None
    labels, classes = encode_labels(data.labels, settings.objective, role)
    party = PartyB(data.features, labels, fit_intercept=settings.fit_intercept, role=role, columns=data.columns)
    if settings.class_weight is not None:       # the weights stay with the label party
        party.set_weights(class_weights(data.labels, settings.class_weight, role))
    return party, classes


def _align(session: "Session", config: FederationConfig, role: str, kind: str, data: PartyData, mine: dict,
           theirs: dict, narrator, needed: int) -> tuple[PartyData, dict | None]:
    """The rows to use: the private set intersection (``align = "psi"``), or the same ids checked by digest."""
    if config.align == "same-ids":
        check_rows(session.endpoint, role, data, mine, theirs, config.roster)
        return data, None
    return private_intersection(session.endpoint, config, role, data, needed, narrator)


# --------------------------------------------------------------------------- alignment only

@uses_compute
def align_only(config: FederationConfig, role: str, data_path, output, narrate: bool = False) -> dict:
    """``vfl align``: run only the private set intersection; write this party's aligned rows.

    Every data party runs it at once (the coordinator takes no part).  Returns
    ``party``, ``alignment`` (every party's row count and the shared count) and
    ``output``, the CSV of this party's rows of the intersection in the common order.
    """
    kind = config.role_of(role)
    if kind == "coordinator":
        raise ConfigurationError(f"party {role} is the coordinator: it holds no rows to align")
    if data_path is None:
        raise ConfigurationError(f"party {role} needs its data: --data FILE.csv")
    data = load_csv(data_path, role, config.id_column, label=config.label if kind == "label" else None,
                    label_required=False)
    narrator = Narrator(role, phase="align") if narrate else None
    with Session(config, role, "align", narrator) as session:
        session.hello()
        aligned, report = private_intersection(session.endpoint, config, role, data, 1, narrator)
    path = write_aligned(output, aligned, config.id_column, config.label if kind == "label" else None)
    return {"party": role, "role": kind, "alignment": report, "output": str(path)}


# --------------------------------------------------------------------------- prediction

@uses_compute
def predict(config: FederationConfig, role: str, data_path=None, model_path=None, workdir=".",
            output=None, narrate: bool = False) -> dict:
    """Run party ``role``'s part of federated prediction; the label party writes the scores CSV.

    Returns a summary dict: ``party`` (the name), ``role`` (its kind), ``mode``,
    ``rows`` (how many rows were scored), ``label`` and ``coordinator`` (their
    names), the transcript's path, and for the label party the scores' path.
    """
    settings, roster = config.training, config.roster
    kind = config.role_of(role)
    workdir = Path(workdir)
    shard = data = None
    if kind == "coordinator":
        if data_path is not None:
            raise ConfigurationError(f"party {role} holds no data (it is the coordinator): leave out --data")
        party = Coordinator(settings.key_bits, settings.insecure, FixedPoint(settings.frac_bits))
    else:
        if data_path is None:
            raise ConfigurationError(f"party {role} needs its data: --data FILE.csv")
        shard = read_shard(model_path or workdir / f"model_{role}.json", role, kind)
        data = load_csv(data_path, role, config.id_column, label=config.label if kind == "label" else None,
                        columns=shard["columns"], label_required=False)
    narrator = Narrator(role, phase="predict") if narrate else None
    with Session(config, role, "predict", narrator) as session:
        extra = dict(rows_hello(data), trained_with=shard["trained_with"]) if data else None
        theirs = session.hello(extra)
        alignment = None
        if data:
            data, alignment = _align(session, config, role, kind, data, extra, theirs, narrator, 1)
            if kind == "feature":
                party = PartyA(data.features, role=role, columns=data.columns)
            else:
                party = PartyB(data.features, np.zeros(data.n_rows), fit_intercept=shard["fit_intercept"], role=role,
                               columns=data.columns)
            party.load_state({"params": shard_params(shard)})
            for peer in _data_peers(role, roster):
                if theirs[peer].get("trained_with") != shard["trained_with"]:
                    raise DataError(f"party {role}: the model shards of {role} and {peer} come from trainings with "
                                    "different settings; use the shards of one training run")
        mode, frac_bits, ep = config.prediction_mode, settings.frac_bits, session.endpoint
        summary = {"party": role, "role": kind, "mode": mode, "label": roster.label,
                   "coordinator": roster.coordinator}
        if alignment:
            summary["alignment"] = alignment
        packed = {"packing": settings.packing, "score_bound": settings.score_bound}
        if kind == "feature":
            predict_a(ep, party, data.features, mode, frac_bits, roster=roster, **packed)
            summary["rows"] = data.n_rows
        elif kind == "label":
            scores = predict_b(ep, party, data.features, mode, frac_bits, roster=roster, **packed)
            summary["rows"] = data.n_rows
            summary["scores"] = str(write_scores(output or workdir / "scores.csv", data.ids, scores, shard,
                                                 config.id_column))
        else:
            summary["rows"] = predict_c(ep, party, mode, roster=roster, **packed)
        summary["transcript"] = str(session.save_transcript(workdir / "transcript_predict.csv"))
    return summary


def abort_reason(role: str, exc: BaseException) -> str:
    """What a failing party tells its peers: a fault of the federation in full, anything else only by kind.

    Messages about this party's data or settings can quote its values (a feature,
    a label, a score), and so can unexpected errors (a ``ValueError`` from numpy),
    so peers learn only the kind of fault; the full message stays in this party's
    own output.

    Parameters
    ----------
    role : str
    exc : BaseException
        What stopped the party.

    Returns
    -------
    str
        For example ``"party A stopped on an internal error (ValueError); details stay with it"``.
    """
    kind = type(exc).__name__
    if isinstance(exc, (PeerError, ProtocolError)):
        return f"party {role}: {kind}: {exc}"
    if isinstance(exc, VFLError):
        return f"party {role} stopped on a {kind} about its own data or settings (details stay with it)"
    if isinstance(exc, KeyboardInterrupt):
        return f"party {role} was interrupted by its operator"
    if isinstance(exc, OSError):
        return f"party {role} stopped on a system error on its machine ({kind}); details stay with it"
    return f"party {role} stopped on an internal error ({kind}); details stay with it"


def write_scores(path, ids, scores, shard: dict, id_column: str = "id") -> Path:
    """B's output: one row per id with the score, and for logistic models the probability and class."""
    frame = pd.DataFrame({id_column: ids, "score": scores})
    if shard.get("objective") == "logistic":
        probability = 1.0 / (1.0 + np.exp(-np.clip(scores, -500, 500)))
        frame["probability"] = probability
        classes = shard.get("classes") or [0, 1]
        frame["prediction"] = np.where(probability >= 0.5, classes[1], classes[0])
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)
    return path


def _bar(enabled: bool, role: str, total: int):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=f"party {role}", unit="epoch")
