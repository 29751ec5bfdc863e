"""The split network's gradients against central finite differences, for every hidden activation and every loss.

The function differentiated is the batch's penalised loss (the task's loss plus
``0.5 alpha sum ||W||^2 / s``); :func:`vfl.parties.mlp.loss_and_gradients` returns
scikit-learn's gradients of exactly that, so both must agree entry by entry.
"""

import numpy as np
import pytest

from vfl.errors import ConfigurationError
from vfl.parties.mlp import SplitNetwork, loss_and_gradients, split_backward, split_forward
from vfl.parties.mlp.activations import HIDDEN, derivative
from vfl.parties.mlp.losses import OUTPUT_ACTIVATION, loss, output_delta, targets

STEP = 1e-6


def _network(rng, widths, bottom_sizes, hidden, n_out):
    def layer(a, b):
        return rng.normal(scale=0.6, size=(a, b)), rng.normal(scale=0.3, size=b)

    bottoms = [[layer(a, b) for a, b in zip([w, *sizes][:-1], sizes)] for w, sizes in zip(widths, bottom_sizes)]
    outs = [sizes[-1] if sizes else w for w, sizes in zip(widths, bottom_sizes)]
    upper = [*hidden, n_out]
    blocks = [rng.normal(scale=0.6, size=(out, upper[0])) for out in outs]
    top = [layer(a, b) for a, b in zip(upper[:-1], upper[1:])]
    return SplitNetwork(bottoms, blocks, rng.normal(scale=0.3, size=upper[0]), top)


def _problem(task, seed=0, n_rows=11):
    rng = np.random.default_rng(seed)
    xs = [rng.normal(size=(n_rows, 3)), rng.normal(size=(n_rows, 2)), rng.normal(size=(n_rows, 2))]
    labels = {"binary": rng.integers(0, 2, n_rows), "multiclass": rng.integers(0, 3, n_rows),
              "regression": rng.normal(size=n_rows)}[task]
    labels[:3] = np.arange(3) % (2 if task == "binary" else 3) if task != "regression" else labels[:3]
    y, _ = targets(labels, task)
    net = _network(rng, [3, 2, 2], [(4,), (), (3, 2)], (5, 3), y.shape[1])
    return xs, y, net, rng


def _numerical(net, xs, y, activation, task, alpha, weights):
    params = net.parameters()
    grads = []
    for i, p in enumerate(params):
        g = np.zeros_like(p)
        for idx in np.ndindex(p.shape):
            values = []
            for sign in (1, -1):
                moved = [q.copy() for q in params]
                moved[i][idx] += sign * STEP
                values.append(loss_and_gradients(net.with_parameters(moved), xs, y, activation, task, alpha,
                                                 weights)[0])
            g[idx] = (values[0] - values[1]) / (2 * STEP)
        grads.append(g)
    return grads


@pytest.mark.parametrize("task", sorted(OUTPUT_ACTIVATION))
@pytest.mark.parametrize("activation", HIDDEN)
def test_every_gradient_of_the_split_network_matches_finite_differences(activation, task):
    xs, y, net, _ = _problem(task)
    _, grads = loss_and_gradients(net, xs, y, activation, task, alpha=0.3)
    numerical = _numerical(net, xs, y, activation, task, 0.3, None)
    for exact, approx in zip(grads.parameters(), numerical):
        np.testing.assert_allclose(exact, approx, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("task", sorted(OUTPUT_ACTIVATION))
def test_sample_weights_enter_the_loss_and_its_gradients_alike(task):
    xs, y, net, rng = _problem(task, seed=1)
    weights = rng.uniform(0.2, 3.0, size=y.shape[0])
    value, grads = loss_and_gradients(net, xs, y, "tanh", task, 0.1, weights)
    unweighted, _ = loss_and_gradients(net, xs, y, "tanh", task, 0.1)
    assert value != pytest.approx(unweighted)
    for exact, approx in zip(grads.parameters(), _numerical(net, xs, y, "tanh", task, 0.1, weights)):
        np.testing.assert_allclose(exact, approx, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("task", sorted(OUTPUT_ACTIVATION))
def test_the_gradient_sent_back_to_each_party_is_the_loss_gradient_on_its_bottom_output(task):
    """``join_backward``'s ``delta W_k^T``: with empty bottoms ``h_k = x_k``, so it is ``s * dL/dx_k``."""
    xs, y, _, rng = _problem(task, seed=2)
    net = _network(rng, [3, 2, 2], [(), (), ()], (4,), y.shape[1])
    out_activation = OUTPUT_ACTIVATION[task]

    def batch_loss(parts):
        return loss(task, y, split_forward(net, parts, "logistic", out_activation)["top"][-1])

    state = split_forward(net, xs, "logistic", out_activation)
    _, grad_h = split_backward(net, state, output_delta(y, state["top"][-1]), "logistic", out_activation)
    for k, x in enumerate(xs):
        numerical = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            moved = [[p.copy() for p in xs], [p.copy() for p in xs]]
            moved[0][k][idx] += STEP
            moved[1][k][idx] -= STEP
            numerical[idx] = (batch_loss(moved[0]) - batch_loss(moved[1])) / (2 * STEP) * x.shape[0]
        np.testing.assert_allclose(grad_h[k], numerical, rtol=1e-5, atol=1e-7)


def test_softmax_is_an_output_activation_only_and_unknown_names_are_refused():
    a = np.array([[0.2, 0.8]])
    with pytest.raises(ConfigurationError, match="hidden layer's activation"):
        derivative("softmax", a, a)
    with pytest.raises(ConfigurationError, match="task must be one of"):
        targets(np.array([0, 1]), "ranking")
    with pytest.raises(ConfigurationError, match="exactly two classes"):
        targets(np.array([0, 1, 2]), "binary")
