"""Run one party of a split neural network as its own process: connect, align, train or predict, write its shard.

The family's run (:mod:`vfl.runs.mlp`, the one the estimators run in threads)
runs over the party's :class:`~vfl.deploy.session.Session` (mutual TLS, the
settings fingerprint, the private set intersection), as the other families'
runs do.  What it adds:

* the coordinator takes part: it deals the masks and the Beaver triples of the
  shared backward pass (it holds no data, no shard and no checkpoint: it keeps
  no state between epochs);
* a checkpoint after every epoch at each data party (its weights and optimizer
  state; the label party's also the schedule's seed and the stopping rule):
  ``--resume`` continues after the last epoch every party completed and ends with
  the network the uninterrupted run would have;
* the shards (:mod:`vfl.deploy.shards.mlp`): each data party's own bottom and
  block; the label party's also the intercept, the top, the task and classes;
* the label party's training metrics: one more private prediction, of the
  training rows, after training (``report_metrics``, on by default).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vfl.deploy.checkpoint import CheckpointStore
from vfl.deploy.config import FederationConfig
from vfl.deploy.data import PartyData, load_csv
from vfl.deploy.progress import Progress
from vfl.deploy.report import label_report, plain, prediction_metrics, rows_report, write_scores
from vfl.deploy.session import stops_told
from vfl.deploy.shards import mlp as shards
from vfl.errors import ConfigurationError, DataError
from vfl.federation.loop import party_run
from vfl.parties.mlp.label_party import MLPLabelParty
from vfl.protocols.release import ReleasePolicy
from vfl.runs import mlp as run
from vfl.runs.hooks import Hooks


def train(config: FederationConfig, role: str, data_path=None, workdir=".", resume: bool = False,
          narrate: bool = False, progress: bool | None = False, record=None) -> dict:
    """Run party ``role``'s part of training a split network; write its shard (data parties) and transcript.

    Returns a summary dict: ``party``, ``role``, ``epochs``, the transcript's and (data
    parties) the shard's paths, and at the label party ``loss_curve``, ``classes`` and
    ``metrics`` (training, and validation with early stopping).
    """
    settings, roster = config.training, config.roster
    kind = config.role_of(role)
    with stops_told(config, role, "train"):
        data = None if kind == "coordinator" else _load(config, role, kind, data_path)
    metrics = None
    with party_run(config, role, "train", data, workdir, resume=resume, narrate=narrate, progress=progress,
                   record=record, min_rows=run.MIN_ROWS) as this:
        store, narrator, shown, workdir = this.store, this.narrator, this.shown, this.workdir
        checkpoints = store.load() if resume and this.data else {}
        if narrator and checkpoints:
            narrator.say(f"resume: has checkpoints after epochs {sorted(k + 1 for k in checkpoints)}")
        if this.data:
            shown.model(settings.max_iter)
        trained = _train_role(this.endpoint, config, role, kind, this.data, store, checkpoints, narrator, shown,
                              workdir)
        shown.close()
        if config.report_metrics:
            metrics = _report_training(this.endpoint, config, role, kind, this.data, trained, workdir)
    summary = this.summary()
    if kind == "coordinator":
        summary["epochs"] = trained["n_iter"]
        return summary
    history = trained.record
    if kind == "label":
        party = trained.party
        summary.update(epochs=history["n_iter"], loss_curve=list(history["loss_curve"]), metrics=metrics,
                       classes=None if party.classes is None else [plain(c) for c in party.classes])
    summary["model"] = str(shards.write_shard(
        workdir / f"model_{role}.json", trained.party, kind, this.trained_with,
        label=config.label if kind == "label" else None, feature_parties=roster.features,
        record=history if kind == "label" else None))
    store.clear()                               # finished: the shard is the result
    return summary


def _load(config: FederationConfig, role: str, kind: str, data_path, columns=None,
          label_required: bool = True) -> PartyData:
    if data_path is None:
        raise ConfigurationError(f"party {role} needs its data: --data FILE.csv")
    return load_csv(data_path, role, config.id_column, label=config.label if kind == "label" else None,
                    columns=columns, label_required=label_required,
                    foreign=(config.label,) if kind == "feature" else ())


def _train_role(ep, config: FederationConfig, role: str, kind: str, data, store: CheckpointStore, checkpoints,
                narrator, shown: Progress, workdir: Path):
    """This party's training run (:mod:`vfl.runs.mlp`), checkpointing, narrating and showing every epoch; a feature
    party checks its releases with its own policy (its ledger and choices, :mod:`vfl.protocols.release`)."""
    settings, roster = config.training, config.roster
    if kind == "coordinator":
        return run.train_coordinator(ep, settings, roster)

    def on_epoch(epoch: int, state: dict) -> None:
        store.save(epoch, state)
        loss = state.get("loss")
        if narrator and loss is not None:
            score = state.get("validation_score")
            narrator.say(f"epoch {epoch + 1}/{settings.max_iter} done: loss {loss:.6f}"
                         + (f", validation score {score:.4f}" if score is not None else ""))
        shown.epoch(epoch, loss)

    if kind == "label":
        return run.train_label(ep, data, settings, roster, Hooks(on_step=on_epoch, checkpoints=checkpoints))
    return run.train_feature(ep, data, settings, roster, Hooks(
        on_step=on_epoch, checkpoints=checkpoints, release=ReleasePolicy.for_party(config.party(role), workdir)))


def _report_training(ep, config: FederationConfig, role: str, kind: str, data, trained, workdir: Path
                     ) -> dict | None:
    """One private prediction of the training rows; the label party's metrics of its training and validation rows."""
    settings, roster = config.training, config.roster
    if kind == "coordinator":
        run.predict_coordinator(ep, settings, roster)
        return None
    if kind == "feature":
        run.predict_feature(ep, data, trained.party, settings, roster,
                            Hooks(release=ReleasePolicy.for_party(config.party(role), workdir)))
        return None
    party = trained.party
    out = run.predict_label(ep, data, party, settings, roster)
    train_rows, validation_rows = run.split_rows(len(out), settings, trained.record["seed"])
    report = {"training": _rows_metrics(party, out[train_rows], party.y[train_rows])}
    if len(validation_rows):
        report["validation"] = _rows_metrics(party, out[validation_rows], party.y[validation_rows])
    return report


def _rows_metrics(party: MLPLabelParty, out: np.ndarray, targets: np.ndarray) -> dict:
    """Metrics of the network's outputs against the party's targets (0/1, one-hot, or values)."""
    if party.task == "regression":
        return rows_report("linear", out[:, 0] if out.shape[1] == 1 else out,
                           targets[:, 0] if targets.shape[1] == 1 else targets)
    if party.task == "binary":
        return rows_report("logistic", out[:, 0], targets[:, 0].astype(int), threshold=0.5)
    return rows_report("logistic", _log(out), targets.argmax(axis=1), link="softmax")


def _log(probability: np.ndarray) -> np.ndarray:
    """Log-probabilities: scores whose softmax gives the probabilities back (what :func:`label_metrics` takes)."""
    with np.errstate(divide="ignore"):
        return np.log(np.clip(probability, 1e-300, None))


# --------------------------------------------------------------------------- prediction

def predict(config: FederationConfig, role: str, data_path=None, model_path=None, workdir=".", output=None,
            narrate: bool = False, progress: bool | None = False, record=None) -> dict:
    """Run party ``role``'s part of private prediction with its shard; the label party writes the scores CSV.

    Returns a summary dict: ``party``, ``role``, ``rows``, ``label`` (the label party's
    name), the transcript's path, and at the label party the scores' path, its
    ``classes`` and, when its CSV holds the label column, ``metrics``.
    """
    settings, roster = config.training, config.roster
    kind = config.role_of(role)
    workdir = Path(workdir)
    shard, data, party = None, None, None
    if kind != "coordinator":
        path = model_path or workdir / f"model_{role}.json"
        with stops_told(config, role, "predict"):       # a bad shard or table: the peers are told, not left waiting
            shard = shards.read_shard(path, role, kind)
            _check_shard(config, role, kind, shard, path)
            data = _load(config, role, kind, data_path, columns=shard["columns"], label_required=False)
            party = shards.shard_party(shard, role)
    with party_run(config, role, "predict", data, workdir, narrate=narrate, progress=progress, record=record,
                   trained_with=shard["trained_with"] if shard else None) as this:
        summary = {"label": roster.label}
        if kind == "coordinator":
            summary["rows"] = run.predict_coordinator(this.endpoint, settings, roster)
        else:
            data = this.data
            summary["rows"] = data.n_rows
            if kind == "feature":
                run.predict_feature(this.endpoint, data, party, settings, roster,
                                    Hooks(release=ReleasePolicy.for_party(config.party(role), workdir)))
            else:
                out = run.predict_label(this.endpoint, data, party, settings, roster)
                summary["scores"] = str(_write_scores(output or workdir / "scores.csv", data.ids, out, party,
                                                     config.id_column))
                summary["classes"] = shard["classes"] or None
                if data.labels is not None:
                    summary["metrics"] = _label_metrics(party, out, data.labels, role)
    return this.summary(**summary)


def _check_shard(config: FederationConfig, role: str, kind: str, shard: dict, path) -> None:
    """The shard fits this federation: the interactive layer's width, and (label party) the same data parties."""
    if shard["units"] != config.training.units:
        raise DataError(f"party {role}: {path} has an interactive layer of {shard['units']} units, but "
                        f"{config.path} says hidden_layer_sizes {list(config.training.hidden_layer_sizes)}: use the "
                        "federation file the network was trained with")
    if kind == "label" and shard["data_parties"] != list(config.roster.data_parties):
        raise DataError(f"party {role}: {path} was trained with the parties {shard['data_parties']}, but "
                        f"{config.path} names {list(config.roster.data_parties)}")


def _label_metrics(party: MLPLabelParty, out: np.ndarray, labels, role: str) -> dict:
    """``vfl predict``'s metrics when the label column is present (or a note saying why there are none)."""
    return prediction_metrics(party.classes, out if out.shape[1] == 1 else _log(out), labels, role)


def _write_scores(path, ids, out: np.ndarray, party: MLPLabelParty, id_column: str = "id") -> Path:
    """The label party's scores CSV: the network's outputs (a classifier's are its class probabilities)."""
    if party.classes is None:
        return write_scores(path, ids, out[:, 0] if out.shape[1] == 1 else out, id_column=id_column)
    classes = [plain(c) for c in party.classes]
    if party.task == "binary":
        return write_scores(path, ids, out[:, 0], out[:, 0], classes, id_column)
    return write_scores(path, ids, out, out, classes, id_column)


# --------------------------------------------------------------------------- what `vfl party` says

def say_trained(role: str, summary: dict, config: FederationConfig) -> list[str]:
    """What party ``role`` did in training: the coordinator's deals, the label party's loss, the shard written."""
    if summary["role"] == "coordinator":
        return [f"party {role}: dealt the masks and Beaver triples of {summary['epochs']} epochs"]
    lines = [f"party {role}: trained {summary['epochs']} epochs, final loss {summary['loss_curve'][-1]:.6f}"] \
        if summary["role"] == "label" else []
    return [*lines, f"party {role}: model shard written to {summary['model']}"]


def say_predicted(role: str, summary: dict) -> list[str]:
    """What party ``role`` did in a prediction, after the label party's classes."""
    if summary["role"] == "label":
        did = f"party {role}: scores of {summary['rows']} rows written to {summary['scores']}"
    elif summary["role"] == "feature":
        did = (f"party {role}: sent its masked part of the interactive layer for {summary['rows']} rows to "
               f"{summary['label']}")
    else:
        did = (f"party {role}: dealt the masks of {summary['rows']} rows" if summary["rows"] else
               f"party {role}: one feature party: no masks to deal")
    return [*label_report(role, summary, metrics=False), did]
