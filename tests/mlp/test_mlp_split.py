"""The identities between the split network and a plain MLP (stated in :mod:`vfl.parties.mlp.split`).

1. Every bottom empty: the split network is the plain MLP whose first layer is ``vstack(W_k)``, in the
   forward pass, the gradients and a whole training run.
2. Bottoms of equal depth: the split network equals the plain MLP whose bottom layers are ``block_diag`` of
   the parties' layers; its gradients are that MLP's on the diagonal blocks, the off-diagonal blocks having
   gradients of their own — so training the split network is training that MLP with those blocks held at 0.
"""

import numpy as np
import pytest
from scipy.linalg import block_diag

from vfl.centralized.mlp import fit_mlp, sklearn_batches
from vfl.parties.mlp import SplitNetwork, loss_and_gradients, make_optimizer, output
from vfl.parties.mlp.losses import targets

WIDTHS = [3, 2, 4]


def _data(seed=0, n_rows=40):
    rng = np.random.default_rng(seed)
    xs = [rng.normal(size=(n_rows, w)) for w in WIDTHS]
    y = (xs[0][:, 0] + xs[2][:, 1] > 0).astype(int)
    return xs, y, rng


def _layer(rng, a, b):
    return rng.normal(scale=0.5, size=(a, b)), rng.normal(scale=0.2, size=b)


def _split(rng, bottom_sizes, hidden=(4,)):
    bottoms = [[_layer(rng, a, b) for a, b in zip([w, *s][:-1], s)] for w, s in zip(WIDTHS, bottom_sizes)]
    outs = [s[-1] if s else w for w, s in zip(WIDTHS, bottom_sizes)]
    top = [_layer(rng, a, b) for a, b in zip([*hidden, 1][:-1], [*hidden, 1][1:])]
    return SplitNetwork(bottoms, [rng.normal(scale=0.5, size=(o, hidden[0])) for o in outs],
                        rng.normal(scale=0.2, size=hidden[0]), top)


def _plain_of(net):
    """The plain MLP (one party, all columns) with block-diagonal bottom layers and ``vstack`` interactive weights."""
    depth = len(net.bottoms[0])
    bottom = [(block_diag(*[stack[i][0] for stack in net.bottoms]), np.concatenate([stack[i][1] for stack in
                                                                                      net.bottoms]))
              for i in range(depth)]
    return SplitNetwork([bottom], [np.vstack(net.blocks)], net.bias, net.top)


def _off_diagonal(net):
    """Per plain bottom layer, a mask of the entries outside the parties' diagonal blocks."""
    masks = []
    for i in range(len(net.bottoms[0])):
        ones = block_diag(*[np.ones_like(stack[i][0]) for stack in net.bottoms])
        masks.append(ones == 0)
    return masks


def test_empty_bottoms_make_the_plain_mlp_on_the_stacked_first_layer():
    xs, y, rng = _data()
    net = _split(rng, [(), (), ()], hidden=(5, 3))
    plain = SplitNetwork([[]], [np.vstack(net.blocks)], net.bias, net.top)
    x = np.hstack(xs)
    np.testing.assert_allclose(output(net, xs, "tanh", "binary"), output(plain, [x], "tanh", "binary"), atol=1e-14)
    split_fit = fit_mlp(xs, y, net, task="binary", activation="tanh", alpha=0.1, batch_size=7, max_iter=3)
    plain_fit = fit_mlp([x], y, plain, task="binary", activation="tanh", alpha=0.1, batch_size=7, max_iter=3)
    np.testing.assert_allclose(np.vstack(split_fit["network"].blocks), plain_fit["network"].blocks[0], atol=1e-12)
    np.testing.assert_allclose(split_fit["loss_curve"], plain_fit["loss_curve"], atol=1e-12)


@pytest.mark.parametrize("bottom_sizes", [[(2,), (3,), (2,)], [(4, 2), (3, 3), (2, 1)]])
def test_equal_depth_bottoms_are_the_block_diagonal_mlp_and_share_its_diagonal_gradients(bottom_sizes):
    xs, y, rng = _data(1)
    target, _ = targets(y, "binary")
    net = _split(rng, bottom_sizes)
    plain, x = _plain_of(net), np.hstack(xs)
    np.testing.assert_allclose(output(net, xs, "relu", "binary"), output(plain, [x], "relu", "binary"), atol=1e-14)
    split_loss, split_grads = loss_and_gradients(net, xs, target, "relu", "binary", 0.2)
    plain_loss, plain_grads = loss_and_gradients(plain, [x], target, "relu", "binary", 0.2)
    assert split_loss == pytest.approx(plain_loss, abs=1e-14)
    expected = _plain_of(split_grads)
    for (gw, gb), (ew, eb), off in zip(plain_grads.bottoms[0], expected.bottoms[0], _off_diagonal(net)):
        np.testing.assert_allclose(np.where(off, 0.0, gw), ew, atol=1e-14)
        np.testing.assert_allclose(gb, eb, atol=1e-14)
        assert np.abs(gw[off]).max() > 1e-3          # the plain MLP would fill the off-diagonal blocks
    np.testing.assert_allclose(plain_grads.blocks[0], np.vstack(split_grads.blocks), atol=1e-14)
    np.testing.assert_allclose(plain_grads.bias, split_grads.bias, atol=1e-14)
    for (gw, gb), (ew, eb) in zip(plain_grads.top, split_grads.top):
        np.testing.assert_allclose(gw, ew, atol=1e-14)
        np.testing.assert_allclose(gb, eb, atol=1e-14)


@pytest.mark.parametrize("solver", ["sgd", "adam"])
def test_training_the_split_network_is_training_the_block_diagonal_mlp_with_its_off_diagonal_held_at_zero(solver):
    xs, y, rng = _data(2)
    target, _ = targets(y, "binary")
    net = _split(rng, [(3,), (2,), (2,)])
    fitted = fit_mlp(xs, y, net, task="binary", activation="logistic", solver=solver, alpha=0.1, batch_size=9,
                     learning_rate_init=0.05, max_iter=2)
    plain, x, masks = _plain_of(net), np.hstack(xs), _off_diagonal(net)
    optimizer = make_optimizer(solver, [a.shape for a in plain.parameters()], learning_rate_init=0.05)
    for _ in range(2):
        for rows in sklearn_batches(len(y), 9):
            _, grads = loss_and_gradients(plain, [x[rows]], target[rows], "logistic", "binary", 0.1)
            grads.bottoms[0] = [(np.where(off, 0.0, gw), gb) for (gw, gb), off in zip(grads.bottoms[0], masks)]
            plain = plain.with_parameters(optimizer.step(plain.parameters(), grads.parameters()))
    expected = _plain_of(fitted["network"])
    for got, want in zip(plain.parameters(), expected.parameters()):
        np.testing.assert_allclose(got, want, atol=1e-12)
