"""A party's encrypted boosting work on a Dask cluster, through joblib: the same trees as on local workers."""

import joblib
import numpy as np
import pytest
from distributed import get_task_stream

from tree_data import make_tree_data, opted_in
from vfl.ensemble import VerticalGradientBoostingClassifier

pytestmark = pytest.mark.slow    # processes, TLS links, servers or kernels

FAST = dict(key_bits=1024, insecure=True, early_stopping=False, max_iter=2, label_party_trees=0)


def test_dask_cluster_boosts_the_same_trees(dask_client, low_thresholds, spy):
    data, _ = make_tree_data(160, seed=21)
    reference = VerticalGradientBoostingClassifier(**FAST, **opted_in(data)).fit(data)     # a1 is coded: A opts in
    with get_task_stream(dask_client) as stream:
        with joblib.parallel_config(backend="dask"):
            model = VerticalGradientBoostingClassifier(**FAST, **opted_in(data)).fit(data)
            raw = model.decision_function(data)
    assert len(stream.data) > 0
    assert {"_task_encrypt", "_task_bucket_products", "_task_combine", "_task_rerandomize"} <= set(spy)
    assert "_task_decrypt" not in spy                              # the label party's key stays in its process
    for a, b in zip(reference.trees_, model.trees_):
        assert np.array_equal(a.left, b.left) and np.array_equal(a.value, b.value)
    np.testing.assert_array_equal(raw, reference.decision_function(data))
