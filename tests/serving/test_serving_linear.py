"""``vfl serve`` with a logistic model: three processes (feature party A, label party B, coordinator C).

The model is trained by ``vfl party`` first; each party then serves its own
shard and its own store.  Checked through HTTP: the scores equal the model's
(every party's plaintext partial scores added up, to the fixed point's
precision); unknown ids are per-id answers naming the party; bad requests get a
4xx naming the problem; the Python client; a feature party killed (503 naming it,
/health degraded, recovered once restarted) and stopped (the deadline: 504 naming
it); the coordinator restarted with a new key; a model version switched while a
client keeps scoring, no request without an answer.  This service takes inline
features (``allow_inline_features``): a client then reads B's weights exactly,
as docs/serving.md says.
"""

import json
import re
import shutil
import signal
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest

from vfl.serving.client import ScoringClient, ScoringError
from vfl.transport.tls import write_federation_certs
from vfl_net_helpers import _free_ports, run_parties, write_federation_file, write_party_data
from vfl_serve_helpers import Services

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]    # processes, TLS links and servers


def partial(shard, frame):
    """A party's plaintext partial score of the rows of ``frame``, from its shard (standardized columns)."""
    x = frame[shard["columns"]].to_numpy(float)
    scale = shard["standardize"]
    x = (x - np.array(scale["mean"])) / np.array(scale["scale"])
    return x @ np.array(shard["coef"]) + (shard.get("intercept") or 0.0)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("serving")
    tls = write_federation_certs(folder / "certs", ["A", "B", "C"])
    data = write_party_data(folder, n_rows=80)
    http = _free_ports(1)[0]
    config = write_federation_file(folder / "federation.toml", tls, _free_ports(3),
                                   # the same model every run (a zero start: the tests below assert which versions
                                   # the release check lets through, and those verdicts depend on the weights)
                                   training={"standardize": True, "packing": "auto", "init": "zeros"},
                                   network={"connect_timeout": 60},
                                   data={"serving": {"deadline_ms": 5000, "max_ids": 50, "batch_wait_ms": 2,
                                                     "B": {"http": f"127.0.0.1:{http}",
                                                           "allow_inline_features": True}}})
    results = run_parties("party", config, data, folder / "train", timeout=300)
    assert all(code == 0 for code, _, _ in results.values()), results
    shards = {}
    for name in "AB":
        shard = json.loads((folder / "train" / name / f"model_{name}.json").read_text())
        (folder / "models" / "1").mkdir(parents=True, exist_ok=True)
        shutil.copy(folder / "train" / name / f"model_{name}.json", folder / "models" / "1")
        twice = dict(shard, coef=[2 * w for w in shard["coef"]])        # version 2: another model of one training
        if name == "B":
            twice["intercept"] = shard["intercept"] - 1.0
        (folder / "models" / "2").mkdir(parents=True, exist_ok=True)
        (folder / "models" / "2" / f"model_{name}.json").write_text(json.dumps(twice))
        shards[name] = (shard, twice)
    a = pd.read_csv(data[("A", "test")], dtype={"id": str}).sort_values("id").reset_index(drop=True)
    b = pd.read_csv(data[("B", "test")], dtype={"id": str}).sort_values("id").reset_index(drop=True)
    a.iloc[3:].to_csv(folder / "A_store.csv", index=False)            # A lacks ids 0-2
    b.drop(index=[4, 5]).to_csv(folder / "B_store.csv", index=False)  # B lacks ids 4-5
    services = Services(config, folder / "serve", f"http://127.0.0.1:{http}")
    services.start("C")
    services.start("A", "--load-csv", folder / "A_store.csv")
    services.start("B", "--load-csv", folder / "B_store.csv", "--version", "1")
    services.wait_healthy()
    expected = {v: dict(zip(a["id"], partial(shards["A"][v], a) + partial(shards["B"][v], b)))
                for v in (0, 1)}
    yield {"services": services, "ids": list(a["id"]), "expected": expected, "b": b, "folder": folder,
           "shards": shards}
    services.stop_all()


def test_scores_over_http_equal_the_model_and_unknown_ids_are_per_id(served):
    s, ids, expected = served["services"], served["ids"], served["expected"][0]
    response = s.score(ids[:8] + ["nobody"])
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model_version"] == "1"
    results = {r["id"]: r for r in body["results"]}
    for key in ids[:3]:                           # A holds no row: named
        assert results[key]["error"]["code"] == "unknown_id" and results[key]["error"]["party"] == "A"
    for key in (ids[4], ids[5], "nobody"):        # B holds no row (and none came inline): A held or not,
        assert results[key]["error"] == results["nobody"]["error"]     # the same answer, naming B only
        assert results[key]["error"]["code"] == "unknown_id" and results[key]["error"]["party"] == "B"
    for key in (ids[3], ids[6], ids[7]):
        z = results[key]["score"]
        assert z == pytest.approx(expected[key], abs=1e-6)
        assert results[key]["probability"] == pytest.approx(1 / (1 + np.exp(-z)))
        assert results[key]["prediction"] == ("yes" if z >= 0 else "no")
    # B's own features inline, for an id it does not hold
    row = served["b"].iloc[4]
    response = s.score([ids[4]], features=[{"b0": float(row["b0"]), "b1": float(row["b1"])}])
    assert response.json()["results"][0]["score"] == pytest.approx(expected[ids[4]], abs=1e-6)


def test_with_inline_features_on_a_client_reads_the_label_partys_weights(served):
    """The documented cost of ``allow_inline_features``: k + 1 queries give B's k weights (and A's part + a constant)."""
    s, ids, expected = served["services"], served["ids"], served["expected"][0]
    shard = served["shards"]["B"][0]
    rows = [{"b0": 0.0, "b1": 0.0}, {"b0": 1.0, "b1": 0.0}, {"b0": 0.0, "b1": 1.0}]
    key = ids[6]
    scores = [s.score([key], features=[row]).json()["results"][0]["score"] for row in rows]
    weights = np.array([scores[1] - scores[0], scores[2] - scores[0]])
    assert np.max(np.abs(weights - np.array(shard["unscaled_coef"]))) < 1e-5       # measured: about 1e-7
    b_own = float(np.dot(shard["unscaled_coef"], served["b"].set_index("id").loc[key, ["b0", "b1"]].astype(float)))
    assert scores[0] == pytest.approx(expected[key] - b_own, abs=1e-5)     # A's partial score + B's constant
    print(f"inline-features attack: B's weights within {np.max(np.abs(weights - shard['unscaled_coef'])):.1e}")


def test_python_client_and_integer_ids(served):
    s, ids, expected = served["services"], served["ids"], served["expected"][0]
    with ScoringClient(s.url) as client:
        result = client.score(ids[6:10], deadline_ms=5000)
        assert [r["id"] for r in result["results"]] == ids[6:10]
        assert [r["score"] for r in result["results"]] == pytest.approx([expected[k] for k in ids[6:10]], abs=1e-6)
        assert client.health()["status"] == "ok"
        with pytest.raises(ScoringError) as caught:
            client.score([])
        assert caught.value.status == 400 and "at least one id" in str(caught.value)
        assert client.score([7])["results"][0]["error"]["code"] == "unknown_id"     # 7 is the id "7"


BAD_REQUESTS = [
    ({"ids": []}, 400, "at least one id"),
    ({"ids": [f"x{i}" for i in range(51)]}, 400, "max_ids"),
    ({"ids": ["a", " a "]}, 400, "appears twice"),
    ({"ids": [True]}, 400, "boolean"),
    ({"ids": [None]}, 400, "missing"),
    ({"ids": ["x" * 300]}, 400, "256 bytes"),
    ({"ids": ["a"], "features": [{"b0": 1.0}]}, 400, "missing column(s) ['b1']"),
    ({"ids": ["a"], "features": [{"b0": 1.0, "b1": 2.0, "a0": 3.0}]}, 400, "unknown column(s) ['a0']"),
    ({"ids": ["a"], "features": [{"b0": None, "b1": 2.0}]}, 400, "linear model needs every value"),
    ({"ids": ["a"], "features": [{"b0": "1", "b1": 2.0}]}, 400, "str is not a number"),
    ({"ids": ["a", "b"], "features": [None]}, 400, "1 entries for 2 ids"),
    ({"ids": ["a"], "deadline_ms": 10 ** 7}, 400, "max_deadline_ms"),
    ({"ids": ["a"], "colour": "red"}, 422, "colour"),
    ({"idz": ["a"]}, 422, "ids"),
]


@pytest.mark.parametrize("body, status, words", BAD_REQUESTS)
def test_bad_requests_get_a_4xx_naming_the_problem(served, body, status, words):
    response = httpx.post(f"{served['services'].url}/score", json=body, timeout=30)
    assert response.status_code == status, response.text
    assert words in response.json()["error"]["message"]


def rounds_so_far(url):
    """The label party's rounds so far (its /metrics): only a round sends anything to a peer."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return float(re.search(r"^vfl_serve_round_ids_count ([0-9.e+]+)$", text, flags=re.M).group(1))


def test_no_bad_request_reaches_a_peer(served):
    url = served["services"].url
    before = rounds_so_far(url)
    for body, status, _ in BAD_REQUESTS:
        assert httpx.post(f"{url}/score", json=body, timeout=30).status_code == status
    assert rounds_so_far(url) == before
    served["services"].score(["nobody"])
    assert rounds_so_far(url) == before + 1                 # a good one is a round


def test_malformed_and_oversized_bodies(served):
    url = served["services"].url
    response = httpx.post(f"{url}/score", content=b'{"ids": [', headers={"content-type": "application/json"})
    assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_request"
    for value in (b"NaN", b"Infinity", b"1e999", b"1" + b"0" * 400):
        response = httpx.post(f"{url}/score", content=b'{"ids": ["a"], "features": [{"b0": %s, "b1": 1}]}' % value,
                              headers={"content-type": "application/json"})
        assert response.status_code == 400 and "not a finite number" in response.text
    big = json.dumps({"ids": ["a"], "pad": "x" * 600_000}).encode()
    response = httpx.post(f"{url}/score", content=big, headers={"content-type": "application/json"})
    assert response.status_code == 413


def test_health_metrics_and_openapi(served):
    s = served["services"]
    s.score(["nobody"])
    health = s.health()
    assert health["status"] == "ok" and health["model_version"] == "1"
    assert set(health["parties"]) == {"A", "C"}
    text = httpx.get(f"{s.url}/metrics").text
    assert 'vfl_serve_requests_total{status="200"}' in text and 'vfl_serve_party_up{party="A"} 1.0' in text
    assert "vfl_serve_round_ids_bucket" in text and 'vfl_serve_ids_total{outcome="unknown_id"}' in text
    spec = httpx.get(f"{s.url}/openapi.json").json()
    assert {"/score", "/health", "/metrics", "/admin/reload"} <= set(spec["paths"])


def test_a_feature_party_killed_gives_errors_naming_it_then_recovers(served):
    s, ids, expected = served["services"], served["ids"], served["expected"][0]
    s.kill("A")
    response = s.score([ids[6]])
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["party"] == "A" and error["code"] == "party_unavailable" and "A" in error["message"]
    report = s.wait_for(lambda r: r["parties"]["A"]["state"] == "down")
    assert report["status"] == "degraded" and httpx.get(f"{s.url}/health").status_code == 503
    s.start("A")                                  # the store it loaded before is still there
    s.wait_healthy()
    assert s.score([ids[6]]).json()["results"][0]["score"] == pytest.approx(expected[ids[6]], abs=1e-6)
    # its private table, kept in its work directory (its owner's only), was read, not built again
    assert "kept on disk, read" in s.parties["A"]._read(s.parties["A"].err_path)
    assert (served["folder"] / "serve" / "A" / "tables" / "1.table").stat().st_mode & 0o077 == 0


def test_a_stopped_feature_party_is_bounded_by_the_deadline(served):
    s, ids = served["services"], served["ids"]
    party = s.parties["A"]
    party.signal(signal.SIGSTOP)
    try:
        started = time.monotonic()
        response = s.score([ids[6]], deadline_ms=400)
        took = time.monotonic() - started
        assert response.status_code == 504, response.text
        assert response.json()["error"]["party"] == "A" and "deadline" in response.json()["error"]["message"]
        assert took < 3.0
    finally:
        party.signal(signal.SIGCONT)
    assert s.score([ids[6]]).status_code == 200


def test_the_coordinator_restarted_keeps_its_key_and_with_a_new_key_the_tables_are_built_again(served):
    s, ids, expected = served["services"], served["ids"], served["expected"][0]
    kept = served["folder"] / "serve" / "C" / "serving_key.json"
    assert kept.stat().st_mode & 0o077 == 0                # its owner's only
    key = kept.read_text()
    s.kill("C")
    response = s.score([ids[7]])
    assert response.status_code == 503 and response.json()["error"]["party"] == "C"
    s.start("C")
    s.wait_healthy()
    assert kept.read_text() == key and s.score([ids[7]]).status_code == 200    # the tables held serve at once
    built = s.parties["A"]._read(s.parties["A"].err_path).count("private table")
    s.kill("C")
    kept.unlink()                                          # a rotation: a new pair, every table built again
    s.start("C")
    s.wait_healthy()
    deadline = time.monotonic() + 30              # until A too holds the new key
    while (response := s.score([ids[7]])).status_code != 200 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert response.json()["results"][0]["score"] == pytest.approx(expected[ids[7]], abs=1e-6)
    assert kept.read_text() != key
    assert s.parties["A"]._read(s.parties["A"].err_path).count("private table") > built


def test_model_reload_without_dropping_requests(served):
    s, ids, expected = served["services"], served["ids"], served["expected"]
    key = ids[8]
    per_client, stop = [[], [], []], threading.Event()

    def client(answers):
        with httpx.Client(timeout=30) as http:
            while not stop.is_set():
                response = http.post(f"{s.url}/score", json={"ids": [key]})
                answers.append((response.status_code, response.json()))

    threads = [threading.Thread(target=client, args=(answers,)) for answers in per_client]
    for t in threads:
        t.start()
    time.sleep(1.0)
    response = httpx.post(f"{s.url}/admin/reload", json={"version": "2"}, timeout=60)
    time.sleep(1.0)
    stop.set()
    for t in threads:
        t.join(60)
    assert response.status_code == 200, response.text
    assert response.json() == {"model_version": "2", "previous": "1"}
    answers = [answer for answers in per_client for answer in answers]
    assert answers and all(code == 200 for code, _ in answers), [a for a in answers if a[0] != 200][:3]
    for own in per_client:                        # each client's requests, one after another: 1s, then 2s
        versions = [body["model_version"] for _, body in own]
        assert versions[0] == "1" and versions[-1] == "2" and versions == sorted(versions)
    for _, body in answers:                       # each answer is one consistent version's score
        version = int(body["model_version"]) - 1
        assert "score" in body["results"][0], body
        assert body["results"][0]["score"] == pytest.approx(expected[version][key], abs=1e-6)
    assert s.health()["model_version"] == "2"
    missing = httpx.post(f"{s.url}/admin/reload", json={"version": "9"}, timeout=60)
    assert missing.status_code == 404 and "no shard of model version 9" in missing.json()["error"]["message"]
    assert "/tmp/" not in missing.text and "…/model_" in missing.text           # no server path answers a client
    newline = httpx.post(f"{s.url}/admin/reload", json={"version": "1\n"}, timeout=60)
    assert newline.status_code in (400, 422) and "version" in newline.text
    bad = httpx.post(f"{s.url}/admin/reload", json={"version": "../1"}, timeout=60)
    assert bad.status_code == 400


def test_a_refresh_builds_the_private_tables_again_from_the_stores_as_they_are_now(served):
    """A feature party's store is read when its table is built: a change shows after a reload of the version in
    use (a refresh), not before; the tables it held serve until the new ones are in."""
    import sqlite3

    s, ids = served["services"], served["ids"]
    key, version = ids[9], s.health()["model_version"]
    shard = served["shards"]["A"][int(version) - 1]
    column = shard["columns"][0]
    before = s.score([key]).json()["results"][0]["score"]
    with sqlite3.connect(served["folder"] / "serve" / "A" / "store_A.db") as db:
        db.execute(f"UPDATE features SET {column} = {column} + 1.0 WHERE id = ?", (key,))
    assert s.score([key]).json()["results"][0]["score"] == before
    response = httpx.post(f"{s.url}/admin/reload", json={"version": version}, timeout=120)
    assert response.status_code == 200 and response.json() == {"model_version": version, "previous": version}
    after = s.score([key]).json()["results"][0]["score"]
    assert after - before == pytest.approx(shard["coef"][0] / shard["standardize"]["scale"][0], abs=1e-6)
    assert s.health()["queries"] == "private"


def test_versions_that_would_give_a_feature_party_s_rows_away_are_refused_at_reload(served):
    """Each version alone gives 1 score against A's 3 continuous columns, but three directions give B every row.

    A keeps a release ledger in its work directory of every version it served to B (its function, replayed on
    A's store at every check); a third direction is refused at ``/admin/reload``, also after A restarts, and B
    keeps serving the version before it.
    """
    s, folder, shards = served["services"], served["folder"], served["shards"]
    a1, b1 = shards["A"][0], shards["B"][0]
    for version, coef in (("3", [a1["coef"][1], -a1["coef"][0], a1["coef"][2]]), ("4", [0.0, 0.0, 1.0])):
        (folder / "models" / version).mkdir(parents=True, exist_ok=True)
        (folder / "models" / version / "model_A.json").write_text(json.dumps(dict(a1, coef=coef)))
        (folder / "models" / version / "model_B.json").write_text(json.dumps(b1))
    response = httpx.post(f"{s.url}/admin/reload", json={"version": "3"}, timeout=60)
    assert response.status_code == 200, response.text
    training = json.loads((folder / "train" / "A" / "release_ledger.json").read_text())["releases"]
    assert [e["released"] for e in training] == [False]            # checked on the training rows, never sent
    served_ledger = json.loads((folder / "serve" / "A" / "release_ledger.json").read_text())["releases"]
    assert {e["what"] for e in served_ledger} >= {f"its partial scores in served version {v}" for v in "13"}
    for restarted in (False, True):
        if restarted:
            s.kill("A")
            s.start("A", "--load-csv", folder / "A_store.csv")
            s.wait_healthy()
        refused = httpx.post(f"{s.url}/admin/reload", json={"version": "4"}, timeout=60)
        assert refused.status_code == 409, refused.text
        message = refused.json()["error"]["message"]
        assert "party A: releasing its partial scores in served version 4 would let the label party B rebuild " \
            "column" in message, message
        assert "allow_reconstruction = true" in message and "party A: party A:" not in message, message
        assert s.health()["model_version"] == "3"
        assert s.score([served["ids"][8]]).status_code == 200


def test_with_the_opt_in_three_versions_give_the_label_party_every_row(served):
    """The attack the release ledger stops: A opted in, B scores the same ids under versions 1, 3 and 4 (one score each,
    against A's 3 columns) and, knowing 4 of A's rows, recovers every other row; from two versions, none."""
    s, folder, shards, b = served["services"], served["folder"], served["shards"], served["b"]
    opted_in = folder / "federation-A-opts-in.toml"
    opted_in.write_text(Path(s.config).read_text().replace("[parties.A]\n", "[parties.A]\nallow_reconstruction = true\n"))
    s.kill("A")
    config, s.config = s.config, opted_in
    try:
        s.start("A", "--load-csv", folder / "A_store.csv")
    finally:
        s.config = config
    s.wait_healthy()
    a = pd.read_csv(folder / "A_store.csv", dtype={"id": str}).set_index("id")
    ids = [i for i in a.index if i in set(pd.read_csv(folder / "B_store.csv", dtype={"id": str})["id"])]
    own = partial(shards["B"][0], b.set_index("id").loc[ids].reset_index())    # B's own part, the same in 1, 3, 4
    seen = []
    for version in ("1", "3", "4"):
        assert httpx.post(f"{s.url}/admin/reload", json={"version": version}, timeout=60).status_code == 200
        results = s.score(ids).json()["results"]
        seen.append(np.array([r["score"] for r in results]) - own)
    x = a.loc[ids, ["a0", "a1", "a2"]].to_numpy()

    def recover(scores):
        steps, targets = x[1:4] - x[0], scores[1:4] - scores[0]
        weights = np.linalg.lstsq(targets.T, (scores - scores[0]).T, rcond=None)[0]
        return x[0] + weights.T @ steps

    assert np.abs(recover(np.column_stack(seen)) - x).max() < 1e-6        # every row of A (measured 1.5e-9)
    assert np.abs(recover(np.column_stack(seen[:2])) - x).max() > 0.1      # two versions: a projection (3.8)
