"""Run one party of a federation as its own process: connect, check, train or predict, write results.

The role programs of :mod:`vfl.protocols` run unchanged; this module gives them
a :class:`~vfl.transport.network.NetworkTransport` instead of in-process queues,
and surrounds them with what a real deployment needs:

* at connect, every pair of parties exchanges a ``hello`` with the fingerprint
  of the shared settings (A and B add their row count and a fresh salt, then
  exchange a digest of their row ids under both salts); any difference stops
  the run with an error saying what differs;
* after every epoch, the party writes a checkpoint; with ``resume`` it starts
  after the last epoch every party completed;
* at the end, A and B write their model shards and every party its transcript
  (the messages it sent); B writes the scores of a prediction;
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
from vfl.federation.checkpoint import CheckpointStore, read_shard, shard_params, write_json, write_shard
from vfl.federation.config import ROLES, FederationConfig
from vfl.federation.data import PartyData, encode_labels, is_salt, load_csv, new_salt
from vfl.federation.narration import Narrator
from vfl.parties import Coordinator, PartyA, PartyB, dp
from vfl.protocols import check_gradient_equations, predict_a, predict_b, predict_c, run_a, run_b, run_c
from vfl.transport import Endpoint, Transcript
from vfl.transport.message import parse_json, quote
from vfl.transport.network import DEFAULT_LINGER, NetworkTransport
from vfl.transport.tls import certificate_role, load_certificate


def check_own_certificate(config: FederationConfig, role: str) -> None:
    """Refuse early, with a local error, a certificate that names another role."""
    named = certificate_role(load_certificate(config.party(role).certificate))
    if named != role:
        raise ConfigurationError(f"party {role}: the certificate {config.party(role).certificate} is "
                                 f"party {named}'s; peers would refuse it")


class Session:
    """One party's connection to the federation, for one task ("train" or "predict").

    Use as a context manager: on an exception the peers are told why, and every
    link is closed on exit.
    """

    def __init__(self, config: FederationConfig, role: str, task: str, narrator: Narrator | None = None):
        if role not in ROLES:
            raise ConfigurationError(f"role must be one of {ROLES}, got {role!r}")
        self.config, self.role, self.task = config, role, task
        self.narrator = narrator
        self.transcript = Transcript()
        self.transport: NetworkTransport | None = None
        self.endpoint: Endpoint | None = None

    def __enter__(self) -> "Session":
        check_own_certificate(self.config, self.role)
        self.transport = NetworkTransport.connect(self.role, self.config.addresses(), self.config.tls(self.role),
                                                  self.config.network)
        self.endpoint = Endpoint(self.transport, [r for r in ROLES if r != self.role], self.transcript,
                                 timeout=self.config.timeout, on_message=self._on_message)
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
        """Exchange settings fingerprints with every peer (and ``extra`` fields with A/B); return theirs."""
        ep = self.endpoint
        shared = self.config.shared(self.task)
        mine = {"fingerprint": self.config.fingerprint(self.task), "shared": json.dumps(shared, sort_keys=True)}
        for peer in ep.peers:
            fields = dict(mine, **(extra or {})) if {peer, self.role} == {"A", "B"} else mine
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


#: The fields of a ``hello`` this party reads, and the type each must have (A and B add the last three).
_HELLO_FIELDS = {"fingerprint": str, "shared": str, "ids_digest": str, "n_rows": int, "trained_with": str}


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
    """What A and B add to their hello to each other: the row count and this run's fresh salt."""
    return {"n_rows": data.n_rows, "ids_salt": new_salt()}


def check_rows(ep: Endpoint, role: str, data: PartyData, mine: dict, theirs: dict[str, dict]) -> None:
    """A and B must hold the same ids: they compare a digest salted with both parties' salts.

    The salts travel in the hellos; only once both are known does each party
    send its digest (message ``ids_digest``), so no digest can be computed
    before the run from a guessed id set, nor compared with another run's.
    """
    peer = "B" if role == "A" else "A"
    other = theirs.get(peer, {})
    if not is_salt(other.get("ids_salt")):
        raise ProtocolError(f"party {role}: the hello from {peer} carries no valid salt for the row-id digest")
    digest = data.ids_digest((mine["ids_salt"], other["ids_salt"]))
    ep.send(peer, "ids_digest", "public", digest=digest)
    received = ep.recv(peer, "ids_digest").fields.get("digest")
    if not isinstance(received, str) or not hmac.compare_digest(received, digest):
        raise DataError(f"party {role}: parties {role} and {peer} hold different row ids ({data.n_rows} rows at "
                        f"{role}, {other.get('n_rows')} at {peer}); each CSV must hold the same ids")


# --------------------------------------------------------------------------- training

def train(config: FederationConfig, role: str, data_path=None, workdir=".", resume: bool = False,
          narrate: bool = False, progress: bool = False) -> dict:
    """Run party ``role``'s part of training; write its shard, transcript, and (C) the loss curve.

    Returns a summary dict (``epochs``, ``loss_curve`` for C, the written paths).
    """
    settings = config.training
    workdir = Path(workdir)
    store = CheckpointStore(workdir / "checkpoints", role, config.fingerprint("train"))
    checkpoints = store.load() if resume else {}
    if not resume:
        store.clear()
    party, data, classes = _training_party(config, role, data_path)
    narrator = Narrator(role, settings.max_iter) if narrate else None
    bar = _bar(progress, role, settings.max_iter)
    if narrator and checkpoints:
        narrator.say(f"resume: has checkpoints after epochs {sorted(k + 1 for k in checkpoints)}")

    def on_epoch(epoch: int, state: dict) -> None:
        store.save(epoch, state)
        loss = state["loss_curve"][-1] if role == "C" else None
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
                check_rows(session.endpoint, role, data, extra, theirs)
                _check_equations(role, data, theirs, settings)
            program = {"A": run_a, "B": run_b, "C": run_c}[role]
            batch_loss = {"on_batch_loss": narrator.batch_loss} if role == "C" and narrator else {}
            result = program(session.endpoint, party, settings, checkpoints or None, on_epoch, **batch_loss)
            summary = {"role": role, "transcript": str(session.save_transcript(workdir / "transcript_train.csv"))}
    finally:
        if bar is not None:
            bar.close()
    if role == "C":
        summary.update(loss_curve=result["loss_curve"], epochs=result["n_iter"], converged=result["converged"])
        write_json(workdir / "training_C.json", summary, private=False)
    else:
        if role == "B" and settings.dp:
            # with DP every epoch runs (tol is refused), so max_iter epochs were released
            summary["dp_spent"] = [dp.epsilon_spent(party.noise_multiplier, settings.dp_delta, settings.max_iter),
                                   settings.dp_delta]
        summary["model"] = str(write_shard(workdir / f"model_{role}.json", role, settings.objective, data.columns,
                                           party.params, party.fit_intercept, config.fingerprint("train"),
                                           classes, config.label if role == "B" else None,
                                           initial=party.initial_params))
    store.clear()  # finished: the shard is the result
    return summary


def _check_equations(role: str, data: PartyData, theirs: dict[str, dict], settings) -> None:
    """The accumulated-equations rule (``check_gradient_equations``), from the column counts in the hellos."""
    if settings.dp:
        return
    peer = "B" if role == "A" else "A"
    columns = {role: len(data.columns), peer: theirs.get(peer, {}).get("n_columns")}
    if not isinstance(columns[peer], int):
        raise ProtocolError(f"party {role}: {peer}'s hello has no column count")
    check_gradient_equations(data.n_rows, settings.batch_size, settings.max_iter, columns, "B",
                             settings.fit_intercept)


def _training_party(config: FederationConfig, role: str, data_path):
    settings = config.training
    if role == "C":
        if data_path is not None:
            raise ConfigurationError("party C holds no data: leave out --data")
        return Coordinator(settings.key_bits, settings.insecure, FixedPoint(settings.frac_bits)), None, None
    if data_path is None:
        raise ConfigurationError(f"party {role} needs its data: --data FILE.csv")
    if role == "A":
        data = load_csv(data_path, "A", config.id_column)
        return PartyA(data.features, columns=data.columns), data, None
    data = load_csv(data_path, "B", config.id_column, label=config.label)
    labels, classes = encode_labels(data.labels, settings.objective)
    party = PartyB(data.features, labels, fit_intercept=settings.fit_intercept, columns=data.columns)
    return party, data, classes


# --------------------------------------------------------------------------- prediction

def predict(config: FederationConfig, role: str, data_path=None, model_path=None, workdir=".",
            output=None, narrate: bool = False) -> dict:
    """Run party ``role``'s part of federated prediction; B writes the scores CSV.

    Returns a summary dict: ``mode``, ``rows`` (how many rows were scored), the
    transcript's path, and for B the scores' path.
    """
    settings = config.training
    workdir = Path(workdir)
    shard = data = None
    if role == "C":
        if data_path is not None:
            raise ConfigurationError("party C holds no data: leave out --data")
        party = Coordinator(settings.key_bits, settings.insecure, FixedPoint(settings.frac_bits))
    else:
        if data_path is None:
            raise ConfigurationError(f"party {role} needs its data: --data FILE.csv")
        shard = read_shard(model_path or workdir / f"model_{role}.json", role)
        data = load_csv(data_path, role, config.id_column, label=config.label if role == "B" else None,
                        columns=shard["columns"], label_required=False)
        if role == "A":
            party = PartyA(data.features, columns=data.columns)
        else:
            party = PartyB(data.features, np.zeros(data.n_rows), fit_intercept=shard["fit_intercept"],
                           columns=data.columns)
        party.load_state({"params": shard_params(shard)})
    narrator = Narrator(role, phase="predict") if narrate else None
    with Session(config, role, "predict", narrator) as session:
        extra = dict(rows_hello(data), trained_with=shard["trained_with"]) if data else None
        theirs = session.hello(extra)
        if data:
            check_rows(session.endpoint, role, data, extra, theirs)
            peer = "B" if role == "A" else "A"
            if theirs[peer].get("trained_with") != shard["trained_with"]:
                raise DataError(f"party {role}: the model shards of A and B come from trainings with different "
                                "settings; use the shards of one training run")
        mode, frac_bits = config.prediction_mode, settings.frac_bits
        packed = {"packing": settings.packing, "score_bound": settings.score_bound}
        summary = {"role": role, "mode": mode}
        if role == "A":
            predict_a(session.endpoint, party, data.features, mode, frac_bits, **packed)
            summary["rows"] = data.n_rows
        elif role == "B":
            scores = predict_b(session.endpoint, party, data.features, mode, frac_bits, **packed)
            summary["rows"] = data.n_rows
            summary["scores"] = str(write_scores(output or workdir / "scores.csv", data.ids, scores, shard,
                                                 config.id_column))
        else:
            summary["rows"] = predict_c(session.endpoint, party, mode, **packed)
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
