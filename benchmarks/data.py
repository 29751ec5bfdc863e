"""The benchmark's data: breast cancer for 569 rows, generated data for any other size.

Features are standardised (as anyone training a linear model would) and split
20 + 10 between party A and party B; labels are -1/+1 (the logistic objective's coding).
"""

from __future__ import annotations

import numpy as np

N_A = 20


def make_data(rows: int, features: int = 30, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """``(x_a, x_b, y, name)``: 569 x 30 is scikit-learn's bundled breast-cancer set, other sizes are generated."""
    if rows == 569 and features == 30:
        from sklearn.datasets import load_breast_cancer

        x, y = load_breast_cancer(return_X_y=True)
        name = "breast cancer"
    else:
        rng = np.random.default_rng(seed)
        # correlated features with a few heavy-tailed columns, like real tabular data
        mixing = rng.normal(size=(features, features)) / np.sqrt(features)
        x = rng.normal(size=(rows, features)) @ mixing
        x[:, ::7] = rng.standard_t(4, size=(rows, len(range(0, features, 7))))
        w = rng.normal(size=features)
        y = (x @ w + rng.logistic(size=rows) > 0).astype(int)
        name = "generated"
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    n_a = min(N_A, features - 1) if features > 1 else features
    return x[:, :n_a], x[:, n_a:], np.where(y > 0, 1.0, -1.0), name


def feature_party_blocks(rows: int, features: int, k: int):
    """The benchmark's data for ``k`` feature parties: ``(roster, blocks, x_b, y, name)``.

    One feature party is "A" with :func:`make_data`'s split; ``k`` of them ("A1", ...) each get
    ``features // (k + 1)`` columns and B the rest.
    """
    from vfl.protocols import Roster

    x_a, x_b, y, name = make_data(rows, features)
    if k == 1:
        return Roster(), {"A": x_a}, x_b, y, name
    x = np.hstack([x_a, x_b])
    width = features // (k + 1)
    roster = Roster(tuple(f"A{j + 1}" for j in range(k)))
    blocks = {name: x[:, j * width:(j + 1) * width] for j, name in enumerate(roster.features)}
    return roster, blocks, x[:, k * width:], y, name
