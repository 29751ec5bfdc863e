"""The label party's labels: their coding for the objective, and each row's weight.

Both stay with the label party.  :func:`targets` gives the values training
fits: the label itself for linear regression, ``-1``/``+1`` for logistic
regression, and with more than two classes one ``-1``/``+1`` target per class
(one-vs-rest: one binary model per class, trained one after the other under the
same key on the same aligned rows).
"""

from __future__ import annotations

import numpy as np
from sklearn.utils.multiclass import type_of_target

from vfl.errors import DataError


def targets(labels, objective: str, role: str = "B") -> tuple[list[np.ndarray], np.ndarray | None]:
    """The targets to train on, one per model, and the classes (``None`` for linear regression).

    Parameters
    ----------
    labels : array of shape (n_rows,)
    objective : {"linear", "logistic"}
    role : str
        The label party's name, for error messages.

    Returns
    -------
    targets : list of arrays of shape (n_rows,)
        Linear: ``[labels]`` as floats.  Logistic: ``[+1 where classes[1], else -1]``
        with two classes; with more, ``[+1 where classes[k], else -1 for each k]``.
    classes : ndarray or None
        The sorted distinct labels (logistic only).

    Raises
    ------
    DataError
        A non-numeric label for linear regression; for logistic regression fewer
        than two classes, mixed value types, or a continuous label.
    """
    if objective == "linear":
        return [numeric_labels(labels, role, "linear regression")], None
    labels = np.asarray(labels)
    classes, _ = class_labels(labels, role, "logistic regression", "linear regression")
    positives = classes[1:] if classes.size == 2 else classes
    return [np.where(labels == positive, 1.0, -1.0) for positive in positives], classes


def class_labels(labels, role: str, model: str = "a classifier",
                 instead: str = "a regressor") -> tuple[np.ndarray, np.ndarray]:
    """The sorted classes of a classifier's label and each row's class index (every family's one check).

    Raises
    ------
    DataError
        Naming the party ``role``: mixed value types, fewer than two classes, or a
        continuous target (``instead`` names what fits one).
    """
    labels = np.asarray(labels)
    try:
        classes, codes = np.unique(labels, return_inverse=True)
    except TypeError:
        kinds = sorted({type(v).__name__ for v in labels.tolist()})
        raise DataError(f"party {role}: the label mixes value types ({', '.join(kinds)}); "
                        "use one type for every class") from None
    if classes.size < 2:
        raise DataError(f"party {role}: the label column holds one class only "
                        f"({plain_class(classes[0]) if classes.size else 'no row'!r}); {model} needs two or more")
    if type_of_target(labels) not in ("binary", "multiclass"):
        raise DataError(f"party {role}: {model} needs class labels, but the label is a continuous "
                        f"target ({classes.size} distinct values such as {classes[:3].tolist()}); use "
                        f"{instead} for it")
    return classes, codes.reshape(-1)


def numeric_labels(labels, role: str, model: str = "a regressor") -> np.ndarray:
    """A regressor's label as floats; values that are not numbers are refused, naming the party ``role``."""
    try:
        return np.asarray(labels, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError(f"party {role}: the label column holds values that are not numbers; {model} needs "
                        "real targets") from None


def event_classes(labels, role: str) -> np.ndarray:
    """The sorted classes of a label that event rates (WOE, IV, monotone bins) are computed from.

    One row, or one class, is refused as such: no binning strategy or other
    setting helps, the step needs rows of two classes at least.
    """
    labels = np.asarray(labels)
    if len(labels) < 2:
        raise DataError(f"party {role}: only {len(labels)} row to learn event rates from; WOE, IV and the "
                        "scorecard need rows of two classes at least (events and non-events)")
    classes = np.unique(labels)
    if classes.size < 2:
        raise DataError(f"party {role}: the label column holds one class only ({plain_class(classes[0])!r} in every "
                        "row); WOE, IV and the scorecard need events and non-events")
    return classes


def plain_class(value):
    """A class value as Python (``'no'``, not ``np.str_('no')``), for a message."""
    return value.item() if isinstance(value, np.generic) else value


def class_weights(labels, class_weight, role: str = "B") -> np.ndarray:
    """Each row's weight from its class: ``"balanced"`` (``n / (n_classes * count)``) or a dict by class.

    Classes missing from a dict weigh 1 (scikit-learn's rule); a dict naming a
    class that is not in the labels is an error.  Keys may also be the classes'
    text (a federation file's table has text keys).
    """
    labels = np.asarray(labels)
    classes, counts = np.unique(labels, return_counts=True)
    if isinstance(class_weight, str) and class_weight == "balanced":
        by_class = {c: len(labels) / (len(classes) * k) for c, k in zip(classes.tolist(), counts.tolist())}
    else:
        by_class = {c: 1.0 for c in classes.tolist()}
        known = {str(c): c for c in classes.tolist()}
        for key, weight in dict(class_weight).items():
            match = key if key in by_class else known.get(str(key))
            if match is None:
                raise DataError(f"party {role}: class_weight names class {key!r}, which is not among the labels' "
                                f"classes {classes.tolist()[:10]}")
            by_class[match] = float(weight)
    return np.array([by_class[c] for c in labels.tolist()], dtype=np.float64)


def row_weights(labels, class_weight=None, sample_weight=None, role: str = "B") -> np.ndarray | None:
    """Each row's weight in the loss: its class weight times its sample weight, or ``None`` for neither.

    Both are the label party's; :meth:`~vfl.parties.linear.LinearLabelParty.set_weights` checks the result.  All zero is
    refused: nothing would be fitted.
    """
    weights = None if class_weight is None else class_weights(labels, class_weight, role)
    if sample_weight is not None:
        s = np.asarray(sample_weight, dtype=np.float64)
        if s.shape != (len(labels),):
            raise DataError(f"party {role}: sample_weight has shape {s.shape}, the data has {len(labels)} rows")
        weights = s if weights is None else weights * s
    if weights is not None and np.all(np.isfinite(weights)) and not np.any(weights > 0):
        raise DataError(f"party {role}: every row's weight is 0 (class_weight times sample_weight), so training "
                        "would fit nothing; give some rows a positive weight")
    return weights
