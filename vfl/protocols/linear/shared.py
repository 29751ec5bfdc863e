"""Training in which no party ever learns a gradient (``protocol="shared"``) — one program per role.

After CAESAR (Chen et al., KDD 2021), FATE's SSHE-LR and SecretFlow's HESS-LR:
every data party's parameters stay additively shared for the whole run, one
share ``a_P`` at the party and one ``c_P`` at the coordinator C (integers at ``2^f``,
:mod:`vfl.parties.linear.shares`); scores, residuals and gradients exist only encrypted
under C's key or split the same way.  C is the second shareholder of every party,
so any number of feature parties costs no product between them, and no coalition
of data parties sees anything but ciphertexts.  One batch (``[[.]]``: C's key)::

    Step  Each feature party P            The label party B                     C
    1                                                                            [[c_P]] -> each P (and B)
    2     [[u_P]] = X_P [[c_P]] + X_P a_P  [[d]] = sum [[u]] - kappa y (s)  -> P
          -> B
    3     [[X_P^T d + 2^V + rho_P]] -> C   the same for B                        keeps G_P + rho_P (its share)
          [[a_P.G_P - rho_P.c_P + pen]] -> B  adds its own and -kappa y.d   -> C  adds c_P.(G_P + rho_P): the loss
    4     a_P <- rule(a_P, -rho_P)         a_B <- rule(a_B, -rho_B)              c_P <- rule(c_P, G_P + rho_P)

After each epoch C says whether to stop (the loss's change, ``max_iter``, a
diverging run; with early stopping, the validation loss, computed the same way
on the held-out rows, which only C learns).  At the end C sends each party its
share, and the party adds its own (``reveal="respectively"``); or the model stays
shared (``reveal="never"``), and prediction (:func:`predict_a`, :func:`predict_b`,
:func:`predict_c`) needs C's shares: C sends each party ``[[c_P]]``, each party
``[[X_P w_P]]`` to B, and B learns the scores through C under a uniform mask.

The set-up (key, resume, the batch seed) is :mod:`vfl.protocols.linear.training`'s; it
calls :func:`steps_a`, :func:`steps_b` and :func:`steps_c` for the batches.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from vfl.crypto import FixedPoint
from vfl.errors import DataError, DivergenceError, ProtocolError
from vfl.parties import Coordinator, get_objective, pack_residues, pack_vector, unpack_residues, unpack_vector
from vfl.parties.linear import LinearFeatureParty, LinearLabelParty
from vfl.parties.linear.shareholders import CoordinatorShares, DataShares, penalty_coefficient, reveal
from vfl.parties.linear.shares import SharedBounds, UpdateRule
from vfl.protocols.linear.checks import diverged
from vfl.protocols.roster import TWO_PARTY, Roster
from vfl.protocols.linear.settings import TrainingSettings, batch_sizes, batches
from vfl.protocols.linear.validation import Tracker
from vfl.transport import Endpoint

#: The message names of a validation pass are a training pass's with this prefix.
VALIDATION = "validation_"


def _bounds(settings: TrainingSettings, n: int, roster: Roster, weighted: bool) -> SharedBounds:
    return SharedBounds(settings.frac_bits, n, len(roster.data_parties), settings.feature_bound, settings.score_bound,
                        weighted)


def _rule(settings: TrainingSettings) -> UpdateRule:
    alpha = settings.penalty_spec.alpha
    return UpdateRule(settings.optimizer, settings.momentum, alpha)


def _penalty(settings: TrainingSettings, bounds: SharedBounds) -> Fraction:
    return penalty_coefficient(settings.penalty_spec.alpha, bounds.n, get_objective(settings.objective), bounds)


# -- one pass, per role -------------------------------------------------------------------
def _layout(holder, bounds: SharedBounds, packed: bool):
    """The packed slots of a pass (public: key size and bounds), or None unpacked."""
    return bounds.layout(int(holder.context.public_key.n).bit_length()) if packed else None


def _pass_a(ep: Endpoint, holder: DataShares, roster: Roster, bounds: SharedBounds, penalty: Fraction,
            rows=None, features=None, prefix: str = "", packed: bool = False) -> None:
    """A feature party: ``[[u_P]]`` to B; ``[[G_P + 2^V + rho_P]]`` to C; its loss share to B.

    Packed: ``s`` rows per ciphertext of ``[[u_P]]`` and ``[[d]]``, every position of the
    products masked; C returns ``[[G_P + rho_P]]``, from which the loss share follows.
    """
    b, c = roster.label, roster.coordinator
    context = holder.context
    share = unpack_vector(context, ep.recv(c, prefix + "weight_share"), len(holder.share))
    layout = _layout(holder, bounds, packed)
    if layout is None:
        ep.send(b, prefix + "scores", "ciphertext", **pack_vector(holder.scores(share, rows, features)))
        d = unpack_vector(context, ep.recv(b, prefix + "residual"), bounds.n)
        masked, _ = holder.gradient_share(d, bounds, rows, features)
        ep.send(c, prefix + "gradient_share", "ciphertext", **pack_vector(masked))
    else:
        ep.send(b, prefix + "packed_scores", "ciphertext", slots=layout.slots,
                **pack_vector(holder.packed_scores(share, layout, rows, features)))
        d = unpack_vector(context, ep.recv(b, prefix + "packed_residual"), layout.ciphertexts(bounds.n))
        masked = holder.packed_gradient_share(d, bounds, layout, rows, features)
        ep.send(c, prefix + "packed_gradient_share", "ciphertext", **pack_vector(masked))
        holder.take_packed_gradient(unpack_vector(context, ep.recv(c, prefix + "returned_gradient_share"),
                                                  len(holder.share)), bounds)
    ep.send(b, prefix + "loss_share", "ciphertext",
            **pack_vector(holder.loss_share(share, bounds, penalty).rerandomize()))


def _pass_b(ep: Endpoint, holder: DataShares, roster: Roster, bounds: SharedBounds, penalty: Fraction, objective,
            rows=None, features=None, labels=None, weights=None, prefix: str = "", packed: bool = False) -> None:
    """The label party: ``[[d]]`` to every feature party; its masked gradient and the summed loss share to C."""
    c = roster.coordinator
    context = holder.context
    share = unpack_vector(context, ep.recv(c, prefix + "weight_share"), len(holder.share))
    layout = _layout(holder, bounds, packed)
    if layout is None:
        own = holder.partial_scores(share, rows, features)
        scores = [unpack_vector(context, ep.recv(a, prefix + "scores"), bounds.n) for a in roster.features]
        d = holder.residual(scores, own, objective, rows, labels, weights)
        residual = pack_vector(d)
        for a in roster.features:
            ep.send(a, prefix + "residual", "ciphertext", **residual)
        masked, label_term = holder.gradient_share(d, bounds, rows, features,
                                                   extra_columns=[holder.label_column(objective, rows, labels)])
        ep.send(c, prefix + "gradient_share", "ciphertext", **pack_vector(masked))
    else:
        count = layout.ciphertexts(bounds.n)
        scores = [unpack_vector(context, ep.recv(a, prefix + "packed_scores"), count) for a in roster.features]
        d = holder.packed_residual(share, scores, objective, layout, rows, features, labels)
        residual = pack_vector(d)
        for a in roster.features:
            ep.send(a, prefix + "packed_residual", "ciphertext", slots=layout.slots, **residual)
        label = holder.label_column(objective, rows, labels, bound=bounds.feature_bound)
        masked = holder.packed_gradient_share(d, bounds, layout, rows, features, extra_columns=[label])
        ep.send(c, prefix + "packed_gradient_share", "ciphertext", **pack_vector(masked))
        label_term = holder.take_packed_gradient(
            unpack_vector(context, ep.recv(c, prefix + "returned_gradient_share"), len(holder.share) + 1), bounds)
    loss = holder.loss_share(share, bounds, penalty) + label_term
    loss = loss + np.array([holder.label_constant(objective, rows, labels, weights)])
    for a in roster.features:
        part = unpack_vector(context, ep.recv(a, prefix + "loss_share"), 1)
        if part.exponent != bounds.loss_exponent:
            raise ProtocolError(f"party {holder.party.role}: {a}'s loss share is at exponent {part.exponent}, not "
                                f"{bounds.loss_exponent}")
        loss = loss + part
    ep.send(c, prefix + "loss", "ciphertext", **pack_vector(loss.rerandomize()), n=bounds.n)


def _pass_c(ep: Endpoint, shares: CoordinatorShares, roster: Roster, bounds: SharedBounds, penalty: Fraction,
            objective, prefix: str = "", packed: bool = False) -> float:
    """C: every party's ``[[c_P]]``; keep each masked gradient as C's share; the batch's mean loss.

    Packed: C reads position ``s - 1`` of each masked product and returns what it keeps, encrypted afresh.
    """
    for peer in roster.data_parties:
        ep.send(peer, prefix + "weight_share", "ciphertext", **pack_vector(shares.encrypted_share(peer)))
    layout = _layout(shares, bounds, packed)
    for peer in roster.data_parties:
        if layout is None:
            shares.receive_gradient(peer, unpack_vector(shares.context, ep.recv(peer, prefix + "gradient_share")),
                                    bounds)
            continue
        masked = unpack_vector(shares.context, ep.recv(peer, prefix + "packed_gradient_share"))
        returned = shares.receive_packed_gradient(peer, masked, bounds, layout, int(peer == roster.label))
        ep.send(peer, prefix + "returned_gradient_share", "ciphertext", **pack_vector(returned))
    message = ep.recv(roster.label, prefix + "loss")
    if message["n"] != bounds.n:
        raise ProtocolError(f"coordinator: {roster.label} sent the loss of {message['n']!r} rows, not {bounds.n}")
    return shares.loss(unpack_vector(shares.context, message, 1), bounds, objective, penalty)


# -- a data party's steps ---------------------------------------------------------------
def steps_a(ep: Endpoint, party: LinearFeatureParty, settings: TrainingSettings, start: int, on_epoch, roster: Roster,
            seed: int) -> None:
    """A feature party: its share of its weights; it learns its weights at the end (or never)."""
    objective = get_objective(settings.objective)

    def one_pass(holder, rows, bounds, penalty):
        _pass_a(ep, holder, roster, bounds, penalty, rows, packed=settings.packed)

    def validate(holder, bounds):
        _pass_a(ep, holder, roster, bounds, Fraction(0), features=party.validation, prefix=VALIDATION,
                packed=settings.packed)

    _data_steps(ep, party, settings, start, roster, seed, objective, one_pass, validate,
                lambda epoch: on_epoch(epoch, party.state()) if on_epoch else None)


def steps_b(ep: Endpoint, party: LinearLabelParty, settings: TrainingSettings, start: int, on_epoch, roster: Roster,
            seed: int) -> None:
    """The label party: as a feature party, and it forms the residual and sums the loss shares."""
    objective = get_objective(settings.objective)

    def one_pass(holder, rows, bounds, penalty):
        weights = None
        if settings.weighted:           # public: every party's bounds and exponents take it into account
            weights = party.weights[rows] if party.weights is not None else np.ones(len(rows))
        _pass_b(ep, holder, roster, bounds, penalty, objective, rows, weights=weights, packed=settings.packed)

    def validate(holder, bounds):
        _pass_b(ep, holder, roster, bounds, Fraction(0), objective, features=party.validation,
                labels=party.validation_labels, prefix=VALIDATION, packed=settings.packed)

    _data_steps(ep, party, settings, start, roster, seed, objective, one_pass, validate,
                lambda epoch: on_epoch(epoch, {**party.state(), "seed": seed}) if on_epoch else None)


def _data_steps(ep: Endpoint, party, settings: TrainingSettings, start: int, roster: Roster, seed: int, objective,
                one_pass, validate, checkpoint) -> None:
    c = roster.coordinator
    holder = DataShares(party)
    if start < 0:
        holder.begin()
    ep.send(c, "parameters", "public", count=len(holder.share))
    rule = _rule(settings)
    per_epoch = len(batch_sizes(party.n_rows, settings.batch_size))
    for epoch in range(start + 1, settings.max_iter):
        ep.iteration = epoch
        for batch, rows in enumerate(batches(party.n_rows, settings.batch_size, seed, epoch)):
            bounds = _bounds(settings, len(rows), roster, settings.weighted)
            one_pass(holder, rows, bounds, _penalty(settings, bounds))
            holder.update(bounds, objective, rule, settings.step_size(epoch * per_epoch + batch + 1, epoch))
        if settings.early_stopping:
            validate(holder, _bounds(settings, len(party.validation), roster, False))
            holder.forget()
            party.share.snapshot(epoch)
        control = ep.recv(c, "control")
        if control["stop"] and settings.early_stopping and control["best_epoch"] >= 0:
            party.share.restore(control["best_epoch"])
        checkpoint(epoch)
        if control["stop"]:
            break
    finish_data(ep, party, settings, roster)


def finish_data(ep: Endpoint, party, settings: TrainingSettings, roster: Roster) -> None:
    """The end of training at a data party: with ``reveal="respectively"`` C's share comes, and the party adds its own."""
    if settings.reveal != "respectively":
        return
    residues = unpack_residues(party.context, ep.recv(roster.coordinator, "model_share"), len(party.share))
    party.params = reveal(party, residues, party.context)


# -- the coordinator's steps --------------------------------------------------------------
def steps_c(ep: Endpoint, coordinator: Coordinator, settings: TrainingSettings, start: int, checkpoints,
            n_rows: int, n_validation: int | None, on_epoch, on_batch_loss, roster: Roster) -> dict:
    """C: its share of every party's parameters; it learns each batch's loss (and the validation loss), no gradient."""
    objective = get_objective(settings.objective)
    shares = coordinator.shares = CoordinatorShares(coordinator.context)
    counts = {peer: ep.recv(peer, "parameters")["count"] for peer in roster.data_parties}
    for peer, count in counts.items():
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 1 << 20:
            raise ProtocolError(f"coordinator: {peer} sent a malformed parameter count {count!r}")
    saved = checkpoints[start] if start >= 0 else {}
    if start >= 0:
        shares.load_state(saved["shares"])
    else:
        shares.begin({peer: [True] * count if peer != roster.label or not settings.fit_intercept
                      else [True] * (count - 1) + [False] for peer, count in counts.items()})
    held = {peer: len(share) for peer, share in shares.shares.items()}
    if held != counts:
        raise ProtocolError(f"coordinator: the parties hold {counts} parameters, its shares {held}")
    rule = _rule(settings)
    tracker = Tracker(settings, saved.get("validation"))
    converged, best_epoch = bool(saved.get("converged", False)), int(saved.get("best_epoch", -1))
    sizes = batch_sizes(n_rows, settings.batch_size)
    for epoch in range(start + 1, settings.max_iter):
        ep.iteration = epoch
        losses = []
        for batch, size in enumerate(sizes):
            bounds = _bounds(settings, size, roster, settings.weighted)
            losses.append(_pass_c(ep, shares, roster, bounds, _penalty(settings, bounds), objective,
                                  packed=settings.packed))
            shares.update(bounds, objective, rule, settings.step_size(epoch * len(sizes) + batch + 1, epoch))
            if on_batch_loss:
                on_batch_loss(epoch, batch, losses[-1])
        previous = coordinator.loss_curve[-1] if coordinator.loss_curve else None
        current = coordinator.record_epoch(losses, sizes)
        if settings.early_stopping:
            if not n_validation:
                raise ProtocolError("coordinator: early stopping without validation rows")
            score = _pass_c(ep, shares, roster, _bounds(settings, n_validation, roster, False), Fraction(0), objective,
                            VALIDATION, packed=settings.packed)
            shares.forget()
            shares.snapshot(epoch)
            converged = tracker.add(epoch, score)
            best_epoch = tracker.best_epoch
        else:
            converged = settings.tol is not None and previous is not None and abs(previous - current) < settings.tol
        diverging = diverged(coordinator.loss_curve)
        stop = converged or diverging is not None or epoch + 1 >= settings.max_iter
        for peer in roster.data_parties:
            ep.send(peer, "control", "public", stop=stop, best_epoch=best_epoch)
        if stop and settings.early_stopping and best_epoch >= 0:
            shares.restore(best_epoch)
        if on_epoch:
            on_epoch(epoch, {**coordinator.state(), "shares": shares.state(), "validation": tracker.state(),
                             "stopped": stop, "converged": converged, "best_epoch": best_epoch})
        if diverging:
            raise DivergenceError(f"{ep.role}: training diverges: {diverging}; lower learning_rate (now "
                                  f"{settings.learning_rate:g}) or scale the features")
        if stop:
            break
    finish_c(ep, shares, settings, roster)
    return {"loss_curve": list(coordinator.loss_curve), "n_iter": len(coordinator.loss_curve),
            "converged": converged, "best_epoch": best_epoch, "validation_scores": list(tracker.scores)}


def finish_c(ep: Endpoint, shares: CoordinatorShares, settings: TrainingSettings, roster: Roster) -> None:
    """The end of training at C: with ``reveal="respectively"`` each party gets C's share of its parameters."""
    if settings.reveal != "respectively":
        return
    for peer in roster.data_parties:
        ep.send(peer, "model_share", "masked", **pack_residues(shares.share_residues(peer), shares.context))


def resume_finished_c(ep: Endpoint, coordinator: Coordinator, settings: TrainingSettings, saved: dict,
                      roster: Roster) -> None:
    """Every party had completed the run: C takes back its shares and reveals them again."""
    shares = coordinator.shares = CoordinatorShares(coordinator.context)
    shares.load_state(saved["shares"])
    finish_c(ep, shares, settings, roster)


# -- prediction with a model that stays shared ------------------------------------------------
def _receive_key(ep: Endpoint, party, frac_bits: int, engine, roster: Roster, x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != party.n_features or not np.isfinite(x).all():
        raise DataError(f"party {party.role}: prediction data must be finite, with the model's {party.n_features} "
                        f"columns; got shape {x.shape}")
    if party.share is None:
        raise DataError(f"party {party.role} holds no share of a shared model")
    key = ep.recv(roster.coordinator, "public_key")["key"]
    party.receive_public_key(key, FixedPoint(frac_bits), engine, len(roster.data_parties))
    return x


def predict_feature(ep: Endpoint, party: LinearFeatureParty, features, frac_bits: int = 32, engine=None,
              roster: Roster = TWO_PARTY) -> None:
    """A feature party of a shared model: ``[[X w]] = X [[c]] + X a`` to the label party."""
    x = _receive_key(ep, party, frac_bits, engine, roster, features)
    n_rows = ep.recv(roster.label, "rows")["n_rows"]
    if n_rows != x.shape[0]:
        raise DataError(f"party {party.role} has {x.shape[0]} prediction rows but party {roster.label} has {n_rows}")
    holder = DataShares(party)
    share = unpack_vector(party.context, ep.recv(roster.coordinator, "weight_share"), len(holder.share))
    ep.send(roster.label, "scores", "ciphertext", **pack_vector(holder.scores(share, features=x)))


def predict_label(ep: Endpoint, party: LinearLabelParty, features, frac_bits: int = 32, engine=None,
              roster: Roster = TWO_PARTY) -> np.ndarray:
    """The label party of a shared model: the scores ``z``, through C under a mask uniform over Z_n."""
    x = _receive_key(ep, party, frac_bits, engine, roster, features)
    for a in roster.features:
        ep.send(a, "rows", "public", n_rows=x.shape[0])
    holder = DataShares(party)
    share = unpack_vector(party.context, ep.recv(roster.coordinator, "weight_share"), len(holder.share))
    total = holder.partial_scores(share, features=x)
    for a in roster.features:
        other = unpack_vector(party.context, ep.recv(a, "scores"), len(total))
        if other.exponent != total.exponent:
            raise ProtocolError(f"party {party.role}: {a}'s scores are at exponent {other.exponent}, not "
                                f"{total.exponent}")
        total = total + other
    masked, mask = party.context.mask(total)
    ep.send(roster.coordinator, "masked_scores", "ciphertext", **pack_vector(masked))
    residues = unpack_residues(party.context, ep.recv(roster.coordinator, "scores"), len(total))
    return party.context.unmask(residues, mask, masked.exponent, what=f"party {party.role} score")


def predict_coordinator(ep: Endpoint, coordinator: Coordinator, roster: Roster = TWO_PARTY) -> int:
    """C for a shared model: its share of every party's parameters, encrypted; then it decrypts the masked scores."""
    saved = coordinator.shares
    if saved is None:
        raise DataError("the coordinator holds no shares of this model")
    key = coordinator.public_key_bytes()
    for peer in roster.data_parties:
        ep.send(peer, "public_key", "public", key=key)
    shares = CoordinatorShares(coordinator.context)
    shares.load_state(saved.state())
    for peer in roster.data_parties:
        ep.send(peer, "weight_share", "ciphertext", **pack_vector(shares.encrypted_share(peer)))
    masked = unpack_vector(coordinator.context, ep.recv(roster.label, "masked_scores"))
    ep.send(roster.label, "scores", "masked", **pack_residues(coordinator.decrypt_masked(masked),
                                                              coordinator.context))
    return len(masked)


# Yang et al.'s party letters, kept for teaching and the notebooks (A: a feature party, B: the label party, C: the coordinator).
predict_a = predict_feature
predict_b = predict_label
predict_c = predict_coordinator
