"""Run one party of gradient boosting as its own process: connect, align, boost or predict, write its shard.

The family's run (:mod:`vfl.runs.trees`, the one the estimators run in threads)
runs over the party's :class:`~vfl.deploy.session.Session` (mutual TLS, the settings
fingerprint, the private set intersection), as the linear models' runs do
(:mod:`vfl.federation.linear`).  What differs:

* no coordinator: the label party makes the key pair; a coordinator named in
  ``federation.toml`` is left out of the run (its ``vfl party`` says so and exits);
* missing values are kept as they are (each party's CSV may have empty cells);
* a checkpoint after every boosting iteration (``--resume`` continues after the
  last iteration every party completed and ends with the trees of an
  uninterrupted run: the trees depend on no random draw but the validation seed,
  which the label party keeps);
* the shards: a feature party's holds its bin thresholds and, per tree it took
  part in, the shape and its own splits; the label party's the loss, the leaf
  values and who owns each split (:func:`~vfl.deploy.shards.trees.write_shard`);
* the label party's training metrics come from the raw scores it already holds
  (the training rows' leaves are known to it), so no extra round is needed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vfl.errors import DataError
from vfl.deploy.shards import trees as shards
from vfl.deploy.compute import uses_compute
from vfl.deploy.config import FederationConfig
from vfl.deploy.data import load_csv
from vfl.deploy.report import label_report, plain, prediction_metrics, rows_report, write_scores
from vfl.deploy.session import stops_told
from vfl.federation import explanations
from vfl.federation.loop import party_run
from vfl.parties.trees.label_party import TreeLabelParty
from vfl.parties.trees.loss import class_probabilities
from vfl.protocols.release import ReleasePolicy
from vfl.runs import explained, trees as run
from vfl.runs.hooks import Hooks

#: What the coordinator's ``vfl party`` / ``vfl predict`` says for gradient boosting.
NO_COORDINATOR = "gradient boosting has no coordinator (the label party holds the key pair): nothing to run"


@uses_compute
def train(config: FederationConfig, role: str, data_path=None, workdir=".", resume: bool = False,
          narrate: bool = False, progress: bool | None = False, record=None) -> dict:
    """Run party ``role``'s part of boosting; write its shard and transcript.

    Returns a summary dict: ``party``, ``role``, the shard's and transcript's paths,
    ``iterations``, and at the label party ``classes``, ``metrics`` (training, and
    validation with early stopping) and the trees' count.
    """
    settings, roster = config.training, config.roster
    kind = config.role_of(role)
    if kind == "coordinator":
        return {"party": role, "role": kind, "idle": NO_COORDINATOR}
    with stops_told(config, role, "train"):
        data = _load(config, role, kind, data_path)
    with party_run(config, role, "train", data, workdir, resume=resume, narrate=narrate, progress=progress,
                   record=record, min_rows=run.min_rows(settings)) as this:
        store, narrator, shown = this.store, this.narrator, this.shown
        checkpoints = store.load() if resume else {}
        if narrator and checkpoints:
            narrator.say(f"resume: has checkpoints after iterations {sorted(k + 1 for k in checkpoints)}")
        shown.model(settings.max_iter)
        held = {}

        def on_iteration(iteration: int, state: dict) -> None:
            store.save(iteration, state)
            shown.epoch(iteration, run.training_loss(held["label"]) if "label" in held else None)

        if kind == "feature":
            result = run.train_feature(this.endpoint, this.data, settings, roster, Hooks(
                checkpoints=checkpoints, on_step=on_iteration,
                release=ReleasePolicy.for_party(config.party(role), this.workdir)))
        else:
            result = run.train_label(this.endpoint, this.data, settings, roster, Hooks(
                checkpoints=checkpoints, on_step=on_iteration, on_party=lambda p: held.update(label=p)))
        party = result.party
        shown.close()
    summary = this.summary(iterations=len(party.trees))
    if kind == "label":
        summary["iterations"] = result.n_iter
        summary.update(classes=None if party.classes is None else [plain(c) for c in party.classes],
                       metrics=training_metrics(config, party), trees=len(party.trees))
    summary["model"] = str(shards.write_shard(
        this.workdir / f"model_{role}.json", party, kind, this.trained_with,
        label=config.label if kind == "label" else None, feature_parties=roster.features,
        n_iter=summary["iterations"], validation_scores=result.validation_scores))
    store.clear()                               # finished: the shard is the result
    return summary


def _load(config: FederationConfig, role: str, kind: str, data_path, columns=None, label_required: bool = True):
    from vfl.errors import ConfigurationError

    if data_path is None:
        raise ConfigurationError(f"party {role} needs its data: --data FILE.csv")
    return load_csv(data_path, role, config.id_column, label=config.label if kind == "label" else None,
                    columns=columns, label_required=label_required,
                    foreign=(config.label,) if kind == "feature" else (), missing=True)


def training_metrics(config: FederationConfig, party: TreeLabelParty) -> dict | None:
    """The label party's metrics of its training (and validation) rows, from the raw scores it holds."""
    if not config.report_metrics:
        return None
    report = {"training": _rows_metrics(party, party.train_rows)}
    if len(party.validation_rows):
        report["validation"] = _rows_metrics(party, party.validation_rows)
    return report


def _rows_metrics(party: TreeLabelParty, rows: np.ndarray) -> dict:
    objective = "linear" if party.classes is None else "logistic"
    raw = party.raw[rows]
    return rows_report(objective, raw[:, 0] if raw.shape[1] == 1 else raw, party.y[rows], link="softmax")


# --------------------------------------------------------------------------- prediction

@uses_compute
def predict(config: FederationConfig, role: str, data_path=None, model_path=None, workdir=".", output=None,
            narrate: bool = False, progress: bool | None = False, record=None) -> dict:
    """Run party ``role``'s part of private prediction with its shard; the label party writes the scores CSV.

    Returns a summary dict: ``party``, ``role``, ``rows``, ``label`` (the label
    party's name), the transcript's path, and at the label party the scores'
    path, its ``classes`` and, when its CSV holds the label column, ``metrics``.
    """
    roster = config.roster
    kind = config.role_of(role)
    if kind == "coordinator":
        return {"party": role, "role": kind, "idle": NO_COORDINATOR}
    workdir = Path(workdir)
    path = model_path or workdir / f"model_{role}.json"
    shard = shards.read_shard(path, role, kind)
    with stops_told(config, role, "predict"):
        data = _load(config, role, kind, data_path, columns=shard["columns"], label_required=False)
    party = shards.shard_party(shard, data.features, role)
    if kind == "label" and shard["data_parties"] != list(roster.data_parties):
        raise DataError(f"party {role}: {path} was trained with the parties {shard['data_parties']}, but "
                        f"{config.path} names {list(roster.data_parties)}")
    if kind == "label" and config.explanations is not None:
        with stops_told(config, role, "predict"):
            run.check_explainable(party, roster.features)
    with party_run(config, role, "predict", data, workdir, narrate=narrate, progress=progress, record=record,
                   trained_with=shard["trained_with"]) as this:
        summary = {"rows": this.data.n_rows, "label": roster.label}
        if kind == "feature":
            release = ReleasePolicy.for_party(config.party(role), workdir)
            run.predict_feature(this.endpoint, this.data, party, roster, Hooks(release=release))
            if config.explanations is not None:     # the label party explains from the masks it just received
                summary["explained"] = {"rows": this.data.n_rows, "named": {}}
        else:
            if config.explanations is None:
                raw = run.predict_label(this.endpoint, this.data, party, roster)
            else:
                raw, values = run.predict_and_explain_label(this.endpoint, this.data, party, roster)
            summary["scores"] = str(_write_scores(output or workdir / "scores.csv", this.data.ids, raw, party,
                                                 config.id_column))
            summary["classes"] = shard["classes"] or None
            if this.data.labels is not None:
                summary["metrics"] = _label_metrics(party, raw, this.data.labels, role)
            if config.explanations is not None:
                summary.update(_explained(config, this.data, party, values, summary["scores"]))
    return this.summary(**summary)


def _explained(config: FederationConfig, data, party: TreeLabelParty, values: dict, scores_path) -> dict:
    """The label party's explanation of the rows it just scored (the parties' exact Shapley values, from the leaf
    masks of that prediction: the feature parties send nothing more), written beside the scores."""
    side = explanations.sign(config.explanations, party.classes)
    return explanations.write(config, scores_path, data.ids, explained.party_level(values), side)


def _label_metrics(party: TreeLabelParty, raw: np.ndarray, labels, role: str) -> dict:
    """``vfl predict``'s metrics when the label column is present (or a note saying why there are none)."""
    return prediction_metrics(party.classes, raw, labels, role)


def _write_scores(path, ids, raw: np.ndarray, party: TreeLabelParty, id_column: str = "id") -> Path:
    """The label party's scores CSV: a classifier's probabilities by sigmoid (two classes) or softmax."""
    if party.classes is None:
        return write_scores(path, ids, raw[:, 0], id_column=id_column)
    classes = [plain(c) for c in party.classes]
    probability = class_probabilities(raw)
    if raw.shape[1] == 1:
        return write_scores(path, ids, raw[:, 0], probability[:, 1], classes, id_column)
    return write_scores(path, ids, raw, probability, classes, id_column)


# --------------------------------------------------------------------------- what `vfl party` says

def say_trained(role: str, summary: dict, config: FederationConfig) -> list[str]:
    """What party ``role`` did in training: the label party's iterations and trees, the shard it wrote."""
    lines = [f"party {role}: {summary['iterations']} boosting iterations, {summary['trees']} trees"] \
        if summary["role"] == "label" else []
    return [*lines, f"party {role}: model shard written to {summary['model']}"]


def say_predicted(role: str, summary: dict) -> list[str]:
    """What party ``role`` did in a prediction, after the label party's classes."""
    return [*label_report(role, summary, metrics=False),
            f"party {role}: scores of {summary['rows']} rows written to {summary['scores']}"
            if summary["role"] == "label" else
            f"party {role}: sent the leaves its splits allow for {summary['rows']} rows to {summary['label']}",
            *explanations.said(role, summary)]
