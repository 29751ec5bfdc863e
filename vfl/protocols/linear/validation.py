"""Early stopping on held-out rows, scored privately after every epoch — one function per role.

The rows are held out by every party alike, from the shared batch seed
(:func:`~vfl.parties.holdout.validation_rows`), unless the user gave
validation data.  After each epoch the validation rows are scored the way
private prediction scores new rows: each feature party sends ``[[u_k]]`` to B,
B adds ``u_B`` and a fresh uniform mask and C decrypts the masked sum.  Only B
sees the scores; it scores them against its labels, keeps track of the best
epoch, and tells C whether to stop and which epoch was best.  C passes both on
in its ``control`` message, and every party restores its own parameters of that
epoch.  Feature parties and C learn the best epoch and when training stopped,
nothing per row.
"""

from __future__ import annotations

from vfl.parties import Coordinator
from vfl.parties.linear import LinearFeatureParty, LinearLabelParty
from vfl.parties.objectives import Objective
from vfl.parties.scoring import improved, validation_score
from vfl.protocols.linear.checks import check_validation_split
from vfl.protocols.linear.inference import decrypt_masked_total, masked_total, send_scores
from vfl.protocols.roster import Roster
from vfl.parties.holdout import validation_rows
from vfl.protocols.linear.settings import TrainingSettings
from vfl.transport import Endpoint


def hold_out(party, settings: TrainingSettings, seed: int) -> None:
    """Move this party's validation rows out of training (unless validation data was given).

    A split that leaves too few rows to train on (for the gradient values this
    party learns) or to validate on is refused first (:func:`~vfl.protocols.linear.checks.check_validation_split`).
    """
    if settings.early_stopping and party.validation is None:
        check_validation_split(party.n_rows, settings, {party.role: party.n_gradient_values},
                               "or turn early_stopping off")
        party.hold_out(validation_rows(party.n_rows, settings.validation_fraction, seed))


class Tracker:
    """B's record of the validation scores: the best epoch, and epochs since it improved."""

    def __init__(self, settings: TrainingSettings, state: dict | None = None):
        self.settings = settings
        state = state or {}
        self.scores: list[float] = [float(v) for v in state.get("scores", [])]
        self.best_epoch: int = int(state.get("best_epoch", -1))
        self.best: float | None = state.get("best")
        self.since: int = int(state.get("since", 0))

    def add(self, epoch: int, score: float) -> bool:
        """Record the score of ``epoch``; return whether to stop."""
        self.scores.append(score)
        if improved(self.settings.scoring, score, self.best, self.settings.tol):
            self.best, self.best_epoch, self.since = score, epoch, 0
        else:
            self.since += 1
        return self.since >= self.settings.n_iter_no_change

    def state(self) -> dict:
        return {"scores": list(self.scores), "best_epoch": self.best_epoch, "best": self.best, "since": self.since}


def score_a(ep: Endpoint, party: LinearFeatureParty, roster: Roster) -> None:
    """A feature party: its validation partial scores, encrypted, to B."""
    send_scores(ep, party, party.scores(features=party.validation), roster, "validation_scores",
                "validation partial scores")


def score_b(ep: Endpoint, party: LinearLabelParty, roster: Roster, objective: Objective, tracker: Tracker,
            epoch: int) -> None:
    """B: the validation scores through C, masked; score them; tell C whether to stop and the best epoch."""
    z = masked_total(ep, party, party.scores(features=party.validation), roster,
                     ("validation_scores", "masked_validation", "validation"), "validation partial scores")
    stop = tracker.add(epoch, validation_score(tracker.settings.scoring, objective, z, party.validation_labels))
    ep.send(roster.coordinator, "early_stop", "public", stop=stop, best_epoch=tracker.best_epoch)


def score_c(ep: Endpoint, coordinator: Coordinator, roster: Roster) -> tuple[bool, int]:
    """C: decrypt B's masked validation scores; return B's ``(stop, best_epoch)``."""
    decrypt_masked_total(ep, coordinator, roster, "masked_validation", "validation")
    verdict = ep.recv(roster.label, "early_stop")
    return bool(verdict["stop"]), int(verdict["best_epoch"])


def end_of_epoch(ep: Endpoint, party, epoch: int, settings: TrainingSettings, roster: Roster) -> dict:
    """Every data party, after an epoch: keep a snapshot, read C's control; restore the best epoch on stop.

    Returns the control message's fields (``stop``; with conjugate gradient, ``beta``).
    """
    if settings.early_stopping:
        party.snapshot(epoch)
    control = ep.recv(roster.coordinator, "control")
    if control["stop"] and settings.early_stopping and control["best_epoch"] >= 0:
        party.restore(control["best_epoch"])
    return dict(control.fields)


__all__ = ["Tracker", "end_of_epoch", "hold_out", "score_a", "score_b", "score_c"]
