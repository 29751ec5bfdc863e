"""What every estimator's ``fit`` does around its own algorithm: the start, the rounds, the history.

Each estimator of :mod:`vfl.horizontal` writes only its round (who takes part,
the local work, the aggregation) and the row it records; the frame around it
is here, once:

- :func:`start` checks one ``fit``'s inputs in the order every estimator
  checks them (``random_state``, the clients and the model, the pooled test
  set, the per-client test sets) and returns them as a :class:`Setup`;
- :class:`Rounds` is the loop over ``1 .. num_rounds`` with its progress bar,
  and the ``history_`` it records, with the running ``bytes_total`` of what
  was sent;
- :func:`warn_diverged` is the warning with which a fit stops when its
  parameters become non-finite.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from ._checks import check_random_state
from ._common import BYTES_PER_FLOAT, RoundMetrics, encode_client_tests, encode_test, prepare


@dataclass
class Setup:
    """The checked inputs of one ``fit``, from which its rounds start.

    Attributes
    ----------
    rng : numpy.random.Generator
        From the estimator's ``random_state``; it drew ``w`` and draws
        everything after.
    classes : ndarray of shape (n_classes,)
    data : list of (ndarray, ndarray)
        The clients, labels as class indices.
    model : LogisticRegressionModel or MLPModel
    w : ndarray of shape (model.n_params,)
        The starting vector.
    metrics : RoundMetrics
        The metrics of a ``history_`` row, on the test sets given to ``fit``.
    """

    rng: np.random.Generator
    classes: np.ndarray
    data: list
    model: object
    w: np.ndarray
    metrics: RoundMetrics

    def fitted(self, estimator) -> None:
        """Set ``classes_``, ``model_``, ``n_features_in_`` and ``n_clients_`` of ``estimator``."""
        estimator.classes_, estimator.model_ = self.classes, self.model
        estimator.n_features_in_, estimator.n_clients_ = self.model.n_features, self.n_clients

    @property
    def n_clients(self) -> int:
        """K, the number of clients."""
        return len(self.data)

    @property
    def vector_bytes(self) -> int:
        """Bytes of one parameter vector on the wire (float64)."""
        return self.model.n_params * BYTES_PER_FLOAT


def start(estimator, clients, X_test, y_test, client_tests, classes, *, check=None,
          score_test: bool = True) -> Setup:
    """Check the inputs of ``estimator.fit`` and build the model, its starting vector and the metrics.

    Parameters
    ----------
    estimator : FederatedClassifierMixin
        Its ``random_state``, ``model``, ``hidden_layer_sizes``, ``l2`` and
        ``initial_parameters`` are used (its other hyperparameters are its
        own to check, before this).
    clients, X_test, y_test, client_tests, classes
        As given to ``fit``.
    check : callable, optional
        Called with the number of clients once the clients are checked and
        before the test sets are, for an estimator's own check of the two
        together (HierFAVG's edges, FedAvg's target that needs a test set).
    score_test : bool, default=True
        Whether the metrics score the pooled test set; it is checked either
        way (LocalOnly has no global model to score it with).

    Returns
    -------
    Setup

    Raises
    ------
    FederatedInputError
        Bad ``random_state``, model options, clients or test sets (a subclass
        says which; the first one found), or what ``check`` raises.
    """
    rng = check_random_state(estimator.random_state)
    classes, data, model, w = prepare(clients, classes, estimator.model, estimator.hidden_layer_sizes,
                                      estimator.l2, estimator.initial_parameters, rng)
    if check is not None:
        check(len(data))
    X_test, y_test = encode_test(X_test, y_test, classes, model.n_features)
    if not score_test:
        X_test = y_test = None
    tests = encode_client_tests(client_tests, classes, model.n_features, len(data))
    return Setup(rng, classes, data, model, w, RoundMetrics(model, data, X_test, y_test, tests))


class Rounds:
    """Rounds ``1 .. estimator.num_rounds`` with a progress bar, and the ``history_`` rows recorded in them.

    Iterate over it for the round numbers; :meth:`record` each round's row;
    :meth:`history` is the ``history_`` frame.

    Parameters
    ----------
    estimator : FederatedClassifierMixin
        Its ``num_rounds`` and ``progress`` are used.
    desc : str
        The progress bar's label.
    unit : str, default="round"
    """

    def __init__(self, estimator, desc: str, unit: str = "round"):
        self.bar = tqdm(range(1, estimator.num_rounds + 1), desc=desc, unit=unit, disable=not estimator.progress)
        self.rows: list[dict] = []
        self.total = 0

    def __iter__(self):
        return iter(self.bar)

    def record(self, row: dict, show: dict, **sent) -> None:
        """Record one round: ``row``, then the bytes ``sent`` on each kind of link and the running ``bytes_total``.

        Parameters
        ----------
        row : dict
            The round's columns, in their order in ``history_``.
        show : dict
            What the progress bar shows after this round.
        **sent : int
            Bytes sent in this round, one column each (``bytes_down=...``,
            ``bytes_up=...``); ``bytes_total`` adds them up over the rounds.
        """
        self.total += sum(sent.values())
        self.rows.append({**row, **sent, "bytes_total": self.total})
        self.bar.set_postfix(**show)

    def history(self) -> pd.DataFrame:
        """The rows recorded so far, one per round."""
        return pd.DataFrame(self.rows)


def warn_diverged(what: str, t: int, kept: str | None, lower: str, *, unit: str = "round") -> None:
    """Warn that ``what``'s parameters became non-finite in round ``t`` and that the fit stops.

    Parameters
    ----------
    what : str
        The algorithm, as the message names it.
    t : int
        The round.
    kept : str or None
        What the fit returns: round ``t - 1``'s ``kept`` (``"model"``,
        ``"models"``), or None to say only that it stops.
    lower : str
        The step sizes to lower, with their values.
    unit : str, default="round"

    Warns
    -----
    RuntimeWarning
        Attributed to the caller of ``fit``, which calls this.
    """
    stopping = "stopping" if kept is None else f"stopping with round {t - 1}'s {kept}"
    warnings.warn(f"{what} diverged: parameters became non-finite in {unit} {t}; {stopping}. Lower {lower}.",
                  RuntimeWarning, stacklevel=3)
