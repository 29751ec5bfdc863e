"""Training: Yang et al. 2019, Table 2 — one program per role.

Read the three programs side by side with the table (one feature party ``A``;
with more, every feature party does what A does)::

    Step  Party A (each feature party k)   Party B                               Party C
    1     -                                -                                     create key pair, send public key
    2     [[u_A]]              -> B        [[d]] = sum_k [[u_k]] + (u_B - k y) -> every A
    3     [[X_A^T d]] + [[R_A]] -> C       [[X_B^T d]] + [[R_B]]            -> C  decrypt and return
          [[a u_A . d]]        -> B        [[L]] from the loss parts        -> C  X_A^T d + R_A -> A, ...;
                                                                                  decrypt [[L]]
    4     unmask, update w_A               unmask, update w_B, b

Linear and logistic regression differ only in the quadratic loss (see
:mod:`vfl.parties.objectives`); ``k`` is 1 for linear and 2 for logistic.  The
loss needs the cross terms ``u_j u_k`` between feature parties, which no party
holds: each feature party adds ``a u_k`` as one more column of its ``X^T [[d]]``
and sends that product to B, which assembles ``[[L]]`` (see
:meth:`vfl.parties.linear.LinearLabelParty.batch_loss`).  C decrypts only the batch loss.

Before step 2 the parties agree on where to start (fresh, or the last epoch
all of them completed, for ``--resume``) and B tells the feature parties the
batch seed.  A fresh run starts each party from its own secret random weights
(``init="random"``), or from zeros.  After each epoch C says whether to stop.

Every role program takes an :class:`~vfl.transport.Endpoint`, its party, the
shared :class:`TrainingSettings` and the :class:`~vfl.protocols.roster.Roster`
(who plays which role; Yang's A, B, C by default); it runs unchanged in threads
(in-process) or as its own process over TLS.  ``checkpoints`` maps a completed
epoch to the party's saved state (``party.state()`` plus, for B, the batch
seed), and ``on_epoch(epoch, state)`` is called after every completed epoch.
"""

from __future__ import annotations

import secrets
from typing import Callable, Mapping

from vfl.crypto import FixedPoint
from vfl.errors import DataError, DivergenceError, ProtocolError
from vfl.parties import Coordinator, get_objective
from vfl.parties.linear import LinearFeatureParty, LinearLabelParty, dp
from vfl.parties.linear.data_party import weight_extra_bits
from vfl.protocols.linear import conjugate, shared, validation
from vfl.protocols.linear.checks import DIVERGING_EPOCHS, diverged
from vfl.protocols.linear.passes import pass_a, pass_b, pass_c, receive_gradient
from vfl.protocols.roster import TWO_PARTY, Roster
from vfl.protocols.linear.settings import TrainingSettings, batch_sizes, batches, check_batch_size
from vfl.transport import Endpoint

Checkpoints = Mapping[int, dict]
OnEpoch = Callable[[int, dict], None]


# -- setup shared by all roles ---------------------------------------------------------
def _receive_key(ep: Endpoint, party, settings: TrainingSettings, engine, roster: Roster) -> None:
    message = ep.recv(roster.coordinator, "public_key")
    precision = FixedPoint(settings.frac_bits)
    extra = weight_extra_bits(precision.frac_bits) if settings.weighted else 0     # head-room for row weights
    party.receive_public_key(message["key"], precision, engine, len(roster.data_parties), extra)
    if settings.packed or settings.shared:     # their slots and masks are sized for the declared bound
        party.check_declared_features(settings.feature_bound)


def _agree_on_start(ep: Endpoint, checkpoints: Checkpoints | None, roster: Roster) -> tuple[int, bool]:
    """Tell C the last epoch this party completed; C answers with the epoch to resume after.

    Also whether training had already stopped there (every party completed its last
    epoch): the party then only takes back its final state.
    """
    ep.send(roster.coordinator, "resume", "public", last_epoch=max(checkpoints) if checkpoints else -1)
    message = ep.recv(roster.coordinator, "start")
    start, finished = message["epoch"], bool(message.fields.get("finished", False))
    if start >= 0 and (not checkpoints or start not in checkpoints):
        raise ProtocolError(f"{ep.role}: asked to resume after epoch {start}, which it has no checkpoint for")
    return start, finished


def _update(ep: Endpoint, party, rows, objective, settings: TrainingSettings, roster: Roster, step: int,
            epoch: int) -> None:
    """Step 4: unmask the gradient C returned, and take this party's optimizer step."""
    party.apply_update(receive_gradient(ep, party, roster), len(rows), objective, settings.penalty_spec,
                       settings.step_size(step, epoch))


def _begin(party, settings: TrainingSettings, start: int, checkpoints) -> None:
    """A fresh optimizer; then, on resume, the weights and optimizer state after epoch ``start``."""
    party.set_optimizer(settings.optimizer, **settings.optimizer_hyper())
    if start >= 0:
        party.load_state(checkpoints[start])


# -- a feature party (Yang's A) ----------------------------------------------------------
def train_feature(ep: Endpoint, party: LinearFeatureParty, settings: TrainingSettings,
                  checkpoints: Checkpoints | None = None, on_epoch: OnEpoch | None = None, engine=None,
                  roster: Roster = TWO_PARTY) -> LinearFeatureParty:
    """A feature party's program: features only; learns its own weights and nothing else."""
    objective = get_objective(settings.objective)
    b, c = roster.label, roster.coordinator
    # Step 1: receive the public key
    _receive_key(ep, party, settings, engine, roster)
    start, finished = _agree_on_start(ep, checkpoints, roster)
    if finished:                # every party had completed the run: its final state is the result
        party.load_state(checkpoints[start])
        if settings.shared:     # the final shares: C reveals its own again
            shared.finish_data(ep, party, settings, roster)
        return party
    if start < 0:
        party.start(settings.init)
    _begin(party, settings, start, checkpoints)
    schedule = ep.recv(b, "schedule")
    if schedule["n_rows"] != party.n_rows:
        raise DataError(f"party {party.role} has {party.n_rows} rows but party {b} has {schedule['n_rows']}; "
                        "the parties' rows must be aligned")
    validation.hold_out(party, settings, schedule["seed"])
    if settings.shared:         # the weights stay shared: A learns no gradient (vfl.protocols.linear.shared)
        shared.steps_a(ep, party, settings, start, on_epoch, roster, schedule["seed"])
        return party
    check_batch_size(party.role, party.n_rows, settings.batch_size, party.n_gradient_values)

    if settings.conjugate:
        conjugate.steps_a(ep, party, settings, start, on_epoch, roster)
        return party
    per_epoch = len(batch_sizes(party.n_rows, settings.batch_size))
    for epoch in range(start + 1, settings.max_iter):
        ep.iteration = epoch
        for batch, rows in enumerate(batches(party.n_rows, settings.batch_size, schedule["seed"], epoch)):
            # Steps 2 and 3 (vfl.protocols.linear.passes), then step 4: unmask X_A^T d, update w_A
            pass_a(ep, party, rows, objective, settings, roster)
            _update(ep, party, rows, objective, settings, roster, epoch * per_epoch + batch + 1, epoch)
        if settings.early_stopping:
            validation.score_a(ep, party, roster)
        stop = validation.end_of_epoch(ep, party, epoch, settings, roster)["stop"]
        if on_epoch:
            on_epoch(epoch, party.state())
        if stop:
            break
    return party


# -- the label party (Yang's B) ----------------------------------------------------------
def train_label(ep: Endpoint, party: LinearLabelParty, settings: TrainingSettings,
                checkpoints: Checkpoints | None = None, on_epoch: OnEpoch | None = None, engine=None,
                roster: Roster = TWO_PARTY) -> LinearLabelParty:
    """The label party's program: features and labels; learns its own weights and intercept."""
    objective = get_objective(settings.objective)
    c = roster.coordinator
    # Step 1: receive the public key
    _receive_key(ep, party, settings, engine, roster)
    _differential_privacy(party, settings, objective.kappa)
    start, finished = _agree_on_start(ep, checkpoints, roster)
    if finished:                # every party had completed the run: its final state is the result
        party.load_state(checkpoints[start])
        party.validation_scores = validation.Tracker(settings, checkpoints[start].get("validation")).scores
        if settings.shared:
            shared.finish_data(ep, party, settings, roster)
        return party
    if start >= 0:
        seed = checkpoints[start]["seed"]
    else:
        party.start(settings.init, objective.kappa)
        seed = settings.random_state if settings.random_state is not None else secrets.randbits(63)
    _begin(party, settings, start, checkpoints)
    for a in roster.features:
        ep.send(a, "schedule", "public", seed=seed, n_rows=party.n_rows)
    validation.hold_out(party, settings, seed)
    tracker = validation.Tracker(settings, checkpoints[start].get("validation") if start >= 0 else None)
    if settings.shared:         # no party learns a gradient: C scores the validation rows (vfl.protocols.linear.shared)
        ep.send(c, "schedule", "public", n_rows=party.n_rows,
                n_validation=0 if party.validation is None else len(party.validation))
        shared.steps_b(ep, party, settings, start, on_epoch, roster, seed)
        return party
    check_batch_size(party.role, party.n_rows, settings.batch_size, party.n_gradient_values)
    ep.send(c, "schedule", "public", n_rows=party.n_rows)

    if settings.conjugate:
        conjugate.steps_b(ep, party, settings, start, on_epoch, roster, seed, tracker)
        party.validation_scores = tracker.scores
        return party
    per_epoch = len(batch_sizes(party.n_rows, settings.batch_size))
    for epoch in range(start + 1, settings.max_iter):
        ep.iteration = epoch
        for batch, rows in enumerate(batches(party.n_rows, settings.batch_size, seed, epoch)):
            # Steps 2 and 3 (vfl.protocols.linear.passes), then step 4: unmask, update w_B and b
            pass_b(ep, party, rows, objective, settings, roster)
            _update(ep, party, rows, objective, settings, roster, epoch * per_epoch + batch + 1, epoch)
        if settings.early_stopping:
            validation.score_b(ep, party, roster, objective, tracker, epoch)
        stop = validation.end_of_epoch(ep, party, epoch, settings, roster)["stop"]
        if on_epoch:
            on_epoch(epoch, {**party.state(), "seed": seed, "validation": tracker.state()})
        if stop:
            break
    party.validation_scores = tracker.scores
    return party


def _differential_privacy(party: LinearLabelParty, settings: TrainingSettings, kappa: float) -> None:
    """With DP on: clip linear labels to the bound, and set the noise for every release of the labels.

    Each row's label is released once per epoch of every model trained on it
    (``party.dp_models``: one per class in one-vs-rest).
    """
    if not settings.dp:
        return
    if settings.objective == "linear":
        party.clip_labels(settings.label_bound)
    party.noise_multiplier = dp.noise_multiplier(settings.dp_epsilon, settings.dp_delta,
                                                 settings.max_iter * party.dp_models)
    # a row's weight scales its residual, and so what its label can change: B's largest weight (B's secret)
    largest = float(party.weights.max()) if party.weights is not None else 1.0
    party.noise_std = party.noise_multiplier * dp.sensitivity(kappa, settings.label_bound) * largest


# -- the coordinator (Yang's C) ----------------------------------------------------------
def train_coordinator(ep: Endpoint, coordinator: Coordinator, settings: TrainingSettings,
          checkpoints: Checkpoints | None = None, on_epoch: OnEpoch | None = None,
          on_batch_loss: Callable[[int, int, float], None] | None = None, roster: Roster = TWO_PARTY) -> dict:
    """C's program: makes the keys, decrypts the masked gradients and the batch loss only.

    ``on_batch_loss(epoch, batch, loss)`` is called with each batch loss as C decrypts it.
    Returns ``{"loss_curve": [...], "n_iter": int, "converged": bool}``.
    Raises :class:`~vfl.errors.DivergenceError` (after telling the parties to stop) when
    the loss is no longer finite or has grown for :data:`DIVERGING_EPOCHS` epochs in a row.
    """
    parties = roster.data_parties
    # Step 1: create the key pair (or keep the one made for an earlier model of this run), send the public key
    key = coordinator.public_key_bytes()
    for peer in parties:
        ep.send(peer, "public_key", "public", key=key, frac_bits=settings.frac_bits)
    # Resume after the last epoch every party completed (-1: from the start)
    last = [ep.recv(peer, "resume")["last_epoch"] for peer in parties]
    start = min(*last, max(checkpoints) if checkpoints else -1)
    finished = start >= 0 and bool(checkpoints[start].get("stopped"))
    for peer in parties:
        ep.send(peer, "start", "public", epoch=start, finished=finished)
    coordinator.load_state(checkpoints[start] if start >= 0 else {"loss_curve": []})
    if finished:                # every party had completed the run: nothing more to train
        saved = checkpoints[start]
        if settings.shared:
            shared.resume_finished_c(ep, coordinator, settings, saved, roster)
        return {"loss_curve": list(coordinator.loss_curve), "n_iter": len(coordinator.loss_curve),
                "converged": bool(saved.get("converged")), "best_epoch": int(saved.get("best_epoch", -1))}
    schedule = ep.recv(roster.label, "schedule")
    n_rows = schedule["n_rows"]
    if settings.shared:
        return shared.steps_c(ep, coordinator, settings, start, checkpoints, n_rows,
                              schedule.fields.get("n_validation"), on_epoch, on_batch_loss, roster)

    if settings.conjugate:
        return conjugate.steps_c(ep, coordinator, settings, start, n_rows, on_epoch, roster)
    converged = False
    for epoch in range(start + 1, settings.max_iter):
        ep.iteration = epoch
        losses, sizes = [], []
        for batch, size in enumerate(batch_sizes(n_rows, settings.batch_size)):
            # Step 3: decrypt and return the masked gradients; decrypt [[L]]
            losses.append(pass_c(ep, coordinator, size, settings, roster))
            sizes.append(size)
            if on_batch_loss:
                on_batch_loss(epoch, batch, losses[-1])
        previous = coordinator.loss_curve[-1] if coordinator.loss_curve else None
        current = coordinator.record_epoch(losses, sizes)
        if settings.early_stopping:     # the validation score decides, not the training loss
            converged, best_epoch = validation.score_c(ep, coordinator, roster)
        else:
            best_epoch = -1
            converged = settings.tol is not None and previous is not None and abs(previous - current) < settings.tol
        diverging = diverged(coordinator.loss_curve, noisy=settings.dp)
        stop = converged or diverging is not None or epoch + 1 >= settings.max_iter
        if on_epoch:
            on_epoch(epoch, {**coordinator.state(), "stopped": stop, "converged": converged,
                             "best_epoch": best_epoch})
        for peer in parties:
            ep.send(peer, "control", "public", stop=stop, best_epoch=best_epoch)
        if diverging:
            raise DivergenceError(f"{ep.role}: training diverges: {diverging}; lower learning_rate (now "
                                  f"{settings.learning_rate:g}) or scale the features")
        if stop:
            break
    return {"loss_curve": list(coordinator.loss_curve), "n_iter": len(coordinator.loss_curve),
            "converged": converged, "best_epoch": best_epoch}


# Yang et al.'s party letters, kept for teaching and the notebooks (A: a feature party, B: the label party, C: the coordinator).
run_a = train_feature
run_b = train_label
run_c = train_coordinator
