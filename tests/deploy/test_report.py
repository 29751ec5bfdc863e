"""The label party's report (vfl.deploy.report): its metrics are scikit-learn's."""

import numpy as np
import pytest
from sklearn.metrics import r2_score, roc_auc_score

from vfl.deploy.report import class_indices, label_metrics
from vfl.metrics import ks_statistic


def test_label_metrics_are_scikit_learn_s():
    rng = np.random.default_rng(3)
    z, y = rng.normal(size=200), rng.integers(0, 2, 200)
    assert label_metrics("logistic", z, y) == {"AUC": roc_auc_score(y, z), "KS": ks_statistic(y, z)}
    t = rng.normal(size=200)
    got = label_metrics("linear", t + 0.1 * z, t)
    assert got["R^2"] == pytest.approx(r2_score(t, t + 0.1 * z))
    assert got["RMSE"] == pytest.approx(np.sqrt(np.mean((0.1 * z) ** 2)))
    three = rng.normal(size=(200, 3))
    classes = rng.integers(0, 3, 200)
    assert set(label_metrics("logistic", three, classes)) == {"AUC (one-vs-rest, macro)", "accuracy"}
    assert label_metrics("logistic", z, np.ones(200, dtype=int)) == {}          # one class: no AUC, no KS
    assert class_indices(np.array(["no", "yes", "no"], dtype=object), ["no", "yes"]).tolist() == [0, 1, 0]
    assert class_indices(np.array(["no", "maybe"], dtype=object), ["no", "yes"]) is None
