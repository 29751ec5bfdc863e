"""Run one party of gradient boosting as its own process: connect, align, boost or predict, write its shard.

The family's run (:mod:`vfl.runs.trees`, the one the estimators run in threads)
runs over the party's :class:`~vfl.deploy.session.Session` (mutual TLS, the settings
fingerprint, the private set intersection), as the linear models' runs do
(:mod:`vfl.federation.runner`).  What differs:

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
from vfl.deploy.align import alignment_line
from vfl.deploy.checkpoint import CheckpointStore, data_digest, run_id
from vfl.deploy.shards import trees as shards
from vfl.deploy.compute import uses_compute
from vfl.deploy.config import FederationConfig
from vfl.deploy.data import load_csv
from vfl.deploy.narration import Narrator
from vfl.deploy.progress import Progress
from vfl.deploy.report import plain, prediction_metrics, rows_report, write_scores
from vfl.deploy.session import Session, align_data, check_same_training, rows_hello, stops_told
from vfl.parties.trees.label_party import TreeLabelParty
from vfl.parties.trees.loss import class_probabilities
from vfl.protocols.release import ReleasePolicy
from vfl.runs import trees as run

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
    workdir = Path(workdir)
    with stops_told(config, role, "train"):
        data = _load(config, role, kind, data_path)
    store = CheckpointStore(workdir / "checkpoints", role, config.fingerprint("train"))
    if not resume:
        store.clear()
    narrator = Narrator(role, settings.max_iter, unit="iteration", family="trees", kind=kind) if narrate else None
    shown = Progress(role, progress, record=record)
    try:
        with Session(config, role, "train", narrator, shown) as session:
            extra = dict(rows_hello(data), n_columns=len(data.columns))
            theirs = session.hello(extra, run_id(workdir / "checkpoints", resume) if kind == "label" else None)
            trained_with = session.trained_with
            data, alignment = align_data(session, role, data, extra, theirs, narrator, run.min_rows(settings))
            if alignment:
                shown.line(alignment_line(role, alignment))
            store.data = data_digest(data)
            checkpoints = store.load() if resume else {}
            if narrator and checkpoints:
                narrator.say(f"resume: has checkpoints after iterations {sorted(k + 1 for k in checkpoints)}")
            shown.model(settings.max_iter)

            held = {}

            def on_iteration(iteration: int, state: dict) -> None:
                store.save(iteration, state)
                shown.epoch(iteration, run.training_loss(held["label"]) if "label" in held else None)

            if kind == "feature":
                result = run.train_feature(session.endpoint, data, settings, roster, role=role,
                                           checkpoints=checkpoints, on_iteration=on_iteration,
                                           release=ReleasePolicy.for_party(config.party(role), workdir))
            else:
                result = run.train_label(session.endpoint, data, settings, roster, role=role, checkpoints=checkpoints,
                                         on_iteration=on_iteration, on_party=lambda p: held.update(label=p))
            party = result.party
            shown.close()
            transcript = session.save_transcript(workdir / "transcript_train.csv")
    finally:
        shown.close()
    summary = {"party": role, "role": kind, "transcript": str(transcript), "iterations": len(party.trees)}
    if alignment:
        summary["alignment"] = alignment
    if kind == "label":
        summary["iterations"] = result.n_iter
        summary.update(classes=None if party.classes is None else [plain(c) for c in party.classes],
                       metrics=training_metrics(config, party), trees=len(party.trees))
    summary["model"] = str(shards.write_shard(
        workdir / f"model_{role}.json", party, kind, trained_with,
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
    narrator = Narrator(role, phase="predict", family="trees", kind=kind) if narrate else None
    shown = Progress(role, progress, record=record)
    with Session(config, role, "predict", narrator, shown) as session:
        extra = dict(rows_hello(data), trained_with=shard["trained_with"])
        theirs = session.hello(extra)
        data, alignment = align_data(session, role, data, extra, theirs, narrator, 1)
        if alignment:
            shown.line(alignment_line(role, alignment))
        check_same_training(role, roster, theirs, shard["trained_with"])
        summary = {"party": role, "role": kind, "rows": data.n_rows, "label": roster.label}
        if alignment:
            summary["alignment"] = alignment
        if kind == "feature":
            run.predict_feature(session.endpoint, data, party, roster,
                                ReleasePolicy.for_party(config.party(role), workdir))
        else:
            raw = run.predict_label(session.endpoint, data, party, roster)
            summary["scores"] = str(_write_scores(output or workdir / "scores.csv", data.ids, raw, party,
                                                 config.id_column))
            summary["classes"] = shard["classes"] or None
            if data.labels is not None:
                summary["metrics"] = _label_metrics(party, raw, data.labels, role)
        summary["transcript"] = str(session.save_transcript(workdir / "transcript_predict.csv"))
    return summary


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
