"""What the label party rebuilds from a split network's forward pass, and the release check that stops it.

The label party receives, per row, the sum of the feature parties' parts ``h_k W_k`` of the interactive
layer (each masked by the coordinator; the masks cancel in the sum), at every training batch and every
prediction.  With one feature party that sum is its part.  The attacks here run on what B really received
(the ``part`` messages of the transcript, decoded and summed), knowing a few of the feature parties' rows;
docs/mlp.md quotes the figures.
"""

import numpy as np
import pandas as pd
import pytest

import vfl.neural_network as network
from vfl import ConfigurationError, VerticalDataset, VerticalMLPClassifier
from vfl.crypto import ring
from vfl.protocols.release import linear_attack, local_linear_attack, neighbour_attack
from vfl.transport import Transcript

FAST = dict(hidden_layer_sizes=(12,), max_iter=3, batch_size=200, verbose=False)


def federation(columns: dict, seed: int = 0, n: int = 400):
    """Feature parties with ``columns`` (name: array), B two normal columns and the label."""
    rng = np.random.default_rng(seed)
    x_b = rng.normal(size=(n, 2))
    signal = x_b[:, 0] + sum(x[:, 0] for x in columns.values())
    frames = {name: pd.DataFrame(x).add_prefix(name.lower()) for name, x in columns.items()}
    frames["B"] = pd.DataFrame(x_b).add_prefix("b").assign(y=(signal > 0).astype(int))
    return VerticalDataset(frames, label="y")


def received_at_prediction(model, data, frac_bits=40):
    """The sum of the feature parties' parts B received when predicting ``data`` (masks cancel), per row."""
    transcript, run_threads = Transcript(keep_payloads=True), network.run_in_threads
    network.run_in_threads = lambda roster, programs, _=None, **kw: run_threads(roster, programs, transcript, **kw)
    try:
        model.predict_proba(data)
    finally:
        network.run_in_threads = run_threads
    total = None
    for _, to, message in transcript.messages():
        if to == "B" and message.name == "part":
            values = ring.from_bytes(message["values"], (message["rows"], model.hidden_layer_sizes[0]))
            total = values if total is None else ring.reduce(total + values)
    return ring.decode(ring.reduce(total), model.frac_bits)


def test_a_linear_bottom_gives_a_feature_party_s_rows_away_and_is_refused():
    """bottom_sizes=() (the old default): A's part is x_A W_A; from 4 known rows B rebuilds every row exactly."""
    rng = np.random.default_rng(1)
    x_a = rng.normal(size=(400, 3))
    data = federation({"A": x_a})
    with pytest.raises(ConfigurationError, match=r"party A: releasing its part of the interactive layer at training "
                                                 r"\(epoch 1.*known-row linear regression.*allow_reconstruction=\['A'\]"):
        VerticalMLPClassifier(bottom_sizes=(), **FAST).fit(data)
    with pytest.warns(Warning):
        model = VerticalMLPClassifier(bottom_sizes=(), allow_reconstruction=["A"], **FAST).fit(data)
    seen = received_at_prediction(model, data)
    estimate = linear_attack(seen[:4], x_a[:4], seen)
    assert np.abs(estimate - x_a).max() < 1e-6                          # every row, to the fixed point


def test_two_feature_parties_masks_cancel_and_both_parties_rows_come_back():
    """Two feature parties with linear bottoms: B's sum is x_A W_A + x_A2 W_A2; from 7 known rows, both parties'."""
    rng = np.random.default_rng(2)
    x_a, x_c = rng.normal(size=(400, 3)), rng.normal(size=(400, 3))
    data = federation({"A": x_a, "A2": x_c})
    with pytest.warns(Warning):
        model = VerticalMLPClassifier(bottom_sizes=(), allow_reconstruction=["A", "A2"], **FAST).fit(data)
    seen = received_at_prediction(model, data)
    both = np.hstack([x_a, x_c])
    estimate = linear_attack(seen[:7], both[:7], seen)
    assert np.abs(estimate - both).max() < 1e-6
    with pytest.raises(ConfigurationError, match=r"party A2?: releasing its part"):      # each checks its own part
        VerticalMLPClassifier(bottom_sizes=(), **FAST).fit(data)


def test_the_default_bottom_passes_on_continuous_columns_and_the_attacks_get_nothing():
    """The default: A's 10 continuous columns through 5 ReLU units; B's attacks from 200 known rows rebuild
    about what a constant guess does (within 0.01 sd)."""
    rng = np.random.default_rng(3)
    x_a = rng.normal(size=(400, 10))
    data = federation({"A": x_a})
    with pytest.warns(Warning):
        model = VerticalMLPClassifier(**FAST).fit(data)
    assert [w.shape[1] for w, _ in model._parties["A"].bottom] == [5]
    seen = received_at_prediction(model, data)
    for attack in (linear_attack, neighbour_attack, local_linear_attack):
        estimate = attack(seen[:200], x_a[:200], seen[200:])
        assert np.mean(np.abs(estimate - x_a[200:]) < 0.01) < 0.03, attack.__name__


def test_discrete_columns_decode_through_any_bottom_and_are_refused():
    """Six 0/1 columns: 64 patterns, each a distinct part whatever the bottom; B decodes every row."""
    rng = np.random.default_rng(4)
    bits = rng.integers(0, 2, size=(400, 6)).astype(float)
    data = federation({"A": bits})
    with pytest.raises(ConfigurationError, match=r"party A: releasing its part .* rebuild column .* of rows"):
        VerticalMLPClassifier(**FAST).fit(data)
    with pytest.warns(Warning):          # a bottom as wide as the columns: no two patterns share a part
        model = VerticalMLPClassifier(bottom_sizes=(8,), allow_reconstruction=["A"], **FAST).fit(data)
    seen = received_at_prediction(model, data)
    _, first = np.unique(bits, axis=0, return_index=True)
    estimate = neighbour_attack(seen[first], bits[first], seen)
    assert np.all(estimate == bits, axis=1).mean() >= 0.95


def test_release_noise_is_drawn_once_per_row_and_version_and_hides_the_bits():
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2, size=(400, 6)).astype(float)
    data = federation({"A": bits})
    with pytest.warns(Warning):
        model = VerticalMLPClassifier(release_epsilon=2.0, release_clip=2.0, **FAST).fit(data)
    first, again = received_at_prediction(model, data), received_at_prediction(model, data)
    np.testing.assert_allclose(first, again, atol=1e-9)           # asking again averages nothing away
    estimate = neighbour_attack(first[:200], bits[:200], first[200:])
    assert np.all(estimate == bits[200:], axis=1).mean() < 0.2         # exact without noise; about chance here


def test_bad_input_to_a_network_gets_the_families_messages():
    """A value beyond the fixed point is a range error naming its cell (not divergence); too large a validation
    share is named as such (not as the batch rule); layers that cannot fit in memory are refused before training."""
    from vfl import DataError, FixedPointOverflowError

    rng = np.random.default_rng(6)
    x = rng.normal(size=(100, 3))
    x[7, 1] = 1e300
    with pytest.raises(FixedPointOverflowError, match=r"party A, column 'a1': value 1e\+300 at row 7"):
        VerticalMLPClassifier(standardize=False, max_iter=1, verbose=False).fit(federation({"A": x}, n=100))
    data = federation({"A": rng.normal(size=(100, 3))}, n=100)
    with pytest.raises(DataError, match=r"validation_fraction=0.95 holds 95 of the 100 rows out"):
        VerticalMLPClassifier(hidden_layer_sizes=(2,), early_stopping=True, validation_fraction=0.95, max_iter=1,
                              verbose=False, allow_reconstruction=["A"]).fit(data)
    with pytest.raises(ConfigurationError, match=r"would need about .* GiB \(widest: 1,000,000 units"):
        VerticalMLPClassifier(hidden_layer_sizes=(10**6,), max_iter=1, verbose=False).fit(data)
