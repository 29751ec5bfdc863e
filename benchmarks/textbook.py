"""The baseline: one iteration of vfl's protocol written the textbook way with ``phe``.

One ``phe`` call per value, in a single process, as the issue describes it:

* ``PaillierPublicKey.encrypt`` for every value a party encrypts: A's scores
  ``u_A``, B's share of every residual (``[[d_i]] = [[u_A,i]] + Enc(u_B,i - kappa y_i)``,
  which is also what re-randomises ``[[d]]`` before it goes back to A), and each mask;
* ``EncryptedNumber * float`` for every term of every gradient sum and of the loss's
  cross term, and ``EncryptedNumber + EncryptedNumber`` to add them up;
* phe's default float encoding, so every float carries the exponent that
  represents it exactly and every sum keeps re-aligning exponents;
* ciphertexts sent as decimal strings with their exponent, as phe's JSON examples
  do; decrypted values sent back as ``repr`` of floats.

The mathematics is vfl's (:mod:`vfl.parties.objectives`): the same residual, loss,
gradient and update, so one textbook step from the same weights lands on vfl's
weights up to float rounding.  The masks are floats (phe cannot add a uniform
element of Z_n to a float-encoded value and still decode it); that only makes the
baseline cheaper.  The intercept's gradient is ``sum [[d_i]]`` (no multiplication),
also in the baseline's favour.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field

import numpy as np


@dataclass
class TextbookResult:
    """What one textbook iteration computed and what it cost."""

    params_a: np.ndarray        # A's weights after the step
    params_b: np.ndarray        # B's weights, then the intercept, after the step
    loss: float                 # the mean loss before the step (as C decrypts it)
    seconds: float
    bytes_sent: int
    phases: dict = field(default_factory=dict)


def _wire_size(encrypted) -> int:
    """Bytes of one phe ciphertext as a decimal string plus its exponent, JSON-style."""
    return len(str(encrypted.ciphertext(be_secure=False))) + len(str(encrypted.exponent)) + 8


def _float_mask() -> float:
    """A random float mask for a gradient (uniform in +-2**20, from the OS CSPRNG)."""
    return (secrets.randbits(53) / 2.0 ** 53 - 0.5) * 2.0 ** 21


def textbook_iteration(phe_public, phe_private, x_a, x_b, y, params_a, params_b, objective, alpha=0.0,
                       learning_rate=0.1, progress=None) -> TextbookResult:
    """One full-batch training iteration of the protocol with one ``phe`` call per value.

    Parameters
    ----------
    phe_public, phe_private : phe key pair
    x_a, x_b : arrays (n, m_A) and (n, m_B)
    y : array (n,), already in the objective's coding (-1/+1 for logistic)
    params_a : array (m_A,); params_b : array (m_B + 1,), B's weights then the intercept
    objective : :class:`vfl.parties.Objective`
    progress : callable(int), optional
        Called with the number of per-value operations just done (for a progress bar).
    """
    tick = progress or (lambda k: None)
    n = len(y)
    phases, sent = {}, 0
    start = time.perf_counter()
    a, b, kappa = objective.a, objective.b, objective.kappa
    w_a, w_b = np.asarray(params_a, dtype=np.float64), np.asarray(params_b, dtype=np.float64)
    design_b = np.column_stack([x_b, np.ones(n)])

    # Step 2 at A: [[u_A]] and [[L_A]] to B.
    t = time.perf_counter()
    u_a = x_a @ w_a
    enc_u = []
    for v in u_a:
        enc_u.append(phe_public.encrypt(float(v)))
        tick(1)
    loss_a = a * float(u_a @ u_a) + n * 0.5 * alpha * float(w_a @ w_a)
    enc_loss_a = phe_public.encrypt(loss_a)
    sent += sum(_wire_size(e) for e in enc_u) + _wire_size(enc_loss_a)
    phases["A: encrypt u_A"] = time.perf_counter() - t

    # Step 2 at B: [[d]] = [[u_A]] + Enc(u_B - kappa y) to A, [[n L]] to C.
    t = time.perf_counter()
    u_b = design_b @ w_b
    enc_d = []
    for e, v in zip(enc_u, u_b - kappa * y):
        enc_d.append(e + phe_public.encrypt(float(v)))
        tick(1)
    enc_loss = enc_loss_a
    for e, v in zip(enc_u, 2.0 * a * u_b + b * y):
        enc_loss = enc_loss + e * float(v)
        tick(1)
    own = float(np.sum(a * u_b * u_b + b * y * u_b + objective.c(y))) + n * 0.5 * alpha * float(w_b[:-1] @ w_b[:-1])
    enc_loss = enc_loss + phe_public.encrypt(own)          # a fresh encryption: re-randomised
    sent += sum(_wire_size(e) for e in enc_d) + _wire_size(enc_loss)
    phases["B: [[d]] and [[L]]"] = time.perf_counter() - t

    def masked_gradient(x, with_sum):
        masked, masks = [], []
        for j in range(x.shape[1]):
            total = enc_d[0] * float(x[0, j])
            for i in range(1, n):
                total = total + enc_d[i] * float(x[i, j])
            tick(n)
            masked.append(total)
        if with_sum:
            total = enc_d[0]
            for i in range(1, n):
                total = total + enc_d[i]
            tick(n)
            masked.append(total)
        out = []
        for e in masked:
            mask = _float_mask()
            out.append(e + phe_public.encrypt(mask))
            masks.append(mask)
        return out, np.array(masks)

    # Step 3 at A and B: [[X^T d]] + [[R]] to C.
    t = time.perf_counter()
    masked_a, masks_a = masked_gradient(x_a, False)
    phases["A: X_A^T [[d]] + mask"] = time.perf_counter() - t
    t = time.perf_counter()
    masked_b, masks_b = masked_gradient(x_b, True)
    phases["B: X_B^T [[d]], sum [[d]] + mask"] = time.perf_counter() - t
    sent += sum(_wire_size(e) for e in masked_a + masked_b)

    # Step 3 at C: decrypt the loss and the masked gradients, send them back.
    t = time.perf_counter()
    loss = phe_private.decrypt(enc_loss) / n
    plain_a = [phe_private.decrypt(e) for e in masked_a]
    plain_b = [phe_private.decrypt(e) for e in masked_b]
    sent += sum(len(repr(v)) for v in plain_a + plain_b)
    tick(len(plain_a) + len(plain_b) + 1)
    phases["C: decrypt"] = time.perf_counter() - t

    # Step 4: unmask and update.
    xtd_a = np.array(plain_a) - masks_a
    xtd_b = np.array(plain_b) - masks_b
    penalised_b = np.ones_like(w_b)
    penalised_b[-1] = 0.0
    new_a = w_a - learning_rate * (objective.grad_scale * xtd_a / n + alpha * w_a)
    new_b = w_b - learning_rate * (objective.grad_scale * xtd_b / n + alpha * penalised_b * w_b)
    return TextbookResult(new_a, new_b, loss, time.perf_counter() - start, sent, phases)


def textbook_work(n: int, m_a: int, m_b: int) -> int:
    """How many progress ticks :func:`textbook_iteration` makes (the progress bar's total)."""
    return 3 * n + n * (m_a + m_b + 1) + m_a + m_b + 2
