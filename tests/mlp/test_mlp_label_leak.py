"""The label leak of split learning (Li et al., ICLR 2022), and what batch-summed gradients still leak.

The data: 2,000 rows, 10% positives, 10 columns at feature party 0 and 10 at the label party, the label a
noisy threshold of both parties' columns; each party a bottom of 8 ReLU units, an interactive layer of 8
units, one logistic output; scikit-learn's defaults otherwise (Adam, rate 0.001, batch 200, alpha 1e-4);
20 epochs (19 at 200 rows, the last at the batch a test names) from
:func:`vfl.parties.mlp.initial_network` (a fresh CSPRNG start every run, so every bound below holds with a
margin over the starts measured). Every AUC is per batch (rows of one label only
skipped; the direction attack's known row, the batch's first positive, left out of its own AUC) and
averaged over the last epoch's batches, as Li et al. report it.

Measured (medians over CSPRNG starts; docs/mlp.md has the table):

* **Plain split learning**, on the ``grad_h`` feature party 0 receives: norm attack 1.00, direction attack
  1.00 (over 75 starts the norm attack fell below 0.96 once, to 0.56: hence medians over 5 starts here).
  The same attacks on gradients permuted among the batch's rows: about 0.5.
* **Batch sums only** (the party learns its own parameters' gradients summed over the batch, 152 numbers
  for 8 x rows unknowns, and estimates ``delta`` with :func:`vfl.attacks.recover_deltas`): at 8 rows the
  map is injective in 84-92% of the batches and there the recovery is exact (AUC 0.99 / 1.00, as plain
  split learning); at 16, 32, 64 rows 0.99 / 1.00, 0.98 / 0.98, 0.91 / 0.93; at 200 rows the estimate
  still leaks: norm 0.69 (0.39-0.78 over 50 starts), direction 0.77 (0.52-0.88), against about 0.5 for
  the estimate from permuted rows' deltas. Batch sums in the clear do not close the leak.
"""

import copy

import numpy as np
import pytest

from vfl.attacks import (attack_auc, direction_attack, gradient_map, injective_batch_limit, norm_attack,
                         party_gradients, recover_deltas)
from vfl.centralized.mlp import fit_mlp, sklearn_batches
from vfl.errors import ConfigurationError
from vfl.parties.mlp import SplitNetwork, initial_network, make_optimizer, split_backward, split_forward
from vfl.parties.mlp.activations import derivative
from vfl.parties.mlp.layers import backward
from vfl.parties.mlp.losses import output_delta, targets
from vfl.parties.mlp.split import stack_activations
from vfl.parties.mlp.step import scale

WIDTHS = [10, 10]
UNITS = 8
ALPHA = 0.0001
EPOCHS = 20
STARTS = 5


def imbalanced(seed=0, n_rows=2000, positives=0.1):
    """Both parties' columns and labels: a noisy threshold of every column, ``positives`` of the rows 1."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_rows, sum(WIDTHS)))
    score = 2.0 * x @ rng.normal(size=x.shape[1]) / np.sqrt(x.shape[1]) + 0.5 * rng.logistic(size=n_rows)
    y = (score > np.quantile(score, 1 - positives)).astype(int)
    return np.split(x, np.cumsum(WIDTHS)[:-1], axis=1), y


def adam(net):
    """scikit-learn's default optimizer for ``net``'s arrays."""
    return make_optimizer("adam", [a.shape for a in net.parameters()], learning_rate_init=0.001, momentum=0.9,
                          nesterovs_momentum=True, beta_1=0.9, beta_2=0.999, epsilon=1e-8)


def interactive_delta(net, state, delta_out, activation):
    """The gradient on the interactive layer's pre-activation ``z`` (what :func:`split_backward` computes inside)."""
    upper, _ = stack_activations(net, activation, "logistic")
    _, grad_a = backward(net.top, state["top"], delta_out, upper[1:])
    return derivative(upper[0], state["top"][0], grad_a)


def flat_party(grads: SplitNetwork, party: int) -> np.ndarray:
    """A party's raw gradients from :func:`split_backward`: its bottom's ``dW``, ``db`` per layer, then ``dW_k``."""
    return np.concatenate([a.ravel() for layer in grads.bottoms[party] for a in layer] + [grads.blocks[party].ravel()])


def epoch(net, optimizer, xs, target, batch_size, activation="relu"):
    """One epoch of plain split learning; per batch, what feature party 0 learns and what it would need.

    Returns the network after the epoch and, per batch: its rows, ``grad_h`` (party 0's per-row
    gradient, that of the batch's mean loss: what plain split learning sends), the network and party 0's
    activations at that step, the true ``delta`` on ``z`` and party 0's raw batch-summed gradients.
    """
    seen = []
    for rows in sklearn_batches(len(target), batch_size):
        state = split_forward(net, [x[rows] for x in xs], activation, "logistic")
        delta_out = output_delta(target[rows], state["top"][-1])
        raw, grad_h = split_backward(net, state, delta_out, activation, "logistic")
        seen.append({"rows": rows, "grad_h": grad_h[0] / len(rows), "net": net, "acts": state["bottoms"][0],
                     "delta": interactive_delta(net, state, delta_out, activation), "sums": flat_party(raw, 0)})
        net = net.with_parameters(optimizer.step(net.parameters(), scale(raw, net, ALPHA, len(rows)).parameters()))
    return net, seen


def train(xs, y):
    """Plain split learning at the defaults for all but the last epoch, from a fresh CSPRNG start."""
    target, _ = targets(y, "binary")
    start = initial_network(WIDTHS, [(UNITS,), (UNITS,)], (UNITS,), 1, "relu")
    net, optimizer = start, adam(start)
    for _ in range(EPOCHS - 1):
        net, _ = epoch(net, optimizer, xs, target, 200)
    return {"xs": xs, "y": y, "target": target, "start": start, "net": net, "optimizer": optimizer}


@pytest.fixture(scope="module")
def runs():
    """Five trainings on the same data from five CSPRNG starts (figures are medians over them)."""
    xs, y = imbalanced()
    return [train(xs, y) for _ in range(STARTS)]


def last_epoch(run, batch_size, n_rows=None):
    """The last epoch, with batches of ``batch_size`` rows, from the trained network and optimizer.

    With ``n_rows``, over the first ``n_rows`` rows only (a shorter epoch, for the costlier measurements).
    """
    rows = slice(n_rows)
    return epoch(run["net"], copy.deepcopy(run["optimizer"]), [x[rows] for x in run["xs"]], run["target"][rows],
                 batch_size)[1]


def estimates(entry, delta=None):
    """Party 0's per-row gradient on ``h`` rebuilt from its batch sums alone (:func:`recover_deltas`).

    With ``delta``, from the sums that ``delta`` would have given instead of the batch's own.
    """
    net, rows = entry["net"], len(entry["rows"])
    sums = entry["sums"] if delta is None else jacobian(entry) @ delta.ravel()
    return recover_deltas(jacobian(entry), sums, rows, UNITS) @ net.blocks[0].T / rows


def jacobian(entry):
    """Party 0's gradient map for the batch (kept in ``entry``: it is asked for more than once)."""
    if "jacobian" not in entry:
        net = entry["net"]
        entry["jacobian"] = gradient_map(net.bottoms[0], entry["acts"], net.blocks[0], "relu")
    return entry["jacobian"]


def batch_aucs(seen, y, per_row):
    """The norm and direction attacks' AUCs, per batch, averaged (the known row: the batch's first positive)."""
    norm, direction = [], []
    for entry in seen:
        labels = y[entry["rows"]]
        if labels.min() == labels.max():
            continue
        grads = per_row(entry)
        norm.append(attack_auc(norm_attack(grads), labels))
        if labels.sum() >= 2:
            known = np.flatnonzero(labels)[0]
            others = np.arange(len(labels)) != known
            direction.append(attack_auc(direction_attack(grads, known)[others], labels[others]))
    return float(np.mean(norm)), float(np.mean(direction))


def permuted(grads):
    """Another row's gradient for every row (a fixed permutation): the same gradients, unlinked from labels."""
    return grads[np.random.default_rng(len(grads)).permutation(len(grads))]


def test_the_training_loop_is_fit_mlp(runs):
    """The loop the attacks watch trains exactly what :func:`fit_mlp` trains (same start, batches, optimizer)."""
    run = runs[0]
    fitted = fit_mlp(run["xs"], run["y"], run["start"], task="binary", activation="relu", alpha=ALPHA,
                     max_iter=EPOCHS - 1)["network"]
    for ours, theirs in zip(run["net"].parameters(), fitted.parameters()):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)


def median_aucs(epochs, y, per_row):
    """Per start, the attacks' AUCs over its last epoch (:func:`batch_aucs`); their medians over the starts."""
    return tuple(float(a) for a in np.median([batch_aucs(seen, y, per_row) for seen in epochs], axis=0))


def test_plain_split_learning_leaks_the_labels(runs):
    """Li et al.'s attacks on ``grad_h``: AUC >= 0.9 (medians over 5 starts; measured 0.99-1.00, 1.00).

    The same attacks on gradients permuted among the batch's rows fall to chance: the gradients carry it.
    """
    epochs, y = [last_epoch(run, 200) for run in runs], runs[0]["y"]
    norm, direction = median_aucs(epochs, y, lambda entry: entry["grad_h"])
    assert norm >= 0.9 and direction >= 0.9, (norm, direction)
    shuffled = median_aucs(epochs, y, lambda entry: permuted(entry["grad_h"]))
    assert max(abs(a - 0.5) for a in shuffled) < 0.15, shuffled


@pytest.mark.parametrize("activation", ["relu", "tanh", "logistic", "identity"])
@pytest.mark.parametrize("bottoms", [[(), (3,)], [(5,), (4,)], [(6, 4), ()]])
@pytest.mark.parametrize("party", [0, 1])
def test_gradient_map_equals_split_backward(activation, bottoms, party):
    """``J @ vec(delta)`` is the party's raw gradients as :func:`split_backward` computes them, to 1e-12."""
    rng = np.random.default_rng(7)
    xs = [rng.normal(size=(9, 4)), rng.normal(size=(9, 3))]
    y = (rng.random(9) < 0.4).astype(float).reshape(-1, 1)
    net = initial_network([4, 3], bottoms, (5, 3), 1, activation)
    state = split_forward(net, xs, activation, "logistic")
    delta_out = output_delta(y, state["top"][-1])
    raw, _ = split_backward(net, state, delta_out, activation, "logistic")
    delta = interactive_delta(net, state, delta_out, activation)
    jacobian = gradient_map(net.bottoms[party], state["bottoms"][party], net.blocks[party], activation)
    expected = flat_party(raw, party)
    assert jacobian.shape == (expected.size, delta.size)
    np.testing.assert_allclose(jacobian @ delta.ravel(), expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(party_gradients(net.bottoms[party], state["bottoms"][party], net.blocks[party],
                                               activation, delta), expected, rtol=0, atol=1e-12)


def test_small_batches_give_every_row_back_exactly(runs):
    """At 8 rows (64 unknowns, 152 sums) the map is injective in most batches; there the recovery is exact.

    So the batch sums tell the party what plain split learning tells it: the same scores, the same AUCs
    (measured over 6 starts: injective in 84-92% of the batches with ReLU, once 47%; AUCs 0.98-1.00). Each start's
    last epoch runs over the first 480 rows (60 batches); the AUCs are medians over the starts.
    """
    y, aucs = runs[0]["y"], []
    for run in runs:
        full = []
        seen = last_epoch(run, 8, 480)
        for entry in seen:
            rows = len(entry["rows"])
            if np.linalg.matrix_rank(jacobian(entry)) == rows * UNITS:
                recovered = recover_deltas(jacobian(entry), entry["sums"], rows, UNITS)
                np.testing.assert_allclose(recovered, entry["delta"], rtol=0,
                                           atol=1e-9 * np.abs(entry["delta"]).max())
                full.append(entry)
        # a start with many dead ReLU units makes fewer maps injective (28 of 60 batches seen once)
        assert len(full) >= 0.25 * len(seen), (len(full), len(seen))
        aucs.append(batch_aucs(full, y, estimates))
        # the same up to rows whose gradient is next to zero (their cosine's sign is rounding): seen 0.875 / 0.9375
        assert aucs[-1] == pytest.approx(batch_aucs(full, y, lambda entry: entry["grad_h"]), abs=0.1)
    assert min(np.median(aucs, axis=0)) >= 0.9, aucs


def test_batches_of_200_still_leak_through_the_sums(runs):
    """At 200 rows (1,600 unknowns, 152 sums) the estimate is a projection, and it still leaks.

    Medians over 5 starts; measured per start over 50 starts: norm attack 0.39-0.78 (median 0.69; below
    0.5 in 2 of 30), direction attack 0.52-0.88 (median 0.77; below 0.6 in 1 of 30), against 0.96-1.00 on
    plain split learning's ``grad_h``; on the estimates the sums of permuted rows' deltas would give:
    0.45-0.58.
    """
    epochs, y = [last_epoch(run, 200) for run in runs], runs[0]["y"]
    norm, direction = median_aucs(epochs, y, estimates)
    assert 0.5 < norm < 0.85 and 0.6 < direction < 0.92, (norm, direction)
    unlinked = median_aucs(epochs, y, lambda entry: estimates(entry, permuted(entry["delta"])))
    assert max(abs(a - 0.5) for a in unlinked) < 0.1, unlinked


def test_injective_batch_limit():
    """``rows * units <= param_count``: the largest batch whose gradient map can be injective."""
    assert injective_batch_limit(152, 8) == 19
    assert injective_batch_limit(151, 8) == 18
    assert injective_batch_limit(7, 8) == 0
    with pytest.raises(ConfigurationError, match="positive"):
        injective_batch_limit(0, 8)


@pytest.mark.parametrize("activation", ["tanh", "logistic"])
@pytest.mark.parametrize("bottom", [(8,), (10,), (6, 8)])
def test_the_limit_is_where_injectivity_ends(activation, bottom):
    """At the limit the map has full column rank and the recovery is exact; one row more, neither.

    (Smooth activations, a last bottom layer at least as wide as the interactive layer: the limit is reached.)
    """
    rng = np.random.default_rng(3)
    net = initial_network([6, 5], [bottom, (4,)], (UNITS,), 1, activation)
    limit = injective_batch_limit(flat_party(net, 0).size, UNITS)
    for rows, injective in ((limit, True), (limit + 1, False)):
        acts = split_forward(net, [rng.normal(size=(rows, 6)), rng.normal(size=(rows, 5))], activation,
                             "logistic")["bottoms"][0]
        jacobian = gradient_map(net.bottoms[0], acts, net.blocks[0], activation)
        assert bool(np.linalg.matrix_rank(jacobian) == rows * UNITS) is injective
        delta = rng.normal(size=(rows, UNITS))
        recovered = recover_deltas(jacobian, jacobian @ delta.ravel(), rows, UNITS)
        assert np.allclose(recovered, delta, atol=1e-8) is injective


@pytest.mark.parametrize("bottom", [(4,), (8,)])
def test_relu_bottoms_lose_one_rank_per_unit(bottom):
    """ReLU is positively homogeneous: at least one linear relation among a party's gradients per ReLU bottom unit."""
    rng = np.random.default_rng(5)
    for activation, relations in (("tanh", 0), ("relu", sum(bottom))):
        net = initial_network([6, 5], [bottom, ()], (4,), 1, activation)
        acts = split_forward(net, [rng.normal(size=(60, 6)), rng.normal(size=(60, 5))], activation,
                             "logistic")["bottoms"][0]
        jacobian = gradient_map(net.bottoms[0], acts, net.blocks[0], activation)
        assert jacobian.shape[1] > jacobian.shape[0]
        rank, size = np.linalg.matrix_rank(jacobian), flat_party(net, 0).size
        if activation == "tanh":
            assert rank == size
        else:   # at least one relation per unit; dead or nearly dead units lose more (76 of 80 seen; 2% of starts)
            assert rank <= size - relations


def test_direction_attack_signs_and_the_auc_orientation():
    """A positive cosine: the known row's label; ``either_orientation`` flips a reversed score, the default never."""
    base = np.array([1.0, -2.0, 0.5])
    grad_h = np.array([-3 * base, 0.1 * base, 0.2 * base, -0.5 * base + [0, 0, 1e-3], np.zeros(3)])
    scores = direction_attack(grad_h, 0)
    np.testing.assert_allclose(scores[:3], [1, -1, -1])
    assert scores[3] > 0.99 and scores[4] == 0
    labels = np.array([1, 0, 0, 1, 0])
    assert attack_auc(scores, labels) == 1.0
    assert attack_auc(-scores, labels) == 0.0
    assert attack_auc(-scores, labels, either_orientation=True) == 1.0
    np.testing.assert_allclose(norm_attack(grad_h), np.linalg.norm(grad_h, axis=1))


def test_recover_deltas_checks_the_shape():
    with pytest.raises(ConfigurationError, match="3 columns for 2 rows of 2 units"):
        recover_deltas(np.ones((5, 3)), np.ones(5), 2, 2)
