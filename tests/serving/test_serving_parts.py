"""The parts of ``vfl serve`` one at a time: ``[serving]``, the stores, the ids on the wire, micro-batching."""

import asyncio
import time

import numpy as np
import pandas as pd
import pytest

from vfl.errors import ConfigurationError, DataError, ProtocolError
from vfl.families import FAMILIES
from vfl.serving.batching import MicroBatcher
from vfl.serving.label import RoundError
from vfl.serving.messages import pack_ids, unpack_ids
from vfl.serving.models import versions
from vfl.deploy.serving_settings import ServingSettings
from vfl.serving.store import load_csv_into, open_store
from vfl.transport.message import Message, decode, encode


def test_versions_sort_numbers_as_numbers(tmp_path):
    for name in ("2", "10", "1", "v3", ".hidden"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "model_bank.json").write_text("{}")
    (tmp_path / "11").mkdir()                      # no shard of bank: not a version of bank's
    assert versions(tmp_path, "bank") == ["1", "2", "10", "v3"]


# -- stores -------------------------------------------------------------------------------------------
@pytest.fixture
def rows(tmp_path):
    frame = pd.DataFrame({"id": ["a", "b", " 7.0", "x'; DROP TABLE features; --"], "f1": [1.0, None, 3.0, 4.0],
                          "f2": [10, 20, 30, 40]})
    path = tmp_path / "rows.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.mark.parametrize("kind", ["sqlite", "csv"])
def test_stores_look_rows_up_by_canonical_id(tmp_path, rows, kind):
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'rows.db'}"
        assert load_csv_into(url, "features", rows, "telco") == 4
        store = open_store(url, "features", "id", "telco")
    else:
        store = open_store(str(rows), "features", "id", "telco")
    values, found = store.lookup(["7", "zz", "b", "a", "7", "x'; DROP TABLE features; --"], ["f2", "f1"])
    assert found.tolist() == [True, False, True, True, True, True]
    assert values[0].tolist() == [30.0, 3.0] and values[4].tolist() == [30.0, 3.0]     # one id asked twice
    assert np.isnan(values[1]).all() and values[2][0] == 20.0 and np.isnan(values[2][1])
    assert values[5].tolist() == [40.0, 4.0]       # an id is a bound value, never SQL
    store.check_columns(["f1", "f2"])
    with pytest.raises(DataError, match=r"no column\(s\) \['f3'\]"):
        store.check_columns(["f1", "f3"])
    store.close()


def test_store_errors_in_plain_words(tmp_path, rows):
    with pytest.raises(ConfigurationError, match="no such table"):
        open_store(f"sqlite:///{tmp_path / 'empty.db'}", "features", "id", "telco")
    with pytest.raises(ConfigurationError, match="does not exist"):
        open_store(str(tmp_path / "none.csv"), "features", "id", "telco")
    url = f"sqlite:///{tmp_path / 'rows.db'}"
    load_csv_into(url, "features", rows, "telco")
    with pytest.raises(ConfigurationError, match="no id column 'key'"):
        open_store(url, "features", "key", "telco")
    bad = tmp_path / "dup.csv"
    pd.DataFrame({"id": ["a", "a"], "f": [1, 2]}).to_csv(bad, index=False)
    with pytest.raises(DataError, match="appears twice"):
        load_csv_into(url, "features", bad, "telco")


@pytest.mark.parametrize("stored, canonical", [(" 7 ", "7"), ("8.0", "8"), ("cafe\u0301", "caf\u00e9")])
def test_a_table_made_by_hand_with_an_id_not_in_canonical_text_is_refused_naming_it(tmp_path, stored, canonical):
    """Lookups compare canonical text: an id stored otherwise would never be found, so the store refuses to open."""
    import sqlite3

    db = sqlite3.connect(tmp_path / "hand.db")
    db.execute("create table features (id text primary key, x real)")
    db.executemany("insert into features values (?, ?)", [("9", 1.0), (stored, 2.0)])
    db.commit()
    db.close()
    with pytest.raises(DataError) as caught:
        open_store(f"sqlite:///{tmp_path / 'hand.db'}", "features", "id", "telco")
    assert f"the id {stored!r} is not written as its canonical text {canonical!r}" in str(caught.value)
    assert "party telco's store" in str(caught.value)

# -- ids on the wire ----------------------------------------------------------------------------------------
def test_ids_round_trip_and_malformed_ids_are_refused():
    ids = ["a", "7", "Zoë", "x" * 256]
    message = decode(encode(Message("score", "public", -1, {"ids": pack_ids(ids)})))
    assert unpack_ids(message, "bank", 10) == ids
    bad = {
        b"": "no ids",
        b"\x00\x05ab": "an id of 5 bytes",
        b"\x00\x00": "an id of 0 bytes",
        b"\x00\x02\xff\xfe": "not the canonical text",
        b"\x00\x03 a ": "not the canonical text",
        b"\x00\x037.0": "not the canonical text",
        b"\x00": "cut short",
    }
    for data, words in bad.items():
        with pytest.raises(ProtocolError, match=words):
            unpack_ids(Message("score", "public", -1, {"ids": data}), "bank", 10)
    with pytest.raises(ProtocolError, match="more than 2 ids"):
        unpack_ids(Message("score", "public", -1, {"ids": pack_ids(["a", "b", "c"])}), "bank", 2)


# -- micro-batching -----------------------------------------------------------------------------------------
def run_batched(calls, max_batch=8, wait=0.05, run=None, max_queue=1000):
    rounds = []

    def fake(ids, inline, deadline):
        rounds.append(list(ids))
        time.sleep(0.01)
        return "1", [{"id": i, "score": float(len(i))} for i in ids]

    async def main():
        batcher = MicroBatcher(run or fake, max_batch, wait, 2, max_queue)
        outcome = await asyncio.gather(*(batcher.submit(ids, [None] * len(ids), time.monotonic() + deadline)
                                         for ids, deadline in calls), return_exceptions=True)
        await batcher.close()
        return outcome

    return asyncio.run(main()), rounds


def test_concurrent_requests_share_rounds_and_get_their_own_answers():
    calls = [([f"r{i}"], 5.0) for i in range(5)] + [([f"big{j}" for j in range(11)], 5.0)]
    outcome, rounds = run_batched(calls)
    assert all(len(r) <= 8 for r in rounds) and sum(map(len, rounds)) == 16
    assert len(rounds) == 2                          # 16 ids gathered into two full rounds
    for (ids, _), (version, answers) in zip(calls, outcome):
        assert version == "1" and [a["id"] for a in answers] == ids


def test_a_failed_round_fails_its_requests_only_and_the_deadline_is_kept():
    def failing(ids, inline, deadline):
        if "bad" in ids:
            raise RoundError("party telco is unavailable", "telco")
        return "1", [{"id": i} for i in ids]

    outcome, _ = run_batched([(["bad"], 5.0)], run=failing)
    assert isinstance(outcome[0], RoundError) and outcome[0].party == "telco"
    outcome, _ = run_batched([(["late"], -1.0), (["fine"], 5.0)], wait=0.0)
    assert isinstance(outcome[0], RoundError) and outcome[0].status == 504
    assert outcome[1][1][0]["id"] == "fine"
    outcome, _ = run_batched([(["a", "b", "c"], 5.0), (["d", "e"], 5.0)], max_queue=4)
    assert isinstance(outcome[1], RoundError) and outcome[1].code == "overloaded"


# -- answers ------------------------------------------------------------------------------------------------
def test_answers_per_model_kind():
    from vfl.serving.answers import outcome
    from vfl.serving.scorers.linear import LinearShare
    from vfl.serving.scorers.trees import TreeShare

    def share(family, **fields):                    # a share's answer needs only these of its shard
        made = object.__new__(family)
        made.__dict__.update(fields)
        return made

    regression = share(LinearShare, objective="linear", classes=None)
    assert outcome(regression, np.array([2.5])) == {"score": 2.5}
    binary = share(LinearShare, objective="logistic", classes=["no", "yes"])
    got = outcome(binary, np.array([0.0]))
    assert got == {"score": 0.0, "probability": 0.5, "prediction": "yes"}
    ovr = share(LinearShare, objective="logistic", classes=["a", "b", "c"])
    got = outcome(ovr, np.array([0.0, 2.0, -1.0]))
    sig = 1 / (1 + np.exp(-np.array([0.0, 2.0, -1.0])))
    assert got["prediction"] == "b" and list(got["probabilities"].values()) == pytest.approx(sig / sig.sum())
    trees = share(TreeShare, classes=[0, 1, 2])
    got = outcome(trees, np.array([1.0, 1.0, 3.0]))
    soft = np.exp([1.0, 1.0, 3.0]) / np.exp([1.0, 1.0, 3.0]).sum()
    assert got["prediction"] == 2 and list(got["probabilities"].values()) == pytest.approx(soft)
    assert set(got["scores"]) == {"0", "1", "2"}


def test_a_malformed_answer_from_a_peer_fails_the_round_with_a_502_naming_it():
    from types import SimpleNamespace

    from vfl.serving.label import LabelService

    service = object.__new__(LabelService)          # no links: the peer's answer is given to the round directly
    from vfl.serving.scorers.trees import TreeShare

    share = object.__new__(TreeShare)               # a label party's trees, as far as the round goes
    share.__dict__.update(version="1", columns=["x"], owners={"telco": [0]}, feature_parties=["telco"],
                          widths={"telco": 2})
    service.shares, service.current, service.store, service.metrics = {"1": share}, "1", None, None
    service.role, service.features = "bank", ["telco"]
    service.config = SimpleNamespace(family=FAMILIES["trees"])      # the round is its family's scorer's
    service.settings = ServingSettings(queries="by_id")
    service._rounds = iter(range(1, 100))
    answers = {"telco": Message("leaf_masks", "plaintext", 1, {"status": np.array([0, 9]), "bits": b"\x00"})}
    service.ask = lambda round_id, requests, deadline: answers
    with pytest.raises(RoundError, match="telco sent a malformed 'leaf_masks' message: field 'status'") as caught:
        service.score(["a", "b"], [{"x": 1.0}, {"x": 2.0}], time.monotonic() + 5)
    assert (caught.value.status, caught.value.code, caught.value.party) == (502, "protocol_error", "telco")


def test_inline_features_beyond_a_float_are_refused_by_name():
    from types import SimpleNamespace

    from vfl.serving.api import Invalid, ScoreRequest, check_request
    from vfl.deploy.serving_settings import ServingSettings

    share = SimpleNamespace(columns=["income"], kind="linear", version="1")
    for value in ("1" + "0" * 400, "-1e999", "NaN"):
        body = ScoreRequest.model_validate_json('{"ids": ["a"], "features": [{"income": %s}]}' % value)
        with pytest.raises(Invalid, match=r"features\[0\]\.income: .* is not a finite number"):
            check_request(body, ServingSettings(allow_inline_features=True), share)
    body = ScoreRequest.model_validate_json('{"ids": ["a"], "features": [{"income": 52000}]}')
    assert check_request(body, ServingSettings(allow_inline_features=True), share)[1] == [{"income": 52000.0}]


# -- linear rounds: scores packed and masked as batch prediction packs them ---------------------------------
def _wire(name: str, kind: str, fields: dict) -> Message:
    return decode(encode(Message(name, kind, -1, fields)))


@pytest.mark.parametrize("width", [1, 3])
def test_a_packed_round_packs_and_masks_the_scores_as_batch_prediction(width):
    import math

    from vfl.parties import Coordinator
    from vfl.parties.linear.packed import prediction_slots
    from vfl.serving.rounds import Layout, decrypted, encrypted_scores, masked_total, summed, unmasked

    c = Coordinator(1024, insecure=True)
    c.generate_keys()
    layout = Layout(c.context, True, 2 ** 12, 3)        # the label party bank and two feature parties
    group = prediction_slots(c.context, 2 ** 12, 3)
    per = len(group.widths)
    assert layout.fields() == {"slot_bits": group.widths[0], "slots": per} and per >= 20
    n = 2 * per // width + 5
    rng = np.random.default_rng(3)                      # test data only
    u = {k: rng.uniform(-4096, 4096, (n, width)) for k in ("telco", "shop", "bank")}
    answers = {k: _wire("scores", "ciphertext", encrypted_scores(layout, u[k], k)) for k in ("telco", "shop")}
    request, secret = masked_total(layout, summed(layout, answers, n * width), u["bank"], "bank")
    assert request["n_values"] == n * width and len(request["ciphertexts"]) == math.ceil(n * width / per)
    reply = _wire("decrypted", "masked",
                  decrypted(layout, c.context, _wire("decrypt", "ciphertext", request), "bank", 10 ** 6))
    z = unmasked(layout, reply, secret, n * width, "bank")
    # the sum of the parties' fixed-point scores, exactly
    exact = sum(np.rint(np.ldexp(u[k].ravel(), 32)).astype(np.int64) for k in u)
    assert np.array_equal(z, np.ldexp(exact.astype(np.float64), -32))
    # what the coordinator decrypts: the packed sums plus a mask as wide as Z_n, fresh for every ciphertext
    # (none of these draws falls below 2^(key bits - 16) but by a 2^-13 chance)
    padded = np.array([int(v) for v in exact] + [0] * (-len(exact) % per), dtype=object)
    packed = group.pack(padded.reshape(-1, per))
    modulus = int(c.context.public_key.n)
    masks = [(int(p) - int(s)) % modulus for p, s in zip(reply["residues"].to_ints(), packed)]
    assert masks == [int(r) for r in secret]
    assert all(r.bit_length() > 1024 - 16 for r in masks) and len(set(masks)) == len(masks)


def test_the_coordinator_refuses_scores_packed_in_another_layout():
    from vfl.parties import Coordinator
    from vfl.serving.rounds import Layout, decrypted, masked_total

    c = Coordinator(1024, insecure=True)
    c.generate_keys()
    layout = Layout(c.context, True, 2 ** 12, 2)
    request, _ = masked_total(layout, None, np.ones((3, 1)), "bank")
    request.update(slots=7, slot_bits=128, value_bits=46)   # vfl-serve/1's per-slot-masked layout at 1024 bits
    with pytest.raises(ProtocolError, match=r"bank packed the scores as \[128, 7\], not as the settings say"):
        decrypted(layout, c.context, _wire("decrypt", "ciphertext", request), "bank", 10 ** 6)


# -- the serving protocol -------------------------------------------------------------------------------------
class _HelloPeer:
    """One end of a link whose peer answers the hello with ``reply``."""

    role, peer = "bank", "telco"

    def __init__(self, reply: dict):
        self.reply, self.sent = reply, []

    def send(self, name: str, kind: str, **fields) -> None:
        self.sent.append(fields)

    def recv(self, timeout: float) -> Message:
        return _wire("serve_hello", "public", self.reply)


def test_a_peer_speaking_another_serving_protocol_is_refused_naming_both():
    import hashlib
    import json
    from types import SimpleNamespace

    from vfl.errors import HandshakeError
    from vfl.serving.links import hello, serving_settings
    from vfl.serving.messages import PROTOCOL

    from vfl.families import FAMILIES

    config = SimpleNamespace(parties={"bank": SimpleNamespace(role="label"), "telco": SimpleNamespace(role="feature")},
                             family=FAMILIES["trees"])
    mine = serving_settings(config)
    assert mine["protocol"] == PROTOCOL == "vfl-serve/5"

    def said(shared: dict) -> dict:
        text = json.dumps(shared, sort_keys=True, separators=(",", ":"))
        return {"fingerprint": hashlib.sha256(text.encode()).hexdigest(), "shared": text}

    assert hello(_HelloPeer(said(mine)), config)["fingerprint"] == said(mine)["fingerprint"]
    older = {k: v for k, v in mine.items() if k != "protocol"}         # a release before the field
    for theirs, spoken in ((older, "vfl-serve/1"), (dict(mine, protocol="vfl-serve/2"), "vfl-serve/2"),
                           (dict(mine, protocol="vfl-serve/3"), "vfl-serve/3"),
                           (dict(mine, protocol="vfl-serve/4"), "vfl-serve/4"),
                           (dict(mine, protocol=["\x1b[2J"]), "unknown")):
        with pytest.raises(HandshakeError, match=rf"party telco speaks the serving protocol {spoken} and party bank "
                                                 r"vfl-serve/5: they run different vfl releases"):
            hello(_HelloPeer(said(theirs)), config)
    # and the older release, comparing fingerprints, refuses this one too
    assert said(older)["fingerprint"] != said(mine)["fingerprint"]
