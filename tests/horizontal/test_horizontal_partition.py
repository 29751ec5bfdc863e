import numpy as np
import pytest

from vfl.horizontal import (
    dirichlet_partition,
    iid_partition,
    partition,
    pathological_partition,
    split_clients,
    unbalanced_partition,
)
from vfl.horizontal.errors import InvalidParameterError, PartitionError

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
