"""The label party recovering a feature party's rows from its per-row scores, and the refusal that stops it.

B learns the scores of the rows it predicts; removing its own part leaves ``S = X_A W_A^T + c``,
one column per score (``c``: the offset A's standardization adds).  With as many scores ``K``
as A has columns ``m`` (one-vs-rest with ``K >= m`` classes, or one score and a one-column
party), ``W_A`` has full column rank: knowing ``m + 1`` of A's rows, B solves for ``W_A`` and
``c`` and then for every other row, exactly.
vfl refuses such a model unless the feature party opts in (``allow_score_span``).
"""

import numpy as np
import pandas as pd
import pytest

from vfl import ConfigurationError, VerticalDataset, VerticalLogisticRegression

FAST = dict(key_bits=1024, insecure=True, max_iter=3, tol=None, learning_rate=0.3)


def classes_data(n_rows, n_a, n_classes, seed):
    rng = np.random.default_rng(seed)
    x_a, x_b = rng.normal(size=(n_rows, n_a)), rng.normal(size=(n_rows, 2))
    z = np.hstack([x_a, x_b]) @ rng.normal(size=(n_a + 2, n_classes))
    label = np.argmax(z, axis=1)
    label[:n_classes] = np.arange(n_classes)                       # every class present
    frames = {"A": pd.DataFrame(x_a).add_prefix("a"), "B": pd.DataFrame(x_b).add_prefix("b").assign(y=label)}
    return VerticalDataset(frames, label="y"), x_a, x_b


def scores_seen_by_b(model, x_b, test):
    """What B holds after predicting ``test``: each row's scores minus its own part (``X_A W_A^T + c``)."""
    z = np.atleast_2d(model.decision_function(test).T).T
    own = (x_b - model.mean_["B"]) / model.scale_["B"] @ np.atleast_2d(model.coef_["B"]).T + model.intercept_
    return z - own


def recover_rows(s, x_known):
    """B knows A's first ``m + 1`` rows: solve ``[x_known, 1] [W^T; c] = s[:m+1]``, then every row from ``s``."""
    known = len(x_known)
    w_c = np.linalg.lstsq(np.hstack([x_known, np.ones((known, 1))]), s[:known], rcond=None)[0]
    return (s - w_c[-1]) @ np.linalg.pinv(w_c[:-1])


def test_b_recovers_a_rows_exactly_when_a_opted_in():
    train, _, _ = classes_data(90, n_a=3, n_classes=4, seed=0)
    model = VerticalLogisticRegression(allow_score_span=["A"], **FAST).fit(train)
    test, x_a, x_b = classes_data(40, n_a=3, n_classes=4, seed=1)
    recovered = recover_rows(scores_seen_by_b(model, x_b, test), x_a[:4])
    assert np.allclose(recovered, x_a, atol=1e-5)                    # every row of A, to fixed-point precision


def test_fewer_scores_than_columns_leave_b_a_projection_only():
    train, _, _ = classes_data(90, n_a=5, n_classes=3, seed=2)
    model = VerticalLogisticRegression(**FAST).fit(train)               # 3 scores < 5 columns: allowed
    test, x_a, x_b = classes_data(40, n_a=5, n_classes=3, seed=3)
    recovered = recover_rows(scores_seen_by_b(model, x_b, test), x_a[:6])
    assert np.abs(recovered - x_a)[6:].max() > 0.5                     # the same attack recovers nothing exact


@pytest.mark.parametrize("n_a,n_classes", [(3, 3), (2, 4), (1, 2)])
def test_as_many_scores_as_columns_is_refused_without_the_opt_in(n_a, n_classes):
    train, _, _ = classes_data(60, n_a=n_a, n_classes=n_classes, seed=4)
    model = VerticalLogisticRegression(**FAST)
    with pytest.raises(ConfigurationError, match=r"party A: the model gives the label party B .* per predicted "
                                                 r"row, not fewer than A's \d column.*allow_score_span=\['A'\]"):
        model.fit(train)
    assert not hasattr(model, "coef_")


def test_prediction_checks_the_opt_in_again():
    train, _, _ = classes_data(60, n_a=3, n_classes=3, seed=5)
    model = VerticalLogisticRegression(allow_score_span=["A"], **FAST).fit(train)
    model.set_params(allow_score_span=None)
    with pytest.raises(ConfigurationError, match="could recover A's rows"):
        model.predict(train)


@pytest.mark.parametrize("value", ["A", ["Z"], [1]])
def test_the_opt_in_names_feature_parties(value):
    train, _, _ = classes_data(60, n_a=3, n_classes=3, seed=6)
    with pytest.raises(ConfigurationError, match="allow_score_span"):
        VerticalLogisticRegression(allow_score_span=value, **FAST).fit(train)
