"""A split network's round: each feature party's part of the interactive layer, masked (the coordinator deals
masks that cancel in the sum, with two feature parties or more) or from its private table (one feature party);
the label party sums them, decodes, and runs its own bottom and the top; with reasons (one feature party only), the
parties' Shapley values from the same part (:func:`reasons_of`)."""

from __future__ import annotations

import secrets
import time

import numpy as np

from vfl.crypto import ring
from vfl.errors import ConfigurationError, DataError, ProtocolError
from vfl.parties.mlp.activations import activate
from vfl.parties.mlp.layers import forward, layer_activations
from vfl.runs import explained
from vfl.runs.mlp import party_values, release_spec
from vfl.serving import messages, private, reasons
from vfl.serving.answers import classified, error, outcome, theirs
from vfl.deploy.shards.mlp import read_shard, shard_party
from vfl.serving.messages import OK, OUT_OF_RANGE, TOKEN_BYTES, pack_ids


#: The round request a split network's feature party answers, and what a feature party of another model says to it.
REQUEST, REFUSED = "part", "asked for the interactive layer's part of a {kind} model"


class MLPShare:
    """One party's shard of a split network.

    A feature party's ``parts(x)`` is its part ``h_k W_k`` of the interactive layer
    per row, and which rows have one within the ring's fixed-point range; the label
    party's ``raw(x, parts)`` adds its own part and the intercept to the sum of the
    feature parties' and runs the top up to the output layer's pre-activation
    (``outputs`` applies the output activation, as batch prediction's outputs).  What every
    share has: :mod:`vfl.serving.scorers`.
    """

    kind = "mlp"
    complete = True
    keyed = False
    request = "part"
    inline_null = False
    noun = "split network"
    own_reasons = False

    def __init__(self, shard: dict, version: str, features=()):
        self.version = version
        self.role = shard["role"]
        self.columns = list(shard["columns"])
        self.trained_with = shard["trained_with"]
        self.party = shard_party(shard, shard["party"])
        #: values each row adds to a round: the interactive layer's width
        self.width = self.units = int(shard["units"])
        #: reasons (one feature party only: :mod:`vfl.serving.reasons`): the adverse side (0: none asked); the label
        #: party's: the feature party's ``(part at its training mean, [])`` from its ``loaded`` answer
        self.reason_sign = 0.0
        self.feature_reasons: dict[str, tuple] = {}
        if self.role == "feature":
            return
        self.task = shard["task"]
        self.classes = list(shard["classes"]) or None
        self.feature_parties = list(shard["data_parties"][:-1])
        if list(features) and list(features) != self.feature_parties:
            raise DataError(f"version {version}: the network was trained with the feature parties "
                            f"{self.feature_parties}, but the federation names {list(features)}")

    def parts(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(n, units)`` parts (0 where a row has none) and, per row, whether it has one: finite, below
        ``2^VALUE_BITS`` in magnitude (what :func:`vfl.crypto.ring.encode` takes)."""
        party = self.party
        if getattr(party, "scaler", None) is not None:
            x = party.scaler.apply(x)
        with np.errstate(all="ignore"):
            out = forward(party.bottom, x, [party.activation] * len(party.bottom))[-1] @ party.block
        ok = np.isfinite(out).all(axis=1) & (np.abs(out) < 2.0 ** ring.VALUE_BITS).all(axis=1)
        out[~ok] = 0.0
        return out, ok

    def raw(self, x: np.ndarray, parts: np.ndarray) -> np.ndarray:
        """The output layer's pre-activation per row (``parts``: the sum of the feature parties' parts)."""
        party = self.party
        upper = layer_activations(len(party.hidden_layer_sizes) + 1, party.activation, "identity")
        with np.errstate(all="ignore"):
            z = parts + party.bias
            if party.has_columns:
                x = x if getattr(party, "scaler", None) is None else party.scaler.apply(x)
                z = z + forward(party.bottom, x, [party.activation] * len(party.bottom))[-1] @ party.block
            return forward(party.top, activate(upper[0], z), upper[1:])[-1]

    # -- the feature party ----------------------------------------------------------------------------------------
    def check_release(self, service, version: str, consent: dict, sign: float, tables: int) -> None:
        """At ``load``: the feature party's release check of its part of the interactive layer over every row of
        its store, recorded in its ledger; with DP, on the noisy parts."""
        ids, values = service.store.rows(self.columns)
        complete = np.all(np.isfinite(values), axis=1)
        parts, finite = self.parts(values[complete])
        rows = values[complete][finite]
        kept = [i for i, ok in zip(ids, complete) if ok]
        service.release.release(service.label, self.columns, rows, release_spec(self.party),
                                f"its part of the interactive layer in served version {version}",
                                ids=[i for i, ok in zip(kept, finite) if ok], values=parts[finite], version=version)

    def answer(self, service, message) -> tuple:
        """Its answer to a ``part`` request: a status per id and its part of the interactive layer per id as ring
        elements (uniform for an id it cannot score, hiding the others' parts in the label party's sum), plus the
        mask the coordinator dealt for the round's token with two feature parties or more."""
        tag = messages.token(message, service.label) if service.coordinator is not None else None
        wait = messages.integer(message, "wait_ms", service.label, 1, 3_600_000) / 1000.0
        values, status, ids = service.rows(message, self)
        ok = status == OK
        parts, finite = self.parts(np.where(ok[:, None], values, 0.0))
        status[ok & ~finite] = OUT_OF_RANGE
        parts = service.noised(self.version, parts, ids, status)
        encoded = ring.uniform(parts.shape)             # no part: uniform, hiding the others' in the label's sum
        scored = status == OK
        if scored.any():
            encoded[scored] = ring.encode(parts[scored], service.config.training.frac_bits)
        if tag is None:
            return "part", "plaintext", dict(status=status, values=ring.to_bytes(encoded))
        mask = service.masks.take(tag, wait)
        if mask is None:
            raise ConfigurationError(f"no mask came from the coordinator {service.coordinator} for the round within "
                                     f"{wait * 1000:.0f} ms")
        try:
            mask = ring.from_bytes(mask, encoded.shape)
        except ProtocolError as exc:
            raise ProtocolError(f"{service.coordinator} dealt a mask that does not fit the round: {exc}") from None
        return "part", "masked", dict(status=status, values=ring.to_bytes(ring.reduce(encoded + mask)))

    def loaded_fields(self, role: str, sign: float) -> dict:
        """What its ``loaded`` answer adds: with reasons, its part at its training mean (what stands for it outside
        a coalition)."""
        return {"part_at_mean": part_at_mean(self, role)} if sign else {}

    def payloads(self, values: np.ndarray, status: np.ndarray, layout, frac_bits: int, noise=None) -> np.ndarray:
        """Per row: its status byte and its part ``h_k W_k`` of the interactive layer as ring elements
        (``noise(parts, status)``: the party's release noise added first, DP)."""
        ok = status == OK
        parts, finite = self.parts(np.where(ok[:, None], values, 0.0))
        status = np.where(ok & ~finite, OUT_OF_RANGE, status)
        if noise is not None:
            parts = noise(parts, status)
        out = private.bodies(status, self.units * ring.RING_BYTES)
        scored = np.flatnonzero(status == OK)
        if len(scored):
            data = ring.to_bytes(ring.encode(parts[scored], frac_bits))
            out[scored, 1:] = np.frombuffer(data, dtype=np.uint8).reshape(len(scored), -1)
        return out

    # -- the label party ------------------------------------------------------------------------------------------
    def by_id_only(self, n_features: int) -> str:
        """Two feature parties or more: served by id only (their parts are masked per round by the coordinator)."""
        if n_features == 1:
            return ""
        return (f"a split network of {n_features} feature parties, which is served by id only (their parts are "
                "masked per round by the coordinator)")

    def take_loaded(self, peer: str, answer, width: int, role: str) -> None:
        """A feature party's ``loaded`` answer: with reasons its part at its training mean; as many units."""
        if self.reason_sign:
            self.feature_reasons[peer] = loaded_part(answer, peer, self.units)
        if width != self.units:
            raise DataError(f"party {peer}'s shard of model version {self.version} has an interactive layer of "
                            f"{width} units, party {role}'s {self.units}; use the shards of one training run")

    def unexplained(self, n_features: int) -> str:
        """Two feature parties or more: never explained (the label party sees only the sum of their parts)."""
        if n_features == 1:
            return ""
        return (f"a split network of {n_features} feature parties, which vfl serve does not explain: the label "
                "party learns only the sum of their parts (each is masked), and unmasking them would tell it more "
                "than prediction does")

    def check_explainable(self) -> None:
        """Raise unless it has one output and, with columns, was trained standardized."""
        if self.party.n_outputs != 1:
            raise ConfigurationError(f"reasons take one output (regression or two classes); this network has "
                                     f"{self.party.n_outputs}")
        if self.party.has_columns and getattr(self.party, "scaler", None) is None:
            raise ConfigurationError("reasons take a network trained with standardize = true (an absent party "
                                     "is fed its training mean, which a standardized shard keeps)")

    def outcome(self, z: np.ndarray) -> dict:
        """One id's answer from its outputs; several classes: their softmax; several outputs: each by index."""
        return classified(z, self.classes)


def load_share(path, version: str, party: str, kind: str, features=()) -> MLPShare:
    """Party ``party``'s share of ``version`` of a split network, from its shard at ``path`` (``kind``: its role),
    checked; ``features``: the federation's feature parties, which the label party's network must name."""
    return MLPShare(read_shard(path, party, kind), version, features)


def score(service, share, ids, values, status, deadline, answers) -> None:
    """Score the round's ids (see :mod:`vfl.serving.scorers`)."""
    masked = service.coordinator is not None
    if masked:
        service.require(service.coordinator)
    go = np.flatnonzero(status == OK)
    if not len(go):
        return
    frac_bits = service.config.training.frac_bits
    if service.private(share):                     # one feature party (two or more are served by id)
        opened = service.query_tables(share, service.features, [ids[i] for i in go], deadline, service.next_round())
        their = {k: status for k, (status, _) in opened.items()}
        parts = table_parts(opened, len(go), share.units, frac_bits)
        return _answers(service, share, ids, values, go, their, parts, answers)
    fields = {"version": share.version, "ids": pack_ids([ids[i] for i in go]),
              "wait_ms": max(1, int((deadline - time.monotonic()) * 1000))}
    requests = {k: ("part", "public", fields) for k in service.features}
    if masked:                                  # the coordinator learns the count of ids, nothing else
        fields["token"] = secrets.token_bytes(TOKEN_BYTES)
        requests[service.coordinator] = ("deal", "public", {"rows": len(go), "units": share.units,
                                                            "token": fields["token"]})
    replies = service.ask(service.next_round(), requests, deadline)
    their = {k: messages.statuses(replies[k], k, len(go)) for k in service.features}
    parts = summed_parts(replies, service.features, (len(go), share.units), frac_bits)
    _answers(service, share, ids, values, go, their, parts, answers)


def _answers(service, share, ids, values, go, their, parts, answers) -> None:
    scored = np.flatnonzero(np.all([s == OK for s in their.values()], axis=0))
    raw = share.raw(values[go][scored], parts[scored])
    given = {}
    if share.reason_sign and len(scored):       # one feature party: its part, as received (reasons.check)
        given = dict(zip(scored.tolist(), reasons_of(share, values[go][scored], parts[scored],
                                                     service.settings.reasons)))
    at = {int(j): r for r, j in enumerate(scored)}
    for j, i in enumerate(go):
        failed = theirs(ids[i], their, j)
        if failed is None and not np.isfinite(raw[at[j]]).all():
            failed = error(ids[i], "own", service.role, messages.OUT_OF_RANGE)
        answers[i] = failed or {"id": ids[i], **outcome(share, raw[at[j]]),
                                **({"reasons": given[j]} if share.reason_sign else {})}


def summed_parts(replies: dict, features: list, shape: tuple, frac_bits: int) -> np.ndarray:
    """The sum of the feature parties' ``part`` answers (their masks cancel), decoded: all the label party sees."""
    total = np.zeros(shape, dtype=object)
    for k in features:
        values = replies[k].fields.get("values")
        try:
            total = total + ring.from_bytes(values if isinstance(values, bytes) else b"", shape)
        except ProtocolError as exc:
            error = ProtocolError(f"{k} sent a malformed 'part' message: {exc}")
            error.party = k
            raise error from None
    return ring.decode(ring.reduce(total), frac_bits)


# -- its reasons (vfl.serving.reasons), and the parts of its private tables' payloads -----------------------------

def part_at_mean(share, role: str) -> np.ndarray:
    """A split network's feature party: its part of the interactive layer at its training mean (one vector per
    version, what stands for it outside a coalition)."""
    scaler = getattr(share.party, "scaler", None)
    if scaler is None:
        raise ConfigurationError(f"party {role}: reasons need its part at its training mean, which a network trained "
                                 "without standardize does not keep; train with standardize = true, or set reasons "
                                 "= 0 at the label party")
    parts, ok = share.parts(np.asarray(scaler.mean, dtype=np.float64)[None, :])
    if not ok.all():
        raise ConfigurationError(f"party {role}: its part at its training mean is not finite")
    return parts[0]


def loaded_part(answer, peer: str, units: int) -> tuple[np.ndarray, list]:
    """The label party: a split network's feature party's part at its training mean, from its ``loaded`` answer."""
    value = answer.fields.get("part_at_mean")
    if not isinstance(value, np.ndarray) or value.dtype != np.float64 or value.shape != (units,) or \
            not np.isfinite(value).all():
        raise ProtocolError(f"{peer} answered 'load' with reasons asked without its part at its training mean "
                            f"({units} numbers)")
    return value, []


def reasons_of(share, values: np.ndarray, parts: np.ndarray, k: int) -> list[list[str]]:
    """The label party's reasons of a split network's scored ids (one feature party): its own rows ``values`` and
    the feature party's ``parts`` as received, each party absent fed its training mean."""
    (peer,) = share.feature_parties
    scaler = getattr(share.party, "scaler", None)
    mean = np.broadcast_to(scaler.mean if scaler is not None else np.zeros(values.shape[1]), values.shape)
    values = party_values(share.raw, values, mean, [(parts, share.feature_reasons[peer][0])],
                          [share.party.role, peer])
    return reasons.ranked(explained.party_level(values), k, share.reason_sign)


def table_parts(answers: dict, n_ids: int, units: int, frac_bits: int) -> np.ndarray:
    """A split network's parts of the round's ids from the payloads (one feature party: no masks), decoded."""
    total = np.zeros((n_ids, units), dtype=object)
    for status, bodies in answers.values():
        for i in np.flatnonzero(status == OK):
            total[i] = total[i] + ring.from_bytes(bodies[i], (units,))
    return ring.decode(ring.reduce(total), frac_bits)
