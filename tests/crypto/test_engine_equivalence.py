"""Training with the fast engine gives exactly the weights of the simple reference engine."""

import numpy as np
import pandas as pd
import pytest

from vfl import VerticalDataset, VerticalLinearRegression, VerticalLogisticRegression


def dataset(task, n_rows=70, seed=11):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_rows, 5)) * [1.0, 3.0, 0.2, 1.0, 5.0]
    z = x @ rng.normal(size=5) + 0.4
    y = (z > 0).astype(int) if task == "logistic" else z + rng.normal(scale=0.1, size=n_rows)
    frame_a = pd.DataFrame(x[:, :3], columns=["a0", "a1", "a2"])
    frame_b = pd.DataFrame(x[:, 3:], columns=["b0", "b1"])
    frame_b["y"] = y
    return VerticalDataset({"A": frame_a, "B": frame_b}, label="y")


@pytest.mark.parametrize("task,batch_size", [("logistic", None), ("linear", 30)])
def test_fast_and_simple_engines_train_identical_weights(task, batch_size):
    cls = VerticalLogisticRegression if task == "logistic" else VerticalLinearRegression
    data = dataset(task)
    # the same (zero) start for both, so the weights can be compared bit for bit
    fits = {engine: cls(learning_rate=0.1, max_iter=3, alpha=0.01, batch_size=batch_size, tol=None, key_bits=1024,
                        insecure=True, random_state=3, engine=engine, init="zeros").fit(data)
            for engine in ("simple", "fast")}
    simple, fast = fits["simple"], fits["fast"]
    for party in ("A", "B"):
        assert np.array_equal(simple.coef_[party], fast.coef_[party])   # bit for bit, not just close
    assert simple.intercept_ == fast.intercept_
    assert np.array_equal(simple.loss_curve_, fast.loss_curve_)
