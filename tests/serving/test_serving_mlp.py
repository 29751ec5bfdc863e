"""``vfl serve`` with split networks: two feature parties (A1, A2), the label party B and the coordinator C.

Three networks of one federation are trained in-process (binary, multiclass,
regression) and served as the model versions 1, 2 and 3; C deals the masks of
every round (two feature parties).  The answers equal in-process prediction from
the same shards (:func:`vfl.runs.mlp.prediction_programs`, what ``vfl predict``
runs); an id a feature party does not hold and rows with a missing value get
their statuses while the other ids of the round are scored; a reload switches
every party to the next version.  A feature party's ``part`` answer is its part
plus C's mask, and uniform ring elements for an id it cannot score.
"""

import concurrent.futures as cf

import httpx
import numpy as np
import pandas as pd
import pytest

from vfl.crypto import ring
from vfl.deploy.config import load_config, write_config
from vfl.deploy.shards import mlp as shards
from vfl.protocols import Roster
from vfl.runs import mlp as run
from vfl.runs.data import RoleData
from vfl.runs.threads import run_in_threads
from vfl.serving import messages
from vfl.transport.message import Message
from vfl.transport.tls import write_federation_certs
from vfl_net_helpers import _free_ports
from vfl_serve_helpers import Services

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow,    # processes, TLS links and servers
              pytest.mark.filterwarnings("ignore::vfl.errors.LabelLeakWarning")]
ROLES = {"A1": "feature", "A2": "feature", "B": "label", "C": "coordinator"}
COLUMNS = {"A1": ["a0", "a1"], "A2": ["a2", "a3"], "B": ["b0"]}
ROSTER = Roster(("A1", "A2"), "B", "C")
#: one feature party: no masks, no coordinator at serving
SINGLE = {"A": ["a0", "a1", "a2", "a3"], "B": ["b0"]}
TASKS = {"1": "binary", "2": "multiclass", "3": "regression"}
TRAINING = {"model": "mlp", "hidden_layer_sizes": [4, 3], "bottom_sizes": [3], "activation": "tanh",
            "batch_size": 40, "iterations": 3, "tol": 0.0, "learning_rate_init": 0.05, "random_state": 3,
            "early_stopping": False}
UNKNOWN, INCOMPLETE_A2, INCOMPLETE_B = (0, 1), 5, 7     # test rows (by id order) the stores leave out or blank


def _labels(signal, task):
    if task == "binary":
        return np.where(signal > 0, "yes", "no")
    if task == "multiclass":
        return np.array(["low", "mid", "high"])[np.digitize(signal, [-1.0, 1.0])]
    return signal


def _frames(n, rng, task, prefix, layout=COLUMNS):
    x = rng.normal(size=(n, 5))
    signal = x @ np.array([1.0, -1.0, 0.5, 2.0, -0.5]) + np.tanh(x[:, 0] * x[:, 4]) + rng.normal(scale=0.3, size=n)
    ids = [f"{prefix}{i:03d}" for i in range(n)]
    frames, at = {}, 0
    for name, columns in layout.items():
        frames[name] = pd.DataFrame(x[:, at:at + len(columns)], columns=columns).assign(id=ids)
        at += len(columns)
    frames["B"]["label"] = _labels(signal, task)
    return frames


def _role_data(frames, labelled=True):
    return {name: RoleData([c for c in frame.columns if c not in ("id", "label")],
                           frame[[c for c in frame.columns if c not in ("id", "label")]].to_numpy(float),
                           frame["label"].to_numpy() if labelled and name == "B" else None)
            for name, frame in frames.items()}


def _train(folder, config_path, task, version, test, roster=ROSTER, layout=COLUMNS):
    """Train one network in-process; write its shards as model version ``version``; its outputs on ``test``."""
    config = load_config(config_path)
    train = _frames(200, np.random.default_rng(int(version)), task, "train", layout)
    trained = run_in_threads(roster, run.training_programs(_role_data(train), config.training, roster))
    parties = {}
    for name in roster.data_parties:
        kind = "label" if name == roster.label else "feature"
        path = shards.write_shard(folder / "models" / version / f"model_{name}.json", trained[name].party, kind,
                                  config.fingerprint("train"), label="label" if kind == "label" else None,
                                  feature_parties=roster.features,
                                  record=trained[name].record if kind == "label" else None)
        parties[name] = shards.shard_party(shards.read_shard(path, name, kind), name)   # from the shards, as served
    programs = run.prediction_programs(_role_data(test, labelled=False), parties, config.training, roster)
    return run_in_threads(roster, programs)["B"]


def _federation(folder, roles, http):
    tls = write_federation_certs(folder / "certs", list(roles))
    ports = _free_ports(len(roles))
    parties = {name: {"role": role, "address": f"127.0.0.1:{port}", "certificate": tls[name].certificate,
                      "key": tls[name].key} for (name, role), port in zip(roles.items(), ports)}
    for entry in parties.values():          # stores of 30 rows: too few to check a release on; the feature
        if entry["role"] == "feature":      # parties opt in (the check's refusal is tested in tests/mlp)
            entry["allow_reconstruction"] = True

    def config(task):
        return write_config(folder / f"federation-{task}.toml", tls["B"].ca, parties, dict(TRAINING, task=task),
                            {"connect_timeout": 60, "timeout": 60},
                            serving={"B": {"http": f"127.0.0.1:{http}", "allow_inline_features": True,
                                                  "batch_wait_ms": 20}})
    return config


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("serving-mlp")
    http = _free_ports(1)[0]
    config = _federation(folder, ROLES, http)
    test = _frames(30, np.random.default_rng(9), "binary", "t")
    expected = {version: _train(folder, config(task), task, version, test) for version, task in TASKS.items()}
    config = folder / "federation-binary.toml"
    stores = {name: frame.copy() for name, frame in test.items()}
    stores["A1"] = stores["A1"].drop(index=list(UNKNOWN))
    stores["A2"].loc[INCOMPLETE_A2, "a3"] = np.nan
    stores["B"].loc[INCOMPLETE_B, "b0"] = np.nan
    services = Services(config, folder / "serve", f"http://127.0.0.1:{http}")
    services.start("C")
    for name, frame in stores.items():
        frame.drop(columns=["label"], errors="ignore").to_csv(folder / f"{name}_store.csv", index=False)
        services.start(name, "--load-csv", folder / f"{name}_store.csv",
                       *(["--models", folder / "models", "--version", "1"] if name == "B" else
                         ["--models", folder / "models"]))
    services.wait_healthy()
    yield {"services": services, "ids": list(test["B"]["id"]), "expected": expected, "test": test,
           "folder": folder, "config": config}
    services.stop_all()


def _results(response):
    assert response.status_code == 200, response.text
    return {r["id"]: r for r in response.json()["results"]}


def _check_statuses(results, ids):
    for i in UNKNOWN:
        assert results[ids[i]]["error"]["code"] == "unknown_id" and results[ids[i]]["error"]["party"] == "A1"
    assert results[ids[INCOMPLETE_A2]]["error"]["code"] == "incomplete_row"
    assert results[ids[INCOMPLETE_A2]]["error"]["party"] == "A2"
    assert results[ids[INCOMPLETE_B]]["error"]["code"] == "incomplete_row"
    assert results[ids[INCOMPLETE_B]]["error"]["party"] == "B"
    return [i for i in range(len(ids)) if i not in (*UNKNOWN, INCOMPLETE_A2, INCOMPLETE_B)]


def test_binary_answers_equal_prediction_from_the_shards_with_per_id_statuses(served):
    s, ids, expected = served["services"], served["ids"], served["expected"]["1"][:, 0]
    response = s.score(ids)
    assert response.json()["model_version"] == "1"
    results = _results(response)
    scored = _check_statuses(results, ids)
    assert len(scored) == 26
    got = np.array([results[ids[i]]["probability"] for i in scored])
    np.testing.assert_allclose(got, expected[scored], rtol=0, atol=1e-9)
    assert got.std() > 0.05
    for i in scored:
        r = results[ids[i]]
        assert r["prediction"] == ("yes" if r["probability"] >= 0.5 else "no")
        assert 1 / (1 + np.exp(-r["score"])) == pytest.approx(r["probability"], abs=1e-12)
    row = served["test"]["B"].iloc[INCOMPLETE_B]            # B's own row inline: scored after all
    inline = _results(s.score([ids[INCOMPLETE_B]], features=[{"b0": float(row["b0"])}]))
    assert inline[ids[INCOMPLETE_B]]["probability"] == pytest.approx(expected[INCOMPLETE_B], abs=1e-9)
    null = s.score([ids[3]], features=[{"b0": None}])
    assert null.status_code == 400 and "a split network needs every value" in null.json()["error"]["message"]


def _rounds(s):
    metrics = httpx.get(f"{s.url}/metrics", timeout=10).text
    lines = [line for line in metrics.splitlines() if line.startswith('vfl_serve_round_seconds_count{model="mlp"}')]
    return float(lines[0].split()[-1]) if lines else 0.0


def test_concurrent_requests_are_batched_into_rounds_and_counted(served):
    s, ids, expected = served["services"], served["ids"], served["expected"]["1"][:, 0]
    scored = list(range(8, 30))
    before = _rounds(s)
    with cf.ThreadPoolExecutor(11) as pool:
        answers = list(pool.map(lambda i: s.score([ids[i]]), scored))
    for i, response in zip(scored, answers):
        assert response.json()["results"][0]["probability"] == pytest.approx(expected[i], abs=1e-9)
    assert 0 < _rounds(s) - before < len(scored)            # rounds of several requests each
    assert s.health()["model"] == "mlp"


def test_reload_to_multiclass_then_regression(served):
    s, ids = served["services"], served["ids"]
    for version in ("2", "3"):
        response = httpx.post(f"{s.url}/admin/reload", json={"version": version}, timeout=60)
        assert response.status_code == 200, response.text
        body = s.score(ids).json()
        assert body["model_version"] == version
        results = {r["id"]: r for r in body["results"]}
        scored = _check_statuses(results, ids)
        expected = served["expected"][version]
        if version == "2":
            classes = ["high", "low", "mid"]
            got = np.array([[results[ids[i]]["probabilities"][c] for c in classes] for i in scored])
            np.testing.assert_allclose(got, expected[scored], rtol=0, atol=1e-9)
            assert [results[ids[i]]["prediction"] for i in scored] == list(np.array(classes)[got.argmax(axis=1)])
        else:
            got = np.array([results[ids[i]]["score"] for i in scored])
            np.testing.assert_allclose(got, expected[scored, 0], rtol=0, atol=1e-9)
            assert "probability" not in results[ids[scored[0]]] or results[ids[scored[0]]]["probability"] is None
    assert s.health()["model_version"] == "3"


def test_a_feature_partys_part_is_masked_and_an_id_it_cannot_score_is_uniform(served):
    """What the label party opens: A1's part + C's mask; for an id A1 lacks, uniform elements (no part of A2's)."""
    from vfl.serving.feature import FeatureService
    from vfl.serving.store import open_store

    folder, ids = served["folder"], served["ids"]
    config = load_config(served["config"])
    store = open_store(str(folder / "A1_store.csv"), "features", "id", "A1", None)
    service = FeatureService(config, "A1", store, config.serving_of("A1").with_options(models=folder / "models"))
    service.dealer = "linked"                   # as if its link to C were up (C deals the masks; here: the test)
    service._load(Message("load", "public", -1, {"version": "1", "keep": "1"}))
    share = service.shares["1"]
    asked = [ids[0], ids[3]]                    # A1 lacks ids[0]
    masks = {}
    for attempt in range(2):
        tag = bytes([attempt]) * messages.TOKEN_BYTES
        masks[tag] = ring.uniform((2, share.units))
        service.masks.put(tag, ring.to_bytes(masks[tag]))
        name, kind, fields = service._round(Message("part", "public", -1, {
            "version": "1", "ids": messages.pack_ids(asked), "token": tag, "wait_ms": 1000}))
        assert (name, kind) == ("part", "masked") and list(fields["status"]) == [messages.UNKNOWN, messages.OK]
        opened = ring.reduce(ring.from_bytes(fields["values"], (2, share.units)) - masks[tag])
        row = served["test"]["A1"].iloc[3][COLUMNS["A1"]].to_numpy(float)[None, :]
        assert (opened[1] == ring.encode(share.parts(row)[0], config.training.frac_bits)[0]).all()
        masks[tag] = opened[0]
        assert service.masks.take(tag, 0.0) is None            # a mask is used once
    first, second = masks.values()
    assert not (first == second).any() and not (first == 0).any()   # fresh uniform elements, not a zero part
    store.close()


def test_the_coordinator_killed_is_named_then_scoring_recovers(served):
    """Once healthy again, the first request is scored as before (the coordinator waits for its feature parties'
    links), whichever version the module's earlier tests left in use."""
    s, ids = served["services"], served["ids"]
    before = s.score([ids[9]]).json()
    s.kill("C")
    response = s.score([ids[9]])
    assert response.status_code == 503 and response.json()["error"]["party"] == "C", response.text
    s.start("C")
    s.wait_healthy()
    after = s.score([ids[9]]).json()
    assert "results" in after, after
    assert after["model_version"] == before["model_version"]
    assert after["results"][0]["score"] == pytest.approx(before["results"][0]["score"], abs=1e-9)


def test_one_feature_party_is_served_without_masks_or_coordinator(tmp_path):
    """One feature party (as batch prediction): its part in the clear to B, no coordinator linked or started."""
    http = _free_ports(1)[0]
    config = _federation(tmp_path, {"A": "feature", "B": "label", "C": "coordinator"}, http)("binary")
    roster = Roster(("A",), "B", "C")
    test = _frames(12, np.random.default_rng(4), "binary", "s", SINGLE)
    expected = _train(tmp_path, config, "binary", "1", test, roster, SINGLE)[:, 0]
    test["A"].iloc[1:].to_csv(tmp_path / "A_store.csv", index=False)         # A lacks the first id
    test["B"].drop(columns=["label"]).to_csv(tmp_path / "B_store.csv", index=False)
    services = Services(config, tmp_path / "serve", f"http://127.0.0.1:{http}")
    try:
        for name in ("A", "B"):
            services.start(name, "--load-csv", tmp_path / f"{name}_store.csv")
        assert set(services.wait_healthy()["parties"]) == {"A"}
        ids = list(test["B"]["id"])
        results = _results(services.score(ids))
        assert results[ids[0]]["error"]["code"] == "unknown_id" and results[ids[0]]["error"]["party"] == "A"
        got = np.array([results[key]["probability"] for key in ids[1:]])
        np.testing.assert_allclose(got, expected[1:], rtol=0, atol=1e-9)
    finally:
        services.stop_all()
