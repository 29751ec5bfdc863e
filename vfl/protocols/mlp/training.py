"""Training a split network (vertical neural network): one program per role.

Every data party runs its bottom model on its own columns; the interactive layer
sums ``h_k W_k`` over the parties; the label party runs the top model.  Read
the three programs side by side with the table (``<>``: shares, :mod:`vfl.crypto.ring`)::

    Step  Feature party k                       Label party B                          Coordinator C
    0     its widths, last saved epoch -> B     checks the batches; seed, fan-in,
                                                validation rows, resume point -> k, C
    per batch (every party computes the same rows from the seed):
    1                                                                                  masks summing to 0 -> each k
                                                                                       (two feature parties or more);
                                                                                       Beaver triples -> k and B
    2     h_k W_k + mask -> B                   z = sum + own part + b; top, loss,
                                                delta = dL/dz (all in the clear)
    3     <-> openings of its factors            <-> openings of <delta>, <Y>, <D>
          (2m + 1 rounds: vfl.parties.mlp.shared_backward)
    4     <- B's shares of its gradients        its shares of k's gradients -> k
    5     its step (Adam/SGD)                   its step
    per epoch:
    6     sum of its ||W||^2 -> B (alpha > 0);  loss, validation score; stop? best? -> k, C
          its part on the validation rows -> B

What each party learns: a feature party, its own gradients summed over each
batch (as in Yang's linear regression) and the public schedule — no row's
``delta``, no label, no other party's output or weights; the label party, the
sum of the feature parties' parts ``sum_k h_k W_k`` of every row (with one
feature party: that party's part, as FATE's and SecretFlow's guests learn
theirs) and each feature party's squared weight norm once per epoch (for the
penalised loss), none of their weights or outputs apart; the coordinator, the
shapes (it deals the triples and masks and receives nothing else).  The
feature party's view of the backward pass is uniform openings and shares; the
batch-size rule (:func:`~vfl.protocols.mlp.settings.check_batch_size`) keeps
its summed gradients from determining ``delta``.  docs/mlp.md has the table.
"""

from __future__ import annotations

import math
import secrets
from typing import Callable, Mapping

import numpy as np

from vfl.crypto import ring
from vfl.errors import ConfigurationError, DataError, DivergenceError, ProtocolError
from vfl.parties import privacy as label_dp
from vfl.parties.mlp.feature_party import MLPFeatureParty
from vfl.parties.mlp.label_party import MLPLabelParty
from vfl.parties.mlp.shared_backward import FEATURE, LABEL, deal, openings, plan, product_shape, shares_from
from vfl.parties.mlp.shared_backward import halves as dealt_halves
from vfl.protocols.fields import flag
from vfl.protocols.mlp.settings import MLPSettings, batch_sizes, batches, check_batch_size, check_memory
from vfl.protocols.roster import Roster
from vfl.transport import Endpoint

OnEpoch = Callable[[int, dict], None]
Checkpoints = Mapping[int, dict]


def pack(arrays) -> bytes:
    """Ring arrays back to back (their shapes are known to the receiver)."""
    return b"".join(ring.to_bytes(a) for a in arrays)


def unpack(data: bytes, shapes) -> list[np.ndarray]:
    """The inverse of :func:`pack`; a size that does not match the shapes is refused."""
    out, offset = [], 0
    for shape in shapes:
        size = ring.RING_BYTES * int(np.prod(shape, dtype=np.int64))
        out.append(ring.from_bytes(data[offset:offset + size], shape))
        offset += size
    if offset != len(data):
        raise ProtocolError(f"{len(data)} bytes of ring elements where {offset} were expected")
    return out


def pack_dealt(dealt: dict, rounds) -> bytes:
    """A side's triples on the wire: every product's seed in plan order, then the shares sent in full."""
    names = [p.name for products in rounds for p in products]
    return b"".join(dealt[n][0] for n in names) + pack([dealt[n][1] for n in names if dealt[n][1] is not None])


def unpack_dealt(data: bytes, rounds, side: str) -> dict:
    """The inverse of :func:`pack_dealt` for ``side`` (it holds the full share of the products it is right of)."""
    products = [p for r in rounds for p in r]
    seeds_end = ring.SEED_BYTES * len(products)
    if len(data) < seeds_end:
        raise ProtocolError(f"{len(data)} bytes of triples, fewer than the {seeds_end} of their seeds")
    right = [p for p in products if p.left != side]
    shares = dict(zip((p.name for p in right), unpack(data[seeds_end:], [product_shape(p) for p in right])))
    return {p.name: (data[ring.SEED_BYTES * i:ring.SEED_BYTES * (i + 1)], shares.get(p.name))
            for i, p in enumerate(products)}


def _round_bytes(values: dict, products) -> bytes:
    return pack([values[p.name] for p in products])


def _round_values(data: bytes, products, sender_side: str) -> dict:
    shapes = [p.left_shape if p.left == sender_side else p.right_shape for p in products]
    return dict(zip((p.name for p in products), unpack(data, shapes)))


def _grad_shapes(in_dim: int, bottom, units: int) -> dict:
    widths = [in_dim, *bottom]
    shapes = {"block": (widths[-1], units)}
    for layer in range(1, len(bottom) + 1):
        shapes[f"weights{layer}"] = (widths[layer - 1], widths[layer])
        shapes[f"intercept{layer}"] = (widths[layer],)
    return shapes


def schedule(n_rows: int, settings: MLPSettings, seed: int, n_validation: int):
    """The training rows and the validation rows, from the shared seed."""
    if not n_validation:
        return np.arange(n_rows), np.arange(0)
    order = np.random.default_rng([int(seed), 0x76616C]).permutation(n_rows)
    return np.sort(order[n_validation:]), np.sort(order[:n_validation])


def validation_count(n_rows: int, settings: MLPSettings) -> int:
    """Rows held out for early stopping (scikit-learn's ``validation_fraction``), 0 without it."""
    if not settings.early_stopping:
        return 0
    return min(max(1, math.ceil(settings.validation_fraction * n_rows)), n_rows - 2)


# ----------------------------------------------------------------------------------------------- feature party


def train_feature(ep: Endpoint, party: MLPFeatureParty, settings: MLPSettings, roster: Roster, start=None,
                  on_epoch: OnEpoch | None = None, checkpoints: Checkpoints | None = None, releases=None) -> dict:
    """Feature party ``k``'s program.

    ``start``: its ``(bottom, block)`` (by default a secret one); ``checkpoints``: its saved states by
    completed epoch (``on_epoch(epoch, state)`` hands each over), to resume after the last epoch every
    party completed; ``releases``: its release guard (``before_epoch(epoch, party)`` checks what the label
    party could rebuild before the epoch's first part leaves it, ``sent(epoch, rows, part, name)`` gives the
    part to send, with DP noise if chosen).
    """
    label, coordinator = roster.label, roster.coordinator
    n_rows, in_dim = party.x.shape
    ep.send(label, "widths", "public", rows=n_rows, columns=in_dim, out=party.out_width,
            last_epoch=max(checkpoints) if checkpoints else -1)
    plan_msg = ep.recv(label, "plan")
    seed, fan_in, n_val = int(plan_msg["seed"]), int(plan_msg["fan_in"]), int(plan_msg["validation_rows"])
    first = int(plan_msg["resume_from"])
    party.start(fan_in, settings.units, settings.solver, settings.optimizer_options(), start)
    best = _resume(party, first, checkpoints) if first >= 0 else None
    train_rows, val_rows = schedule(n_rows, settings, seed, n_val)
    masked = len(roster.features) > 1
    batch = settings.effective_batch(len(train_rows))
    n_iter = first + 1
    for epoch in range(first + 1, 0 if flag(plan_msg, "finished") else settings.max_iter):
        ep.iteration = epoch
        norms = 0.0
        if releases is not None:
            releases.before_epoch(epoch, party)
        for idx in batches(len(train_rows), batch, seed, epoch, settings.shuffle):
            rows = train_rows[idx]
            part = party.train_part(rows)
            if releases is not None:
                part = releases.sent(epoch, rows, part, "part")
            send_part(ep, part, label, coordinator, settings, masked, "part")
            norms += party.squared_norm()
            bottom_grads, block_grad = _feature_backward(ep, party, settings, roster, len(rows), in_dim)
            party.step(bottom_grads, block_grad, settings.alpha, len(rows))
        if settings.alpha > 0:
            ep.send(label, "penalty", "plaintext", value=float(norms))
        if n_val:
            part = party.part(party.x[val_rows])
            if releases is not None:
                part = releases.sent(epoch, val_rows, part, "validation_part")
            send_part(ep, part, label, coordinator, settings, masked, "validation_part")
        verdict = ep.recv(label, "epoch")
        if flag(verdict, "best"):
            best = [a.copy() for a in party.parameters()]
        n_iter = epoch + 1
        if on_epoch:
            on_epoch(epoch, party.state(best))
        if flag(verdict, "stop"):
            break
    if settings.early_stopping and best is not None:
        party._set(best)
    return {"n_iter": n_iter}


def _resume(party, first: int, checkpoints):
    """Load the party's state after epoch ``first``; returns its best arrays (early stopping) or None."""
    if first not in (checkpoints or {}):
        raise ProtocolError(f"party {party.role}: asked to resume after epoch {first + 1}, which it has no "
                            "checkpoint for")
    return party.load_state(checkpoints[first])


def send_part(ep, part, label, coordinator, settings, masked, name) -> None:
    """Send a feature party's part ``h_k W_k`` to the label party, encoded, masked with C's mask if ``masked``."""
    encoded = ring.encode(part, settings.frac_bits)
    if masked:
        mask = unpack(ep.recv(coordinator, f"{name}_mask")["values"], [encoded.shape])[0]
        encoded = ring.reduce(encoded + mask)
    ep.send(label, name, "masked" if masked else "plaintext", values=ring.to_bytes(encoded),
            rows=encoded.shape[0])


def _feature_backward(ep, party: MLPFeatureParty, settings: MLPSettings, roster: Roster, rows: int, in_dim: int):
    rounds = plan(rows, in_dim, party.bottom_sizes, settings.units)
    halves = dealt_halves(unpack_dealt(ep.recv(roster.coordinator, "triples")["values"], rounds, FEATURE), rounds,
                          FEATURE)
    side = party.backward_side(settings.frac_bits)
    for products in rounds:
        factors = side.factors(products)
        ep.send(roster.label, "opening", "masked", values=_round_bytes(openings(products, factors, halves), products))
        peer = _round_values(ep.recv(roster.label, "opening")["values"], products, LABEL)
        side.absorb(products, shares_from(products, FEATURE, factors, peer, halves))
    shapes = _grad_shapes(in_dim, party.bottom_sizes, settings.units)
    names = sorted(shapes)
    peer = dict(zip(names, unpack(ep.recv(roster.label, "gradient_shares")["values"], [shapes[n] for n in names])))
    return side.gradients(peer)


# ------------------------------------------------------------------------------------------------- label party


def train_label(ep: Endpoint, party: MLPLabelParty, settings: MLPSettings, roster: Roster, start=None,
                on_epoch: OnEpoch | None = None, checkpoints: Checkpoints | None = None) -> dict:
    """The label party's program: the top model, the loss, ``delta``, the stopping rule, the resume point."""
    n_rows = party.x.shape[0]
    widths = {k: ep.recv(k, "widths") for k in roster.features}
    for k, msg in widths.items():
        if int(msg["rows"]) != n_rows:
            raise DataError(f"party {k} has {int(msg['rows'])} aligned rows, the label party {party.role} "
                            f"{n_rows}: align the tables first")
    n_val = validation_count(n_rows, settings)
    n_train = n_rows - n_val
    smallest = min(batch_sizes(n_train, settings.effective_batch(n_train)))
    in_dims = {k: int(widths[k]["columns"]) for k in roster.features}
    check_memory({**in_dims, party.role: party.x.shape[1]}, settings, settings.effective_batch(n_train), roster)
    whole = min(batch_sizes(n_rows, settings.effective_batch(n_rows)))
    for k in roster.features:
        bottom = settings.bottom_of(k, in_dims[k])
        try:
            check_batch_size(k, in_dims[k], bottom, settings.units, smallest)
        except DataError:
            if n_val:
                check_batch_size(k, in_dims[k], bottom, settings.units, whole)     # the rows held out are the cause
                raise DataError(f"validation_fraction={settings.validation_fraction} holds {n_val} of the {n_rows} "
                                f"rows out for early stopping, leaving {n_train} to train on: too few for party {k}'s "
                                "batches (each must give more values of the interactive layer's gradient than "
                                f"twice what party {k} learns per batch); lower validation_fraction, or train without "
                                "early_stopping") from None
            raise
    fan_in = sum(int(msg["out"]) for msg in widths.values()) + party.out_width
    first = min([int(msg["last_epoch"]) for msg in widths.values()] + [max(checkpoints) if checkpoints else -1])
    saved = None
    if first >= 0:
        if first not in (checkpoints or {}):
            raise ProtocolError(f"party {party.role}: asked to resume after epoch {first + 1}, which it has no "
                                "checkpoint for")
        saved = checkpoints[first]
    seed = (int(saved["seed"]) if saved else
            secrets.randbits(62) if settings.random_state is None else int(settings.random_state))
    tracker = _Stopping(settings)
    if saved:
        tracker.load(saved["tracker"])
    finished = tracker.count > settings.n_iter_no_change
    for k in roster.features:
        ep.send(k, "plan", "public", seed=seed, fan_in=fan_in, validation_rows=n_val, resume_from=first,
                finished=finished)
    ep.send(roster.coordinator, "plan", "public", rows=n_rows, validation_rows=n_val, resume_from=first,
            finished=finished, in_dims=np.array([in_dims[k] for k in roster.features], dtype=np.int64))
    party.start(fan_in, settings.solver, settings.optimizer_options(), start)
    if saved:
        tracker.best_params = party.load_state(saved["party"])
    train_rows, val_rows = schedule(n_rows, settings, seed, n_val)
    batch = settings.effective_batch(len(train_rows))
    stop = finished
    noise_std = dp_noise_std(settings)
    for epoch in range(first + 1, 0 if finished else settings.max_iter):
        ep.iteration = epoch
        total, norms = 0.0, 0.0
        for idx in batches(len(train_rows), batch, seed, epoch, settings.shuffle):
            rows = train_rows[idx]
            parts = receive_parts(ep, roster, "part", len(rows), settings)
            total += party.batch_loss(rows, parts) * len(rows)
            norms += party.squared_norm()
            delta, own = party.backward(rows, noise_std)
            _label_backward(ep, party, settings, roster, delta, in_dims)
            party.step(own, settings.alpha, len(rows))
        if settings.alpha > 0:
            norms += sum(float(ep.recv(k, "penalty")["value"]) for k in roster.features)
        loss = (total + 0.5 * settings.alpha * norms) / len(train_rows)
        if not math.isfinite(loss):
            raise _diverged(party.role, epoch)
        score = None
        if n_val:
            parts = receive_parts(ep, roster, "validation_part", len(val_rows), settings)
            score = party.score(val_rows, parts)
        stop, best = tracker.update(loss, score)
        if settings.dp:
            stop = False            # every epoch runs: a stop decided on the loss would depend on the labels
        for name in (*roster.features, roster.coordinator):
            ep.send(name, "epoch", "public", stop=stop, best=best)
        if best:
            tracker.keep(party.parameters())
        if on_epoch:
            on_epoch(epoch, {"loss": loss, "validation_score": score, "seed": seed, "tracker": tracker.state(),
                             "party": party.state(tracker.best_params)})
        if stop:
            break
    if settings.early_stopping and tracker.best_params is not None:
        party._set(tracker.best_params)
    return {"n_iter": len(tracker.losses), "loss_curve": tracker.losses, "validation_scores": tracker.scores,
            "best_loss": tracker.best_loss, "converged": stop, "seed": seed, "noise_std": noise_std}


def dp_noise_std(settings: MLPSettings) -> float:
    """The standard deviation of the label party's noise on each output delta (0 without DP).

    Each row's label meets the Gaussian mechanism once per epoch (each row is in one batch), with L2
    sensitivity :meth:`~vfl.protocols.mlp.settings.MLPSettings.dp_sensitivity`; over ``max_iter`` epochs
    that composes to one Gaussian mechanism, calibrated by ``dp_accounting``'s PLD accountant
    (:mod:`vfl.parties.linear.dp`, shared with the linear models).
    """
    if not settings.dp:
        return 0.0
    z = label_dp.noise_multiplier(settings.dp_epsilon, settings.dp_delta, settings.max_iter)
    return z * settings.dp_sensitivity()


def _diverged(role: str, epoch: int):
    return DivergenceError(f"party {role}: the loss of epoch {epoch + 1} is not finite; the fit diverged: lower "
                           "learning_rate_init")


def receive_parts(ep, roster: Roster, name: str, rows: int, settings: MLPSettings) -> np.ndarray:
    """The sum of the feature parties' parts (their masks cancel), decoded: all the label party sees of them."""
    total = np.zeros((rows, settings.units), dtype=object)
    for k in roster.features:
        msg = ep.recv(k, name)
        if int(msg["rows"]) != rows:
            raise ProtocolError(f"party {k} sent {int(msg['rows'])} rows of {name!r}, {rows} expected")
        total = total + unpack(msg["values"], [(rows, settings.units)])[0]
    return ring.decode(ring.reduce(total), settings.frac_bits)


def _label_backward(ep, party: MLPLabelParty, settings: MLPSettings, roster: Roster, delta, in_dims) -> None:
    rows = delta.shape[0]
    plans = {k: plan(rows, in_dims[k], settings.bottom_of(k, in_dims[k]), settings.units) for k in roster.features}
    halves = {k: dealt_halves(unpack_dealt(ep.recv(roster.coordinator, "triples")["values"], plans[k], LABEL),
                              plans[k], LABEL) for k in roster.features}
    sides = {k: party.backward_side(delta, settings.frac_bits, len(settings.bottom_of(k, in_dims[k])))
             for k in roster.features}
    for r in range(max(len(p) for p in plans.values())):
        factors = {}
        for k in roster.features:
            if r < len(plans[k]):
                products = plans[k][r]
                factors[k] = sides[k].factors(products)
                ep.send(k, "opening", "masked", values=_round_bytes(openings(products, factors[k], halves[k]),
                                                                      products))
        for k in factors:
            products = plans[k][r]
            peer = _round_values(ep.recv(k, "opening")["values"], products, FEATURE)
            sides[k].absorb(products, shares_from(products, LABEL, factors[k], peer, halves[k]))
    for k in roster.features:
        shares = sides[k].gradient_shares()
        ep.send(k, "gradient_shares", "masked", values=pack([shares[n] for n in sorted(shares)]))


class _Stopping:
    """scikit-learn's stopping rule (``_update_no_improvement_count``) and the best epoch's weights."""

    def __init__(self, settings: MLPSettings):
        self.settings = settings
        self.losses: list[float] = []
        self.scores: list[float] = []
        self.best_loss = math.inf
        self.best_score = -math.inf
        self.count = 0
        self.best_params = None

    def update(self, loss: float, score: float | None) -> tuple[bool, bool]:
        """Record an epoch; return (stop now, this epoch is the best so far)."""
        s = self.settings
        self.losses.append(loss)
        if s.early_stopping:
            self.scores.append(score)
            self.count = self.count + 1 if score < self.best_score + s.tol else 0
            best = score > self.best_score
            if best:
                self.best_score = score
        else:
            self.count = self.count + 1 if loss > self.best_loss - s.tol else 0
            best = False
        self.best_loss = min(self.best_loss, loss)
        return self.count > s.n_iter_no_change, best

    def keep(self, params) -> None:
        self.best_params = [a.copy() for a in params]

    def state(self) -> dict:
        """The rule's counters and curves, for a checkpoint (the best arrays go with the party's state)."""
        return {"losses": list(self.losses), "scores": list(self.scores), "best_loss": _finite(self.best_loss),
                "best_score": _finite(self.best_score), "count": self.count}

    def load(self, state: dict) -> None:
        self.losses = [float(v) for v in state["losses"]]
        self.scores = [None if v is None else float(v) for v in state["scores"]]
        self.best_loss = math.inf if state["best_loss"] is None else float(state["best_loss"])
        self.best_score = -math.inf if state["best_score"] is None else float(state["best_score"])
        self.count = int(state["count"])


def _finite(value: float):
    """A value JSON can hold: None for an infinity (nothing recorded yet)."""
    return value if math.isfinite(value) else None


# ------------------------------------------------------------------------------------------------- coordinator


def train_coordinator(ep: Endpoint, settings: MLPSettings, roster: Roster) -> dict:
    """The coordinator's program: it deals the masks and Beaver triples of every batch, and receives nothing else.

    It keeps no state between epochs, so it needs no checkpoint: the label party's plan says where to start.
    """
    label = roster.label
    msg = ep.recv(label, "plan")
    n_rows, n_val, first = int(msg["rows"]), int(msg["validation_rows"]), int(msg["resume_from"])
    in_dims = dict(zip(roster.features, (int(v) for v in msg["in_dims"])))
    if len(in_dims) != len(roster.features):
        raise ProtocolError(f"the plan names {len(in_dims)} feature parties, the roster {len(roster.features)}")
    n_train = n_rows - n_val
    batch = settings.effective_batch(n_train)
    masked = len(roster.features) > 1
    n_iter = first + 1
    for epoch in range(first + 1, 0 if flag(msg, "finished") else settings.max_iter):
        ep.iteration = epoch
        for size in batch_sizes(n_train, batch):
            if masked:
                deal_masks(ep, roster, "part", size, settings.units)
            for k in roster.features:
                rounds = plan(size, in_dims[k], settings.bottom_of(k, in_dims[k]), settings.units)
                feature, label_half = deal(rounds)
                ep.send(k, "triples", "masked", values=pack_dealt(feature, rounds))
                ep.send(label, "triples", "masked", values=pack_dealt(label_half, rounds))
        if n_val and masked:
            deal_masks(ep, roster, "validation_part", n_val, settings.units)
        n_iter = epoch + 1
        if flag(ep.recv(label, "epoch"), "stop"):
            break
    return {"n_iter": n_iter}


def deal_masks(ep: Endpoint, roster: Roster, name: str, rows: int, units: int) -> None:
    """Masks summing to zero, one per feature party, for ``rows`` parts of the interactive layer."""
    for k, mask in zip(roster.features, ring.zero_sum(len(roster.features), (rows, units))):
        ep.send(k, f"{name}_mask", "masked", values=ring.to_bytes(mask))


def check_settings_for(roster: Roster, settings: MLPSettings) -> None:
    """Refuse bottom sizes for parties the roster does not have."""
    unknown = sorted(set(settings.bottom_sizes) - set(roster.data_parties))
    if unknown:
        raise ConfigurationError(f"bottom_sizes names {unknown}, not parties of this federation "
                                 f"({list(roster.data_parties)})")
