"""vfl: vertical federated learning with Paillier homomorphic encryption.

Any number of feature parties (Yang et al.'s A) and one label party (B:
features and labels) train one linear or logistic model with a coordinator C
(the key holder), following Yang et al. 2019::

    from vfl import VerticalDataset, VerticalLogisticRegression
    data = VerticalDataset({"bank": bank, "telco": telco}, label="y", id_column="id")
    model = VerticalLogisticRegression(max_iter=30).fit(data)

Gradient-boosted trees (SecureBoost) are :mod:`vfl.ensemble`'s
``VerticalGradientBoostingClassifier`` and ``VerticalGradientBoostingRegressor``.
The credit-scoring pipeline around a model (binning, WOE/IV, selection,
scorecard) is :mod:`vfl.preprocessing`, table statistics across parties
:mod:`vfl.stats`.
Unaligned tables are aligned by private set intersection (:mod:`vfl.psi`);
horizontal FedAvg lives in :mod:`vfl.horizontal`.
"""

from vfl.dataset import VerticalDataset
from vfl.errors import (ConfigurationError, DataError, DivergenceError, FixedPointOverflowError, NotFittedError, PeerError,
                        ProtocolError, VFLError)
from vfl.ensemble import VerticalGradientBoostingClassifier, VerticalGradientBoostingRegressor
from vfl.linear_model import VerticalLinearRegression, VerticalLogisticRegression
from vfl.neural_network import VerticalMLPClassifier, VerticalMLPRegressor

__version__ = "0.1.0"

__all__ = ["ConfigurationError", "DataError", "DivergenceError", "FixedPointOverflowError", "NotFittedError", "PeerError",
           "ProtocolError", "VFLError", "VerticalDataset", "VerticalGradientBoostingClassifier",
           "VerticalGradientBoostingRegressor", "VerticalLinearRegression", "VerticalLogisticRegression",
           "VerticalMLPClassifier", "VerticalMLPRegressor",
           "__version__"]
