import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

import vfl.horizontal.clients as clients_module
from vfl.horizontal import FedAvg, partition, split_clients


def softmax_gd(X, y, w0, n_classes, lr, steps):
    """Centralised full-batch gradient descent on mean softmax cross-entropy,
    written independently of vfl.horizontal.models."""
    d = X.shape[1]
    W, b = w0[: d * n_classes].reshape(d, n_classes).copy(), w0[d * n_classes :].copy()
    Y = np.eye(n_classes)[y]
    out = []
    for _ in range(steps):
        z = X @ W + b
        P = np.exp(z - z.max(axis=1, keepdims=True))
        P /= P.sum(axis=1, keepdims=True)
        W -= lr * X.T @ (P - Y) / len(y)
        b -= lr * (P - Y).mean(axis=0)
        out.append(np.concatenate([W.ravel(), b]))
    return out


def sigmoid_gd(X, y, w0, lr, steps):
    w, b = w0[:-1].copy(), w0[-1]
    out = []
    for _ in range(steps):
        r = 1 / (1 + np.exp(-(X @ w + b))) - y
        w, b = w - lr * X.T @ r / len(y), b - lr * r.mean()
        out.append(np.append(w, b))
    return out


def test_fedsgd_one_client_equals_centralised_gd_step_for_step(digits):
    X, _, y, _ = digits
    w0 = np.random.default_rng(0).normal(scale=0.1, size=65 * 10)
    expected = softmax_gd(X, y, w0, 10, lr=0.3, steps=5)
    for t in range(1, 6):
        est = FedAvg(num_rounds=t, fraction_fit=1.0, local_epochs=1, batch_size=None, learning_rate=0.3,
                     initial_parameters=w0).fit([(X, y)])
        np.testing.assert_allclose(est.parameters_, expected[t - 1], rtol=1e-10, atol=1e-12)


def test_fedsgd_binary_equals_centralised_gd(cancer):
    X, _, y, _ = cancer
    w0 = np.zeros(X.shape[1] + 1)
    expected = sigmoid_gd(X, y, w0, lr=0.5, steps=4)[-1]
    est = FedAvg(num_rounds=4, fraction_fit=1.0, batch_size=None, learning_rate=0.5).fit([(X, y)])
    np.testing.assert_allclose(est.parameters_, expected, rtol=1e-10, atol=1e-12)


def test_fedsgd_unbalanced_clients_equals_gd_thanks_to_nk_weighting(digits):
    # with all clients, E=1, B=None, the n_k/n-weighted average of one-step
    # updates is exactly one centralised full-batch step
    X, _, y, _ = digits
    parts = partition(y, 6, "unbalanced", sigma=1.5, seed=0)
    clients = split_clients(X, y, parts)
    order = np.concatenate(parts)
    expected = softmax_gd(X[order], y[order], np.zeros(650), 10, lr=0.3, steps=3)[-1]
    est = FedAvg(num_rounds=3, fraction_fit=1.0, batch_size=None, learning_rate=0.3).fit(clients)
    np.testing.assert_allclose(est.parameters_, expected, rtol=1e-9, atol=1e-12)
    # the unweighted average would not be: the weighting matters here
    sizes = [p.size for p in parts]
    assert max(sizes) > 2 * min(sizes)
    unweighted = np.mean([softmax_gd(Xk, yk, np.zeros(650), 10, 0.3, 1)[0] for Xk, yk in clients], axis=0)
    assert not np.allclose(unweighted, softmax_gd(X, y, np.zeros(650), 10, 0.3, 1)[0], atol=1e-6)


def test_iid_fedavg_within_two_points_of_centralised(digits):
    X, Xt, y, yt = digits
    central = LogisticRegression(max_iter=2000).fit(X, y).score(Xt, yt)
    clients = split_clients(X, y, partition(y, 10, "iid", seed=0))
    est = FedAvg(num_rounds=30, fraction_fit=0.5, local_epochs=2, batch_size=10, learning_rate=0.05,
                 random_state=0).fit(clients, Xt, yt)
    assert est.score(Xt, yt) >= central - 0.02
    assert est.history_["test_accuracy"].iloc[-1] == pytest.approx(est.score(Xt, yt))


def test_history_sampling_and_bytes(digits):
    X, Xt, y, yt = digits
    clients = split_clients(X, y, partition(y, 10, "iid", seed=0))
    est = FedAvg(num_rounds=4, fraction_fit=0.3, batch_size=20, random_state=0).fit(clients, Xt, yt)
    h = est.history_
    assert list(h["round"]) == [1, 2, 3, 4]
    assert (h["clients"] == 3).all()
    vector = est.model_.n_params * 8
    assert (h["bytes_down"] == 3 * vector).all() and (h["bytes_up"] == 3 * vector).all()
    assert h["bytes_total"].iloc[-1] == 4 * 2 * 3 * vector
    assert h["train_loss"].is_monotonic_decreasing or h["train_loss"].iloc[-1] < h["train_loss"].iloc[0]
    # min_fit_clients raises m above floor(C * K)
    est2 = FedAvg(num_rounds=1, fraction_fit=0.1, min_fit_clients=4, random_state=0).fit(clients)
    assert est2.history_["clients"].iloc[0] == 4


def test_more_local_computation_needs_fewer_rounds(digits):
    # McMahan's Table 2 effect on IID data: more local updates per round
    # (u = E * n_k / B) cut the rounds to a target accuracy.  The target is
    # high enough that every setting needs several rounds (at 0.9, E=5/B=10
    # got there in round 1, which compared nothing).
    X, Xt, y, yt = digits
    clients = split_clients(X, y, partition(y, 10, "iid", seed=0))
    kw = dict(fraction_fit=0.5, learning_rate=0.1, target_accuracy=0.94, num_rounds=300, random_state=0)
    settings = [(1, None), (5, None), (1, 10), (5, 10)]  # u = 1, 5, ~11.5, ~57.5: FedSGD first
    rounds = []
    for epochs, batch in settings:
        est = FedAvg(local_epochs=epochs, batch_size=batch, **kw).fit(clients, Xt, yt)
        assert est.rounds_to_target_ is not None, (epochs, batch)
        assert len(est.history_) == est.rounds_to_target_
        assert est.history_["test_accuracy"].iloc[-1] >= 0.94 > est.history_["test_accuracy"].iloc[:-1].max()
        rounds.append(est.rounds_to_target_)
    assert min(rounds) >= 3, rounds
    assert all(a > b for a, b in zip(rounds, rounds[1:])), rounds
    assert rounds[0] >= 5 * rounds[-1], rounds  # FedSGD needs many times the rounds of E=5, B=10


def test_server_weights_by_examples_of_the_sampled_clients_only(cancer, monkeypatch):
    # With C < 1, w_{t+1} = sum_{k in S_t} n_k w_k / sum_{k in S_t} n_k: n is
    # summed over this round's participants S_t, not over all K clients.
    # Checked for two rounds against an independent computation of each
    # sampled client's E = 2 full-batch gradient steps.
    X, _, y, _ = cancer
    parts = partition(y, 6, "unbalanced", sigma=1.0, min_size=10, seed=4)
    clients = split_clients(X, y, parts)
    sizes = np.array([p.size for p in parts])
    assert sizes.max() > 2 * sizes.min()
    drawn = []
    real_sample = clients_module.sample_clients

    def recording_sample(rng, n_available, m):
        chosen = real_sample(rng, n_available, m)
        drawn.append(chosen.copy())
        return chosen

    monkeypatch.setattr(clients_module, "sample_clients", recording_sample)
    lr, w = 0.3, np.zeros(X.shape[1] + 1)
    est = FedAvg(num_rounds=2, fraction_fit=0.5, local_epochs=2, batch_size=None, learning_rate=lr,
                 random_state=1).fit(clients)
    assert len(drawn) == 2 and all(d.size == 3 for d in drawn)
    assert list(est.history_["clients"]) == [3, 3]
    for sampled in drawn:
        local = np.array([sigmoid_gd(*clients[k], w, lr, 2)[-1] for k in sampled])
        n_sampled = sizes[sampled]
        expected = n_sampled @ local / n_sampled.sum()
        # the two plausible mistakes give clearly different vectors
        over_all_k = n_sampled @ local / sizes.sum()
        unweighted = local.mean(axis=0)
        assert not np.allclose(expected, over_all_k, atol=1e-3)
        assert not np.allclose(expected, unweighted, atol=1e-3)
        w = expected
    np.testing.assert_allclose(est.parameters_, w, rtol=1e-10, atol=1e-12)


def test_train_objective_and_target_train_objective(cancer):
    X, Xt, y, yt = cancer
    clients = split_clients(X, y, partition(y, 4, "iid", seed=0))
    l2 = 0.05
    full = FedAvg(num_rounds=40, fraction_fit=1.0, batch_size=None, learning_rate=0.5, l2=l2,
                  random_state=0).fit(clients, Xt, yt)
    h = full.history_
    # train_objective = pooled log loss + l2/2 ||coef||^2, the loss the clients minimise
    pooled = (np.vstack([c[0] for c in clients]), np.concatenate([c[1] for c in clients]))
    assert h["train_objective"].iloc[-1] == pytest.approx(full.model_.loss(full.parameters_, *pooled), rel=1e-12)
    penalty = 0.5 * l2 * np.sum(full.parameters_[:-1] ** 2)
    assert h["train_objective"].iloc[-1] - h["train_loss"].iloc[-1] == pytest.approx(penalty, rel=1e-9)
    # stop at the first round whose objective is at or below the target
    target = float(h["train_objective"].iloc[24])
    est = FedAvg(num_rounds=40, fraction_fit=1.0, batch_size=None, learning_rate=0.5, l2=l2,
                 target_train_objective=target, random_state=0).fit(clients, Xt, yt)
    first = int(np.argmax(h["train_objective"].to_numpy() <= target)) + 1
    assert est.rounds_to_target_ == first == len(est.history_)
    np.testing.assert_array_equal(est.history_["train_objective"], h["train_objective"].iloc[:first])
    # unreachable target: all rounds run, no rounds_to_target_
    never = FedAvg(num_rounds=5, fraction_fit=1.0, batch_size=None, target_train_objective=0.0,
                   random_state=0).fit(clients)
    assert never.rounds_to_target_ is None and len(never.history_) == 5
    # both targets: stop at the first round where both are met, whichever binds
    objective, accuracy = h["train_objective"].to_numpy(), h["test_accuracy"].to_numpy()
    for target_objective, target_accuracy in ((objective[24], accuracy[9]), (objective[9], accuracy[-1])):
        alone = (int(np.argmax(objective <= target_objective)) + 1, int(np.argmax(accuracy >= target_accuracy)) + 1)
        assert alone[0] != alone[1]
        both = FedAvg(num_rounds=40, fraction_fit=1.0, batch_size=None, learning_rate=0.5, l2=l2, random_state=0,
                      target_train_objective=target_objective, target_accuracy=target_accuracy).fit(clients, Xt, yt)
        expected = int(np.argmax((objective <= target_objective) & (accuracy >= target_accuracy))) + 1
        assert both.rounds_to_target_ == len(both.history_) == expected == max(alone)


def test_same_seed_same_model_and_mlp_learns(digits):
    X, Xt, y, yt = digits
    clients = split_clients(X, y, partition(y, 8, "pathological", seed=0))
    kw = dict(num_rounds=15, fraction_fit=0.5, local_epochs=2, batch_size=16, learning_rate=0.05,
              hidden_layer_sizes=(32, 32), random_state=3)
    a = FedAvg("mlp", **kw).fit(clients, Xt, yt)
    b = FedAvg("mlp", **kw).fit(clients, Xt, yt)
    np.testing.assert_array_equal(a.parameters_, b.parameters_)
    assert a.score(Xt, yt) > 0.8
    assert set(a.predict(Xt)) <= set(np.unique(y))


def _with_attacker(monkeypatch, n_clients, scale=1e6):
    """Client 0 sends a huge random vector instead of its update (clients
    are visited in index order and all are sampled when fraction_fit=1).
    (A constant vector would be harmless: softmax ignores equal shifts.)"""
    real, calls, noise = clients_module.local_update, {"n": 0}, np.random.default_rng(99)

    def update(model, w, X, y, **kw):
        k = calls["n"] % n_clients
        calls["n"] += 1
        return scale * noise.normal(size=w.shape) if k == 0 else real(model, w, X, y, **kw)

    monkeypatch.setattr(clients_module, "local_update", update)


@pytest.mark.parametrize("aggregator", ["mean", "median", "trimmed_mean"])
def test_malicious_client_breaks_mean_only(digits, monkeypatch, aggregator):
    X, Xt, y, yt = digits
    clients = split_clients(X, y, partition(y, 10, "iid", seed=0))
    _with_attacker(monkeypatch, 10)
    est = FedAvg(num_rounds=10, fraction_fit=1.0, batch_size=20, learning_rate=0.1, aggregator=aggregator,
                 trim_beta=0.2, random_state=0).fit(clients, Xt, yt)
    accuracy = est.score(Xt, yt)
    if aggregator == "mean":
        assert accuracy < 0.5
    else:
        assert accuracy > 0.9


@pytest.mark.parametrize("estimator", ["fedavg", "afl"])
def test_divergence_stops_with_a_warning(digits, estimator):
    from vfl.horizontal import AgnosticFL

    X, Xt, y, yt = digits
    clients = split_clients(X, y, partition(y, 4, "iid", seed=0))
    cls = FedAvg if estimator == "fedavg" else AgnosticFL
    with pytest.warns(RuntimeWarning, match="diverged") as caught:
        est = cls("mlp", num_rounds=50, fraction_fit=1.0, learning_rate=1e4, random_state=0).fit(clients, Xt, yt)
    assert len(est.history_) < 50
    # the warning points at the line that called fit, not at the package's insides
    assert [w.filename for w in caught if "diverged" in str(w.message)] == [__file__]
