"""Differential-privacy accounting every family shares: one Gaussian mechanism, composed, calibrated.

Google's ``dp_accounting``: the PLD accountant for tight values, bracketed by the RDP
accountant.  The label party's label DP (:mod:`vfl.parties.linear.dp`, the split
networks') and the feature parties' release DP (:mod:`vfl.protocols.release_dp`)
both calibrate here.
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
