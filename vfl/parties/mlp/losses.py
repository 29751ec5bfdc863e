"""The output layer's activation and loss per task, computed as scikit-learn's MLP computes them.

========== ================= ======================================= ===============================
task       output activation loss (scikit-learn's name)              targets
========== ================= ======================================= ===============================
binary     logistic          ``binary_log_loss``                     one column of 0/1
multiclass softmax           ``log_loss`` (softmax cross-entropy)    one-hot, a column per class
regression identity          ``squared_error``: half the mean square one column per output
========== ================= ======================================= ===============================

Each loss is a (sample-weighted) mean over the rows: scikit-learn's
``np.average(..., weights=sample_weight, axis=0)``, summed over the columns for
the log losses and averaged over them for the squared error.  The L2 penalty is
``0.5 * alpha * sum ||W||^2 / s`` over every weight matrix (never the
intercepts), ``s`` being the batch's row count or its sum of sample weights, as
in scikit-learn's ``_backprop``.

**The output delta.**  The gradient of a row's loss with respect to the
output layer's pre-activation is ``out - y`` for all three (the canonical
links), times the row's sample weight.  For the two log losses and for one
regression output it is exactly the gradient of the loss above times ``s``; for
``k > 1`` regression outputs scikit-learn still uses ``out - y``, which is ``k``
times that gradient — kept here, for the references to equal scikit-learn.
"""

from __future__ import annotations

import numpy as np
from scipy.special import xlogy

from vfl.errors import ConfigurationError
from vfl.parties.labels import class_labels, numeric_labels

#: Per task, the output layer's activation.
OUTPUT_ACTIVATION = {"binary": "logistic", "multiclass": "softmax", "regression": "identity"}


def check_task(task: str) -> str:
    """``task`` itself, or a :class:`~vfl.errors.ConfigurationError` naming the tasks there are."""
    if task not in OUTPUT_ACTIVATION:
        raise ConfigurationError(f"task must be one of {sorted(OUTPUT_ACTIVATION)}, got {task!r}")
    return task


def targets(y: np.ndarray, task: str, role: str = "B") -> tuple[np.ndarray, np.ndarray | None]:
    """The target matrix the output layer is compared with, and the classes (None for regression).

    As scikit-learn's ``LabelBinarizer``: binary labels give one column, 1 for
    the larger class; multi-class labels one column per class in sorted order.
    The labels are checked as every family checks them (:mod:`vfl.parties.labels`),
    naming the label party ``role``.
    """
    if check_task(task) == "regression":
        y = numeric_labels(y, role, "a regressor")
        return (y.reshape(-1, 1) if y.ndim == 1 else y), None
    classes, codes = class_labels(y, role, "a classifier", "a regressor (task = \"regression\")")
    if task == "binary":
        if classes.size != 2:
            raise ConfigurationError(f"party {role}: task \"binary\" needs exactly two classes, the label has "
                            f"{classes.size}; use task \"multiclass\"")
        return codes.reshape(-1, 1).astype(np.float64), classes
    return np.eye(classes.size)[codes], classes


def loss(task: str, y: np.ndarray, out: np.ndarray, sample_weight: np.ndarray | None = None) -> float:
    """The task's loss of the outputs ``out`` (after the output activation) against ``y``, no penalty."""
    if check_task(task) == "regression":
        return float(0.5 * np.average((y - out) ** 2, weights=sample_weight, axis=0).mean())
    eps = np.finfo(out.dtype).eps
    p = np.clip(out, eps, 1 - eps)
    if task == "binary":
        return float(-np.average(xlogy(y, p) + xlogy(1 - y, 1 - p), weights=sample_weight, axis=0).sum())
    return float(-np.average(xlogy(y, p), weights=sample_weight, axis=0).sum())


def constant_loss(task: str, y: np.ndarray) -> float:
    """The loss of the best constant output: every row the targets' mean (the class shares, or the mean value)."""
    return loss(task, y, np.broadcast_to(y.mean(axis=0), y.shape).astype(np.float64))


def output_delta(y: np.ndarray, out: np.ndarray, sample_weight: np.ndarray | None = None) -> np.ndarray:
    """Each row's ``(out - y)``, times its sample weight: the loss's gradient on the output pre-activation."""
    delta = out - y
    return delta if sample_weight is None else delta * sample_weight.reshape(-1, 1)


def weight_sum(n_rows: int, sample_weight: np.ndarray | None = None) -> float:
    """``s``: the rows' count, or the sum of their sample weights (scikit-learn's ``sw_sum``)."""
    return n_rows if sample_weight is None else float(np.sum(sample_weight))


def l2_penalty(weights: list[np.ndarray], alpha: float, sw_sum: float) -> float:
    """``0.5 * alpha * sum ||W||^2 / s`` over the weight matrices ``weights``."""
    values = 0.0
    for w in weights:
        flat = w.ravel()
        values += np.dot(flat, flat)
    return float((0.5 * alpha) * values / sw_sum)
