"""A linear model's round: each feature party's encrypted partial scores (or its private table's), summed under
encryption with the label party's own, masked, decrypted by the coordinator, unmasked by the label party.

With reasons (``[serving] reasons``, :mod:`vfl.serving.reasons`) each feature party's total is decrypted on its own
instead of their sum, in the same one masked ``decrypt`` request (:func:`party_totals`), as the credit pipeline's
round does."""

from __future__ import annotations

import json

import gmpy2
import numpy as np

from vfl.crypto import EncryptedVector
from vfl.errors import ConfigurationError, DataError, ProtocolError
from vfl.parties.explain import additive_contributions
from vfl.serving import messages, private, reasons
from vfl.serving.answers import classified, error, outcome, theirs
from vfl.deploy.shards.linear import read_shard, shard_models, shard_scaler
from vfl.runs import explained
from vfl.runs.linear import REASONS, Explaining, raw_release, reason_codes
from vfl.serving.messages import OK, pack_ids
from vfl.serving.rounds import encrypted_scores, masked_total, partial_scores, summed, unmasked


#: The round request a linear model's feature party answers, and what a feature party of another model says to it.
REQUEST, REFUSED = "score", "asked for partial scores of a tree model"


class LinearShare:
    """One party's shard of a linear or logistic model: its columns, weights and scaling.

    ``scores(x)`` is its partial score of every model (one, or one per class for
    one-vs-rest): ``(n, models)``; the label party's includes the intercept.  What every
    share has (:mod:`vfl.serving.scorers`) is documented there.
    """

    kind = "linear"
    complete = True
    keyed = True
    request = "score"
    inline_null = False
    noun = "linear model"
    own_reasons = False

    def __init__(self, shard: dict, version: str):
        self.version = version
        self.role = shard["role"]
        self.columns = list(shard["columns"])
        self.trained_with = shard["trained_with"]
        self.objective = shard["objective"]
        params = np.asarray(shard_models(shard), dtype=np.float64)
        m = len(self.columns)
        self.coef = params[:, :m]
        self.intercept = params[:, m] if params.shape[1] > m else np.zeros(len(params))
        self.scaler = shard_scaler(shard)
        #: the party's training mean per column (raw units; reasons measure contributions from it), or None for a
        #: shard written before ``vfl party`` kept it
        self.training_mean = np.asarray(shard["training_mean"], dtype=np.float64) if "training_mean" in shard \
            else None
        self.classes = shard.get("classes") or None
        #: values each row adds to a round: one per model
        self.width = len(params)
        #: the columns its partial scores are linear in
        self.released_columns = self.columns
        #: reasons (:mod:`vfl.serving.reasons`): the adverse side (0: none asked); the label party's: each feature
        #: party's ``(constant, codes it may name)`` from its ``loaded`` answer; a feature party's: its consenting
        #: model (:class:`vfl.runs.linear.Explaining`) where it sends codes
        self.reason_sign = 0.0
        self.feature_reasons: dict[str, tuple[float, list]] = {}
        self.reason_model = None

    def scores(self, x: np.ndarray) -> np.ndarray:
        x = x if self.scaler is None else self.scaler.apply(x)
        with np.errstate(all="ignore"):
            return x @ self.coef.T + self.intercept

    # -- the feature party ----------------------------------------------------------------------------------------
    def check_release(self, service, version: str, consent: dict, sign: float, tables: int) -> None:
        """At ``load``: its partial scores' release check, and its reason codes' where it sends them."""
        check_release(service, self, version)
        if sign and consent and tables not in (1, 2) and service.settings.queries != "private" and \
                service.release.epsilon is None:
            _check_reason_release(service, self, version, consent, sign)

    def answer(self, service, message) -> tuple:
        """Its answer to a ``score`` request (:func:`answer`)."""
        return answer(service, self, message)

    def loaded_fields(self, role: str, sign: float) -> dict:
        """What its ``loaded`` answer adds: with reasons, its total's constant and the codes it may name."""
        if not sign:
            return {}
        names = list(self.reason_model.codes.values()) if self.reason_model is not None else []
        return {"constant": constant(self), "reason_names": json.dumps(names)}

    def payloads(self, values: np.ndarray, status: np.ndarray, layout, frac_bits: int, noise=None) -> np.ndarray:
        """Its private table's payloads (:func:`payloads`)."""
        return payloads(self, layout, values, status, noise)

    # -- the label party ------------------------------------------------------------------------------------------
    def by_id_only(self, n_features: int) -> str:
        """Why its rounds cannot be private queries ("": they can)."""
        return ""

    def take_loaded(self, peer: str, answer, width: int, role: str) -> None:
        """A feature party's ``loaded`` answer: as many models, and with reasons its constant and codes."""
        check_models(self, peer, width, role)
        if self.reason_sign:
            self.feature_reasons[peer] = loaded_constant(answer, peer)

    def unexplained(self, n_features: int) -> str:
        """Why ``vfl serve`` never explains it ("": it may)."""
        return ""

    def check_explainable(self) -> None:
        """Raise a :class:`~vfl.errors.ConfigurationError` if its rounds cannot give reasons."""
        if self.width != 1:
            raise ConfigurationError("reasons take one model (regression or two classes), not one-vs-rest")
        explaining(self)                # its training mean: kept by the shard

    def outcome(self, z: np.ndarray) -> dict:
        """One id's answer from its scores; several classes: one-vs-rest, each class's sigmoid normalised."""
        return classified(z, self.classes, regression=self.objective == "linear", one_vs_rest=True)


def load_share(path, version: str, party: str, kind: str, features=()) -> LinearShare:
    """Party ``party``'s share of ``version`` of a linear model, from its shard at ``path`` (``kind``: its role),
    checked; ``features`` (the federation's feature parties) is not needed."""
    return LinearShare(read_shard(path, party, kind), version)


def answer(service, share, message) -> tuple:
    """The feature party's ``scores`` answer: a status per id and its partial scores encrypted under the coordinator's
    key (0 for ids it cannot score), with DP its noise added; where it consented at ``load``, per id the index of
    the column it names as its reason."""
    fingerprint = messages.text(message, "key", service.label, 64)
    layout = service.key(fingerprint)
    if layout is None or layout.context.public_key.fingerprint != fingerprint:
        raise ConfigurationError(f"it does not hold the coordinator's current key "
                                 f"({'not linked to ' + str(service.coordinator) if layout is None else 'another key'})")
    values, status, ids = service.rows(message, share)
    u, status = partial_scores(share, values, status, layout.bound)
    u = service.noised(share.version, u, ids, status)
    named = {} if share.reason_model is None else {
        "codes": feature_codes(share, values, status == OK, share.reason_model, share.reason_sign)}
    return "scores", "ciphertext", dict(encrypted_scores(layout, u, service.role), status=status, **named)


def check_models(share, peer: str, width: int, role: str) -> None:
    """The label party: a feature party's shard must hold as many models (``width``, from its ``loaded`` answer)."""
    if width != share.width:
        raise DataError(f"party {peer}'s shard of model version {share.version} holds {width} model(s), party "
                        f"{role}'s {share.width}; use the shards of one training run")


def check_release(service, share, version: str) -> None:
    """Before version ``version`` scores any row: the feature party's release check of its partial scores over every
    row of its store (:mod:`vfl.protocols.release`), recorded in its ledger; with DP, on the noisy scores."""
    ids, values = service.store.rows(share.columns)
    complete = np.all(np.isfinite(values), axis=1)
    rows = values[complete]
    service.release.release(service.label, share.columns, rows, raw_release(share.coef, share.scaler),
                            f"its partial scores in served version {version}",
                            ids=[i for i, ok in zip(ids, complete) if ok], values=share.scores(rows), version=version)


def _check_reason_release(service, share, version: str, consent: dict, sign: float) -> None:
    """Before version ``version`` names any of its columns as a reason: the feature party's release check of its
    reason codes (the indicator of the consented column it would name, :func:`vfl.runs.linear.reason_codes`) over
    every row of its store, with every earlier release to the label party; then its rounds by id send them."""
    ids, values = service.store.rows(share.columns)
    rows = values[np.all(np.isfinite(values), axis=1)]
    model = explaining(share, consent)
    x = rows if share.scaler is None else share.scaler.apply(rows)
    _, _, onehot, spec = reason_codes(x, model, sign)
    service.release.release(service.label, share.columns, rows, spec, f"{REASONS} in served version {version}",
                            values=onehot, version=version)
    share.reason_model, share.reason_sign = model, sign


def payloads(share, layout, values: np.ndarray, status: np.ndarray, noise=None) -> np.ndarray:
    """Per row: its status byte and ``[[u_k]]`` (``share.width`` ciphertexts; zeros where the status is not OK);
    ``noise(u, status)``: the party's release noise added first (DP, :mod:`vfl.protocols.release_dp`)."""
    u, status = partial_scores(share, values, status, layout.bound)
    if noise is not None:
        u = noise(u, status)
    width = layout.context.public_key.ciphertext_bytes * share.width
    out = private.bodies(status, width)
    ok = np.flatnonzero(status == OK)
    for start in range(0, len(ok), 50_000):           # bounded memory: the ciphertexts of 50,000 rows at a time
        rows = ok[start:start + 50_000]
        vector = layout.context.encrypt(u[rows].ravel(), what=f"party {share.role} score")
        out[rows, 1:] = np.frombuffer(vector.to_bytes(), dtype=np.uint8).reshape(len(rows), width)
    return out


def score(service, share, ids, values, status, deadline, answers, finish=None, per_party: bool = False) -> None:
    """Score the round's ids (see :mod:`vfl.serving.scorers`).

    ``finish(service, share, ids, values, go, u_b, totals, their, round_id, deadline, answers, codes)`` ends the
    round instead of the sum's decryption; ``per_party``: ``totals`` holds each feature party's encrypted total on
    its own (keyed by party) rather than their sum (keyed by ``""``); ``codes``: each consenting feature party's
    reason codes of the round's ids (by id only).  A version served with reasons ends in :func:`_with_reasons`.
    """
    if finish is None and share.reason_sign:
        finish, per_party = _with_reasons, True
    layout = service.layout
    service.require(service.coordinator, layout is not None)
    u_b, status = partial_scores(share, values, status, layout.bound)
    go = np.flatnonzero(status == OK)
    for i in np.flatnonzero(status == messages.OUT_OF_RANGE):
        answers[i] = error(ids[i], "own", service.role, status[i])
    if not len(go):
        return
    chosen = [ids[i] for i in go]
    round_id = service.next_round()
    groups = {k: [k] for k in service.features} if per_party else {"": service.features}
    codes = {}
    if service.private(share):
        opened = service.query_tables(share, service.features, chosen, deadline, round_id)
        their = {k: status for k, (status, _) in opened.items()}
        totals = {g: EncryptedVector(layout.context, packed_sum(layout, {k: opened[k] for k in ks},
                                                                        len(go), share.width),
                                     layout.context.frac_bits) for g, ks in groups.items()}
    else:
        fields = {"version": share.version, "key": layout.context.public_key.fingerprint,
                  "ids": pack_ids(chosen)}
        replies = service.ask(round_id, {k: ("score", "public", fields) for k in service.features}, deadline)
        their = {k: messages.statuses(replies[k], k, len(go)) for k in service.features}
        totals = {g: summed(layout, {k: replies[k] for k in ks}, len(go) * share.width)
                  for g, ks in groups.items()}
        if share.reason_sign:
            codes = {k: round_codes(replies[k], k, len(go), share.feature_reasons[k][1])
                     for k in service.features}
    if finish is not None:
        return finish(service, share, ids, values, go, u_b, totals, their, round_id, deadline, answers, codes)
    request, secret = masked_total(layout, totals[""], u_b[go], service.role)
    answer = service.ask(round_id, {service.coordinator: ("decrypt", "ciphertext", request)}, deadline)
    z = unmasked(layout, answer[service.coordinator], secret, request["n_values"], service.role)
    z = z.reshape(len(go), share.width)
    for j, i in enumerate(go):
        answers[i] = theirs(ids[i], their, j) or {"id": ids[i], **outcome(share, z[j])}


def party_totals(service, totals: dict, n: int, round_id: int, deadline: float) -> dict:
    """Each feature party's total of the round's ``n`` ids (``totals``: its encrypted total, one model, keyed by
    party), decrypted in one ``decrypt`` request under the label party's fresh masks, as the sum is otherwise."""
    layout = service.layout
    block = layout.ciphertexts(n) * (len(layout.slots.widths) if layout.packed else 1)
    request, secret = masked_total(layout, EncryptedVector.concat(list(totals.values())),
                                   np.zeros(block * len(totals)), service.role)
    answer = service.ask(round_id, {service.coordinator: ("decrypt", "ciphertext", request)}, deadline)
    parts = unmasked(layout, answer[service.coordinator], secret, request["n_values"], service.role)
    return dict(zip(totals, parts.reshape(len(totals), block)[:, :n]))


def _with_reasons(service, share, ids, values, go, u_b, totals, their, round_id, deadline, answers, codes) -> None:
    """End a round with reasons: the score is the label party's own plus every feature party's total."""
    parts = party_totals(service, totals, len(go), round_id, deadline)
    z = u_b[go, 0] + sum(parts.values())
    scored = [j for j in range(len(go)) if theirs(ids[go[j]], their, j) is None]
    ranked = reasons_of(share, values[go[scored]], {k: u[scored] for k, u in parts.items()},
                        {k: c[scored] for k, c in codes.items() if c is not None},
                        service.settings.reasons) if scored else []
    given = dict(zip(scored, ranked))
    for j, i in enumerate(go):
        answers[i] = theirs(ids[i], their, j) or {"id": ids[i], **outcome(share, z[j:j + 1]),
                                                   "reasons": given[j]}


# -- its reasons (vfl.serving.reasons), and the sum of its private tables' payloads -------------------------------

def explaining(share, consent: dict | None = None) -> Explaining:
    """A linear share's model for its columns' contributions (standardized: the training mean is 0 in the model's
    units); ``consent``: ``{column: code}`` a feature party lets a reason name."""
    mean = share.training_mean if share.training_mean is not None else \
        share.scaler.mean if share.scaler is not None else None
    if mean is None:
        raise ConfigurationError(f"its shard of model version {share.version} keeps no training mean (written before "
                                 "vfl party kept it, without standardize), which reasons need: train the model "
                                 "again")
    return Explaining(share.coef[0], share.scaler, np.asarray(mean, dtype=np.float64), list(share.columns),
                      dict(consent or {}))


def constant(share) -> float:
    """A feature party's model constant: its partial score at its training mean (0 for standardized columns),
    what its total leaves out; sent once per version."""
    model = explaining(share)
    return float(model.reference() @ np.ravel(model.weights))


def loaded_constant(answer, peer: str) -> tuple[float, list[str]]:
    """The label party: a feature party's ``constant`` and the codes it may name (``reason_names``), from its
    ``loaded`` answer."""
    value, names = answer.fields.get("constant"), answer.fields.get("reason_names")
    try:
        names = json.loads(names) if isinstance(names, str) else None
    except ValueError:
        names = None
    if not isinstance(value, float) or not np.isfinite(value) or not isinstance(names, list) or \
            not all(isinstance(n, str) and n for n in names):
        raise ProtocolError(f"{peer} answered 'load' with reasons asked without its constant and the codes it may "
                            "name")
    return value, names


def feature_codes(share, values: np.ndarray, ok: np.ndarray, model, sign: float) -> np.ndarray:
    """Per id, the index of the column a consenting feature party names as its reason (-1: none, or not scored)."""
    codes = np.full(len(values), -1, dtype=np.int64)
    if ok.any():
        x = values[ok] if share.scaler is None else share.scaler.apply(values[ok])
        codes[ok] = reason_codes(x, model, sign)[0]
    return codes


def round_codes(message, peer: str, count: int, names: list) -> np.ndarray | None:
    """The codes in a feature party's ``scores`` answer (one per id, -1 to ``len(names) - 1``), or None if it names
    none."""
    if not names:
        return None
    codes = message.fields.get("codes")
    if not isinstance(codes, np.ndarray) or codes.dtype != np.int64 or codes.shape != (count,) or \
            (count and (codes.min() < -1 or codes.max() >= len(names))):
        raise ProtocolError(f"{peer} sent a malformed 'scores' message: field 'codes' is not {count} indices of its "
                            f"{len(names)} reason codes")
    return codes


def reasons_of(share, values: np.ndarray, totals: dict, codes: dict, k: int) -> list[list[str]]:
    """The label party's reasons of a linear round's scored ids: its own rows ``values``, each feature party's
    decrypted ``totals`` (its partial scores), and its ``codes`` (or None)."""
    model = explaining(share)
    x = share.scaler.apply(values)
    own = additive_contributions(x, np.ravel(model.weights), model.reference())
    parties = {}
    for peer, total in totals.items():
        at_mean, names = share.feature_reasons[peer]
        parties[peer] = {"totals": np.asarray(total, dtype=np.float64) - at_mean, "codes": codes.get(peer),
                         "names": names}
    return reasons.ranked(explained.explained(share.columns, own, parties, 0.0), k, share.reason_sign)


def packed_sum(layout, answers: dict, n_ids: int, width: int) -> list:
    """``prod_k [[u_k]]`` per value, packed into the public layout by shifting: the ciphertexts of the sum.

    ``answers`` maps each feature party to its ``(status, bodies)`` of the round's
    ids; an id's value with no OK payload contributes nothing (an encryption of 0).
    Value ``j`` (id ``j // width``, model ``j % width``) sits in slot ``j % s`` of
    ciphertext ``j // s`` (``s`` slots of ``w`` bits each: :func:`vfl.parties.linear.packed.prediction_slots`),
    so ciphertext ``c`` is ``prod_slot [[v]]^(2^(w slot))``, by Horner's rule: ``w`` squarings per slot.
    """
    context = layout.context
    n2 = gmpy2.mpz(context.public_key.nsquare)
    count = n_ids * width
    values = [gmpy2.mpz(1)] * count
    for status, bodies in answers.values():
        for i in np.flatnonzero(status == OK):       # each body: ``width`` ciphertexts, checked in Z_{n^2}
            for m, c in enumerate(context.from_bytes(bodies[i], context.frac_bits).ciphertexts):
                values[i * width + m] = values[i * width + m] * c % n2
    if not layout.packed:
        return values
    per, shift = len(layout.slots.widths), 1 << layout.slots.widths[0]
    out = []
    for start in range(0, count, per):
        acc = gmpy2.mpz(1)
        for c in reversed(values[start:start + per]):
            acc = gmpy2.powmod(acc, shift, n2) * c % n2
        out.append(acc)
    return out
