"""Client-side pieces shared by the estimators: input checks, sampling, local SGD.

In this simulation a *client* is a pair ``(X_k, y_k)`` of numpy arrays that
never leaves this module's functions except through the parameter vector that
:func:`local_update` returns, which is what a real client would send.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.utils.multiclass import type_of_target

from ._checks import check_fraction, check_positive_int
from .errors import (
    EmptyClientError,
    InvalidParameterError,
    LabelError,
    ShapeMismatchError,
)

__all__ = ["check_clients", "child_generators", "encode_labels", "local_steps", "local_update", "num_fit_clients",
           "sample_clients"]


def check_clients(clients) -> list[tuple[np.ndarray, np.ndarray]]:
    """Validate ``[(X_0, y_0), (X_1, y_1), ...]`` and return float64/1-D copies.

    Raises
    ------
    EmptyClientError
        No clients, or a client with zero rows.
    ShapeMismatchError
        ``X_k`` not 2-D, ``y_k`` not 1-D, ``X_k``/``y_k`` lengths differ, or
        feature counts differ between clients.
    InvalidParameterError
        Non-numeric or non-finite features.
    """
    try:
        clients = list(clients)
    except TypeError as exc:
        raise InvalidParameterError("clients must be a sequence of (X, y) pairs") from exc
    if not clients:
        raise EmptyClientError("no clients were given")
    checked = []
    for k, pair in enumerate(clients):
        try:
            X, y = pair
        except (TypeError, ValueError) as exc:
            raise InvalidParameterError(f"client {k} must be an (X, y) pair") from exc
        try:
            X = np.asarray(X, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise InvalidParameterError(f"client {k}: X is not numeric ({exc})") from exc
        y = np.asarray(y)
        if X.ndim != 2:
            raise ShapeMismatchError(f"client {k}: X must be 2-D (rows, features), got shape {X.shape}")
        if y.ndim != 1:
            raise ShapeMismatchError(f"client {k}: y must be 1-D, got shape {y.shape}")
        if X.shape[0] == 0:
            raise EmptyClientError(f"client {k} has no examples (X has shape {X.shape})")
        if X.shape[0] != y.shape[0]:
            raise ShapeMismatchError(f"client {k}: X has {X.shape[0]} rows but y has {y.shape[0]} labels")
        if checked and X.shape[1] != checked[0][0].shape[1]:
            raise ShapeMismatchError(
                f"client {k} has {X.shape[1]} features but client 0 has {checked[0][0].shape[1]}"
            )
        if not np.all(np.isfinite(X)):
            row = int(np.flatnonzero(~np.all(np.isfinite(X), axis=1))[0])
            raise InvalidParameterError(f"client {k}: X contains NaN or infinite values (first at row {row})")
        missing = np.flatnonzero(pd.isna(y))
        if missing.size:
            raise LabelError(f"client {k}, row {int(missing[0])}: the label is missing (NaN)")
        checked.append((X, y))
    return checked


def encode_labels(clients, classes=None) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """Map labels to indices ``0 .. n_classes - 1`` shared by all clients.

    ``classes`` defaults to the union of client labels.  In a real deployment
    the label set is agreed before training; pass it explicitly when some
    class might be absent from every client.
    """
    labels = np.concatenate([y for _, y in clients])
    found = np.unique(labels)
    if classes is None and type_of_target(labels) not in ("binary", "multiclass"):
        raise LabelError(f"the labels are a continuous target ({found.size} distinct values such as "
                         f"{found[:3].tolist()}), not classes; these models classify")
    classes = found if classes is None else np.unique(np.asarray(classes))
    if classes.size < 2:
        raise LabelError(f"need at least two classes, got {classes.tolist()}")
    encoded = []
    for k, (X, y) in enumerate(clients):
        unknown = np.setdiff1d(y, classes)
        if unknown.size:
            raise LabelError(f"client {k} has labels {unknown.tolist()} not in classes {classes.tolist()}")
        encoded.append((X, np.searchsorted(classes, y)))
    return classes, encoded


def num_fit_clients(n_available: int, fraction_fit: float, min_fit_clients: int = 1) -> int:
    """Clients per round: ``max(floor(C * K), min_fit_clients)``.

    This is McMahan's ``m = max(C * K, 1)`` and Flower's ``num_fit_clients``
    rule.  A tiny tolerance keeps ``0.3 * 10`` at 3 despite rounding.
    """
    check_fraction("fraction_fit (C)", fraction_fit)
    check_positive_int("min_fit_clients", min_fit_clients)
    if min_fit_clients > n_available:
        raise InvalidParameterError(
            f"min_fit_clients={min_fit_clients} but only {n_available} clients are available"
        )
    return max(int(np.floor(fraction_fit * n_available + 1e-9)), min_fit_clients)


def sample_clients(rng: np.random.Generator, n_available: int, m: int) -> np.ndarray:
    """Draw ``m`` distinct client indices uniformly at random, sorted."""
    return np.sort(rng.choice(n_available, size=m, replace=False))


def child_generators(rng: np.random.Generator, m: int) -> list[np.random.Generator]:
    """Independent generators for the sampled clients' shuffling (numpy >= 1.24)."""
    return [np.random.default_rng(seed) for seed in rng.integers(0, 2**63 - 1, size=m)]


def local_update(model, w, X, y, *, local_epochs: int, batch_size, learning_rate: float,
                 rng: np.random.Generator) -> np.ndarray:
    """ClientUpdate of McMahan et al. (2017), Algorithm 1.

    Runs ``local_epochs`` passes of minibatch SGD over ``(X, y)`` starting at
    ``w``, reshuffling every epoch; ``batch_size=None`` (B = infinity) takes
    one full-batch gradient step per epoch.  Returns the new parameter vector
    (``w`` itself is not modified).
    """
    w = np.array(w, dtype=np.float64, copy=True)
    n = X.shape[0]
    if batch_size is None or batch_size >= n:
        for _ in range(local_epochs):
            w -= learning_rate * model.loss_and_grad(w, X, y)[1]
        return w
    for _ in range(local_epochs):
        order = rng.permutation(n)
        for start in range(0, n, batch_size):
            batch = order[start : start + batch_size]
            w -= learning_rate * model.loss_and_grad(w, X[batch], y[batch])[1]
    return w


def local_steps(model, w, X, y, *, steps: int, batch_size, learning_rate: float,
                rng: np.random.Generator) -> np.ndarray:
    """``steps`` gradient steps on ``(X, y)`` from ``w``, counted in steps rather than epochs.

    The local update of HierFAVG (kappa_1 steps) and of L2GD (its local
    steps).  ``batch_size=None`` (or ``>= n``) takes full-batch gradient
    steps, so ``steps=E`` equals :func:`local_update` with ``local_epochs=E``
    and B = infinity; otherwise every step draws ``batch_size`` rows without
    replacement, afresh.  Returns the new vector (``w`` is not modified).
    """
    w = np.array(w, dtype=np.float64, copy=True)
    n = X.shape[0]
    for _ in range(steps):
        if batch_size is None or batch_size >= n:
            w -= learning_rate * model.loss_and_grad(w, X, y)[1]
        else:
            batch = rng.choice(n, size=batch_size, replace=False)
            w -= learning_rate * model.loss_and_grad(w, X[batch], y[batch])[1]
    return w
