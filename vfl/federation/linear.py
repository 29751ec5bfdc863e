"""Run one party of a federation as its own process: connect, check, train or predict, write results.

Each party runs its role's run of :mod:`vfl.runs.linear` (the one the
estimators run in threads), over a :class:`~vfl.transport.network.NetworkTransport`
instead of in-process queues, and surrounded by what a real deployment needs:

The connection itself (links, hellos, the checks between data parties) is
:mod:`vfl.deploy.session`.

Parties are named in ``federation.toml`` (``A``, ``B``, ``C``, or ``bank``,
``telco``...), each with its role; the names are the transport's role names.
A feature party links only to the label party and the coordinator
(:meth:`vfl.protocols.Roster.peers`).

* at connect, every pair of linked parties exchanges a ``hello`` with the
  fingerprint of the shared settings (each feature party and the label party add
  their row count, column count and a fresh salt, then exchange a digest of
  their row ids under both salts); any difference stops the run with an error
  saying what differs;
* before training, the label party sends every feature party the column count of
  every data party (``columns``), so each data party checks the validation
  split, the batch sizes and the accumulated-equations rule for all of them and
  refuses with the same message (the estimators' message: the same run);
* after every epoch, the party writes a checkpoint; with ``resume`` it starts
  after the last epoch every party completed;
* logistic regression with three classes or more trains one binary model per
  class (one-vs-rest) in the same run: after alignment the label party tells
  every peer how many models (``models``), and the parties run the protocol
  once per model, under the same key and on the same rows, each model with its
  own checkpoints; prediction scores every model the same way;
* at the end, the data parties write their model shards (one row of weights per
  model) and every party its transcript (the messages it sent); the label party
  writes the scores of a prediction;
* on any failure the party tells its peers why (``abort``, best effort), closes
  its links at once, and the error names the peer and the protocol step.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vfl.errors import ConfigurationError, DataError
from vfl.deploy.align import min_rows, private_intersection, write_aligned
from vfl.deploy.checkpoint import CheckpointStore, data_digest
from vfl.deploy.jsonfile import write_json
from vfl.deploy.shards.linear import (read_coordinator_shard, read_shard, shard_models, shard_scaler, shard_shares,
                                      write_coordinator_shard, write_shard)
from vfl.deploy.compute import uses_compute
from vfl.deploy.config import FederationConfig
from vfl.deploy.data import PartyData, load_csv
from vfl.deploy.narration import Narrator
from vfl.deploy.progress import Progress
from vfl.deploy.report import class_indices, classes_line, label_report, plain, rows_report, write_scores
from vfl.deploy.session import Session, hello_columns, stops_told
from vfl.federation import explanations
from vfl.federation.loop import party_run
from vfl.parties import Coordinator
from vfl.parties.linear import dp
from vfl.runs import linear as run_linear
from vfl.runs.hooks import Hooks
from vfl.runs.linear import kept_shared
from vfl.protocols.release import ReleasePolicy
from vfl.transport import Endpoint

# --------------------------------------------------------------------------- training

@uses_compute
def train(config: FederationConfig, role: str, data_path=None, workdir=".", resume: bool = False,
          narrate: bool = False, progress: bool | None = False, record=None) -> dict:
    """Run party ``role``'s part of training; write its shard, transcript, and (coordinator) the loss curve.

    ``role`` is the party's name in ``config``; ``progress`` shows progress on standard
    error (``None``: if it is a terminal; :mod:`vfl.deploy.progress`).  Returns a
    summary dict: ``party`` (the name), ``role`` (``"feature"``, ``"label"`` or
    ``"coordinator"``), the written paths, ``models`` (one, or one per class for
    one-vs-rest), ``epochs`` and ``loss_curve`` for the coordinator (per model when
    several), and for the label party ``classes`` and ``metrics`` (training, and
    validation with early stopping; see :func:`report_training`).
    """
    settings = config.training
    kind = config.role_of(role)
    workdir = Path(workdir)
    with stops_told(config, role, "train"):
        data = _training_data(config, role, kind, data_path)
        previous = _previous_shard(config, role, kind, data, workdir) if config.warm_start and data else None
    if not resume:
        _clear_checkpoints(workdir / "checkpoints", role, config.fingerprint("train"))
    coordinator = Coordinator.for_settings(settings) if kind == "coordinator" else None  # one key pair, every model
    fewest = min_rows(settings.batch_size, len(data.columns) + (kind == "label" and settings.fit_intercept)) \
        if data else 1
    with party_run(config, role, "train", data, workdir, resume=resume, narrate=narrate, progress=progress,
                   record=record, min_rows=fewest, checkpoints=False) as this:
        data, narrator, shown = this.data, this.narrator, this.shown
        on_model = _on_model(config, role, kind, workdir, resume, narrator, shown, data_digest(data))
        trained = _train_role(this.endpoint, config, role, kind, data, this.theirs, previous, coordinator, workdir,
                              on_model, narrator, this.trained_with)
        shown.close()
        n_models, parties = trained.n_models, trained.parties
        classes = trained.classes
        metrics = report_training(this.session, config, role, kind, parties, coordinator, n_models, trained.shares)
    summary = this.summary(models=n_models)
    if kind == "label":
        summary.update(metrics=metrics, classes=None if classes is None else [plain(c) for c in classes])
    if kind == "coordinator":
        results, one = trained.results, n_models == 1
        summary.update(loss_curve=results[0]["loss_curve"] if one else [r["loss_curve"] for r in results],
                       epochs=results[0]["n_iter"] if one else [r["n_iter"] for r in results],
                       converged=all(r["converged"] for r in results))
        if kept_shared(settings):   # C's shares: prediction needs them, and only C may read them
            summary["model"] = str(write_coordinator_shard(workdir / f"model_{role}.json", role,
                                                           this.trained_with, trained.shares))
        write_json(workdir / f"training_{role}.json", summary)
    else:
        if kind == "label" and settings.dp:
            # with DP every epoch runs (tol is refused), so max_iter epochs were released per model
            summary["dp_spent"] = [dp.epsilon_spent(parties[0].noise_multiplier, settings.dp_delta,
                                                    settings.max_iter * n_models), settings.dp_delta]
        summary["model"] = str(write_shard(
            workdir / f"model_{role}.json", role, kind, settings.objective, data.columns,
            [p.params for p in parties] if n_models > 1 else parties[0].params, parties[0].fit_intercept,
            this.trained_with, None if classes is None else [plain(c) for c in classes],
            config.label if kind == "label" else None,
            initial=[p.initial_params for p in parties] if n_models > 1 else parties[0].initial_params,
            scaler=trained.scaler, shares=[p.share.state() for p in parties] if kept_shared(settings) else None,
            mean=data.features.mean(axis=0), data_parties=list(config.roster.data_parties)))
    _clear_checkpoints(workdir / "checkpoints", role, config.fingerprint("train"))  # finished: the shard is the result
    return summary


def _train_role(ep: Endpoint, config: FederationConfig, role: str, kind: str, data: PartyData | None, theirs: dict,
                previous: dict | None, coordinator, workdir: Path, on_model, narrator,
                trained_with: str) -> run_linear.Trained:
    """This party's training run (:mod:`vfl.runs.linear`), with its session's hooks."""
    settings, roster = config.training, config.roster
    if kind == "coordinator":
        return run_linear.train_coordinator(ep, coordinator, settings, roster, Hooks(
            on_model=on_model, on_batch_loss=narrator.batch_loss if narrator else None))
    start = run_linear.WarmStart(shard_scaler(previous), _warm_starts(previous, role)) if previous else None
    if kind == "label":
        return run_linear.train_label(ep, data, settings, roster, Hooks(
            start=start, on_model=on_model, columns=run_linear.ShareColumns(hello_columns(role, theirs, roster))))
    return run_linear.train_feature(ep, data, settings, roster, Hooks(
        start=start, on_model=on_model, release=release_policy(config, role, workdir)))


def _on_model(config: FederationConfig, role: str, kind: str, workdir: Path, resume: bool, narrator, shown: Progress,
              data: str | None = None):
    """The run's ``on_model`` hook: say which model starts, and checkpoint each model in its own folder."""
    settings = config.training

    def on_model(index: int, n_models: int, classes) -> tuple:
        if index == 0 and kind == "label" and classes_line(role, classes):
            shown.line(classes_line(role, classes))
        which = f" (class {classes[index]!r} against the rest)" if classes is not None and n_models > 1 else ""
        if narrator and n_models > 1:
            narrator.say(f"one-vs-rest: model {index + 1} of {n_models}{which}")
        shown.model(settings.max_iter, index, n_models, which)
        store = CheckpointStore(_model_folder(workdir / "checkpoints", index, n_models), role,
                                config.fingerprint("train"), data)
        return checkpointing(store, kind, resume, narrator, shown)
    return on_model


def checkpointing(store: CheckpointStore, kind: str, resume: bool, narrator, shown: Progress) -> tuple:
    """One model's checkpoints to resume from (``resume``), and its ``on_epoch``: save, narrate, show.

    What an ``on_model`` hook of linear's run returns (:data:`vfl.runs.linear.OnModel`), here and in the credit
    pipeline's ``vfl party`` (:mod:`vfl.federation.credit`)."""
    checkpoints = store.load() if resume else {}
    if narrator and checkpoints:
        narrator.say(f"resume: has checkpoints after epochs {sorted(k + 1 for k in checkpoints)}")

    def on_epoch(epoch: int, state: dict) -> None:
        store.save(epoch, state)
        loss = state["loss_curve"][-1] if kind == "coordinator" else None
        if narrator and loss is not None:
            narrator.loss(epoch, loss)
        shown.epoch(epoch, loss)
    return checkpoints, on_epoch


def agree_on_models(ep: Endpoint, role: str, kind: str, roster, count: int | None) -> int:
    """How many models the run trains or scores (:func:`vfl.runs.linear.agree_on_models`); ``kind`` is not used."""
    return run_linear.agree_on_models(ep, role, roster, count)


def _previous_shard(config: FederationConfig, role: str, kind: str, data: PartyData, workdir: Path) -> dict:
    """``warm_start``: this party's shard of the previous run (in its work folder), checked against its data."""
    path = workdir / f"model_{role}.json"
    if not path.exists():
        raise ConfigurationError(f"party {role}: warm_start continues the model shard {path}, which does not exist; "
                                 "train once without warm_start first")
    shard = read_shard(path, role, kind)
    if shard["columns"] != data.columns:
        raise DataError(f"party {role}: warm_start continues {path}, trained on the columns {shard['columns']}, but "
                        f"the data has {data.columns}")
    if kind == "label" and (shard["fit_intercept"] != config.training.fit_intercept
                            or shard["objective"] != config.training.objective):
        raise DataError(f"party {role}: warm_start continues {path}, a {shard['objective']} model with "
                        f"fit_intercept={shard['fit_intercept']}; the settings ask for another")
    return shard


def _warm_starts(shard: dict, role: str):
    """The run's ``starts`` hook: each model's start from the previous shard, which must hold as many models."""
    def starts(n_models: int, classes) -> list:
        models = shard_models(shard)
        run_linear.check_warm_models(role, len(models), shard.get("classes"), n_models, classes)
        return [np.asarray(m, dtype=np.float64) for m in models]
    return starts


def _model_folder(folder: Path, index: int, n_models: int) -> Path:
    """Model ``index``'s checkpoints: ``checkpoints/`` for a single model, ``checkpoints/model-K/`` in one-vs-rest."""
    return folder if n_models == 1 else folder / f"model-{index:03d}"


def _clear_checkpoints(folder: Path, role: str, fingerprint: str) -> None:
    """Remove this party's checkpoints, the single model's and every one-vs-rest model's."""
    CheckpointStore(folder, role, fingerprint).clear()
    if folder.is_dir():
        for sub in sorted(folder.glob("model-[0-9][0-9][0-9]")):
            CheckpointStore(sub, role, fingerprint).clear()
            try:
                sub.rmdir()
            except OSError:     # something else is in it: leave it
                pass


def needs_data(role: str, kind: str, data_path) -> bool:
    """Whether party ``role`` reads a CSV: a data party must be given one, the coordinator must not."""
    if kind == "coordinator":
        if data_path is not None:
            raise ConfigurationError(f"party {role} holds no data (it is the coordinator): leave out --data")
        return False
    if data_path is None:
        raise ConfigurationError(f"party {role} needs its data: --data FILE.csv")
    return True


def _training_data(config: FederationConfig, role: str, kind: str, data_path) -> PartyData | None:
    """This party's CSV (none for the coordinator)."""
    if not needs_data(role, kind, data_path):
        return None
    label = kind == "label"
    return load_csv(data_path, role, config.id_column, label=config.label if label else None,
                    weight=config.sample_weight if label else None, foreign=_foreign(config, kind))


def release_policy(config: FederationConfig, role: str, workdir: Path) -> ReleasePolicy:
    """Feature party ``role``'s release policy: its release ledger and noise key in its work directory, its own
    opt-in and differential-privacy choices (its ``[parties.NAME]`` table; :mod:`vfl.protocols.release`)."""
    return ReleasePolicy.for_party(config.party(role), workdir)


def _foreign(config: FederationConfig, kind: str) -> tuple:
    """The label party's columns, which a feature party's CSV must not hold (see :mod:`vfl.datachecks`)."""
    return (config.label, config.sample_weight) if kind == "feature" else ()


# --------------------------------------------------------------------------- alignment only

@uses_compute
def align_only(config: FederationConfig, role: str, data_path, output, narrate: bool = False,
               record=None, workdir=None) -> dict:
    """``vfl align``: run only the private set intersection; write this party's aligned rows.

    Every data party runs it at once (the coordinator takes no part).  Returns
    ``party``, ``alignment`` (every party's row count and the shared count) and
    ``output``, the CSV of this party's rows of the intersection in the common order.
    """
    kind = config.role_of(role)
    if kind == "coordinator":
        raise ConfigurationError(f"party {role} is the coordinator: it holds no rows to align")
    if data_path is None:
        raise ConfigurationError(f"party {role} needs its data: --data FILE.csv")
    with stops_told(config, role, "align"):
        data = load_csv(data_path, role, config.id_column, label=config.label if kind == "label" else None,
                        label_required=False, foreign=_foreign(config, kind), missing=True)   # kept as empty cells
    narrator = Narrator(role, phase="align", family="alignment", kind=kind) if narrate else None
    with Session(config, role, "align", narrator, Progress(role, False, record=record)) as session:
        session.hello()
        aligned, report = private_intersection(session.endpoint, config, role, data, 1, narrator, workdir=workdir)
    path = write_aligned(output, aligned, config.id_column, config.label if kind == "label" else None)
    return {"party": role, "role": kind, "alignment": report, "output": str(path)}


# --------------------------------------------------------------------------- prediction

def scoring_part(config: FederationConfig, role: str, data_path, model_path, workdir: Path,
                 read=read_shard) -> tuple[str, Coordinator | None, dict | None]:
    """Party ``role``'s kind and part in scoring: the coordinator's key holder, or a data party's shard.

    ``read(path, role, kind)`` reads the shard (``model_path``, else ``workdir/model_ROLE.json``); a data
    party must be given its data and the coordinator must not.
    """
    kind = config.role_of(role)
    if not needs_data(role, kind, data_path):
        settings = config.training
        return kind, Coordinator.for_settings(settings), None
    return kind, None, read(model_path or workdir / f"model_{role}.json", role, kind)


@uses_compute
def predict(config: FederationConfig, role: str, data_path=None, model_path=None, workdir=".",
            output=None, narrate: bool = False, progress: bool | None = False, record=None) -> dict:
    """Run party ``role``'s part of federated prediction; the label party writes the scores CSV.

    Returns a summary dict: ``party`` (the name), ``role`` (its kind), ``mode``,
    ``rows`` (how many rows were scored), ``models`` (one, or one per class),
    ``label`` and ``coordinator`` (their names), the transcript's path, and for
    the label party the scores' path, its ``classes`` and, when its CSV holds the label
    column, ``metrics`` (:func:`vfl.deploy.report.label_metrics` of these rows).
    ``progress`` as for :func:`train`.
    """
    settings, roster = config.training, config.roster
    workdir = Path(workdir)
    kind, coordinator, shard = scoring_part(config, role, data_path, model_path, workdir)
    if coordinator is not None and kept_shared(settings):   # the model stayed shared: C's shares are part of it
        shard = read_coordinator_shard(model_path or workdir / f"model_{role}.json", role)
    data = explaining = None
    if coordinator is None:
        with stops_told(config, role, "predict"):
            data = load_csv(data_path, role, config.id_column, label=config.label if kind == "label" else None,
                            columns=shard["columns"], label_required=False,
                            weight=config.sample_weight if kind == "label" else None, foreign=_foreign(config, kind))
            if config.explanations is not None:
                explaining = _explaining(config, role, kind, shard, model_path or workdir / f"model_{role}.json")
    with party_run(config, role, "predict", data, workdir, narrate=narrate, progress=progress, record=record,
                   trained_with=shard["trained_with"] if data else None) as this:
        data = this.data
        if kind == "coordinator":
            models = shard["shares"] if shard else None
        else:
            models = shard_shares(shard) if "share" in shard else shard_models(shard)
        if kind != "coordinator" and ("share" in shard) != kept_shared(settings):
            held = "a share of a model that stays shared" if "share" in shard else "weights"
            raise DataError(f"party {role}: its model shard holds {held}, but the settings say protocol = "
                            f"{settings.protocol!r}, reveal = {settings.reveal!r}; use the settings it was trained with")
        mode, ep = config.prediction_mode, this.endpoint
        summary = {"mode": mode, "label": roster.label, "coordinator": roster.coordinator}
        shared = kept_shared(settings)
        if kind == "coordinator":
            n_models, summary["rows"] = run_linear.predict_coordinator(ep, coordinator, settings, roster, mode=mode,
                                                                       shares=models)
        elif kind == "feature":
            release = release_policy(config, role, workdir)
            summary["rows"] = run_linear.predict_feature(ep, data.features, data.columns, models, settings, roster,
                                                         Hooks(release=release), scaler=shard_scaler(shard),
                                                         mode=mode, shared=shared, ids=data.ids)
            if explaining is not None:      # the same release as the scores: its ledger adds nothing
                summary["explained"] = run_linear.explain_feature(ep, data.features, data.columns, explaining,
                                                                  roster.without_coordinator(), release=release,
                                                                  ids=data.ids)
        else:
            scores = run_linear.predict_label(ep, data.features, data.columns, models, shard["fit_intercept"],
                                              settings, roster, scaler=shard_scaler(shard), mode=mode, shared=shared)
            summary["rows"] = len(scores)
            summary["scores"] = str(_write_scores(output or workdir / "scores.csv", data.ids, scores, shard,
                                                 config.id_column))
            summary["classes"] = shard["classes"]
            if data.labels is not None:     # the label column is there: the metrics of these rows
                summary["metrics"] = _metrics(shard["objective"], scores, data.labels, shard["classes"], role)
            if explaining is not None:
                summary.update(_explain_label(ep, config, data, shard, models[0], explaining, summary["scores"]))
        summary["models"] = len(models) if models else n_models
    return this.summary(**summary)


def _explaining(config: FederationConfig, role: str, kind: str, shard: dict, path) -> run_linear.Explaining:
    """A data party's model for ``[prediction] explain``: one model, its own weights, its training mean."""
    if "share" in shard:
        raise ConfigurationError(f"party {role}: [prediction] explain needs each party's own weights, and this "
                                 "model stays shared (reveal = \"never\"): leave explain and reasons out")
    models = shard_models(shard)
    if len(models) != 1:
        raise ConfigurationError(f"party {role}: [prediction] explain takes one model (regression or two classes); "
                                 f"{path} holds {len(models)}, one per class: leave explain and reasons out")
    if "training_mean" not in shard:
        raise DataError(f"party {role}: {path} holds no training mean (a shard written before explanations), the "
                        "reference an explanation is taken against: train the model again to explain it")
    columns = shard["columns"]
    codes = explanations.consent(config, role, columns) if kind == "feature" else {}
    return run_linear.Explaining(np.asarray(models[0][:len(columns)], dtype=np.float64), shard_scaler(shard),
                                 np.asarray(shard["training_mean"], dtype=np.float64), list(columns), codes)


def _explain_label(ep: Endpoint, config: FederationConfig, data: PartyData, shard: dict, params, model,
                   scores_path) -> dict:
    """The label party's explanation of the rows it just scored, written beside the scores."""
    side = explanations.sign(config.explanations, shard["classes"] if shard["objective"] == "logistic" else None)
    intercept = float(params[len(shard["columns"])]) if shard["fit_intercept"] else 0.0
    result = run_linear.explain_label(ep, data.features, model, intercept, config.roster.without_coordinator(),
                                      sign=side)
    return explanations.write(config, scores_path, data.ids, result, side)


def score_rows(ep: Endpoint, config: FederationConfig, role: str, kind: str, features, columns, params,
               fit_intercept, coordinator, mode: str = "private", share=None, scores=None):
    """One private prediction of ``features`` with the weights ``params`` (:func:`vfl.runs.linear.score_rows`).

    A model that stays shared passes ``share`` instead of the weights; a feature party may pass the ``scores``
    its release check let it send (with DP noise, say).  Returns the scores at the label party, the number of
    rows scored elsewhere.  ``role`` and ``kind`` are the endpoint's.
    """
    return run_linear.score_rows(ep, config.training, config.roster, features, columns,
                                 params if share is None else share, fit_intercept, coordinator, mode,
                                 shared=share is not None, scores=scores)


def report_training(session: Session, config: FederationConfig, role: str, kind: str, parties: list, coordinator,
                    n_models: int, coordinator_shares: list | None = None, scores: list | None = None
                    ) -> dict | None:
    """After training: the label party's metrics on its training (and validation) rows, by private prediction.

    Every party takes part, once per model: the data parties score their training
    rows, then their validation rows (early stopping), with the weights they will
    write; the label party learns the scores, exactly as ``vfl predict`` on the
    training CSVs would show them, and nobody else learns anything (always the
    private mode, whatever ``[prediction] mode``).  Off with ``[training]
    report_metrics = false``.  A feature party may pass the ``scores`` per model its release check let it send
    (the pipeline: its parts of the training rows' scores).  Returns, at the label party, ``{"training": ...,
    "validation": ...}``, each ``{"rows": n, "metrics": {...}}``.
    """
    if not config.report_metrics:
        return None
    ep, session.endpoint.iteration = session.endpoint, -1
    if session.narrator is not None:
        session.narrator.phase = "metrics"
    columns = []
    for index in range(n_models):
        ep.model = index if n_models > 1 else None
        party = parties[index] if kind != "coordinator" else None
        rows = None if party is None else (party.features if party.validation is None
                                           else np.vstack([party.features, party.validation]))
        share = None
        if kept_shared(config.training):        # the model stays shared: each scores with its share
            share = coordinator_shares[index] if kind == "coordinator" else parties[index].share.state()
        columns.append(score_rows(ep, config, role, kind, rows, party and party.columns, party and party.params,
                                  party and party.fit_intercept, coordinator, share=share,
                                  scores=scores[index] if scores is not None else None))
    ep.model = None
    if kind != "label":
        return None
    scores = columns[0] if n_models == 1 else np.column_stack(columns)
    if config.training.objective == "linear":
        y = parties[0].labels if parties[0].validation is None else np.concatenate(
            [parties[0].labels, parties[0].validation_labels])
    else:   # each row's class: the model whose target is +1 (binary: 1 for the positive class)
        targets = [p.labels if p.validation is None else np.concatenate([p.labels, p.validation_labels])
                   for p in parties]
        y = (targets[0] > 0).astype(np.int64) if n_models == 1 else np.argmax(np.column_stack(targets), axis=1)
    n_train = len(parties[0].labels)
    report = {"training": rows_report(config.training.objective, scores[:n_train], y[:n_train])}
    if len(y) > n_train:
        report["validation"] = rows_report(config.training.objective, scores[n_train:], y[n_train:])
    return report


def _metrics(objective: str, scores, labels, classes, role: str) -> dict:
    """``vfl predict``'s metrics when the label column is present: ``{"rows": n, "metrics": {...}}``.

    Labels that cannot be scored (not numbers for a linear model, not classes of the
    model) give no metrics but a ``note`` saying why; the scores are written all the same.
    """
    if objective == "linear":
        try:
            y = np.asarray(labels, dtype=np.float64)
        except (TypeError, ValueError):
            y = None
        note = "the label column holds values that are not numbers"
    else:
        y = class_indices(labels, classes)
        note = f"the label column holds values that are not classes of the model ({', '.join(map(repr, classes))})"
    if y is None or not np.isfinite(np.asarray(y, dtype=np.float64)).all():
        return {"rows": len(labels), "metrics": {}, "note": f"party {role}: no metrics: {note}"}
    return rows_report(objective, scores, y)


def _write_scores(path, ids, scores, shard: dict, id_column: str = "id") -> Path:
    """B's output: the scores, and for logistic models each class's sigmoid (normalised to sum to 1 for
    one-vs-rest, as the estimator's ``predict_proba``) and the predicted class."""
    scores = np.asarray(scores, dtype=np.float64)
    if shard.get("objective") != "logistic":
        return write_scores(path, ids, scores, id_column=id_column)
    classes = shard.get("classes") or [0, 1]
    probability = _sigmoid(scores)
    if scores.ndim == 2:
        probability /= probability.sum(axis=1, keepdims=True)
    return write_scores(path, ids, scores, probability, classes, id_column)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -500, 500)))


# --------------------------------------------------------------------------- what `vfl party` says

def say_trained(role: str, summary: dict, config: FederationConfig) -> list[str]:
    """What party ``role`` did in training: the coordinator's losses, a data party's shard, the DP spent."""
    if summary["role"] == "coordinator" and summary["models"] == 1:
        lines = [f"party {role}: trained {summary['epochs']} epochs, final loss {summary['loss_curve'][-1]:.6f}"]
    elif summary["role"] == "coordinator":
        lines = [f"party {role}: trained {summary['models']} one-vs-rest models "
                 f"({', '.join(map(str, summary['epochs']))} epochs), final losses "
                 f"{', '.join(f'{curve[-1]:.6f}' for curve in summary['loss_curve'])}"]
    else:
        lines = [f"party {role}: model shard written to {summary['model']}"]
    if "dp_spent" in summary:
        epsilon, delta = summary["dp_spent"]
        epochs = config.training.max_iter * summary["models"]
        lines.append(f"party {role}: differential privacy of the labels: ({epsilon:.3g}, {delta:g})-DP spent over "
                     f"{epochs} epochs" + (f" ({summary['models']} one-vs-rest models)" if summary["models"] > 1
                                           else ""))
    return lines


def say_predicted(role: str, summary: dict) -> list[str]:
    """What party ``role`` did in a prediction (:func:`prediction_line`), after the label party's classes."""
    return [*label_report(role, summary, metrics=False), prediction_line(summary),
            *explanations.said(role, summary)]


def prediction_line(summary: dict) -> str:
    """One line saying what a party did in a federated prediction.

    Parameters
    ----------
    summary : dict
        What :func:`predict` returned: ``party`` (its name), ``role`` (``"feature"``, ``"label"`` or
        ``"coordinator"``), ``mode``, ``rows``, the names ``label`` and ``coordinator``, the label party's
        ``scores``, and ``models`` (more than one: one-vs-rest).

    Returns
    -------
    str
        For example ``"party A: sent encrypted partial scores for 171 rows to B"``.
    """
    name, role, label, coordinator = summary["party"], summary["role"], summary["label"], summary["coordinator"]
    rows, table3 = summary["rows"], summary["mode"] == "table3"
    models = f" for each of {summary['models']} one-vs-rest models" if summary.get("models", 1) > 1 else ""
    if role == "feature":
        if table3:
            return (f"party {name}: sent partial scores for {rows} rows{models} to {coordinator} in clear "
                    "(table3 mode)")
        return f"party {name}: sent encrypted partial scores for {rows} rows{models} to {label}"
    if role == "coordinator":
        if table3:
            return (f"party {name}: added the partial scores of {rows} rows{models} and sent the scores to {label} "
                    "(table3 mode)")
        return f"party {name}: decrypted {rows} masked scores{models} for {label}"
    return f"party {name}: scores of {rows} rows{models} written to {summary['scores']}"
