import numpy as np
import pytest

from vfl.horizontal import (
    dirichlet_partition,
    iid_partition,
    partition,
    pathological_partition,
    split_clients,
    train_test_split_clients,
    unbalanced_partition,
)
from vfl.horizontal.errors import InvalidParameterError, PartitionError, ShapeMismatchError

Y = np.repeat(np.arange(10), 100)  # 10 labels x 100 rows


def assert_exact_cover(parts, n):
    joined = np.concatenate(parts)
    assert joined.size == n
    np.testing.assert_array_equal(np.sort(joined), np.arange(n))


@pytest.mark.parametrize("method", ["iid", "pathological", "unbalanced", "dirichlet"])
def test_every_partition_is_disjoint_cover_and_reproducible(method):
    a = partition(Y, 10, method, seed=7)
    b = partition(Y, 10, method, seed=7)
    c = partition(Y, 10, method, seed=8)
    assert len(a) == 10
    assert_exact_cover(a, Y.size)
    assert all(p.size > 0 for p in a)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))


def test_iid_sizes_and_label_mix():
    parts = iid_partition(1000, 7, seed=0)
    sizes = [p.size for p in parts]
    assert max(sizes) - min(sizes) <= 1
    assert all(np.unique(Y[p]).size >= 8 for p in parts)


def test_pathological_gives_two_labels_per_client():
    # 20 shards of 50 rows: each shard lies inside one label
    parts = pathological_partition(Y, 10, shards_per_client=2, seed=0)
    assert all(p.size == 100 for p in parts)
    assert all(np.unique(Y[p]).size <= 2 for p in parts)
    assert sum(np.unique(Y[p]).size == 2 for p in parts) >= 5  # shards are dealt at random


def test_unbalanced_sizes():
    equal = unbalanced_partition(1000, 10, sigma=0.0, seed=0)
    assert max(p.size for p in equal) - min(p.size for p in equal) <= 1
    skewed = unbalanced_partition(1000, 10, sigma=1.5, min_size=5, seed=0)
    sizes = np.array([p.size for p in skewed])
    assert sizes.min() >= 5 and sizes.max() > 3 * sizes.min()


def test_dirichlet_alpha_controls_skew():
    def mean_top_share(alpha):
        parts = dirichlet_partition(Y, 10, alpha=alpha, seed=0)
        return np.mean([np.bincount(Y[p], minlength=10).max() / p.size for p in parts])

    assert mean_top_share(0.1) > 0.5 > mean_top_share(100.0)
    parts = dirichlet_partition(Y, 10, alpha=0.3, min_size=20, seed=1)
    assert min(p.size for p in parts) >= 20


def test_split_clients_pairs_rows():
    X = np.arange(20).reshape(10, 2)
    y = np.arange(10)
    clients = split_clients(X, y, iid_partition(10, 3, seed=0))
    for Xk, yk in clients:
        np.testing.assert_array_equal(Xk[:, 0] // 2, yk)


def test_partition_errors():
    with pytest.raises(PartitionError, match="5 clients"):
        iid_partition(4, 5)
    with pytest.raises(PartitionError, match="2 row"):
        pathological_partition(np.arange(10), 6, shards_per_client=2)
    with pytest.raises(InvalidParameterError, match="alpha"):
        dirichlet_partition(Y, 4, alpha=0.0)
    with pytest.raises(PartitionError, match="increase alpha"):
        dirichlet_partition(Y, 50, alpha=0.01, min_size=15, max_tries=5)
    with pytest.raises(InvalidParameterError, match="n_clients"):
        partition(Y, 0)
    with pytest.raises(InvalidParameterError, match="unknown partition"):
        partition(Y, 2, "by_zip_code")


@pytest.mark.parametrize("sigma", [np.nan, np.inf, -np.inf, -0.5, "1.0", None, True])
def test_unbalanced_rejects_non_finite_or_negative_sigma(sigma):
    # NaN used to give NaN shares and sizes like [0, 4, 0, 100] for 100 rows
    with pytest.raises(InvalidParameterError, match="sigma must be a finite number >= 0"):
        unbalanced_partition(100, 4, sigma=sigma, seed=0)
    with pytest.raises(InvalidParameterError, match="sigma"):
        partition(Y, 4, "unbalanced", sigma=sigma, seed=0)


def test_unbalanced_huge_sigma_is_still_an_exact_cover():
    # exp(N(0, 1000)) overflows; the shares are normalised in log space
    parts = unbalanced_partition(1000, 10, sigma=1000.0, min_size=5, seed=0)
    assert_exact_cover(parts, 1000)
    assert min(p.size for p in parts) >= 5


@pytest.mark.parametrize("call, message", [
    (lambda: partition(Y, 10, "pathological", shards_per_client=2.5), "shards_per_client must be an integer >= 1"),
    (lambda: partition(Y, 10, "pathological", shards_per_client="2"), "shards_per_client"),
    (lambda: pathological_partition(Y, 10, shards_per_client=0), "shards_per_client"),
    (lambda: partition(Y, 2.5), "n_clients must be an integer >= 1"),
    (lambda: partition(Y, "3", "pathological"), "n_clients"),
    (lambda: partition(Y, 4, "dirichlet", alpha="x"), "alpha must be a finite number > 0"),
    (lambda: partition(Y, 4, "dirichlet", alpha=np.inf), "alpha"),
    (lambda: partition(Y, 4, "dirichlet", alpha=np.nan), "alpha"),
    (lambda: partition(Y, 4, "dirichlet", min_size=1.5), "min_size must be an integer >= 1"),
    (lambda: partition(Y, 4, "unbalanced", min_size=0), "min_size"),
    (lambda: dirichlet_partition(Y, 4, max_tries=0), "max_tries"),
    (lambda: iid_partition(10.0, 2), "n_samples must be an integer"),
    (lambda: partition(Y, 4, seed="x"), "seed must be None, a non-negative integer"),
    (lambda: partition(Y, 4, "pathological", seed=-3), "seed"),
])
def test_partition_bad_arguments_get_clear_errors(call, message):
    with pytest.raises(InvalidParameterError, match=message):
        call()


def test_partition_accepts_numpy_integers_and_generators():
    parts = partition(Y, np.int64(5), "pathological", shards_per_client=np.int32(2),
                      seed=np.random.default_rng(0))
    assert_exact_cover(parts, Y.size)


def test_train_test_split_clients_keeps_each_clients_label_mix():
    X = np.arange(Y.size, dtype=float)[:, None]
    clients = split_clients(X, Y, dirichlet_partition(Y, 8, alpha=0.3, min_size=10, seed=2))
    train, test = train_test_split_clients(clients, test_size=0.25, seed=0)
    again = train_test_split_clients(clients, test_size=0.25, seed=0)
    for (Xk, yk), (Xa, ya), (Xb, yb), (Xa2, _) in zip(clients, train, test, again[0]):
        # every row once, in train or test; the split is reproducible
        np.testing.assert_array_equal(np.sort(np.concatenate([Xa[:, 0], Xb[:, 0]])), np.sort(Xk[:, 0]))
        np.testing.assert_array_equal(Xa, Xa2)
        np.testing.assert_array_equal(Y[Xa[:, 0].astype(int)], ya)  # rows keep their labels
        for label, count in zip(*np.unique(yk, return_counts=True)):
            held = np.sum(yb == label)
            assert held == min(count - 1, int(np.floor(0.25 * count + 0.5)))  # round(25 %), a training row kept
            assert np.sum(ya == label) >= 1
        assert yb.size >= 1


def test_train_test_split_clients_small_and_bad_clients():
    # two labels with one row each: nothing can be spared per label, one row of the client is held out
    train, test = train_test_split_clients([(np.zeros((2, 1)), np.array([3, 4]))], seed=0)
    assert train[0][1].size == 1 and test[0][1].size == 1
    with pytest.raises(PartitionError, match="client 1 holds 1 row"):
        train_test_split_clients([(np.zeros((3, 1)), np.zeros(3)), (np.zeros((1, 1)), np.zeros(1))])
    with pytest.raises(InvalidParameterError, match=r"test_size must be in \(0, 1\)"):
        train_test_split_clients([(np.zeros((3, 1)), np.zeros(3))], test_size=1.0)
    with pytest.raises(ShapeMismatchError, match="client 0: X has 3 rows but y has 2"):
        train_test_split_clients([(np.zeros((3, 1)), np.zeros(2))])
