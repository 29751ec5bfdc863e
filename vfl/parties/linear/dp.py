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

from vfl.parties.privacy import epsilon_spent, noise_multiplier  # noqa: F401  (this family's names for them)


def sensitivity(kappa: float, label_bound: float) -> float:
    """L2 sensitivity of one row's entry of ``d = z - kappa y`` to its label: ``2 kappa B_y``."""
    return 2.0 * kappa * label_bound
