"""Differential privacy for the label party: Gaussian noise on the residual, and its accounting.

What the feature parties learn about the labels passes through one quantity: the
residual ``d = z - kappa y`` of each batch (they see ``X^T d``, their masked
gradient, unmasked).  With DP on, party B adds fresh Gaussian noise
``e ~ N(0, sigma^2)`` to every row of ``[[d]]`` under encryption, and *every*
party, B included, updates its weights from the noisy residual.  Then each
party's whole training state is a function of the released noisy residuals, and
the only place a label enters a new release is ``-kappa y`` itself:

* neighbouring data sets differ in one row's label; that changes one entry of
  ``d`` by at most ``2 kappa B_y`` (labels in ``[-B_y, B_y]``: ``B_y = 1`` for
  logistic regression's -1/+1 labels, ``dp_label_bound`` for linear regression,
  whose labels B clips to it);
* each row is in exactly one batch per epoch, so per epoch a row's label meets
  one Gaussian mechanism with L2 sensitivity ``Delta = 2 kappa B_y``;
* over ``E`` epochs that is ``E`` adaptive compositions of the Gaussian
  mechanism with noise multiplier ``z = sigma / Delta``.  Gaussian privacy-loss
  distributions compose exactly: ``E`` of them equal one Gaussian mechanism with
  multiplier ``z / sqrt(E)``, which Google's ``dp_accounting`` PLD accountant
  evaluates tightly.

Not covered: the batch loss C decrypts (an aggregate over the batch, computed
from the exact residual), and anything B itself learns.  The noise is drawn
from the operating system's CSPRNG and never leaves B.
"""

from __future__ import annotations

import math

import dp_accounting
from dp_accounting import mechanism_calibration, pld, rdp

#: PLD discretization: fine enough that epsilon is exact to about 1e-6 for the
#: multipliers used here, coarse enough that calibration takes a few seconds.
_DISCRETIZATION = 1e-3


def _accountant() -> pld.PLDAccountant:
    return pld.PLDAccountant(value_discretization_interval=_DISCRETIZATION)


def _event(noise_multiplier: float, epochs: int) -> dp_accounting.DpEvent:
    """``epochs`` Gaussian mechanisms of multiplier ``z`` as the one Gaussian they compose to."""
    return dp_accounting.GaussianDpEvent(noise_multiplier / math.sqrt(epochs))


def noise_multiplier(epsilon: float, delta: float, epochs: int) -> float:
    """The smallest ``z = sigma / Delta`` for which ``epochs`` releases are ``(epsilon, delta)``-DP.

    Parameters
    ----------
    epsilon : float
        Target privacy loss, > 0.
    delta : float
        Target failure probability, in (0, 1).
    epochs : int
        How many times each row's label is released (once per epoch).

    Notes
    -----
    The search is bracketed by the RDP accountant's answer, which is looser (it
    needs more noise) and cheap; the PLD accountant then finds the tight value
    below it.  Should the bracket ever miss, the RDP answer, which is also
    ``(epsilon, delta)``-DP, is used.
    """
    event = lambda z: _event(z, epochs)  # noqa: E731
    upper = float(mechanism_calibration.calibrate_dp_mechanism(
        rdp.RdpAccountant, event, epsilon, delta, mechanism_calibration.LowerEndpointAndGuess(1e-3, 1.0)))
    try:
        return float(mechanism_calibration.calibrate_dp_mechanism(
            _accountant, event, epsilon, delta, mechanism_calibration.ExplicitBracketInterval(upper / 2, upper)))
    except ValueError:
        return upper


def epsilon_spent(noise_multiplier: float, delta: float, epochs: int) -> float:
    """The epsilon at ``delta`` of ``epochs`` releases with multiplier ``noise_multiplier``."""
    if epochs <= 0:
        return 0.0
    accountant = _accountant()
    accountant.compose(_event(noise_multiplier, epochs))
    return float(accountant.get_epsilon(delta))


def sensitivity(kappa: float, label_bound: float) -> float:
    """L2 sensitivity of one row's entry of ``d = z - kappa y`` to its label: ``2 kappa B_y``."""
    return 2.0 * kappa * label_bound
