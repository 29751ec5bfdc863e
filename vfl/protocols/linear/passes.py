"""One encrypted pass over a batch: Yang et al. 2019, Table 2, steps 2 and 3 — one function per role.

A pass takes every party's scores ``u_k = X_k v_k`` of its vector ``v_k`` (its
weights; for conjugate gradient, its block of the search direction) and leaves
each data party with the masked ``X_k^T [[d]]`` that C decrypts and returns (the
caller receives it: :func:`receive_gradient`), and C with the batch loss::

    Step  Party A (each feature party k)   Party B                               Party C
    2     [[u_A]]              -> B        [[d]] = sum_k [[u_k]] + (u_B - k y) -> every A
    3     [[X_A^T d]] + [[R_A]] -> C       [[X_B^T d]] + [[R_B]]            -> C  decrypt and return
          [[a u_A . d]]        -> B        [[L]] from the loss parts        -> C  X_A^T d + R_A -> A, ...;
                                                                                  decrypt [[L]]

With ``settings.packed`` the same steps carry ``s`` values per ciphertext
(:mod:`vfl.parties.linear.packed`): ``n / s`` ciphertexts for ``[[u_k]]`` and ``[[d]]``,
and C returns position ``s - 1`` of each masked product.
"""

from __future__ import annotations

from vfl.parties import Coordinator, pack_residues, pack_vector, unpack_residues, unpack_vector
from vfl.parties.linear import LinearFeatureParty, LinearLabelParty
from vfl.parties.linear.packed import training_layout
from vfl.protocols.roster import Roster
from vfl.protocols.linear.settings import TrainingSettings
from vfl.transport import Endpoint


def _layout(context, rows: int, settings: TrainingSettings, roster: Roster):
    """The packed slot layout of a batch (public: key, precision, batch size, parties, declared bounds)."""
    return training_layout(context, rows, settings.feature_bound, settings.score_bound, len(roster.data_parties))


def pass_a(ep: Endpoint, party: LinearFeatureParty, rows, objective, settings: TrainingSettings,
           roster: Roster) -> None:
    """A feature party: ``[[u_k]]`` to B; ``[[X_k^T d]] + [[R_k]]`` to C and its loss part to B."""
    b, c = roster.label, roster.coordinator
    if settings.packed:
        layout = _layout(party.context, len(rows), settings, roster)
        count = layout.ciphertexts(len(rows))
        ep.send(b, "packed_scores", "ciphertext", slots=layout.slots, **pack_vector(
            party.encrypted_packed_scores(rows, layout, settings.score_bound)))
        d = unpack_vector(party.context, ep.recv(b, "packed_residual"), count)
        gradient, loss_part = party.packed_gradient_and_loss_part(d, rows, objective, settings.penalty_spec, layout)
        ep.send(c, "masked_packed_gradient", "ciphertext", **pack_vector(gradient))
        ep.send(b, "packed_loss_part", "ciphertext", **pack_vector(loss_part))
        return
    # Step 2: [[u_A]] to B
    ep.send(b, "scores", "ciphertext", **pack_vector(party.encrypted_scores(rows)))
    # Step 3: [[X_A^T d]] + [[R_A]] to C; A's loss part [[a u_A . d + penalty]] to B
    d = unpack_vector(party.context, ep.recv(b, "residual"), len(rows))
    gradient, loss_part = party.masked_gradient_and_loss_part(d, rows, objective, settings.penalty_spec)
    ep.send(c, "masked_gradient", "ciphertext", **pack_vector(gradient))
    ep.send(b, "loss_part", "ciphertext", **pack_vector(loss_part))


def pass_b(ep: Endpoint, party: LinearLabelParty, rows, objective, settings: TrainingSettings, roster: Roster) -> None:
    """The label party: ``[[d]]`` to every feature party; ``[[X_B^T d]] + [[R_B]]`` and ``[[L]]`` to C."""
    c = roster.coordinator
    if settings.packed:
        layout = _layout(party.context, len(rows), settings, roster)
        count = layout.ciphertexts(len(rows))
        scores = [unpack_vector(party.context, ep.recv(a, "packed_scores"), count) for a in roster.features]
        d = party.packed_residual(scores, rows, objective, layout, settings.score_bound)
        residual = pack_vector(d)
        for a in roster.features:
            ep.send(a, "packed_residual", "ciphertext", slots=layout.slots, **residual)
        ep.send(c, "masked_packed_gradient", "ciphertext",
                **pack_vector(party.packed_masked_gradient(d, rows, layout)))
        parts = [unpack_vector(party.context, ep.recv(a, "packed_loss_part"), 1) for a in roster.features]
        ep.send(c, "packed_loss", "ciphertext", **pack_vector(
            party.packed_batch_loss(parts, objective, settings.penalty_spec, layout)), n=len(rows))
        return
    # Step 2: [[d]] to every feature party
    scores = [unpack_vector(party.context, ep.recv(a, "scores"), len(rows)) for a in roster.features]
    d = party.residual(scores, rows, objective)
    residual = pack_vector(d)
    for a in roster.features:
        ep.send(a, "residual", "ciphertext", **residual)
    # Step 3: [[X_B^T d]] + [[R_B]] to C; [[L]] to C, from the feature parties' loss parts
    ep.send(c, "masked_gradient", "ciphertext", **pack_vector(party.masked_gradient(d, rows)))
    parts = [unpack_vector(party.context, ep.recv(a, "loss_part"), 1) for a in roster.features]
    ep.send(c, "loss", "ciphertext", **pack_vector(party.batch_loss(parts, objective, settings.penalty_spec)),
            n=len(rows))


def pass_c(ep: Endpoint, coordinator: Coordinator, size: int, settings: TrainingSettings, roster: Roster) -> float:
    """C: decrypt and return each party's masked gradient; decrypt the batch loss, returned per row."""
    if settings.packed:
        layout = _layout(coordinator.context, size, settings, roster)
        for peer in roster.data_parties:
            masked = unpack_vector(coordinator.context, ep.recv(peer, "masked_packed_gradient"))
            ep.send(peer, "gradient", "masked", **pack_residues(coordinator.decrypt_packed_results(masked, layout),
                                                                coordinator.context))
        loss_message = ep.recv(roster.label, "packed_loss")
        loss = unpack_vector(coordinator.context, loss_message, 1)
        return coordinator.decrypt_packed_total(loss, layout) / loss_message["n"]
    for peer in roster.data_parties:
        masked = unpack_vector(coordinator.context, ep.recv(peer, "masked_gradient"))
        ep.send(peer, "gradient", "masked", **pack_residues(coordinator.decrypt_masked(masked), coordinator.context))
    loss_message = ep.recv(roster.label, "loss")
    return coordinator.decrypt_total(unpack_vector(coordinator.context, loss_message, 1)) / loss_message["n"]


def receive_gradient(ep: Endpoint, party, roster: Roster) -> list[int]:
    """A data party: the masked ``X_k^T d`` C returned, as residues for the party to unmask."""
    return unpack_residues(party.context, ep.recv(roster.coordinator, "gradient"), party.n_gradient_values)
