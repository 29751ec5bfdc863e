import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from vfl.horizontal import AgnosticFL, FedAvg
from vfl.horizontal.errors import (
    EmptyClientError,
    FederatedInputError,
    InvalidParameterError,
    LabelError,
    ShapeMismatchError,
)

rng = np.random.default_rng(0)


def client(n=6, d=4, labels=(0, 1)):
    return rng.normal(size=(n, d)), np.resize(np.array(labels), n)


def test_errors_are_value_errors():
    for exc in (EmptyClientError, ShapeMismatchError, LabelError, InvalidParameterError):
        assert issubclass(exc, FederatedInputError) and issubclass(exc, ValueError)


@pytest.mark.parametrize("clients, error, message", [
    ([], EmptyClientError, "no clients"),
    ([client(), (np.zeros((0, 4)), np.zeros(0)), client()], EmptyClientError, "client 1 has no examples"),
    ([client(), client(d=5)], ShapeMismatchError, "client 1 has 5 features but client 0 has 4"),
    ([client(), (np.zeros(4), np.zeros(4))], ShapeMismatchError, r"client 1: X must be 2-D.*\(4,\)"),
    ([(np.zeros((3, 4)), np.zeros(2))], ShapeMismatchError, "client 0: X has 3 rows but y has 2"),
    ([client(), (np.full((2, 4), np.nan), np.zeros(2))], InvalidParameterError, "client 1: X contains NaN"),
    ([client(labels=(1,)), client(labels=(1,))], LabelError, "at least two classes"),
    ([client(), "oops"], InvalidParameterError, "client 1 must be an"),
])
def test_bad_clients(clients, error, message):
    with pytest.raises(error, match=message):
        FedAvg(num_rounds=1).fit(clients)


@pytest.mark.parametrize("params, message", [
    (dict(fraction_fit=0.0), r"fraction_fit \(C\) must be in \(0, 1\], got 0.0"),
    (dict(fraction_fit=1.2), r"fraction_fit \(C\) must be in \(0, 1\]"),
    (dict(local_epochs=0), r"local_epochs \(E\)"),
    (dict(batch_size=0), r"batch_size \(B\)"),
    (dict(batch_size=2.5), r"batch_size \(B\)"),
    (dict(learning_rate=-1.0), "learning_rate"),
    (dict(num_rounds=0), "num_rounds"),
    (dict(aggregator="krum"), "unknown aggregator"),
    (dict(trim_beta=0.6), "trim_beta"),
    (dict(min_fit_clients=3), "min_fit_clients=3 but only 2 clients"),
    (dict(model="cnn"), "unknown model"),
    (dict(target_accuracy=0.9), "target_accuracy needs X_test"),
])
def test_bad_hyperparameters(params, message):
    with pytest.raises(InvalidParameterError, match=message):
        FedAvg(**{"num_rounds": 1, **params}).fit([client(), client()])


def test_bad_test_set_and_predict():
    clients = [client(), client()]
    with pytest.raises(ShapeMismatchError, match=r"initial_parameters has shape \(3,\); .* needs \(5,\)"):
        FedAvg(num_rounds=1, initial_parameters=np.zeros(3)).fit(clients)
    with pytest.raises(ShapeMismatchError, match=r"X_test has shape \(3, 2\); expected \(n, 4\)"):
        FedAvg(num_rounds=1).fit(clients, np.zeros((3, 2)), np.zeros(3))
    with pytest.raises(LabelError, match=r"y_test has labels \[7\]"):
        FedAvg(num_rounds=1).fit(clients, np.zeros((2, 4)), np.array([0, 7]))
    with pytest.raises(InvalidParameterError, match="both X_test and y_test"):
        FedAvg(num_rounds=1).fit(clients, np.zeros((2, 4)))
    with pytest.raises(NotFittedError):
        FedAvg().predict(np.zeros((1, 4)))
    est = FedAvg(num_rounds=1).fit(clients)
    with pytest.raises(ShapeMismatchError, match=r"expected \(n, 4\)"):
        est.predict(np.zeros((2, 3)))
    with pytest.raises(LabelError, match=r"client 0 has labels \[5\]"):
        est.client_losses([client(labels=(5,))])


def test_afl_bad_input():
    with pytest.raises(InvalidParameterError, match="lambda_learning_rate"):
        AgnosticFL(lambda_learning_rate=0).fit([client(), client()])
    with pytest.raises(ShapeMismatchError, match="client 1 has 3 features"):
        AgnosticFL().fit([client(), client(d=3)])
