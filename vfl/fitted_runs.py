"""What the estimators share to write the record of a fit (``save_run``), for ``vfl board --run PATH``."""

from __future__ import annotations

import numpy as np
import pandas as pd

from vfl.deploy.record import save_fitted
from vfl.deploy.report import class_indices, rows_report
from vfl.errors import ConfigurationError


def save_run(estimator, path, data=None, party=None, family: str = "linear", loss_known_by: str = "label",
             files=None):
    """Write ``estimator``'s fit as party ``party`` saw it (default: the label party), under ``path/runs``.

    Parameters
    ----------
    estimator : fitted vfl estimator
    path : path
        A folder; ``vfl board --run path`` shows the record.
    data : VerticalDataset, optional
        Labelled rows: the label party's record then holds its metrics and curves on them
        (scored by private prediction).
    party : str, optional
        Whose view: its messages only; the party ``loss_known_by`` names (``"label"`` or
        ``"coordinator"``) gets the loss curve, the label party the metrics.
    family : str
    loss_known_by : {"label", "coordinator"}
    files : dict, optional
        ``{name: write(path, party)}``: what the record keeps beside it (a shard).

    Returns
    -------
    pathlib.Path
        The run's folder.
    """
    def result(party, role):
        if data is None or role != "label":
            return {}
        return {"metrics": {"training": report(estimator, data, getattr(estimator, "classes_", None))}}

    return save_view(path, family=family, label=estimator.label_party_, features=estimator.feature_parties_,
                     transcripts=[estimator.transcript_], settings=scalar_settings(estimator.get_params()), party=party,
                     loss_curve=getattr(estimator, "loss_curve_", None), loss_known_by=loss_known_by,
                     result=result, files=files)


def save_view(path, *, family: str, label: str, features, transcripts, settings: dict, party=None,
              loss_curve=None, loss_known_by: str = "label", result=None, files=None):
    """The record of a fit run in threads, as one of its parties saw it (what :func:`save_run` writes).

    ``transcripts``: the fit's transcripts (frames or :class:`~vfl.transport.Transcript`), in
    the order they were made; a party not named ``label`` or in ``features`` that sent or received
    a message is a coordinator. ``result(party, role)``: that party's summary. ``files``: ``{name:
    write(path, party)}``.
    """
    frame = pd.concat([t.to_frame() if hasattr(t, "to_frame") else t for t in transcripts], ignore_index=True)
    parties = {name: "feature" for name in features}
    parties[label] = "label"
    for name in {*frame["sender"], *frame["receiver"]} - set(parties):
        parties[name] = "coordinator"
    party = label if party is None else party
    if party not in parties:
        raise ConfigurationError(f"save_run: no party {party!r} took part in this fit; the parties: "
                                 f"{', '.join(sorted(parties))}")
    role = parties[party]
    spans = [t.span() for t in transcripts if hasattr(t, "span")]
    span = (min(s for s, _ in spans), max(e for _, e in spans)) if spans else None
    return save_fitted(path, family=family, party=party, parties=parties, settings=settings, transcript=frame,
                       span=span,
                       loss_curve=loss_curve if role == loss_known_by else None,
                       result=result(party, role) if result is not None else {},
                       files={name: (lambda target, write=write: write(target, party)) for name, write in
                              (files or {}).items()})


def scalar_settings(params: dict) -> dict:
    """The settings a record keeps: the parameters that are plain numbers, strings, booleans or ``None``."""
    return {k: v for k, v in params.items() if isinstance(v, (str, int, float, bool)) or v is None}


def report(estimator, data, classes) -> dict:
    """The label party's metrics and curves of ``estimator`` on ``data`` (``classes``: ``None`` for a regressor)."""
    labels = data.labels
    if labels is None:
        raise ConfigurationError("save_run: the data has no labels to report metrics of")
    if classes is None:
        return rows_report("linear", np.asarray(estimator.predict(data), dtype=np.float64),
                           np.asarray(labels, dtype=np.float64))
    y = class_indices(labels, classes)
    if y is None:
        raise ConfigurationError("save_run: the data's labels are not classes of the model")
    probability = np.asarray(estimator.predict_proba(data), dtype=np.float64)
    if probability.ndim == 1 or probability.shape[1] == 1:          # two classes: the positive one's
        return rows_report("logistic", probability.reshape(len(y), -1)[:, -1], y, threshold=0.5)
    if probability.shape[1] == 2:
        return rows_report("logistic", probability[:, 1], y, threshold=0.5)
    return rows_report("logistic", np.log(np.clip(probability, 1e-300, None)), y, link="softmax")
