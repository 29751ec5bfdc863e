"""Binary logistic regression with a ridge term, written out in numpy for the tests.

Independent of :mod:`vfl.horizontal.models`: the tests compare the federated
estimators with gradient descent and with the minimisers of the papers'
objectives computed from these functions.  Parameters are laid out as the
binary model lays them out (the coefficients, then the intercept); the ridge
term ``l2 / 2 * ||coef||^2`` leaves the intercept alone.
"""

import numpy as np
from scipy.optimize import minimize


def loss(theta, X, y, l2):
    z = X @ theta[:-1] + theta[-1]
    return float(np.mean(np.logaddexp(0.0, z) - y * z) + 0.5 * l2 * theta[:-1] @ theta[:-1])


def grad(theta, X, y, l2):
    z = X @ theta[:-1] + theta[-1]
    r = (1.0 / (1.0 + np.exp(-z)) - y) / len(y)
    return np.append(X.T @ r + l2 * theta[:-1], r.sum())


def hessian(theta, X, y, l2):
    z = X @ theta[:-1] + theta[-1]
    s = 1.0 / (1.0 + np.exp(-z))
    X1 = np.hstack([X, np.ones((len(y), 1))])
    H = X1.T @ (X1 * (s * (1 - s))[:, None]) / len(y)
    H[:-1, :-1] += l2 * np.eye(X.shape[1])
    return H


def make_clients(sizes, d=3, seed=0):
    """Clients whose features and labelling rules differ (non-IID), labels in {0, 1}."""
    rng = np.random.default_rng(seed)
    clients = []
    for k, n in enumerate(sizes):
        X = rng.normal(size=(n, d)) + 0.5 * k
        rule = rng.normal(size=d)
        y = (X @ rule - rule @ np.full(d, 0.5 * k) + 0.5 * rng.normal(size=n) > 0).astype(int)
        clients.append((X, y))
    return clients


def argmin(value_and_grad, x0):
    """A tight L-BFGS minimiser (gradient norm about 1e-10)."""
    result = minimize(value_and_grad, x0, jac=True, method="L-BFGS-B",
                      options={"gtol": 1e-11, "ftol": 1e-16, "maxiter": 20_000, "maxcor": 30})
    assert np.abs(result.jac).max() < 1e-8, result
    return result.x


def local_optima(clients, l2):
    """Each client's own minimiser of its loss (local-only training)."""
    d = clients[0][0].shape[1] + 1
    return np.array([argmin(lambda t, X=X, y=y: (loss(t, X, y, l2), grad(t, X, y, l2)), np.zeros(d))
                     for X, y in clients])


def consensus_optimum(clients, l2):
    """The minimiser of the plain mean of the clients' losses (FedAvg's problem, equal weights)."""
    d = clients[0][0].shape[1] + 1
    K = len(clients)

    def fun(theta):
        return (sum(loss(theta, X, y, l2) for X, y in clients) / K,
                sum(grad(theta, X, y, l2) for X, y in clients) / K)

    return argmin(fun, np.zeros(d))
