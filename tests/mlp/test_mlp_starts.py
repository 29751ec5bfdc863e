"""Starting weights: scikit-learn's Glorot-uniform shape and bounds, drawn from the CSPRNG and never from numpy."""

import numpy as np
import pytest

import vfl.parties.mlp.starts as starts
from vfl.errors import ConfigurationError
from vfl.parties.mlp import initial_network


def _draw():
    return initial_network([3, 2, 4], [(5,), (), (2, 3)], (6, 2), 3, "relu")


def test_shapes_follow_the_architecture_and_the_bounds_are_scikit_learns():
    net = _draw()
    assert [[w.shape for w, _ in stack] for stack in net.bottoms] == [[(3, 5)], [], [(4, 2), (2, 3)]]
    assert [b.shape for b in net.blocks] == [(5, 6), (2, 6), (3, 6)] and net.bias.shape == (6,)
    assert [w.shape for w, _ in net.top] == [(6, 2), (2, 3)]
    bound = np.sqrt(6.0 / (5 + 2 + 3 + 6))             # the interactive layer's fan-in: every party's outputs
    assert all(np.abs(a).max() <= bound for a in [*net.blocks, net.bias])
    assert np.sqrt(2.0 / (3 + 5)) == starts.glorot_bound(3, 5, "logistic")
    wide = starts.glorot_layer(300, 200, "tanh")[0]
    edge = np.sqrt(6.0 / 500)
    assert np.abs(wide).max() <= edge and np.abs(wide).max() > 0.99 * edge   # uniform over the whole interval
    assert abs(wide.mean()) < 0.01 * edge and abs(wide.std() - edge / np.sqrt(3)) < 0.01 * edge


def test_two_draws_differ_and_numpys_global_generator_is_untouched():
    before = np.random.get_state()
    first, second = _draw(), _draw()
    after = np.random.get_state()
    assert before[0] == after[0] and np.array_equal(before[1], after[1]) and before[2:] == after[2:]
    for a, b in zip(first.parameters(), second.parameters()):
        assert a.shape == b.shape and not np.array_equal(a, b)


def test_the_weights_come_from_the_csprng_and_no_numpy_generator_is_built(monkeypatch):
    """With ``uniform_floats`` giving zeros every weight is ``-bound``; numpy's generators would raise."""
    def refuse(*args, **kwargs):
        raise AssertionError("numpy's generator used for a secret start")

    monkeypatch.setattr(np.random, "default_rng", refuse)
    monkeypatch.setattr(np.random, "RandomState", refuse)
    monkeypatch.setattr(np.random, "uniform", refuse)
    monkeypatch.setattr(starts, "uniform_floats", lambda count: np.zeros(count))
    w, b = starts.glorot_layer(4, 3, "tanh")
    assert (w == -np.sqrt(6.0 / 7)).all() and (b == -np.sqrt(6.0 / 7)).all()


def test_one_bottom_per_party_is_required():
    with pytest.raises(ConfigurationError, match="3 parties' widths for 2 bottom models"):
        initial_network([3, 2, 4], [(), ()], (4,), 1, "relu")
