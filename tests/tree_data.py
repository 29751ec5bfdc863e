"""Generated vertical data for the boosting tests: a nonlinear target over several parties' columns, with gaps."""

import numpy as np
import pandas as pd

from vfl import VerticalDataset


def make_tree_data(n_rows=300, parties=("A", "B"), columns=3, task="binary", missing=0.1, seed=0, n_classes=3):
    """``VerticalDataset`` of ``parties`` (the last holds the label ``y``), each with ``columns`` columns.

    The target depends on thresholds and an interaction of columns spread over
    the parties, so that trees split on every party; ``missing`` of the values of
    each party's first column are NaN (the label party's too).  Returns the data
    and the labels.
    """
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_rows, columns * len(parties)))
    x[:, 1] = np.round(x[:, 1] * 2) / 2                    # a column of few distinct values
    score = 1.5 * (x[:, 0] > 0.3) - x[:, columns] * (x[:, -1] > 0) + 0.8 * x[:, 1] + rng.normal(scale=0.4,
                                                                                               size=n_rows)
    if task == "binary":
        y = (score > np.median(score)).astype(int)
    elif task == "multiclass":
        y = np.digitize(score, np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1]))
    else:
        y = 10 * score + 50
    frames = {}
    for p, name in enumerate(parties):
        block = x[:, p * columns:(p + 1) * columns].copy()
        gaps = rng.random(n_rows) < missing
        block[gaps, 0] = np.nan
        frame = pd.DataFrame(block, columns=[f"{name.lower()}{j}" for j in range(columns)])
        frame.insert(0, "id", np.arange(n_rows) + 5000)
        frames[name] = frame
    frames[parties[-1]]["y"] = y
    return VerticalDataset(frames, label="y", id_column="id"), y


def opted_in(data):
    """``allow_reconstruction`` for every feature party of ``data``.

    Each party's second column is coded (a few distinct values) and the trees split
    on it, so the sides of its splits a feature party releases at prediction decode
    it for many rows: its release check refuses that by default (tests/trees/
    test_trees_release.py measures it).  Tests about the trees' arithmetic opt every
    feature party in, knowingly.
    """
    return {"allow_reconstruction": list(data.feature_parties)}
