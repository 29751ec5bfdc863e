"""Training by conjugate gradient (``solver="cg"``): one encrypted pass per step — one program per role.

The objective is a quadratic in the weights, so conjugate directions with exact
line searches (:mod:`vfl.parties.linear.cg`) reach its optimum in about as many steps as
there are weights, where gradient descent needs a learning rate and many more
epochs.  Each step needs the product ``H p`` of the Hessian with the search
direction ``p``, and that product is a Table 2 pass (:mod:`vfl.protocols.linear.passes`)
run at ``p`` (at the probe ``s p``) instead of the weights, with the label term
taken out (:meth:`~vfl.parties.objectives.Objective.curvature`)::

    Step  Each data party k (A, ..., B)                         C
    0     a pass at w_0: g_k (its block of the gradient)        L(w_0)
          [[||g_k||^2]] -> B; B sums them            -> C       gamma_0 = ||g||^2
    1     a pass at s p_k, no labels: (H p)_k                   p^T H p = 2 x the pass's "loss" / s^2
    2                                                           eta = -(g . p) / p^T H p  -> every party
    3     w_k += eta p_k,  g_k += eta (H p)_k
          [[its shares of ||g||^2, g . H p_i, g . p_i]] -> B;
          B sums them                                -> C       the sums; L' = L + eta g.p + eta^2 p^T H p / 2
    4     p_k = -g_k + sum_i beta_i p_i,  s       <-            beta_i = (g . H p_i) / p_i^T H p_i, s, stop?

Steps 1-4 repeat; step 0 runs once.  What is new beside Table 2: C learns, per
step, ``p^T H p`` and the sums of step 3 — sums over every party and row, like the
loss it already learns — and every data party learns ``eta``, the ``beta``'s and
``s = ||g_0|| / ||g||``.  The passes themselves reveal what a gradient step's do:
each party its own block of ``X^T d`` (here of the gradient and of ``H p``),
masked from C.  The shares of step 3 travel encrypted and summed, so C learns no
party's share.
"""

from __future__ import annotations

import math

import numpy as np

from vfl.errors import DivergenceError, ProtocolError
from vfl.parties import Coordinator, get_objective, pack_vector, unpack_vector
from vfl.parties.linear import LinearFeatureParty, LinearLabelParty
from vfl.parties.linear import cg
from vfl.protocols.linear import validation
from vfl.protocols.linear.passes import pass_a, pass_b, pass_c, receive_gradient
from vfl.protocols.roster import Roster
from vfl.protocols.linear.settings import TrainingSettings
from vfl.transport import Endpoint


def steps_a(ep: Endpoint, party: LinearFeatureParty, settings: TrainingSettings, start: int, on_epoch,
            roster: Roster) -> None:
    """A feature party's steps: its blocks of ``w``, ``g`` and the ``p_i``; the scalars come from C."""
    def sums() -> None:
        ep.send(roster.label, "norm_part", "ciphertext", **pack_vector(party.context.encrypt(
            party.directions.sums(), what=f"party {party.role} gradient products")))

    _steps(ep, party, settings, start, roster, pass_a, sums,
           lambda: validation.score_a(ep, party, roster),
           lambda epoch: on_epoch(epoch, party.state()) if on_epoch else None)


def steps_b(ep: Endpoint, party: LinearLabelParty, settings: TrainingSettings, start: int, on_epoch, roster: Roster,
            seed: int, tracker: validation.Tracker) -> None:
    """The label party's steps: as a feature party's, and it sums every party's shares for C."""
    objective = get_objective(settings.objective)

    def sums() -> None:
        own = party.directions.sums()
        total = party.context.encrypt(own, what=f"party {party.role} gradient products")
        for a in roster.features:
            total = total + unpack_vector(party.context, ep.recv(a, "norm_part"), len(own))
        ep.send(roster.coordinator, "norm", "ciphertext", **pack_vector(total.rerandomize()))

    def checkpoint(epoch: int) -> None:
        if on_epoch:
            on_epoch(epoch, {**party.state(), "seed": seed, "validation": tracker.state()})

    _steps(ep, party, settings, start, roster, pass_b, sums,
           lambda: validation.score_b(ep, party, roster, objective, tracker, ep.iteration), checkpoint)


def _steps(ep: Endpoint, party, settings: TrainingSettings, start: int, roster: Roster, one_pass, sums, score,
           checkpoint) -> None:
    """Steps 0-4 at a data party; ``one_pass`` is its role's pass, ``sums`` sends its shares of step 3's sums."""
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
            sums()
        # Step 1: the pass at the probe s p, without labels, gives this party's block of H (s p)
        probe = party.directions.probe()
        with party.scoring_with(probe):
            one_pass(ep, party, rows, curvature, settings, roster)
        probed = party.gradient(receive_gradient(ep, party, roster), len(rows), curvature, penalty, at=probe)
        # Steps 2-3: C's step size; move, and send this party's shares of the new sums
        eta = _number(ep.recv(roster.coordinator, "step")["eta"], "eta", party.role)
        party.params = party.directions.step(party.params, eta, probed)
        sums()
        if settings.early_stopping:
            score()
        # Step 4: the next direction, conjugate to every earlier one
        control = validation.end_of_epoch(ep, party, epoch, settings, roster)
        betas = _numbers(control.get("beta"), len(party.directions.past), party.role)
        party.directions.turn(betas, _number(control.get("scale"), "scale", party.role))
        checkpoint(epoch)
        if control["stop"]:
            break


def steps_c(ep: Endpoint, coordinator: Coordinator, settings: TrainingSettings, start: int, n_rows: int, on_epoch,
            roster: Roster) -> dict:
    """C's steps: ``eta``, the ``beta``'s and ``s`` from the sums it decrypts; the loss follows from them."""
    parties = roster.data_parties

    def sums(count: int) -> np.ndarray:
        return coordinator.context.decrypt(unpack_vector(coordinator.context, ep.recv(roster.label, "norm"), count),
                                           what="gradient products")

    state = dict(coordinator.cg_state)
    converged, best_epoch = False, -1
    for epoch in range(start + 1, settings.max_iter):
        ep.iteration = epoch
        if not state:
            # Step 0: the loss and the squared gradient norm at the start (the first slope is -gamma)
            loss = pass_c(ep, coordinator, n_rows, settings, roster)
            gamma = float(sums(1)[0])
            state = {"loss": loss, "gamma": gamma, "gamma_first": gamma, "slope": -gamma, "scale": 1.0,
                     "curvatures": [], "scales": []}
        # Step 1: the pass at the probe s p decrypts to n s^2 p^T H p / 2
        curvature = 2.0 * pass_c(ep, coordinator, n_rows, settings, roster) / state["scale"] ** 2
        # Step 2: the exact step along p
        eta = cg.step_size(state["slope"], curvature)
        for peer in parties:
            ep.send(peer, "step", "public", eta=eta)
        # Step 3: the loss there; the sums, hence the next direction's weights, slope and probe scale
        loss = cg.next_loss(state["loss"], state["slope"], eta, curvature)
        if not math.isfinite(loss):
            raise DivergenceError(f"{ep.role}: the loss is {loss} after step {epoch + 1}; scale the features")
        curvatures, scales = [*state["curvatures"], curvature], [*state["scales"], state["scale"]]
        gamma, betas, slope = cg.conjugation(sums(1 + 2 * len(curvatures)), curvatures, state["scale"], scales)
        scale = cg.probe_scale(gamma, state["gamma_first"])
        state = {"loss": loss, "gamma": gamma, "gamma_first": state["gamma_first"], "slope": slope, "scale": scale,
                 "curvatures": curvatures, "scales": scales}
        coordinator.loss_curve.append(loss)
        coordinator.cg_state = state
        exhausted = cg.converged(gamma, state["gamma_first"], None, curvature)
        if settings.early_stopping:     # the validation score decides, not the gradient
            converged, best_epoch = validation.score_c(ep, coordinator, roster)
        else:
            converged = cg.converged(gamma, state["gamma_first"], settings.tol, curvature)
        # Step 4: the beta's, the probe scale, and whether to stop
        stop = converged or exhausted or epoch + 1 >= settings.max_iter
        if on_epoch:
            on_epoch(epoch, {**coordinator.state(), "stopped": stop, "converged": converged or exhausted,
                             "best_epoch": best_epoch})
        for peer in parties:
            ep.send(peer, "control", "public", stop=stop, best_epoch=best_epoch, beta=betas, scale=scale)
        if stop:
            converged = converged or exhausted
            break
    return {"loss_curve": list(coordinator.loss_curve), "n_iter": len(coordinator.loss_curve),
            "converged": converged, "best_epoch": best_epoch}


def _number(value, name: str, role: str) -> float:
    """A step size or scale from C: a finite number (anything else ends the run)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ProtocolError(f"party {role}: the coordinator's {name} must be a finite number, got {value!r}")
    return float(value)


def _numbers(value, count: int, role: str) -> np.ndarray:
    """The coordinator's ``beta``'s: ``count`` finite numbers, one per earlier direction."""
    if not isinstance(value, np.ndarray) or value.shape != (count,) or not np.isfinite(value).all():
        raise ProtocolError(f"party {role}: the coordinator's beta must be {count} finite numbers, got "
                            f"{type(value).__name__} {getattr(value, 'shape', '')}")
    return value
