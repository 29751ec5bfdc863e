"""Checks of a training run that the settings alone do not make: what a party could infer, and who runs.

Shared by the estimators (in threads, :mod:`vfl.runs.threads`), the teaching runner
(:mod:`vfl.inprocess`) and the ``vfl party`` command (:mod:`vfl.federation.linear`), so that
all refuse, or warn, alike:

* :func:`check_settings_safety`: ``init="zeros"`` needs ``insecure=True`` (the
  first gradient then hands every feature party ``X^T y``); an ``alpha`` under
  which plain gradient descent cannot converge, or that leaves every weight
  below the fixed-point precision, is refused naming ``alpha``;
* :func:`warn_mini_batch_labels`: mini-batch training without differential
  privacy lets a feature party infer most labels from its own gradients (the
  measured figures are in docs/threat_model.md and docs/protocol.md);
* :func:`check_run`: the parties handed to a run are the roster's, the label
  party's targets fit the objective, and the coordinator's key the settings';
* :func:`diverged`: the coordinator's rule for a run whose loss runs away.
"""

from __future__ import annotations

import math
import warnings
from typing import Mapping

import numpy as np

from vfl.parties.holdout import check_split
from vfl.errors import ConfigurationError, DataError, LabelLeakWarning

#: What the label-inference attack of tests/linear/test_label_leak.py measured (see docs/protocol.md).
MINI_BATCH_LEAK = ("in vfl's own attack test a feature party, taking the minimum-norm solution of each "
                   "step's gradient equation X_b^T d = g and summing it per row, guessed 84-96% of the labels "
                   "(majority class 51-53%) after as many mini-batch epochs as vfl allows; 56-63% with full "
                   "batches (what its own columns predict), 49-56% with DP at epsilon = 1, 53-62% at epsilon = 8")


def check_settings_safety(settings) -> None:
    """Refuse settings that hand a party the labels, or that cannot train; called by ``TrainingSettings``."""
    # with protocol="shared" no party learns the first gradient (nor any): a zero start tells no one anything
    if settings.init == "zeros" and not settings.insecure and settings.protocol != "shared":
        raise ConfigurationError(
            "init='zeros' starts every weight at 0, so the first gradient hands every feature party X^T y "
            "(its columns against the labels): pass insecure=True (insecure = true in [training]) to acknowledge "
            "it, for teaching and reproducible comparisons only; the default init='random' does not leak this")
    l2 = settings.alpha * {"l2": 1.0, "elasticnet": 1.0 - settings.l1_ratio}.get(settings.penalty, 0.0)
    if not settings.conjugate and settings.optimizer == "sgd" and settings.learning_rate * l2 >= 2.0:
        raise ConfigurationError(
            f"alpha={settings.alpha:g} with learning_rate={settings.learning_rate:g}: every plain gradient step "
            f"multiplies the weights by 1 - learning_rate * alpha = {1 - settings.learning_rate * l2:.3g}, so "
            "the penalty alone makes the weights grow without end; use learning_rate * alpha < 2 (lower alpha)")
    if settings.penalty != "none" and settings.alpha >= 2.0 ** settings.frac_bits:
        raise ConfigurationError(
            f"alpha={settings.alpha:g} is at least 2**frac_bits = {2.0 ** settings.frac_bits:g}: a penalty this "
            f"strong holds every weight below the fixed-point precision 2**-{settings.frac_bits}, so the model would "
            "be all zeros; lower alpha")


def warn_mini_batch_labels(settings, n_rows: int, stacklevel: int = 3) -> None:
    """Warn that mini-batch training without DP lets a feature party infer the labels (:data:`MINI_BATCH_LEAK`)."""
    if settings.dp or settings.shared or settings.batch_size is None or n_rows // settings.batch_size < 2:
        return          # no gradient (the shared protocol), or one batch an epoch (the remainder joins the last)
    warnings.warn(
        f"mini-batch training (batch_size={settings.batch_size}) without differential privacy lets a feature "
        f"party infer the label party's labels from its own gradients: {MINI_BATCH_LEAK}. Train with full "
        "batches (batch_size=None), or with differential privacy (dp_epsilon, dp_delta), or with "
        "protocol='shared', in which no party learns any gradient",
        LabelLeakWarning, stacklevel=stacklevel)


def check_run(parties: Mapping, roster, settings, coordinator) -> None:
    """The parties of an in-process run are the roster's; B's targets and C's key fit the settings."""
    expected = set(roster.data_parties)
    if set(parties) != expected:
        missing, extra = sorted(expected - set(parties)), sorted(set(parties) - expected)
        raise ConfigurationError(
            f"the parties given are {sorted(map(str, parties))}, the roster's data parties {sorted(expected)} "
            f"(missing {missing}, unknown {extra}); name them as the roster does, or pass "
            f"roster=Roster(features=(...), label=..., coordinator=...)")
    labels = np.asarray(parties[roster.label].labels, dtype=np.float64)
    if settings.objective == "logistic":
        odd = np.flatnonzero(np.abs(labels) != 1.0)
        if odd.size:
            raise DataError(f"party {roster.label}: logistic regression trains on targets -1/+1, but row "
                            f"{int(odd[0])} holds {labels[odd[0]]:g}; code the classes with vfl.parties.targets")
    warn_clipped_labels(labels, settings, roster.label)
    bits = getattr(coordinator, "key_bits", settings.key_bits)
    if bits != settings.key_bits or bool(getattr(coordinator, "insecure", False)) and not settings.insecure:
        raise ConfigurationError(
            f"the coordinator {roster.coordinator} makes {bits}-bit keys"
            f"{' (insecure=True)' if getattr(coordinator, 'insecure', False) else ''}, but the settings ask for "
            f"key_bits={settings.key_bits} (insecure={settings.insecure}): make both the same")


def warn_clipped_labels(labels, settings, role: str) -> None:
    """With DP and linear regression, warn the label party ``role`` of labels beyond ``dp_label_bound``."""
    if not (settings.dp and settings.objective == "linear"):
        return
    values = np.asarray(labels, dtype=np.float64)
    clipped = int(np.count_nonzero(np.abs(values) > settings.label_bound))
    if clipped:
        warnings.warn(f"party {role}: {clipped} of {values.size} labels lie beyond dp_label_bound = "
                      f"{settings.label_bound:g} and are clipped to it for differential privacy; the model "
                      "fits the clipped labels (raise dp_label_bound to keep them, at the cost of more noise)",
                      UserWarning, stacklevel=4)




def check_validation_split(n_rows: int, settings, n_values: Mapping[str, int],
                           advice: str = "or pass fit(..., validation=...)") -> None:
    """With early stopping on held-out rows: the rows left to train on must outnumber each party's gradient values.

    ``n_values`` gives each data party's gradient values per step (its weights).
    Said in terms of ``validation_fraction``, before the batch-size rule would
    report the same shortage as a batch problem.  With ``protocol="shared"`` no
    party learns a gradient value: two rows to train on at least.  The rule of
    :func:`check_split`, which every model family applies; ``advice`` as there.
    """
    if not settings.early_stopping:
        return
    if settings.shared:
        check_split(n_rows, settings.validation_fraction, 2, "the two a model needs at least", advice)
        return
    party, most = max(n_values.items(), key=lambda item: item[1])
    check_split(n_rows, settings.validation_fraction, most + 1,
                f"more than the {most} gradient values party {party} learns per step", advice)



#: Epochs in a row the loss may grow before C calls the run diverging.
DIVERGING_EPOCHS = 5


def diverged(loss_curve, noisy: bool = False) -> str | None:
    """Why the epoch losses say the run diverges, or ``None``.

    A loss that is no longer finite, or that grew for :data:`DIVERGING_EPOCHS`
    epochs in a row to more than twice its smallest value (noisy mini-batches
    may raise it for an epoch or two; that is not divergence).  With DP noise
    (``noisy``) the loss may climb for as long as the noise outweighs the
    gradient, so only a blow-up past 1000 times its smallest value counts.
    """
    if not loss_curve:
        return None
    last = loss_curve[-1]
    if not math.isfinite(last):
        return f"the loss is {last} at epoch {len(loss_curve)}"
    tail = loss_curve[-DIVERGING_EPOCHS - 1:]
    rising = len(tail) == DIVERGING_EPOCHS + 1 and all(b > a for a, b in zip(tail, tail[1:]))
    if rising and last > (1000 if noisy else 2) * min(loss_curve):
        return (f"the loss grew for {DIVERGING_EPOCHS} epochs in a row, from {tail[0]:.4g} to {last:.4g} "
                f"(epoch {len(loss_curve)})")
    return None
