"""The same training on the pooled table, one module per family: the references the federated runs equal.

* :mod:`~vfl.centralized.linear` — gradient descent and conjugate gradient on the objective the linear family
  trains (the same options, start and fixed-point rounding).
* :mod:`~vfl.centralized.mlp` — the split network (bottoms, interactive layer, top) with scikit-learn's losses
  and optimizers, from a given start on given batches.
* :mod:`~vfl.centralized.trees` — boosting on the pooled bins, which the federated trees equal split for split.
"""

from vfl.centralized.linear import fit_gradient_descent, random_start
from vfl.centralized.mlp import fit_mlp
from vfl.centralized.trees import PooledModel, fit_boosting, tree_leaves

__all__ = ["PooledModel", "fit_boosting", "fit_mlp", "fit_gradient_descent", "random_start", "tree_leaves"]
