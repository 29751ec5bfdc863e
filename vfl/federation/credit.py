"""The credit-scoring pipeline as one process per party: PSI, binning, WOE/IV, selection, model, scorecard.

``vfl party`` with a ``[pipeline]`` table runs, over the party's
:class:`~vfl.deploy.session.Session` (mutual TLS, the settings
fingerprint):

1. the private set intersection (``[data] align``);
2. its own table statistics (``statistics_NAME.csv``; nothing crosses);
3. its own binning (its thresholds stay with it; the label party may bin its
   columns monotonically with its labels);
4. WOE/IV (:mod:`vfl.protocols.credit.woe`, the label party's key) and
   selection (:mod:`vfl.protocols.credit.selection`): every party learns which
   of its own columns stay; a checkpoint after it, so ``--resume`` skips both
   when every data party has one;
5. the model: each party codes its selected columns (WOE values, or bin
   indicators for a feature party not given its WOE values), standardizes them
   and trains logistic regression with the coordinator through linear's run
   (:mod:`vfl.runs.linear`, the coded columns as its data; the column counts as
   ``model_columns``, :func:`model_columns`; checkpoints every epoch), then the
   label party's training metrics by one private prediction;
6. the scorecard: each party its own points per bin; the shard
   (:mod:`vfl.deploy.shards.credit`).

``vfl predict`` bins and codes each party's new rows with its shard, runs the
private prediction, and the label party writes each row's scorecard score,
log-odds, probability and class; every party writes the population stability
of its columns between its training and scoring rows (``psi_NAME.csv``).
The coordinator takes part in the model only.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from vfl.errors import ConfigurationError, DataError, ProtocolError
from vfl.deploy.checkpoint import check_same_data
from vfl.deploy.jsonfile import read_json, write_json, write_private_csv
from vfl.deploy.shards import credit as shards
from vfl.deploy.shards.credit import read_shard
from vfl.deploy.compute import uses_compute
from vfl.deploy.config import FederationConfig
from vfl.deploy.data import PartyData, load_csv
from vfl.deploy.report import class_indices, classes_line, rows_report
from vfl.federation.linear import (agree_on_models, checkpointing, needs_data, release_policy, report_training,
                                  score_rows, scoring_part)
from vfl.deploy.session import check_equations, stops_told
from vfl.federation import explanations
from vfl.federation.loop import party_run
from vfl.parties import Coordinator
from vfl.parties.binning import Binner
from vfl.parties.credit.scorecard import Coder
from vfl.parties.credit.statistics import describe, population_stability
from vfl.parties.scaling import Standardizer
from vfl.protocols.release import ReleaseWarning, refuse
from vfl.protocols.fields import count, flag
from vfl.runs import credit as credit_run
from vfl.runs import linear as run_linear
from vfl.runs.data import RoleData
from vfl.runs.hooks import Hooks
from vfl.runs.linear import raw_release

#: The format of the checkpoint written after WOE/IV and selection.
STEP_FORMAT = "vfl-pipeline-step/1"


# --------------------------------------------------------------------------- training

@uses_compute
def train(config: FederationConfig, role: str, data_path=None, workdir=".", resume: bool = False,
          narrate: bool = False, progress: bool | None = False, record=None) -> dict:
    """Run party ``role``'s part of the whole pipeline; write its statistics, shard and transcript.

    Returns a summary dict: ``party``, ``role``, the written paths, and at the label
    party ``iv`` (every party's columns), ``selected`` and ``metrics``; at a data
    party its own ``selected`` columns.
    """
    settings, credit = config.training, config.pipeline
    kind = config.role_of(role)
    workdir = Path(workdir)
    with stops_told(config, role, "train"):
        data = _data(config, role, kind, data_path)
    fingerprint = config.fingerprint("train")
    step_path = workdir / "checkpoints" / f"pipeline_{role}.json"
    if not resume:
        step_path.unlink(missing_ok=True)
    coordinator = Coordinator.for_settings(settings) if kind == "coordinator" else None
    summary = {}
    with party_run(config, role, "train", data, workdir, resume=resume, narrate=narrate, progress=progress,
                   record=record, min_rows=10) as this:
        ep, store, narrator, shown, data = this.endpoint, this.store, this.narrator, this.shown, this.data
        if data:
            shown.step("table statistics")
            statistics = describe(data.features, data.columns)
            summary["statistics"] = str(_write_csv(statistics, workdir / f"statistics_{role}.csv"))
            shown.step("binning")
            binner = credit_run.fit_binner(credit, data, role, kind == "label", scorecard=True)
            codes = credit_run.bin_codes(binner, data, role)
            if narrator:
                narrator.say(f"binned its {len(data.columns)} columns: "
                             f"{', '.join(str(int(b)) for b in binner.n_bins_)} bins (and a missing bin each)")
            shown.step("WOE and IV")
            step = _woe_and_selection(ep, config, role, kind, data, binner, step_path, fingerprint, resume,
                                      narrator, store.data)
            coder = _coder(credit, role, binner, codes, step, data.columns, config.roster)
            coded = RoleData(coder.names, coder.transform(codes), data.labels if kind == "label" else None,
                             None, data.ids)
            summary["selected"] = [data.columns[j] for j in coder.selected]
        on_model = _on_model(config, role, kind, step["classes"] if kind == "label" else None, store, resume,
                             narrator, shown)
        trained = _train_model(ep, config, kind, coded if data else None, coordinator, on_model, narrator)
        shown.close()
        if kind == "coordinator":
            party, result = coordinator, trained.results[0]
        else:
            party, scaler = trained.parties[0], trained.scaler
            model_x = run_linear.scaled(coded.features, scaler)
        parts = None
        if kind == "feature":
            parts = _check_trained_part(config, role, workdir, data, binner, coder, party, scaler, model_x)
        shown.step("validation and metrics")
        metrics = report_training(this.session, config, role, kind, [party], coordinator, 1, scores=parts)
        shown.step("scorecard")
    summary = this.summary(**summary)
    if kind == "coordinator":
        summary.update(loss_curve=result["loss_curve"], epochs=result["n_iter"], converged=result["converged"])
        write_json(workdir / f"training_{role}.json", summary, private=False)
    else:
        shard = _shard(config, role, kind, data, binner, coder, party, scaler, step, this.trained_with)
        summary["model"] = str(write_json(workdir / f"model_{role}.json", shard, private=True))
        if kind == "label":
            summary.update(metrics=metrics, iv=step["iv"], plan=step["plan"], classes=step["classes"],
                           base_points=shard["scorecard"]["base_points"])
    store.clear()
    step_path.unlink(missing_ok=True)
    return summary


_TRAINING_PART = "its part of each score of its training rows (the label party's training metrics)"


def _check_trained_part(config: FederationConfig, role: str, workdir: Path, data: PartyData, binner: Binner,
                        coder: Coder, party, scaler, model_x) -> list | None:
    """A feature party after training: the release check of its part of a score (one value per bin of its selected
    columns) against its raw columns and their bins (:func:`vfl.runs.credit.check_part`), on its training rows.

    The verdict is kept in its ledger (a later prediction of too few rows to assess uses it).  The label party's
    training metrics release its parts of the training rows: checked as a release (refused unless the party opted
    in; with DP, the noisy parts are what is sent, returned per model).  Without the metrics a refusal is a
    warning now (prediction will refuse).
    """
    policy = release_policy(config, role, workdir)
    coef = np.atleast_2d(np.asarray(party.coef, dtype=np.float64))
    spec = raw_release(coef, scaler)
    assessment = credit_run.check_trained_part(policy, config.roster.label, binner, coder, data.features, spec,
                                               what=credit_run.PART + " at prediction")
    if not config.report_metrics:
        if not policy.allowed and policy.epsilon is None and not assessment.passes():
            try:
                refuse(role, config.roster.label, credit_run.PART + " at prediction", assessment, policy.how)
            except ConfigurationError as exc:
                warnings.warn(f"{exc} (checked on its training rows; prediction will refuse)", ReleaseWarning,
                              stacklevel=2)
        return None
    sent = credit_run.check_part(policy, config.roster.label, binner, coder, data.features, spec,
                                 what=_TRAINING_PART, ids=data.ids, values=np.asarray(model_x) @ coef.T)
    if getattr(party, "validation", None) is None:
        return [sent[:, 0]]
    if policy.epsilon is not None:      # the metrics score the training rows, then the validation rows, exactly
        raise ConfigurationError(f"party {role}: release_dp cannot noise the training metrics' parts when a "
                                 "validation split holds rows out; set report_metrics = false")
    return None                         # every row checked above, training and validation alike


def _data(config: FederationConfig, role: str, kind: str, data_path, columns=None,
          label_required: bool = True) -> PartyData | None:
    if not needs_data(role, kind, data_path):
        return None
    return load_csv(data_path, role, config.id_column, label=config.label if kind == "label" else None,
                    columns=columns, label_required=label_required,
                    foreign=(config.label,) if kind == "feature" else (), missing=True)


def _woe_and_selection(ep, config: FederationConfig, role: str, kind: str, data: PartyData, binner: Binner,
                       path: Path, fingerprint: str, resume: bool, narrator, digest: str | None = None) -> dict:
    """Steps 4: WOE/IV and selection between the data parties, or their saved result when every one has it."""
    credit, settings = config.pipeline, config.training
    roster = config.roster.without_coordinator()
    saved = _load_step(path, role, fingerprint, digest) if resume else None
    if kind == "feature":
        ep.send(roster.label, "pipeline_resume", "public", saved=saved is not None)
        go = flag(ep.recv(roster.label, "pipeline_resume"), "resume")
    else:
        have = [flag(ep.recv(k, "pipeline_resume"), "saved") for k in roster.features]
        go = saved is not None and all(have)
        for k in roster.features:
            ep.send(k, "pipeline_resume", "public", resume=go)
    if go:
        if saved is None:
            raise ProtocolError(f"{role}: {roster.label} resumes after selection, but {role} has no checkpoint of it")
        if narrator:
            narrator.say("resume: WOE/IV and selection from its checkpoint")
        return saved
    if kind == "feature":
        _, step = credit_run.train_feature(ep, data, role, binner, roster, credit)
    else:
        _, step = credit_run.train_label(ep, data, role, binner, roster, credit, settings.key_bits, settings.insecure)
        plan = step["plan"]
        empty = [k for k in roster.features if not any(plan[k])]
        if empty:
            raise DataError(f"party {role}: no column of {', '.join(empty)} was selected; every feature party must "
                            "keep a column for the model (lower iv_threshold, or raise top_k)")
    write_json(path, {"format": STEP_FORMAT, "party": role, "fingerprint": fingerprint, "data": digest,
                      "step": step}, private=True)
    return step


def _load_step(path: Path, role: str, fingerprint: str, data: str | None = None) -> dict | None:
    if not path.exists():
        return None
    saved = read_json(path, "checkpoint")
    if saved.get("format") != STEP_FORMAT or saved.get("party") != role:
        raise DataError(f"{path} is not party {role}'s pipeline checkpoint")
    if saved.get("fingerprint") != fingerprint:
        raise ConfigurationError(f"party {role}: the checkpoint {path} was made with other settings; run without "
                                 "--resume to start afresh")
    check_same_data(role, path, saved.get("data"), data)
    return saved["step"]


def _coder(credit, role: str, binner: Binner, codes, step: dict, columns, roster) -> Coder:
    """This party's model columns (:func:`vfl.runs.credit.model_coder`), refused when none is left."""
    selected = [j for j, s in enumerate(step["selected"]) if s]
    coder = credit_run.model_coder(role, credit_run.coding(role, roster, credit.share_woe), binner, codes, selected,
                                   columns, step["woe"])
    if not coder.names:
        raise DataError(f"party {role}: none of its selected columns has two bins with training rows, so none "
                        "enters the model")
    return coder


def _train_model(ep, config: FederationConfig, kind: str, coded: RoleData | None, coordinator, on_model,
                 narrator) -> run_linear.Trained:
    """The model: linear's run (:mod:`vfl.runs.linear`) on the coded columns, logistic regression with the
    coordinator, each data party standardizing its own coded columns; the column counts travel as the pipeline's
    ``model_columns`` (:func:`model_columns`), not as linear's ``columns``."""
    settings, roster = config.training, config.roster
    if kind == "coordinator":
        return run_linear.train_coordinator(ep, coordinator, settings, roster, Hooks(
            on_model=on_model, on_batch_loss=narrator.batch_loss if narrator else None))
    program = run_linear.train_label if kind == "label" else run_linear.train_feature
    return program(ep, coded, settings, roster, Hooks(on_model=on_model, columns=model_columns))


def model_columns(ep, n_rows: int, n_columns: int, settings, roster, separate_validation: bool) -> None:
    """The pipeline's column-count exchange (``Hooks.columns`` of linear's run): every feature party tells the
    label party its model column count (message ``model_columns``); the label party checks the
    gradient-equations rule on every count.  ``separate_validation`` is not used (the pipeline has none)."""
    if ep.role != roster.label:
        ep.send(roster.label, "model_columns", "public", count=n_columns)
        return
    counts = {k: count(ep.recv(k, "model_columns"), "count", 1 << 20) for k in roster.features}
    counts[ep.role] = n_columns
    check_equations(n_rows, counts, settings, roster)


def _on_model(config: FederationConfig, role: str, kind: str, classes, store, resume: bool, narrator, shown):
    """The model's ``on_model`` hook: one model only, the label party's classes shown, its checkpoints (in the
    party's store) to resume from and its ``on_epoch`` (:func:`vfl.federation.linear.checkpointing`)."""
    def on_model(index: int, n_models: int, _classes) -> tuple:
        if n_models != 1:
            raise ProtocolError(f"{role}: the pipeline trains one model, {config.roster.label} announced {n_models}")
        if classes is not None and classes_line(role, classes):
            shown.line(classes_line(role, classes))
        shown.model(config.training.max_iter)
        return checkpointing(store, kind, resume, narrator, shown)
    return on_model


def _shard(config: FederationConfig, role: str, kind: str, data: PartyData, binner: Binner, coder: Coder, party,
           scaler, step: dict, fingerprint: str) -> dict:
    """This party's shard: its bins, coding, weights and points (the label party: the base points too)."""
    credit = config.pipeline
    coef = np.asarray(party.coef, dtype=np.float64)
    scaler = scaler if scaler is not None else Standardizer(np.zeros(len(coef)), np.ones(len(coef)))
    points = credit_run.points(coder, coef, scaler.mean, scaler.scale, credit.scale)
    model = {"columns": coder.names, "coef": coef.tolist(), **scaler.to_dict()}     # JSON numbers only
    local = credit_run.bin_codes(binner, data, role)
    model["training_mean"] = coder.transform(local).mean(axis=0).tolist()   # what explanations are taken against
    bin_counts = [np.bincount(local[:, j], minlength=int(binner.n_bins_[j]) + 1) for j in range(local.shape[1])]
    iv = step["iv"]
    scorecard = None
    if kind == "label":
        intercept = float(party.intercept)
        model.update(intercept=intercept, classes=step["classes"], label=config.label)
        scorecard = dict(credit.scale.to_dict(), base_points=credit_run.base_points(credit.scale, intercept))
    return shards.build(role, kind, data.columns, binner, bin_counts, coder, model, points, fingerprint, iv=iv,
                        scorecard=scorecard)


def _write_csv(frame: pd.DataFrame, path: Path) -> Path:
    return write_private_csv(frame, path)


# --------------------------------------------------------------------------- prediction

@uses_compute
def predict(config: FederationConfig, role: str, data_path=None, model_path=None, workdir=".", output=None,
            narrate: bool = False, progress: bool | None = False, record=None) -> dict:
    """Run party ``role``'s part of scoring new rows with its shard.

    Every data party writes the population stability of its columns
    (``psi_NAME.csv``); the label party writes per id the scorecard ``score``, the
    ``log_odds``, the ``probability`` of the event class and the ``prediction``.
    """
    roster = config.roster
    workdir = Path(workdir)
    kind, coordinator, shard = scoring_part(config, role, data_path, model_path, workdir, read_shard)
    data = None
    if shard is not None:
        with stops_told(config, role, "predict"):
            data = _data(config, role, kind, data_path, columns=shard["columns"], label_required=False)
            if config.explanations is not None and "training_mean" not in shard["model"]:
                raise DataError(f"party {role}: {model_path or workdir / f'model_{role}.json'} holds no training "
                                "mean of its model columns (a shard written before explanations), the reference an "
                                "explanation is taken against: train the pipeline again to explain it")
    summary = {"label": roster.label}
    with party_run(config, role, "predict", data, workdir, narrate=narrate, progress=progress, record=record,
                   trained_with=shard["trained_with"] if shard else None) as this:
        ep, data = this.endpoint, this.data
        features = params = None
        if data:
            binner = Binner.from_dict(shard["binning"])
            local = credit_run.bin_codes(binner, data, role)
            psi = pd.Series([population_stability(shard["bin_counts"][j],
                                                  np.bincount(local[:, j], minlength=len(shard["bin_counts"][j])))
                             for j in range(len(data.columns))], index=data.columns, name="psi")
            summary["psi"] = str(_write_csv(psi.to_frame(), workdir / f"psi_{role}.csv"))
            summary["max_psi"] = float(psi.max()) if len(psi) else 0.0
            coder = Coder.from_dict(shard["coding"])
            model = shard["model"]
            features = Standardizer.from_dict(model, len(model["columns"]), "model shard").transform(
                coder.transform(local))
            params = np.asarray(model["coef"] + ([model["intercept"]] if kind == "label" else []), dtype=np.float64)
        n_models = agree_on_models(ep, role, kind, roster, 1 if data else None)
        if n_models != 1:
            raise ProtocolError(f"{role}: the pipeline scores one model, {roster.label} announced {n_models}")
        sent = None
        if kind == "feature":
            scaler = Standardizer.from_dict(model, len(model["columns"]), "model shard")
            coef = np.atleast_2d(np.asarray(model["coef"], dtype=np.float64))
            sent = credit_run.check_part(release_policy(config, role, workdir), roster.label, binner, coder,
                                         data.features, raw_release(coef, scaler), what=credit_run.PART +
                                         " at prediction", ids=data.ids, values=features @ coef.T)[:, 0]
        scored = score_rows(ep, config, role, kind, features, shard and shard["model"]["columns"], params,
                            True, coordinator, scores=sent)
        if kind == "label":
            summary.update(rows=len(scored), scores=str(write_scores(output or workdir / "scores.csv", data.ids,
                                                                     scored, shard, config.id_column)))
            if data.labels is not None:
                y = class_indices(data.labels, shard["model"]["classes"])
                summary["metrics"] = (rows_report("logistic", scored, y)
                                      if y is not None else
                                      {"rows": len(data.labels), "metrics": {},
                                       "note": f"party {role}: no metrics: the label column holds values that are "
                                               "not classes of the model"})
        else:
            summary["rows"] = scored
        if data and config.explanations is not None:
            summary.update(_explain(ep, config, role, kind, data, shard, binner, coder, workdir,
                                    summary.get("scores")))
    return this.summary(**summary)


def _explain(ep, config: FederationConfig, role: str, kind: str, data: PartyData, shard: dict, binner: Binner,
             coder: Coder, workdir: Path, scores_path) -> dict:
    """A data party's part of ``[prediction] explain``: the logistic model's explanation on its model columns,
    reported per raw column (a column's WOE value or bin indicators together); a feature party's totals and
    codes checked against its raw columns and bins, as its part of a score is (:class:`ScorecardRelease`)."""
    model = shard["model"]
    coded = coder.transform(credit_run.bin_codes(binner, data, role))
    scaler = Standardizer.from_dict(model, len(model["columns"]), "model shard") if config.training.standardize \
        else None
    explaining = run_linear.Explaining(np.asarray(model["coef"], dtype=np.float64), scaler,
                                       np.asarray(model["training_mean"], dtype=np.float64),
                                       credit_run.model_groups(coder),
                                       explanations.consent(config, role, data.columns) if kind == "feature" else {})
    roster = config.roster.without_coordinator()
    if kind == "feature":
        release = credit_run.ScorecardRelease(release_policy(config, role, workdir), binner, coder, data.features)
        return {"explained": run_linear.explain_feature(ep, coded, model["columns"], explaining, roster,
                                                        release=release, ids=data.ids)}
    side = explanations.sign(config.explanations, model["classes"])
    result = run_linear.explain_label(ep, coded, explaining, float(model["intercept"]), roster, sign=side)
    return explanations.write(config, scores_path, data.ids, result, side)


def write_scores(path, ids, z, shard: dict, id_column: str = "id") -> Path:
    """The label party's output: per id the scorecard score, the log-odds, the event's probability, the class."""
    card = shard["scorecard"]
    from vfl.parties.credit.scorecard import ScorecardScale

    scale = ScorecardScale(card["base_score"], card["base_odds"], card["pdo"])
    classes = shard["model"]["classes"]
    z = np.asarray(z, dtype=np.float64)
    probability = 1.0 / (1.0 + np.exp(-np.clip(z, -500, 500)))
    frame = pd.DataFrame({id_column: ids, "score": scale.score(z), "log_odds": z, "probability": probability,
                          "prediction": np.where(probability >= 0.5, classes[1], classes[0])})
    return write_private_csv(frame, path, index=False)


# --------------------------------------------------------------------------- what `vfl party` says

def say_trained(role: str, summary: dict, config: FederationConfig) -> list[str]:
    """What party ``role`` did in training: its statistics and selected columns, the IV ranking (label party),
    the shard it wrote; the coordinator's steps and loss."""
    if summary["role"] == "coordinator":
        return [f"party {role}: trained the pipeline's model, {summary['epochs']} steps, final loss "
                f"{summary['loss_curve'][-1]:.6f}"]
    lines = [f"party {role}: its table statistics written to {summary['statistics']}",
             f"party {role}: selected {len(summary['selected'])} of its columns: {', '.join(summary['selected'])}"]
    if summary["role"] == "label":
        ranked = sorted(((iv, party, j) for party, ivs in summary["iv"].items() for j, iv in enumerate(ivs)),
                        reverse=True)
        shown = ", ".join(f"{party}[{j}] {iv:.3f}" + ("" if summary["plan"][party][j] else " (dropped)")
                          for iv, party, j in ranked[:15])
        lines += [f"party {role}: information value, highest first (party[column]): {shown}",
                  f"party {role}: scorecard base points {summary['base_points']:.2f}"]
    return [*lines, f"party {role}: pipeline shard (bins, coding, weights, points) written to {summary['model']}"]


def say_predicted(role: str, summary: dict) -> list[str]:
    """What party ``role`` did in a prediction: its population stability, the scores written or its part."""
    lines = [f"party {role}: population stability of its columns (largest {summary['max_psi']:.4f}) written to "
             f"{summary['psi']}"] if "psi" in summary else []
    return [*lines, f"party {role}: scorecard scores of {summary['rows']} rows written to {summary['scores']}"
            if summary["role"] == "label" else f"party {role}: took part in scoring {summary['rows']} rows",
            *explanations.said(role, summary)]
