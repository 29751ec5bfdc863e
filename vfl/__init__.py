"""vfl: vertical federated learning with Paillier homomorphic encryption.

Parties A (features) and B (features and labels) train one linear or logistic
model with coordinator C (the key holder), following Yang et al. 2019::

    from vfl import VerticalDataset, VerticalLogisticRegression
    data = VerticalDataset({"A": frame_a, "B": frame_b}, label="y", id_column="id")
    model = VerticalLogisticRegression(max_iter=30).fit(data)

Horizontal FedAvg lives in :mod:`vfl.horizontal`.
"""

from vfl.dataset import VerticalDataset
from vfl.errors import (ConfigurationError, DataError, DivergenceError, FixedPointOverflowError, NotFittedError, PeerError,
                        ProtocolError, VFLError)
from vfl.linear_model import VerticalLinearRegression, VerticalLogisticRegression

__version__ = "0.1.0"

__all__ = ["ConfigurationError", "DataError", "DivergenceError", "FixedPointOverflowError", "NotFittedError", "PeerError",
           "ProtocolError", "VFLError", "VerticalDataset", "VerticalLinearRegression",
           "VerticalLogisticRegression", "__version__"]
