"""What the estimators share to write the record of a fit (``save_run``), for ``vfl board --run PATH``."""

from __future__ import annotations

import numpy as np

from vfl.deploy.record import save_fitted
from vfl.deploy.report import class_indices, rows_report
from vfl.errors import ConfigurationError


def save_run(estimator, path, data=None, party=None, family: str = "linear", loss_known_by: str = "label",
             files=None):
    """Write ``estimator``'s fit as party ``party`` (default: the label party) saw it, under ``path/runs``.

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
    label, features = estimator.label_party_, list(estimator.feature_parties_)
    parties = {name: "feature" for name in features}
    parties[label] = "label"
    frame = estimator.transcript_.to_frame() if hasattr(estimator.transcript_, "to_frame") else estimator.transcript_
    for name in {*frame["sender"], *frame["receiver"]} - set(parties):
        parties[name] = "coordinator"
    party = label if party is None else party
    if party not in parties:
        raise ConfigurationError(f"save_run: no party {party!r} took part in this fit; the parties: "
                                 f"{', '.join(sorted(parties))}")
    role = parties[party]
    result = {}
    if data is not None and role == "label":
        result["metrics"] = {"training": _report(estimator, data)}
    knows_loss = role == loss_known_by
    settings = {k: v for k, v in estimator.get_params().items()
                if isinstance(v, (str, int, float, bool)) or v is None}
    return save_fitted(path, family=family, party=party, parties=parties, settings=settings, transcript=frame,
                       loss_curve=getattr(estimator, "loss_curve_", None) if knows_loss else None, result=result,
                       files={name: (lambda target, write=write: write(target, party)) for name, write in
                              (files or {}).items()})


def _report(estimator, data) -> dict:
    labels = data.labels
    if labels is None:
        raise ConfigurationError("save_run: the data has no labels to report metrics of")
    classes = getattr(estimator, "classes_", None)
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
