import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from vfl.horizontal import AgnosticFL, FedAvg, LogisticRegressionModel, MLPModel, load_dataset
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
    ([client(), (rng.normal(size=(4, 4)), np.array([0.0, 1.0, np.nan, 1.0]))], LabelError,
     r"client 1, row 2: the label is missing"),
    ([(rng.normal(size=(8, 4)), rng.normal(size=8))], LabelError, "continuous target"),
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


# Wrong *types* must get the same clear InvalidParameterError as wrong values,
# never a bare TypeError from a comparison inside fit.
@pytest.mark.parametrize("params, message", [
    (dict(trim_beta="x"), r"trim_beta must be in \[0, 0.5\), got 'x'"),
    (dict(trim_beta=float("nan")), "trim_beta"),
    (dict(target_accuracy="x"), r"target_accuracy must be in \(0, 1\], got 'x'"),
    (dict(target_accuracy=0.0), "target_accuracy"),
    (dict(target_train_objective="x"), "target_train_objective must be a finite number >= 0"),
    (dict(target_train_objective=-0.1), "target_train_objective"),
    (dict(num_rounds=2.5), "num_rounds must be an integer >= 1, got 2.5"),
    (dict(num_rounds=True), "num_rounds"),
    (dict(fraction_fit="0.5"), r"fraction_fit \(C\)"),
    (dict(min_fit_clients=1.5), "min_fit_clients must be an integer"),
    (dict(local_epochs="2"), r"local_epochs \(E\)"),
    (dict(learning_rate="0.1"), "learning_rate"),
    (dict(learning_rate=float("inf")), "learning_rate"),
    (dict(aggregator=None), "unknown aggregator"),
    (dict(aggregator=["mean"]), "unknown aggregator"),
    (dict(l2="x"), "l2 must be a finite number >= 0"),
    (dict(l2=True), "l2"),
    (dict(hidden_layer_sizes=64), "hidden_layer_sizes"),
    (dict(hidden_layer_sizes="64"), "hidden_layer_sizes"),
    (dict(hidden_layer_sizes=(16, 2.5)), "hidden_layer_sizes"),
    (dict(hidden_layer_sizes=()), "hidden_layer_sizes"),
    (dict(model="mlp", hidden_layer_sizes=(8, 0)), "hidden_layer_sizes"),
    (dict(initial_parameters="abc"), "initial_parameters must be a numeric vector"),
    (dict(initial_parameters=[0.0, 0.0, np.nan, 0.0, 0.0]), "initial_parameters contains NaN"),
    (dict(random_state="x"), "random_state must be None, a non-negative integer or a numpy Generator"),
    (dict(random_state=-1), "random_state"),
    (dict(random_state=1.5), "random_state"),
])
def test_wrongly_typed_hyperparameters(params, message):
    with pytest.raises(InvalidParameterError, match=message):
        FedAvg(**{"num_rounds": 1, **params}).fit([client(), client()])


@pytest.mark.parametrize("params, message", [
    (dict(lambda_learning_rate="x"), "lambda_learning_rate"),
    (dict(num_rounds="10"), "num_rounds"),
    (dict(min_fit_clients=0), "min_fit_clients"),
    (dict(batch_size=1.5), r"batch_size \(B\)"),
    (dict(random_state="seed"), "random_state"),
    (dict(l2=-1.0), "l2"),
    (dict(hidden_layer_sizes=[4, "x"]), "hidden_layer_sizes"),
])
def test_afl_wrongly_typed_hyperparameters(params, message):
    with pytest.raises(InvalidParameterError, match=message):
        AgnosticFL(**{"num_rounds": 1, **params}).fit([client(), client()])


def test_generator_and_numpy_scalars_are_accepted():
    clients = [client(), client()]
    est = FedAvg(num_rounds=np.int64(2), fraction_fit=np.float64(1.0), trim_beta=np.float32(0.1),
                 aggregator="trimmed_mean", min_fit_clients=np.int32(2), l2=np.float64(0.0),
                 target_accuracy=np.float64(1.0), random_state=np.random.default_rng(0))
    with pytest.warns(RuntimeWarning, match="trims floor"):  # 0.1 * 2 < 1: nothing trimmed
        est.fit(clients, *client())
    assert len(est.history_) >= 1


@pytest.mark.parametrize("build, message", [
    (lambda: LogisticRegressionModel(4, "x"), "n_classes must be an integer >= 2"),
    (lambda: LogisticRegressionModel(4.5, 2), "n_features"),
    (lambda: LogisticRegressionModel(4, 2, l2=-1), "l2"),
    (lambda: MLPModel(4, 3, (2.5,)), "hidden_layer_sizes"),
    (lambda: MLPModel(0, 3, (4,)), "n_features must be an integer >= 1"),
    (lambda: MLPModel(4, 3, (4,), l2=float("nan")), "l2"),
    (lambda: load_dataset("iris", test_size="x"), r"test_size must be in \(0, 1\)"),
    (lambda: load_dataset("iris", test_size=1.0), "test_size"),
])
def test_models_and_datasets_reject_bad_arguments(build, message):
    with pytest.raises(InvalidParameterError, match=message):
        build()


def test_prediction_and_score_check_their_input_as_fit_does():
    from sklearn.base import clone

    fitted = FedAvg(num_rounds=2).fit([client(n=20), client(n=20)])
    X, y = client(n=10)
    X[3, 1] = np.nan
    for call in (lambda: fitted.predict(X), lambda: fitted.score(X, y)):
        with pytest.raises(InvalidParameterError, match=r"X, row 3, column 1: nan \(values must be finite\)"):
            call()
    X, y = client(n=10)
    with pytest.raises(ShapeMismatchError, match=r"y has shape \(10, 1\); expected \(10,\)"):
        fitted.score(X, y[:, None])
    with pytest.raises(ShapeMismatchError, match="expected"):
        fitted.score(X, y[:4])
    with pytest.raises(LabelError, match=r"y has labels \['a'\] not seen in training"):
        fitted.score(X, np.array(["a"] * 10))
    with pytest.raises(InvalidParameterError, match="X_test, row 0"):
        FedAvg(num_rounds=1).fit([client(), client()], X_test=np.full((2, 4), np.inf), y_test=np.array([0, 1]))
    again = clone(FedAvg(num_rounds=3, learning_rate=0.5))
    assert again.get_params()["num_rounds"] == 3 and again.set_params(num_rounds=4).num_rounds == 4


def test_checks_of_clients_and_test_sets_together_come_before_the_test_sets():
    """HierFAVG's edges and FedAvg's target are checked once the clients are, before the test sets."""
    from vfl.horizontal import HierFAVG

    clients = [client(), client(), client()]
    X_bad, y_test = rng.normal(size=(5, 3)), np.zeros(5)
    with pytest.raises(InvalidParameterError, match="edges \\(L\\) must be between 1 and the number of clients 3"):
        HierFAVG(edges=5).fit(clients, X_bad, y_test)
    with pytest.raises(InvalidParameterError, match="target_accuracy needs X_test and y_test"):
        FedAvg(target_accuracy=0.5).fit(clients, client_tests=[client()])
    with pytest.raises(EmptyClientError, match="no clients"):
        FedAvg(target_accuracy=0.5).fit([])
