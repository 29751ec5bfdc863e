"""Horizontal federated learning: FedAvg, AFL, personalized and hierarchical federated learning.

FedAvg (McMahan et al. 2017), Agnostic FL (Mohri et al. 2019), two forms of
personalization for non-IID clients, L2GD (Hanzely and Richtárik 2020: one
model per client, pulled toward their mean) and Per-FedAvg (Fallah et al.
2020: a meta-model each client adapts in a gradient step), hierarchical
HierFAVG (Liu et al. 2020: clients -> edge servers -> cloud), and local-only
training as the baseline.

Clients hold different *rows* with the same features (the horizontal setting),
unlike :mod:`vfl`'s vertical protocol where parties hold different *columns*
of the same rows.  Everything runs in one process as a simulation; what would
travel over the network is the flat float64 parameter vector, and its size is
counted in every estimator's ``history_``.

>>> from vfl.horizontal import FedAvg, load_dataset, partition, split_clients
>>> X_train, X_test, y_train, y_test = load_dataset("digits")
>>> clients = split_clients(X_train, y_train, partition(y_train, 10, "iid", seed=0))
>>> est = FedAvg(num_rounds=5, fraction_fit=0.5, batch_size=10, random_state=0).fit(clients, X_test, y_test)
>>> est.history_.shape[0]
5
"""

from ._common import worst_fraction_mean
from .afl import AgnosticFL, project_onto_simplex
from .aggregation import (
    AGGREGATORS,
    aggregate,
    coordinate_median,
    edge_average,
    max_tolerated_faults,
    mix_toward_mean,
    trimmed_mean,
    weighted_average,
)
from .datasets import DATASETS, load_clients, load_dataset
from .errors import (
    EmptyClientError,
    FederatedInputError,
    InvalidParameterError,
    LabelError,
    PartitionError,
    ShapeMismatchError,
)
from .fedavg import FedAvg
from .hierfavg import HierFAVG, assign_edges
from .l2gd import L2GD, mixture_objective
from .local import LocalOnly
from .models import MODELS, LogisticRegressionModel, MLPModel, make_model
from .partition import (
    PARTITIONS,
    dirichlet_partition,
    iid_partition,
    partition,
    pathological_partition,
    split_clients,
    train_test_split_clients,
    unbalanced_partition,
)
from .perfedavg import PerFedAvg, adapt_parameters, meta_gradient

__all__ = [
    "AGGREGATORS", "DATASETS", "MODELS", "PARTITIONS",
    "AgnosticFL", "FedAvg", "HierFAVG", "L2GD", "LocalOnly", "PerFedAvg",
    "LogisticRegressionModel", "MLPModel", "make_model",
    "aggregate", "coordinate_median", "edge_average", "max_tolerated_faults", "mix_toward_mean",
    "trimmed_mean", "weighted_average",
    "project_onto_simplex", "mixture_objective", "meta_gradient", "adapt_parameters", "assign_edges",
    "worst_fraction_mean",
    "partition", "iid_partition", "pathological_partition", "unbalanced_partition",
    "dirichlet_partition", "split_clients", "train_test_split_clients", "load_clients", "load_dataset",
    "FederatedInputError", "EmptyClientError", "ShapeMismatchError", "LabelError",
    "InvalidParameterError", "PartitionError",
]
