import numpy as np
import pytest

from vfl.horizontal import LogisticRegressionModel, MLPModel, make_model
from vfl.horizontal.errors import InvalidParameterError, ShapeMismatchError


@pytest.mark.parametrize(
    "model",
    [LogisticRegressionModel(4, 2, l2=0.3), LogisticRegressionModel(4, 3, l2=0.3), MLPModel(4, 3, (5, 3), l2=0.3)],
    ids=["binary", "softmax", "mlp"],
)
def test_gradient_matches_finite_differences(model):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(15, 4))
    y = rng.integers(0, model.n_classes, size=15)
    w = rng.normal(size=model.n_params)
    _, grad = model.loss_and_grad(w, X, y)
    eps = 1e-6
    numeric = np.array([
        (model.loss(w + eps * e, X, y) - model.loss(w - eps * e, X, y)) / (2 * eps)
        for e in np.eye(model.n_params)
    ])
    np.testing.assert_allclose(grad, numeric, atol=1e-6)
    proba = model.predict_proba(w, X)
    assert proba.shape == (15, model.n_classes)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_parameter_counts():
    assert LogisticRegressionModel(64, 2).n_params == 65
    assert LogisticRegressionModel(64, 10).n_params == 650
    assert MLPModel(64, 10, (64, 64)).n_params == 64 * 64 + 64 + 64 * 64 + 64 + 64 * 10 + 10


def test_mlp_init_is_seeded():
    m = make_model("mlp", 8, 3, hidden_layer_sizes=(6, 6))
    np.testing.assert_array_equal(m.init_params(np.random.default_rng(3)), m.init_params(np.random.default_rng(3)))
    assert np.any(m.init_params(np.random.default_rng(3)) != 0)


def test_model_errors():
    with pytest.raises(InvalidParameterError, match="unknown model"):
        make_model("cnn", 4, 2)
    with pytest.raises(InvalidParameterError, match="n_classes"):
        LogisticRegressionModel(4, 1)
    with pytest.raises(ShapeMismatchError, match=r"expected \(5,\)"):
        LogisticRegressionModel(4, 2).predict_proba(np.zeros(3), np.zeros((2, 4)))
