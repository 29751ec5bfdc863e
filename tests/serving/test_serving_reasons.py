"""Reason codes in ``/score`` answers (``[serving] reasons``): the estimators' ``predict_reasons``, per id.

In one process: the label party's service and each feature party's, their own
handlers answering each other through the wire encoding, the coordinator's
decryption by its key (no links, no HTTP: the process tests of the other files
run those).  The models are fitted by the estimators and served from shards
written of them; the answers' reasons equal the estimator's ``predict_reasons``
on the same rows — a logistic model by id with a feature party consenting to
name its columns, the same under private queries (no codes: "information from
<party>"), and trees (party-level).  What a feature party receives with reasons
on is what it receives without, but the adverse side at ``load``.  Bad settings
and a consent naming a column the party does not have are refused by name.
"""

import itertools
import json
import threading
import time
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from vfl import VerticalDataset, VerticalGradientBoostingClassifier, VerticalLogisticRegression, VerticalMLPClassifier
from vfl.deploy.serving_settings import ServingSettings, parse_serving
from vfl.deploy.shards import linear as linear_shards
from vfl.deploy.shards import mlp as mlp_shards
from vfl.deploy.shards import trees as tree_shards
from vfl.errors import ConfigurationError
from vfl.families import FAMILIES
from vfl.parties import Coordinator
from vfl.protocols.release import ReleasePolicy
from vfl.serving import private
from vfl.serving.feature import FeatureService
from vfl.serving.label import LabelService
from vfl.serving.rounds import Layout, decrypted
from vfl.serving.store import open_store
from vfl.transport.message import Message, decode, encode

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
KEYS = dict(key_bits=1024, insecure=True)
FEATURES = ("telco", "shop")
CONSENT = {"telco": {"t0": "T-ZERO", "t1": "T-ONE"}}


def _wire(name, kind, fields):
    return decode(encode(Message(name, kind, -1, fields)))


def _data(n=160, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6)) * [1, 3, 4, 1, 0.5, 5] + [0, 5, 20, 0, 1, 20]
    z = ((x - x.mean(axis=0)) / x.std(axis=0)) @ [1.0, -1.0, 0.5, 2.0, -0.3, 0.7]
    ids = [f"r{i:03d}" for i in range(n)]
    frames = {"bank": pd.DataFrame(x[:, :2], columns=["b0", "b1"]).assign(y=(z + rng.normal(size=n) > 0).astype(int)),
              "telco": pd.DataFrame(x[:, 2:4], columns=["t0", "t1"]),
              "shop": pd.DataFrame(x[:, 4:], columns=["s0", "s1"])}
    frames = {k: f.assign(id=ids) for k, f in frames.items()}
    return VerticalDataset(frames, label="y", id_column="id"), frames, ids


class Federation:
    """The label party "bank", the feature parties, and the coordinator's key, in one process.

    ``settings[party]`` are each party's ``[serving]`` settings; the feature parties' stores are CSV files of
    ``frames``.  Every message a feature party receives is kept in ``received[party]``.
    """

    def __init__(self, folder, family, frames, settings, coordinator=None, features=FEATURES, consents=None):
        self.coordinator = coordinator
        self.layout = Layout(coordinator.context, True, 4096.0, 3) if coordinator is not None else None
        self.received = {k: [] for k in features}
        self.features = {}
        for k in features:
            frames[k].to_csv(folder / f"{k}.csv", index=False)
            service = FeatureService.__new__(FeatureService)
            service.role, service.label, service.workdir = k, "bank", None
            service.coordinator = "C" if coordinator is not None else None
            service.config = SimpleNamespace(family=FAMILIES[family], training=SimpleNamespace(frac_bits=32),
                                             party=lambda name: SimpleNamespace(reason_columns=(consents or {}).get(name)))
            service.settings = settings[k]
            service.store = open_store(str(folder / f"{k}.csv"), "features", "id", k, None)
            service.release = ReleasePolicy.in_process(k, "serve", allowed=family != "linear")
            service.shares, service.tables, service.named = {}, {}, {}
            service._lock, service._tables, service._keyed = threading.Lock(), threading.Lock(), threading.Condition()
            service.layout = self.layout
            self.features[k] = service
        frames["bank"].drop(columns=["y"]).to_csv(folder / "bank.csv", index=False)
        label = self.label = LabelService.__new__(LabelService)
        label.role, label.features, label.coordinator = "bank", list(features), "C" if coordinator else None
        label.config = SimpleNamespace(family=FAMILIES[family], training=SimpleNamespace(frac_bits=32))
        label.settings, label.metrics, label.layout = settings["bank"], None, self.layout
        label.store = open_store(str(folder / "bank.csv"), "features", "id", "bank", None)
        label.shares, label.held, label._tables, label._held = {}, {}, {}, threading.Condition()
        label._rounds, label._ready = itertools.count(1), dict.fromkeys([*features, "C"], "linked")
        label.ask = self.ask

    def load(self, version="1"):
        """The label party's start: its shard, then each feature party's ``load`` (and its private table, held)."""
        share = self.label._own_share(version)
        self.label.shares[version], self.label.current = share, version
        tables = int(self.label.private(share))
        for k, service in self.features.items():
            message = _wire("load", "public", {"round": 1, "version": version, "keep": version, "tables": tables,
                                               "reasons": share.reason_sign})
            self.received[k].append(message)
            self.label._check_loaded(k, share, _wire(*service._load(message)))
            while tables and service.tables[version].building:
                time.sleep(0.01)
            if tables:
                table = service.tables[version].table
                self.label.held[(k, version)] = private.HeldTable(k, version, table.ident, table.kind,
                                                                  table.payload_bytes, table.count, table.entries,
                                                                  table.key_fingerprint)

    def ask(self, round_id, requests, deadline):
        out = {}
        for peer, (name, kind, fields) in requests.items():
            message = _wire(name, kind, dict(fields, round=round_id))
            if peer == "C":
                out[peer] = _wire("decrypted", "masked", decrypted(self.layout, self.coordinator.context, message,
                                                                   "bank", 10 ** 6))
                continue
            self.received[peer].append(message)
            service = self.features[peer]
            handler = service._evaluate if name == "evaluate" else service._round   # a round's: its family's
            out[peer] = _wire(*handler(message))
        return out

    def reasons(self, ids):
        _, answers = self.label.score(ids, [None] * len(ids), time.monotonic() + 60)
        return {a["id"]: a["reasons"] for a in answers}


def _settings(folder, bank=None, parties=FEATURES, **features):
    return {"bank": ServingSettings(models=folder / "models", **(bank or {})),
            **{k: ServingSettings(models=folder / "models", **features.get(k, {})) for k in parties}}


def _expected(model, d, k):
    table = model.predict_reasons(d, k=k)
    return {key: [r for r in row if isinstance(r, str)] for key, row in zip(table.index, table.itertuples(index=False))}


@pytest.fixture(scope="module")
def logistic(tmp_path_factory):
    folder = tmp_path_factory.mktemp("reasons-linear")
    d, frames, ids = _data()
    model = VerticalLogisticRegression(max_iter=15, reason_columns=CONSENT, **KEYS).fit(d)
    scalers = model._fitted_scalers()
    (folder / "models" / "1").mkdir(parents=True)
    for name in ("bank", *FEATURES):
        label = name == "bank"
        params = np.append(model.coef_[name], model.intercept_) if label else np.ravel(model.coef_[name])
        linear_shards.write_shard(folder / "models" / "1" / f"model_{name}.json", name,
                                  "label" if label else "feature", "logistic", list(model.feature_names_[name]),
                                  params, label, "fit", classes=[int(c) for c in model.classes_] if label else None,
                                  label="y" if label else None, scaler=scalers[name])
    coordinator = Coordinator(1024, insecure=True)
    coordinator.generate_keys()
    return SimpleNamespace(folder=folder, d=d, frames=frames, ids=ids, model=model, coordinator=coordinator)


def test_linear_reasons_by_id_equal_predict_reasons_and_the_feature_party_learns_only_the_side(logistic):
    folder, ids = logistic.folder, logistic.ids
    on = Federation(folder, "linear", logistic.frames, _settings(
        folder, {"queries": "by_id", "reasons": 3}), logistic.coordinator,
        consents={"telco": {"t0": "T-ZERO", "t1": "T-ONE"}})
    on.load()
    got = on.reasons(ids)
    expected = _expected(logistic.model, logistic.d, 3)
    assert got == expected
    flat = {code for row in got.values() for code in row}
    assert {"T-ZERO", "T-ONE", "information from shop"} <= flat and not flat & {"t0", "t1", "s0", "s1"}
    # what the feature parties received: with reasons off, the same messages but the adverse side at load
    off = Federation(folder, "linear", logistic.frames, _settings(folder, {"queries": "by_id"}), logistic.coordinator)
    off.load()
    _, plain = off.label.score(ids[:5], [None] * 5, time.monotonic() + 60)
    on.received = {k: on.received[k][:1] for k in FEATURES}
    on.reasons(ids[:5])
    assert "reasons" not in plain[0]
    for k in FEATURES:
        (load_on, score_on), (load_off, score_off) = on.received[k], off.received[k]
        assert {f: v for f, v in load_on.fields.items() if f != "reasons"} == \
            {f: v for f, v in load_off.fields.items() if f != "reasons"}
        assert load_on.fields["reasons"] == 1.0 and load_off.fields["reasons"] == 0.0
        assert set(score_on.fields) == set(score_off.fields) == {"round", "version", "key", "ids"}
        assert score_on.fields["ids"] == score_off.fields["ids"]
    # what telco sent back: one code per id, an index into the codes it published at load
    share = on.label.share
    assert share.feature_reasons["telco"][1] == ["T-ZERO", "T-ONE"] and share.feature_reasons["shop"][1] == []
    assert share.feature_reasons["telco"][0] == pytest.approx(0.0, abs=1e-12)       # standardized: mean at 0


def test_linear_reasons_under_private_queries_name_parties_only(logistic):
    folder, ids = logistic.folder, logistic.ids
    served = Federation(folder, "linear", logistic.frames, _settings(
        folder, {"reasons": 3}), logistic.coordinator, consents={"telco": {"t0": "T-ZERO"}})
    served.load()
    assert served.label.private(served.label.share)
    got = served.reasons(ids)
    model = logistic.model
    kept = model.reason_columns
    try:
        expected = _expected(model.set_params(reason_columns=None), logistic.d, 3)
    finally:
        model.set_params(reason_columns=kept)
    assert got == expected
    for k in FEATURES:                          # the feature parties: no id, no request of their own for reasons
        assert [m.name for m in served.received[k]] == ["load", "evaluate"]


def test_tree_reasons_equal_predict_reasons(tmp_path):
    d, frames, ids = _data(n=120, seed=3)
    model = VerticalGradientBoostingClassifier(max_iter=3, max_depth=3, allow_reconstruction=list(FEATURES),
                                               **KEYS).fit(d)
    (tmp_path / "models" / "1").mkdir(parents=True)
    for name in ("bank", *FEATURES):
        tree_shards.write_shard(tmp_path / "models" / "1" / f"model_{name}.json", model._parties[name],
                                "label" if name == "bank" else "feature", "fit", label="y",
                                feature_parties=model.feature_parties_)
    served = Federation(tmp_path, "trees", frames, _settings(tmp_path, {"queries": "by_id", "reasons": 2}))
    served.load()
    got = served.reasons(ids)
    assert got == _expected(model, d, 2) and {f"information from {k}" for k in ("bank", *FEATURES)} <= \
        {code for row in got.values() for code in row}
    for k in FEATURES:
        assert [m.name for m in served.received[k]] == ["load", "leaves"]


def test_network_reasons_with_one_feature_party_equal_predict_reasons(tmp_path):
    """One feature party: its part reaches the label party unmasked anyway, so its Shapley value costs nothing more
    than its part at its training mean, once per version.  With two, reasons are refused (the sum is all it sees)."""
    d, frames, ids = _data(n=120, seed=5)
    frames = {k: frames[k] for k in ("bank", "telco")}
    d = VerticalDataset({k: f for k, f in frames.items()}, label="y", id_column="id")
    model = VerticalMLPClassifier(hidden_layer_sizes=(4,), max_iter=3, random_state=0,
                                  allow_reconstruction=["telco"]).fit(d)
    (tmp_path / "models" / "1").mkdir(parents=True)
    for name in ("bank", "telco"):
        mlp_shards.write_shard(tmp_path / "models" / "1" / f"model_{name}.json", model._parties[name],
                               "label" if name == "bank" else "feature", "fit", label="y", feature_parties=["telco"])
    for queries, asked in (("by_id", "part"), ("auto", "evaluate")):
        served = Federation(tmp_path, "mlp", dict(frames), _settings(
            tmp_path, {"queries": queries, "reasons": 2}, parties=("telco",)), features=("telco",))
        served.load()
        got = served.reasons(ids)
        assert got == _expected(model, d, 2) and any(got.values())     # (which parties: as the fit falls)
        assert [m.name for m in served.received["telco"]] == ["load", asked]
    from vfl.serving import reasons
    with pytest.raises(ConfigurationError, match="split network of 2 feature parties, which vfl serve does not "
                                                 "explain"):
        reasons.check(served.label.share, ServingSettings(reasons=4), ["A1", "A2"], "bank")


@pytest.mark.parametrize("value, words", [
    (-1, "reasons must be a whole number from 0 to 20"),
    ("yes", "reasons must be a whole number from 0 to 20 (the reason codes each answer gives at most; 0: none), "
            "got 'yes'"),
    (True, "reasons must be a whole number"),
])
def test_a_bad_reasons_value_is_refused_at_start(tmp_path, value, words):
    with pytest.raises(ConfigurationError) as caught:
        parse_serving("federation.toml", {"bank": {"reasons": value}}, ["bank", "telco"], tmp_path)
    assert "federation.toml [serving.bank]: " + words in str(caught.value)


def test_reason_columns_in_a_serving_table_points_to_the_party_s_own_table(tmp_path):
    with pytest.raises(ConfigurationError, match=r"\[serving.telco\]: reason_columns is a feature party's consent "
                                                 r".* put it in the party's own \[parties.NAME\] table"):
        parse_serving("federation.toml", {"telco": {"reason_columns": ["calls"]}}, ["bank", "telco"], tmp_path)


def test_a_consent_naming_a_column_the_party_does_not_have_is_refused_at_load(logistic):
    folder = logistic.folder
    served = Federation(folder, "linear", logistic.frames, _settings(
        folder, {"queries": "by_id", "reasons": 3}), logistic.coordinator, consents={"telco": {"calls": "T01"}})
    with pytest.raises(ConfigurationError, match=r"party telco: its reason_columns names 'calls', a column model "
                                                 r"version 1 does not have \(its columns: \['t0', 't1'\]\)"):
        served.load()


def test_reasons_on_a_model_they_do_not_fit_are_refused_at_start_naming_the_fix(logistic, tmp_path):
    served = Federation(logistic.folder, "linear", logistic.frames, _settings(logistic.folder, {"reasons": 2}),
                        logistic.coordinator)
    shard = json.loads((logistic.folder / "models" / "1" / "model_bank.json").read_text())
    for name in ("bank", *FEATURES):
        plain = json.loads((logistic.folder / "models" / "1" / f"model_{name}.json").read_text())
        plain.pop("standardize", None)
        (tmp_path / "2").mkdir(exist_ok=True)
        (tmp_path / "2" / f"model_{name}.json").write_text(json.dumps(plain))
    assert shard["standardize"]
    assert served.label._own_share("1").reason_sign == 1.0
    for adverse, sign in ((1, 1.0), (0, -1.0)):
        served.label.settings = ServingSettings(models=logistic.folder / "models", reasons=2, reasons_adverse=adverse)
        assert served.label._own_share("1").reason_sign == sign
    served.label.settings = ServingSettings(models=logistic.folder / "models", reasons=2, reasons_adverse="maybe")
    with pytest.raises(ConfigurationError, match=r"model version 1 cannot give them: adverse must be one of the "
                                                 r"classes \[0, 1\], got 'maybe'; set reasons = 0"):
        served.label._own_share("1")
    served.label.settings = ServingSettings(models=tmp_path, reasons=2)
    with pytest.raises(ConfigurationError, match=r"party bank: reasons = 2, but model version 2 cannot give them: "
                                                 r"its shard .* keeps no training mean .* train the model again; "
                                                 r"set reasons = 0"):
        served.label._own_share("2")
