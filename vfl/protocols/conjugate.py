"""Training by conjugate gradient (``solver="cg"``): one encrypted pass per step — one program per role.

The objective is a quadratic in the weights, so conjugate gradient with an exact
line search (:mod:`vfl.parties.cg`) reaches its optimum in about as many steps as
there are weights, where gradient descent needs a learning rate and many more
epochs.  Each step needs the product ``H p`` of the Hessian with the search
direction ``p``, and that product is a Table 2 pass (:mod:`vfl.protocols.passes`)
run at ``p`` instead of the weights, with the label term taken out
(:meth:`~vfl.parties.objectives.Objective.curvature`)::

    Step  Each data party k (A, ..., B)                      C
    0     a pass at w_0: g_k (its block of the gradient)     L(w_0)
          [[||g_k||^2]] -> B; B sums them         -> C       gamma_0 = ||g||^2
    1     a pass at p_k, no labels: (H p)_k                  p^T H p = 2 x the pass's "loss"
    2                                                        eta = gamma / p^T H p  -> every party
    3     w_k += eta p_k,  g_k += eta (H p)_k
          [[||g_k||^2]] -> B; B sums them         -> C       gamma' ; L' = L - eta gamma + eta^2 p^T H p / 2
    4     p_k = -g_k + beta p_k                    <-        beta = gamma' / gamma, stop?  -> every party

Steps 1-4 repeat; step 0 runs once.  What is new beside Table 2: C learns, per
step, ``||g||^2`` and ``p^T H p`` (sums over every party and row, like the loss it
already learns), and every data party learns ``eta`` and ``beta``.  The passes
themselves reveal what a gradient step's do: each party its own block of ``X^T d``
(here of the gradient and of ``H p``), masked from C.  The gradient norm parts
travel encrypted and summed, so C learns no party's share.
"""

from __future__ import annotations

import math

import numpy as np

from vfl.errors import DivergenceError, ProtocolError
from vfl.parties import Coordinator, PartyA, PartyB, get_objective, pack_vector, unpack_vector
from vfl.parties import cg
from vfl.protocols import validation
from vfl.protocols.passes import pass_a, pass_b, pass_c, receive_gradient
from vfl.protocols.roster import Roster
from vfl.protocols.settings import TrainingSettings
from vfl.transport import Endpoint


def steps_a(ep: Endpoint, party: PartyA, settings: TrainingSettings, start: int, on_epoch, roster: Roster) -> None:
    """A feature party's steps: its blocks of ``w``, ``g`` and ``p``; the scalars come from C."""
    def norm() -> None:
        ep.send(roster.label, "norm_part", "ciphertext", **pack_vector(party.context.encrypt(
            np.array([party.directions.norm_part()]), what=f"party {party.role} gradient norm")))

    _steps(ep, party, settings, start, roster, pass_a, norm,
           lambda: validation.score_a(ep, party, roster),
           lambda epoch: on_epoch(epoch, party.state()) if on_epoch else None)


def steps_b(ep: Endpoint, party: PartyB, settings: TrainingSettings, start: int, on_epoch, roster: Roster, seed: int,
            tracker: validation.Tracker) -> None:
    """The label party's steps: as a feature party's, and it sums the gradient norm parts for C."""
    objective = get_objective(settings.objective)

    def norm() -> None:
        total = party.context.encrypt(np.array([party.directions.norm_part()]),
                                      what=f"party {party.role} gradient norm")
        for a in roster.features:
            total = total + unpack_vector(party.context, ep.recv(a, "norm_part"), 1)
        ep.send(roster.coordinator, "norm", "ciphertext", **pack_vector(total.rerandomize()))

    def checkpoint(epoch: int) -> None:
        if on_epoch:
            on_epoch(epoch, {**party.state(), "seed": seed, "validation": tracker.state()})

    _steps(ep, party, settings, start, roster, pass_b, norm,
           lambda: validation.score_b(ep, party, roster, objective, tracker, ep.iteration), checkpoint)


def _steps(ep: Endpoint, party, settings: TrainingSettings, start: int, roster: Roster, one_pass, norm, score,
           checkpoint) -> None:
    """Steps 0-4 at a data party; ``one_pass`` is its role's pass, ``norm`` sends its share of ``||g||^2``."""
    objective = get_objective(settings.objective)
    curvature = objective.curvature()
    penalty = settings.penalty_spec
    rows = np.arange(party.n_rows)
    for epoch in range(start + 1, settings.max_iter):
        ep.iteration = epoch
        if not party.directions.started:
            # Step 0: the gradient at the start; the first direction is steepest descent
            one_pass(ep, party, rows, objective, settings, roster)
            party.directions.begin(party.gradient(receive_gradient(ep, party, roster), len(rows), objective, penalty))
            norm()
        # Step 1: the pass at p, without labels, gives this party's block of H p
        direction = party.directions.direction
        with party.scoring_with(direction):
            one_pass(ep, party, rows, curvature, settings, roster)
        product = party.gradient(receive_gradient(ep, party, roster), len(rows), curvature, penalty, at=direction)
        # Steps 2-3: C's step size; move, and send the new gradient's norm part
        eta = _scalar(ep.recv(roster.coordinator, "step"), "eta", party.role)
        party.params = party.directions.step(party.params, eta, product)
        norm()
        if settings.early_stopping:
            score()
        # Step 4: the next direction, conjugate to the previous ones
        control = validation.end_of_epoch(ep, party, epoch, settings, roster)
        party.directions.turn(_scalar(control, "beta", party.role))
        checkpoint(epoch)
        if control["stop"]:
            break


def steps_c(ep: Endpoint, coordinator: Coordinator, settings: TrainingSettings, start: int, n_rows: int, on_epoch,
            roster: Roster) -> dict:
    """C's steps: ``eta`` and ``beta`` from the sums it decrypts; the loss follows from them."""
    parties = roster.data_parties

    def norm() -> float:
        return coordinator.decrypt_total(unpack_vector(coordinator.context, ep.recv(roster.label, "norm"), 1))

    state = dict(coordinator.cg_state)
    converged, best_epoch = False, -1
    for epoch in range(start + 1, settings.max_iter):
        ep.iteration = epoch
        if not state:
            # Step 0: the loss and the squared gradient norm at the start
            loss = pass_c(ep, coordinator, n_rows, settings, roster)
            gamma = norm()
            state = {"loss": loss, "gamma": gamma, "gamma_first": gamma}
        # Step 1: the pass at p decrypts to n p^T H p / 2, per row p^T H p / 2
        curvature = 2.0 * pass_c(ep, coordinator, n_rows, settings, roster)
        # Step 2: the exact step along p
        eta = cg.step_size(state["gamma"], curvature)
        for peer in parties:
            ep.send(peer, "step", "public", eta=eta)
        # Step 3: the new gradient's squared norm; the loss there
        gamma = norm()
        loss = cg.next_loss(state["loss"], state["gamma"], eta, curvature)
        if not math.isfinite(loss):
            raise DivergenceError(f"{ep.role}: the loss is {loss} after step {epoch + 1}; scale the features")
        beta = cg.conjugacy(gamma, state["gamma"])
        state = {"loss": loss, "gamma": gamma, "gamma_first": state["gamma_first"]}
        coordinator.loss_curve.append(loss)
        coordinator.cg_state = state
        exhausted = cg.converged(gamma, state["gamma_first"], None, curvature)
        if settings.early_stopping:     # the validation score decides, not the gradient
            converged, best_epoch = validation.score_c(ep, coordinator, roster)
        else:
            converged = cg.converged(gamma, state["gamma_first"], settings.tol, curvature)
        # Step 4: beta, and whether to stop
        stop = converged or exhausted or epoch + 1 >= settings.max_iter
        if on_epoch:
            on_epoch(epoch, {**coordinator.state(), "stopped": stop, "converged": converged or exhausted,
                             "best_epoch": best_epoch})
        for peer in parties:
            ep.send(peer, "control", "public", stop=stop, best_epoch=best_epoch, beta=beta)
        if stop:
            converged = converged or exhausted
            break
    return {"loss_curve": list(coordinator.loss_curve), "n_iter": len(coordinator.loss_curve),
            "converged": converged, "best_epoch": best_epoch}


def _scalar(fields, name: str, role: str) -> float:
    """A step size or conjugacy from C: a finite number, at least 0 (anything else ends the run)."""
    value = fields[name] if name in getattr(fields, "fields", fields) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ProtocolError(f"party {role}: the coordinator's {name} must be a finite number >= 0, got {value!r}")
    return float(value)
