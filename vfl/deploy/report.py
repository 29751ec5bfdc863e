"""What the label party reports of a model: its metrics on rows whose labels it holds, and the positive class.

Only the label party prints these: it alone holds the labels and learns the
scores (from the private prediction of :mod:`vfl.protocols.linear.inference`).
Classification: AUC and KS (:func:`vfl.metrics.ks_statistic`) for two classes;
with three classes or more (one-vs-rest), the macro one-vs-rest AUC and the
accuracy.  Regression: R² and RMSE.  scikit-learn computes each metric but KS.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sklearn.metrics import (accuracy_score, confusion_matrix, mean_squared_error, precision_recall_curve, r2_score,
                             roc_auc_score, roc_curve)

from vfl.deploy.jsonfile import write_private_csv
from vfl.metrics import ks_statistic


def plain(value):
    """A label class as JSON writes it (numpy scalars become Python numbers)."""
    return value.item() if hasattr(value, "item") else value


def label_metrics(objective: str, scores, y, link: str = "sigmoid") -> dict[str, float]:
    """The metrics of ``scores`` against ``y``; a metric the rows cannot define (one class only) is left out.

    Parameters
    ----------
    objective : {"logistic", "linear"}
    scores : array of shape (n,) or (n, n_classes)
        The scores ``z`` (one column per class for one-vs-rest).
    y : array of shape (n,)
        Logistic: each row's class index (1: the positive class of a binary model);
        linear: the label values.
    link : {"sigmoid", "softmax"}
        How several classes' scores become probabilities: each class's sigmoid,
        normalized (one-vs-rest models), or the softmax (a multinomial model).

    Returns
    -------
    dict
        ``{"AUC": ..., "KS": ...}``, ``{"AUC (one-vs-rest, macro)": ..., "accuracy": ...}``
        or ``{"R^2": ..., "RMSE": ...}``.
    """
    scores, y = np.asarray(scores, dtype=np.float64), np.asarray(y)
    if objective == "linear":
        out = {"RMSE": float(np.sqrt(mean_squared_error(y, scores)))}
        if y.size > 1:
            out = {"R^2": float(r2_score(y, scores)), **out}
        return out
    if scores.ndim == 1:
        positive = (y == 1).astype(int)
        if positive.min() == positive.max():
            return {}
        return {"AUC": float(roc_auc_score(positive, scores)), "KS": ks_statistic(positive, scores)}
    out = {}
    if np.unique(y).size == scores.shape[1]:
        if link == "softmax":
            probability = np.exp(scores - scores.max(axis=1, keepdims=True))
        else:
            probability = 1.0 / (1.0 + np.exp(-np.clip(scores, -500, 500)))
        probability /= probability.sum(axis=1, keepdims=True)
        out["AUC (one-vs-rest, macro)"] = float(roc_auc_score(y, probability, multi_class="ovr", average="macro"))
    out["accuracy"] = float(accuracy_score(y, np.argmax(scores, axis=1)))
    return out


#: Points per curve at most (a curve of 10^6 rows is drawn from as many points as one of 1,000).
CURVE_POINTS = 200


def rows_report(objective: str, scores, y, link: str = "sigmoid", threshold: float = 0.0) -> dict:
    """What the label party reports of some rows: ``{"rows", "metrics", "curves"}``.

    ``metrics``: :func:`label_metrics`; ``curves``: :func:`label_curves` (what ``vfl board`` draws).
    """
    return {"rows": len(y), "metrics": label_metrics(objective, scores, y, link),
            "curves": label_curves(objective, scores, y, threshold)}


def label_curves(objective: str, scores, y, threshold: float = 0.0) -> dict:
    """The curves behind the metrics, each at most :data:`CURVE_POINTS` points, for a chart.

    Two classes: ``roc`` (``fpr``, ``tpr``), ``pr`` (``recall``, ``precision``), ``ks``
    (``population``, ``positives``, ``negatives``: the shares of each class above each
    score, highest scores first), ``gains`` and ``lift`` per tenth of the rows by score,
    and ``confusion`` (``[[TN, FP], [FN, TP]]`` at ``threshold``: 0 for log-odds, 0.5 for
    probabilities).  Several classes: ``confusion`` of the highest score.  Regression:
    ``residuals`` (``predicted``, ``residual`` of at most :data:`CURVE_POINTS` rows, evenly
    spaced by prediction).
    """
    scores, y = np.asarray(scores, dtype=np.float64), np.asarray(y)
    if objective == "linear":
        if scores.ndim > 1 or y.ndim > 1:            # several outputs: no residual plot
            return {}
        order = np.argsort(scores, kind="stable")
        pick = order[np.unique(np.linspace(0, len(order) - 1, min(len(order), CURVE_POINTS)).astype(int))]
        return {"residuals": {"predicted": _round(scores[pick]), "residual": _round(y[pick] - scores[pick])}}
    if scores.ndim > 1:
        return {"confusion": confusion_matrix(y, np.argmax(scores, axis=1), labels=range(scores.shape[1])).tolist()}
    positive = (y == 1).astype(int)
    if positive.min() == positive.max():
        return {}
    fpr, tpr, _ = roc_curve(positive, scores)
    precision, recall, _ = precision_recall_curve(positive, scores)
    order = np.argsort(-scores, kind="stable")
    hits = positive[order]
    share = np.arange(1, len(hits) + 1) / len(hits)
    pos, neg = np.cumsum(hits) / hits.sum(), np.cumsum(1 - hits) / (len(hits) - hits.sum())
    keep = _spaced(len(hits))
    tenths = np.array_split(hits, 10)
    rate = hits.mean()
    gains = np.cumsum([t.sum() for t in tenths]) / hits.sum()
    return {"roc": {"fpr": _round(fpr[_spaced(len(fpr))]), "tpr": _round(tpr[_spaced(len(tpr))])},
            "pr": {"recall": _round(recall[_spaced(len(recall))]), "precision": _round(precision[_spaced(len(recall))])},
            "ks": {"population": _round(share[keep]), "positives": _round(pos[keep]), "negatives": _round(neg[keep])},
            "gains": _round(gains), "lift": _round([t.mean() / rate if len(t) else 0.0 for t in tenths]),
            "confusion": confusion_matrix(positive, (scores >= threshold).astype(int), labels=[0, 1]).tolist(),
            "threshold": threshold}


def _spaced(n: int) -> np.ndarray:
    """At most :data:`CURVE_POINTS` indices of ``n``, evenly spaced, the first and the last included."""
    return np.unique(np.linspace(0, n - 1, min(n, CURVE_POINTS)).round().astype(int))


def _round(values) -> list:
    return [round(float(v), 6) for v in values]


def prediction_metrics(classes, scores: np.ndarray, labels, role: str) -> dict:
    """``vfl predict``'s metrics at the label party when the label column is present (or a note saying why not).

    ``classes``: the model's classes (None for regression); ``scores``: (rows, 1) scores or (rows, classes)
    scores whose softmax gives the probabilities (raw scores, or log-probabilities).
    """
    if classes is None:
        try:
            y = np.asarray(labels, dtype=np.float64)
        except (TypeError, ValueError):
            return {"rows": len(labels), "metrics": {},
                    "note": f"party {role}: no metrics: the label column holds values that are not numbers"}
        return rows_report("linear", scores[:, 0], y)
    y = class_indices(labels, classes)
    if y is None:
        return {"rows": len(labels), "metrics": {},
                "note": f"party {role}: no metrics: the label column holds values that are not classes of the model "
                        f"({', '.join(map(repr, [plain(c) for c in classes]))})"}
    return rows_report("logistic", scores[:, 0] if scores.shape[1] == 1 else scores, y, link="softmax")


def class_indices(labels, classes) -> np.ndarray | None:
    """Each label's index in ``classes`` (compared as JSON writes them), or ``None`` if one is not a class."""
    index = {plain(c): k for k, c in enumerate(classes)}
    try:
        return np.array([index[plain(v)] for v in np.asarray(labels, dtype=object)], dtype=np.int64)
    except (KeyError, TypeError):
        return None


def metrics_line(role: str, what: str, rows: int, metrics: dict[str, float]) -> str:
    """``party B: training metrics on 398 rows: AUC 0.9871, KS 0.9012`` (or why there are none)."""
    text = ", ".join(f"{name} {value:.4f}" for name, value in metrics.items()) or "none (a single class)"
    return f"party {role}: {what} metrics on {rows:,} rows: {text}"


def classes_line(role: str, classes) -> str | None:
    """Which class is positive (two classes), or the classes of one-vs-rest; ``None`` for regression."""
    if classes is None or len(classes) == 0:
        return None
    classes = [plain(c) for c in classes]
    if len(classes) == 2:
        return (f"party {role}: positive class {classes[1]!r} (the other: {classes[0]!r}); scores and probabilities "
                f"are those of {classes[1]!r}")
    return f"party {role}: one-vs-rest, one model per class: {', '.join(repr(c) for c in classes)}"


def label_report(role: str, summary: dict, classes: bool = True, metrics: bool = True) -> list[str]:
    """The label party's lines after a run: which class is positive, and its metrics (training, validation, or
    the rows just scored); none at another party."""
    if summary.get("role") != "label":
        return []
    lines = []
    line = classes_line(role, summary.get("classes")) if classes else None
    if line:
        lines.append(line)
    if not metrics:
        return lines
    report = summary.get("metrics") or {}
    if "note" in report:
        lines.append(report["note"])
    elif "rows" in report:            # vfl predict: the rows just scored
        lines.append(metrics_line(role, "prediction", report["rows"], report["metrics"]))
    for what in ("training", "validation"):
        if what in report:
            lines.append(metrics_line(role, what, report[what]["rows"], report[what]["metrics"]))
    return lines


def write_scores(path, ids, scores, probability=None, classes=None, id_column: str = "id") -> Path:
    """The label party's scores CSV: one row per id, the same columns for every model kind.

    Parameters
    ----------
    scores : array of shape (n,) or (n, n_classes)
        Raw scores (one per class for one-vs-rest or multinomial models).
    probability : array, optional
        Classifiers: the positive class's probability (shape (n,)), or one column
        per class summing to 1; ``None`` for regression.
    classes : list, optional
        The label classes (a classifier's).

    Writes ``score`` (or ``score_CLASS`` per class), and for a classifier
    ``probability`` of the positive class ``classes[1]`` (or ``probability_CLASS``
    per class) and ``prediction``, the class of the highest probability (two
    classes: the positive one from 0.5).
    """
    import pandas as pd

    scores = np.asarray(scores, dtype=np.float64)
    frame = pd.DataFrame({id_column: ids})
    if scores.ndim == 1:
        frame["score"] = scores
        if probability is not None:
            frame["probability"] = probability
            frame["prediction"] = np.where(probability >= 0.5, classes[1], classes[0])
    else:
        for k, name in enumerate(classes):
            frame[f"score_{name}"] = scores[:, k]
        for k, name in enumerate(classes):
            frame[f"probability_{name}"] = probability[:, k]
        frame["prediction"] = np.asarray(classes, dtype=object)[np.argmax(probability, axis=1)]
    return write_private_csv(frame, path, index=False)
