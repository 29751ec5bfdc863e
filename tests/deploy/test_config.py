"""federation.toml, party CSVs, checkpoints, shards and narration: the files around a party process."""

import io
import json
import re
import stat

import numpy as np
import pandas as pd
import pytest

from vfl.errors import ConfigurationError, DataError, FixedPointOverflowError, PeerError, ProtocolError
from vfl.deploy.checkpoint import KEEP, CheckpointStore
from vfl.deploy.shards.linear import (read_coordinator_shard, read_shard, shard_models, shard_shares,
                                      write_coordinator_shard, write_shard)
from vfl.deploy.config import load_config, write_config
from vfl.deploy.data import PartyData, load_csv
from vfl.deploy.narration import Narrator
from vfl.deploy.session import (Session, differences, abort_reason, check_equations, check_rows, fault_category,
                                    rows_hello, share_columns)
from vfl.parties import targets
from vfl.protocols import Roster
from vfl.transport import BigInts, Endpoint, InProcessNetwork, Message, Transcript, run_roles

PARTIES = {r: {"address": f"127.0.0.1:{7000 + i}", "certificate": f"certs/{r}.pem", "key": f"certs/{r}.key"}
           for i, r in enumerate("ABC")}
TRAINING = {"model": "logistic", "learning_rate": 0.2, "iterations": 5, "batch_size": 0, "tol": 0,
            "key_bits": 1024, "insecure": True}


def test_config_round_trip_and_fingerprint(tmp_path):
    path = write_config(tmp_path / "f.toml", "certs/ca.pem", PARTIES, TRAINING, {"timeout": 9, "connect_timeout": 3,
                                                                                 "handshake_timeout": 2})
    config = load_config(path)
    assert config.network.handshake_timeout == 2
    assert config.ca == tmp_path / "certs" / "ca.pem"  # relative to the file
    assert config.party("B").address == ("127.0.0.1", 7001)
    assert config.training.objective == "logistic" and config.training.max_iter == 5
    assert config.training.batch_size is None and config.training.tol is None
    assert config.timeout == 9 and config.network.connect_timeout == 3
    # Network settings are local; training settings are shared.
    other_net = load_config(write_config(tmp_path / "g.toml", "certs/ca.pem", PARTIES, TRAINING, {"timeout": 50}))
    assert other_net.fingerprint("train") == config.fingerprint("train")
    other = load_config(write_config(tmp_path / "h.toml", "certs/ca.pem", PARTIES, dict(TRAINING, learning_rate=0.3)))
    assert other.fingerprint("train") != config.fingerprint("train")
    assert config.fingerprint("train") != config.fingerprint("predict")
    diff = differences(config.shared("train"), json.dumps(other.shared("train")), "A", "C")
    assert diff == "training.learning_rate = 0.2 at A, 0.3 at C"


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("learning_rate", "learnin_rate"), "unknown key(s) ['learnin_rate']"),
    (lambda t: t.replace("insecure = true", "insecure = false"), "below the secure minimum"),
    (lambda t: t.replace("[parties.C]", "[parties.D]"), "[parties.A]: 'role' is missing"),
    (lambda t: t.replace('address = "127.0.0.1:7001"', 'address = "nowhere"'), "expected host:port"),
    (lambda t: t.replace("[training]", "[trainin]"), "unknown key(s) ['trainin']"),
    (lambda t: t + "\n[[", "not valid TOML"),
])
def test_config_errors_say_what_is_wrong(tmp_path, edit, message):
    path = write_config(tmp_path / "f.toml", "ca.pem", PARTIES, TRAINING)
    path.write_text(edit(path.read_text()))
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        load_config(path)


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigurationError, match="cannot read the federation file"):
        load_config(tmp_path / "none.toml")


def test_csv_rows_sorted_by_id_and_digest_ignores_order(tmp_path):
    frame = pd.DataFrame({"id": ["c", "a", "b"], "x": [3.0, 1.0, 2.0], "label": ["n", "y", "y"]})
    frame.to_csv(tmp_path / "one.csv", index=False)
    frame.iloc[[2, 0, 1]].to_csv(tmp_path / "two.csv", index=False)
    one = load_csv(tmp_path / "one.csv", "B", label="label")
    two = load_csv(tmp_path / "two.csv", "B", label="label")
    assert one.ids == ["a", "b", "c"] and one.features[:, 0].tolist() == [1.0, 2.0, 3.0]
    assert one.ids_digest(["s1", "s2"]) == two.ids_digest(["s2", "s1"]) and one.columns == ["x"]
    (labels,), classes = targets(one.labels, "logistic")
    assert labels.tolist() == [1.0, 1.0, -1.0] and classes.tolist() == ["n", "y"]


@pytest.mark.parametrize("csv, kwargs, message", [
    ("id,x\n1,2\n1,3\n", {}, "id '1' appears twice"),
    ("key,x\n1,2\n", {}, "id column 'id' is missing"),
    ("id,x\n1,abc\n2,3\n", {}, r"column 'x': not numeric \(dtype \w+\): row 0 \(id '1'\) holds 'abc'"),
    ("id,x\n1,\n2,3\n", {}, r"column 'x': NaN at row 0 \(id '1'\)"),
    ("id,x\n1,inf\n2,3\n", {}, r"column 'x': infinity at row 0 \(id '1'\)"),
    ('id,x\n"   ",2\n2,3\n', {}, r"id column 'id', row 0: the id is empty \(only whitespace"),
    ("id,x\n7,2\n7.0,3\n", {}, r"id '7.0' appears twice \(rows 0 and 1; .*7 and 7.0 are one id"),
    ("id,x,y\n1,2,0\n2,3,1\n", {"foreign": ("y", None)}, r"holds the column 'y', the label party's.*feature party"),
    ("id,x,w\n1,2,0\n2,3,1\n", {"foreign": ("y", "w")}, r"holds the column 'w', the label party's"),
    ("id,x,y\n1,2,\n2,3,1\n", {"label": "y"}, r"column 'y': NaN at row 0 \(id '1'\)"),
    ("id,x,y\nz9,1,0\nb2,2,1\na1,,1\n", {"label": "y"}, r"column 'x': NaN at row 2 \(id 'a1'\)"),   # the file's row,
    ("id,x,y\nz9,1,\nb2,2,1\na1,3,1\n", {"label": "y"}, r"column 'y': NaN at row 0 \(id 'z9'\)"),   # not the sorted
    ("id,x\n1,2\n", {"label": "y"}, "there is no label column 'y'; its columns are x"),
    ("id,x,diagnosis\n1,2,a\n", {"label": "diagnosys"},
     r"d.csv\): there is no label column 'diagnosys' \(did you mean 'diagnosis'\?\); its columns are x, diagnosis"),
    ("id,x,z\n1,2,3\n", {"columns": ["x"]}, r"unexpected \['z'\]"),
    ("id\n1\n", {}, "no feature columns"),
])
def test_csv_errors_name_party_column_and_row(tmp_path, csv, kwargs, message):
    (tmp_path / "d.csv").write_text(csv)
    with pytest.raises(DataError, match=message):
        load_csv(tmp_path / "d.csv", "A", **kwargs)


def test_a_csv_read_is_sorted_by_id_with_its_labels_and_weights():
    import io

    data = load_csv(io.StringIO("id,x,y,w\nz9,1,0,1\nb2,2,1,2\na1,3,1,3\n"), "B", label="y", weight="w")
    assert data.ids == ["a1", "b2", "z9"] and data.features[:, 0].tolist() == [3.0, 2.0, 1.0]
    assert data.labels.tolist() == [1, 1, 0] and data.weights.tolist() == [3.0, 2.0, 1.0]


def test_the_cli_and_the_api_refuse_the_same_data_alike(tmp_path):
    """One set of checks (vfl.datachecks): the same bad table gets the same reason on both paths."""
    from vfl import VerticalDataset

    cases = [({"id": ["1", "   "], "x": [1.0, 2.0]}, "the id is empty"),
             ({"id": ["1", "2"], "x": [1.0, float("nan")]}, "column 'x': NaN at row"),
             ({"id": ["1", "2"], "x": ["a", "b"]}, "column 'x': not numeric")]
    for columns, reason in cases:
        frame = pd.DataFrame(columns)
        frame.to_csv(tmp_path / "a.csv", index=False)
        with pytest.raises(DataError, match=reason):
            load_csv(tmp_path / "a.csv", "A")                     # a linear model's table
        other = pd.DataFrame({"id": frame["id"], "b": [0.0, 1.0], "y": [0, 1]})
        with pytest.raises(DataError, match=reason):
            VerticalDataset({"A": frame, "B": other}, label="y", id_column="id").require_complete()
    # a missing value: kept for gradient boosting on both paths, refused for a linear model on both
    frame = pd.DataFrame({"id": ["1", "2"], "x": [1.0, float("nan")]})
    frame.to_csv(tmp_path / "a.csv", index=False)
    assert np.isnan(load_csv(tmp_path / "a.csv", "A", missing=True).features[1, 0])
    other = pd.DataFrame({"id": frame["id"], "b": [0.0, 1.0], "y": [0, 1]})
    assert np.isnan(VerticalDataset({"A": frame, "B": other}, label="y", id_column="id").features("A")[1, 0])


def test_allow_score_span_is_a_feature_party_boolean(tmp_path):
    parties = {name: {"address": f"127.0.0.1:{7100 + i}", "certificate": "c.pem", "key": "k.pem"}
               for i, name in enumerate("ABC")}
    parties["A"]["allow_score_span"] = True
    config = load_config(write_config(tmp_path / "f.toml", "ca.pem", parties, {"key_bits": 1024, "insecure": True}))
    assert config.party("A").allow_score_span and not config.party("B").allow_score_span
    assert config.fingerprint("train") == load_config(write_config(
        tmp_path / "g.toml", "ca.pem", {**parties, "A": {**parties["A"], "allow_score_span": False}},
        {"key_bits": 1024, "insecure": True})).fingerprint("train")       # each party's own decision
    for name, value in (("A", "yes"), ("B", True)):
        bad = {**parties, name: {**parties[name], "allow_score_span": value}}
        with pytest.raises(ConfigurationError, match=rf"\[parties.{name}\]: allow_score_span must be true or false"):
            load_config(write_config(tmp_path / "h.toml", "ca.pem", bad, {"key_bits": 1024, "insecure": True}))


def test_a_feature_party_s_release_choices_are_its_own_and_checked(tmp_path):
    parties = {name: {"address": f"127.0.0.1:{7100 + i}", "certificate": "c.pem", "key": "k.pem"}
               for i, name in enumerate("ABC")}
    training = {"key_bits": 1024, "insecure": True}
    parties["A"].update(allow_reconstruction=True, release_epsilon=2.0, release_clip=1.5)
    config = load_config(write_config(tmp_path / "f.toml", "ca.pem", parties, training))
    assert config.party("A").allow_reconstruction and config.party("A").allow_score_span
    assert config.party("A").release_dp == {"epsilon": 2.0, "delta": 1e-6, "clip": 1.5, "budget": 10.0}
    assert config.party("B").release_dp is None
    plain = {**parties, "A": {k: v for k, v in parties["A"].items() if not k.startswith(("release", "allow"))}}
    assert config.fingerprint("train") == load_config(write_config(tmp_path / "g.toml", "ca.pem", plain,
                                                                   training)).fingerprint("train")
    for name, extra, problem in (
            ("B", {"release_epsilon": 1.0}, r"apply to a feature party's releases, not a label party"),
            ("A", {"release_clip": 1.0}, r"release_clip given without release_epsilon"),
            ("A", {"release_epsilon": -1.0}, r"release_epsilon must be a number above 0"),
            ("A", {"release_epsilon": 1.0, "release_delta": 1.0}, r"release_delta must be a number above 0 and below 1"),
            ("A", {"allow_reconstruction": True, "allow_score_span": True}, r"give allow_reconstruction only")):
        bad = {**plain, name: {**plain[name], **extra}}
        with pytest.raises(ConfigurationError, match=rf"\[parties.{name}\]: .*{problem}"):
            load_config(write_config(tmp_path / "h.toml", "ca.pem", bad, training))


def test_init_zeros_in_the_file_needs_insecure(tmp_path):
    parties = {name: {"address": f"127.0.0.1:{7100 + i}", "certificate": "c.pem", "key": "k.pem"}
               for i, name in enumerate("ABC")}
    with pytest.raises(ConfigurationError, match=r"\[training\]: init='zeros'.*insecure = true in \[training\]"):
        load_config(write_config(tmp_path / "f.toml", "ca.pem", parties, {"init": "zeros"}))


def test_missing_csv(tmp_path):
    with pytest.raises(DataError, match="party A: data file .* does not exist"):
        load_csv(tmp_path / "none.csv", "A")


def test_checkpoints_keep_the_last_few_and_refuse_other_settings(tmp_path):
    store = CheckpointStore(tmp_path / "ck", "A", "fingerprint-1")
    for epoch in range(6):
        store.save(epoch, {"params": [float(epoch)]})
    assert store.epochs() == list(range(6 - KEEP, 6))
    assert store.load()[5] == {"params": [5.0]}
    assert stat.S_IMODE((tmp_path / "ck" / "epoch-000005.json").stat().st_mode) == 0o600
    with pytest.raises(ConfigurationError, match="made with other settings"):
        CheckpointStore(tmp_path / "ck", "A", "fingerprint-2").load()
    with pytest.raises(DataError, match="not party B's"):
        CheckpointStore(tmp_path / "ck", "B", "fingerprint-1").load()
    store.clear()
    assert store.load() == {}


def test_shards(tmp_path):
    path = write_shard(tmp_path / "b.json", "B", "label", "logistic", ["x", "y"], [0.5, -1.0, 0.25], True, "fp",
                       classes=["no", "yes"], label="label")
    shard = read_shard(path, "B", "label")
    assert shard["coef"] == [0.5, -1.0] and shard["intercept"] == 0.25 and shard["party"] == "B"
    assert shard_models(shard) == [[0.5, -1.0, 0.25]]
    with pytest.raises(DataError, match="not party A's model shard"):
        read_shard(path, "A", "feature")
    with pytest.raises(DataError, match="the model shard of a 'label' party; party B is the feature party"):
        read_shard(path, "B", "feature")


@pytest.mark.parametrize("role, edit, message", [
    ("A", lambda s: s.update(coef=[0.5, float("nan")]), r"coef\[1\] must be a finite number, got nan"),
    ("A", lambda s: s.update(coef=[0.5, "1.0"]), r"coef\[1\] must be a finite number, got '1.0'"),
    ("A", lambda s: s.update(coef=[True, 1.0]), r"coef\[0\] must be a finite number"),
    ("A", lambda s: s.update(coef="0.5,1.0"), "'coef' must be a list of weights"),
    ("A", lambda s: s.update(columns="x,y"), "'columns' must be a list of column names"),
    ("A", lambda s: s.update(columns=["x", 2]), "'columns' must be a list of column names"),
    ("A", lambda s: s.pop("columns"), "'columns' must be a list of column names, got None"),
    ("A", lambda s: s.pop("trained_with"), "'trained_with'"),
    ("A", lambda s: s.update(objective="poisson"), "'objective' must be 'linear' or 'logistic'"),
    ("B", lambda s: s.update(intercept=float("inf")), "intercept must be a finite number, got inf"),
    ("A", lambda s: s.update(coef=[0.5, 1e300]), r"coef\[1\] = 1e\+300 is beyond the range of a model parameter"),
    ("B", lambda s: s.update(intercept=-1e80), r"intercept = -1e\+80 is beyond the range of a model parameter"),
    ("B", lambda s: s.update(fit_intercept="false"), "'fit_intercept' must be true or false, got 'false'"),
    ("B", lambda s: s.update(classes=["yes"]), "'classes' must be a list of the two label values"),
])
def test_shards_with_bad_values_are_refused_naming_the_file(tmp_path, role, edit, message):
    """A shard edited by hand or damaged gives a DataError naming the file, never a traceback later."""
    kind = {"A": "feature", "B": "label"}[role]
    path = write_shard(tmp_path / f"model_{role}.json", role, kind, "logistic", ["x", "y"], [0.5, -1.0, 0.25], True,
                       "fp", classes=["no", "yes"], label="label")
    shard = json.loads(path.read_text())
    edit(shard)
    path.write_text(json.dumps(shard))      # json writes NaN and Infinity as the literals it also reads
    with pytest.raises(DataError, match=re.escape(str(path)) + ".*" + message):
        read_shard(path, role, kind)


def test_label_that_is_the_id_column_is_refused(tmp_path):
    (tmp_path / "b.csv").write_text("id,x\n1,2\n2,3\n")
    with pytest.raises(DataError, match="party B .*: the label column 'id' is also the id column"):
        load_csv(tmp_path / "b.csv", "B", id_column="id", label="id")
    path = write_config(tmp_path / "f.toml", "ca.pem", PARTIES, TRAINING, id_column="key", label="key")
    with pytest.raises(ConfigurationError, match=r"\[data\]: label and id_column are both 'key'"):
        load_config(path)


def _rows_check(tmp_path, ids_a, ids_b, salt_b=None):
    """A and B run the real hello and rows check over in-process links; returns every message sent."""
    config = load_config(write_config(tmp_path / "f.toml", "ca.pem", PARTIES, TRAINING))
    data = {"A": PartyData(sorted(ids_a), ["x"], np.zeros((len(ids_a), 1))),
            "B": PartyData(sorted(ids_b), ["x"], np.zeros((len(ids_b), 1)))}
    network, transcript = InProcessNetwork("AB"), Transcript(keep_payloads=True)

    def program(role):
        def run():
            session = Session(config, role, "train")
            session.endpoint = Endpoint(network.transport(role), ["B" if role == "A" else "A"], transcript)
            extra = rows_hello(data[role])
            if role == "B" and salt_b is not None:
                extra["ids_salt"] = salt_b
            check_rows(session.endpoint, role, data[role], extra, session.hello(extra))
        return run

    run_roles(network, {"A": program("A"), "B": program("B")})
    return {(sender, m.name): m.fields for sender, _, m in transcript.messages()}


def test_the_id_digest_is_salted_afresh_every_run(tmp_path):
    ids = [f"c-{i}" for i in range(20)]
    first = _rows_check(tmp_path, ids, ids[::-1])
    # the hello carries a salt and the row count, no digest: no digest exists before both salts are known
    assert set(first["A", "hello"]) == {"fingerprint", "shared", "n_rows", "ids_salt"}
    salts = first["A", "hello"]["ids_salt"], first["B", "hello"]["ids_salt"]
    assert salts[0] != salts[1] and all(len(s) == 32 for s in salts)
    digest = first["A", "ids_digest"]["digest"]
    assert first["B", "ids_digest"]["digest"] == digest
    data = PartyData(sorted(ids), ["x"], np.zeros((20, 1)))
    assert digest == data.ids_digest(salts) == data.ids_digest(salts[::-1])
    second = _rows_check(tmp_path, ids, ids)
    assert second["A", "ids_digest"]["digest"] != digest      # fresh salts: another run, another digest
    assert data.ids_digest(["a", "b"]) != data.ids_digest(["a", "c"])


def test_rows_check_refuses_other_ids_and_a_missing_salt(tmp_path):
    ids = [str(i) for i in range(10)]
    with pytest.raises(DataError, match="parties [AB] and [AB] hold different row ids"):
        _rows_check(tmp_path, ids, ids[:9] + ["x"])
    with pytest.raises(ProtocolError, match="the hello from B carries no valid salt"):
        _rows_check(tmp_path, ids, ids, salt_b="not a salt")


def test_narrator_one_line_per_message():
    out = io.StringIO()
    narrator = Narrator("telco", total_epochs=3, stream=out, family="linear", kind="feature")
    coordinator = Narrator("hub", total_epochs=3, stream=out, family="linear", kind="coordinator")
    message = Message("masked_gradient", "ciphertext", 1, {"ciphertexts": BigInts.from_ints([1, 2, 3], 256),
                                                           "exponent": 4})
    narrator("->", "hub", message, 1234)
    narrator("<-", "hub", message, 1234)  # received messages are narrated by their sender
    narrator("->", "bank", Message("loss_part", "ciphertext", 1, {"ciphertexts": BigInts.from_ints([5], 256)}), 300)
    coordinator.batch_loss(1, 0, 0.25)
    coordinator.loss(1, 0.5)
    lines = out.getvalue().splitlines()
    assert lines == [
        "[telco] epoch 2/3  telco -> hub  masked_gradient: encrypted gradient plus its mask [[X_k^T d + R]]  "
        "[ciphertext, 3 values, 1,234 bytes]",
        "[telco] epoch 2/3  telco -> bank  loss_part: encrypted loss part [[a u_k.d + penalty]]  "
        "[ciphertext, 1 value, 300 bytes]",
        "[hub] epoch 2/3  hub decrypts [[L]] of batch 1: loss 0.250000",
        "[hub] epoch 2/3 done: hub's decrypted loss over the epoch: 0.500000",
    ]


def test_peers_learn_only_the_kind_of_a_data_error():
    """A party's own values (a label, a score) stay in its own output; federation faults go to peers in full."""
    leak = FixedPointOverflowError("party B: label 7.3e+80 at row 12 is outside the fixed-point range")
    reason = abort_reason("B", leak)
    assert "FixedPointOverflowError" in reason and "7.3e+80" not in reason and "row 12" not in reason
    assert "an error in its data" in reason and "scaling down" in reason
    assert "income" not in abort_reason("B", DataError("party B, column 'income': NaN at row 3 (id 'c-17')"))
    fault = PeerError("B: waiting for 'residual' from A: no message from A within 300 s")
    assert abort_reason("B", fault) == f"party B stopped on a refused peer or a fault of the network: PeerError: {fault}"


@pytest.mark.parametrize("exc, category, expected", [
    (ValueError("could not convert string to float: 'secret-value'"), "internal",
     "party A stopped on an internal error (ValueError); the details stay with A"),
    (KeyError("income"), "internal", "party A stopped on an internal error (KeyError); the details stay with A"),
    (PermissionError(13, "Permission denied", "/data/a.csv"), "system",
     "party A stopped on a fault of its own machine (PermissionError); the details stay with A"),
    (KeyboardInterrupt(), "interrupted", "party A was interrupted by its operator"),
    (DataError("party A, column 'x': NaN at row 3"), "data",
     "party A stopped on an error in its data (DataError); the details stay with A"),
    (ConfigurationError("party A: key_bits 512 needs insecure"), "settings",
     "party A stopped on an error in its settings (ConfigurationError); the details stay with A"),
])
def test_abort_reason_names_the_category_of_the_fault_and_quotes_no_values(exc, category, expected):
    assert abort_reason("A", exc) == expected
    assert fault_category(exc) == category


def test_a_passed_on_abort_keeps_the_party_that_stopped_first_and_its_category():
    """C stops because A did: C's abort to B names A and A's category, and B's error says C passed it on."""
    from vfl.errors import PeerStopped
    from vfl.deploy.session import abort_party
    net = InProcessNetwork(["A", "B", "C"])
    a, b, c = (Endpoint(net.transport(r), [p for p in "ABC" if p != r], timeout=2) for r in "ABC")
    first = DataError("party A, column 'x': 1e300 at row 3")
    a.abort(abort_reason("A", first), party=abort_party("A", first), category=fault_category(first))
    with pytest.raises(PeerStopped) as at_c:
        c.recv("A", "resume")
    assert (at_c.value.party, at_c.value.category) == ("A", "data")
    assert str(at_c.value) == ("C: A stopped while C waited for 'resume': party A stopped on an error in its data "
                               "(DataError); the details stay with A")
    c.abort(abort_reason("C", at_c.value), party=abort_party("C", at_c.value), category=fault_category(at_c.value))
    with pytest.raises(PeerStopped) as at_b:
        b.recv("C", "start")
    assert (at_b.value.party, at_b.value.category) == ("A", "data")
    assert str(at_b.value) == ("B: C stopped while B waited for 'start', passing on: party A stopped on an error in "
                               "its data (DataError); the details stay with A")


def test_hello_fields_are_checked_and_their_settings_parsed_strictly():
    from vfl.errors import ProtocolError
    from vfl.deploy.session import check_hello

    good = {"fingerprint": "ab" * 32, "shared": "{}", "n_rows": 3, "ids_digest": "cd" * 32, "later": [1]}
    check_hello("B", "A", Message("hello", "public", -1, good))  # unknown fields are ignored
    for bad, problem in (({"shared": "{}"}, "no field 'fingerprint'"),
                         (dict(good, n_rows=True), "field 'n_rows' must be of type int"),
                         (dict(good, n_rows="3"), "field 'n_rows' must be of type int"),
                         (dict(good, shared=b"{}"), "field 'shared' must be of type str")):
        with pytest.raises(ProtocolError, match=f"^B: waiting for 'hello' from A: A sent a malformed message: "
                                                f"{problem}$"):
            check_hello("B", "A", Message("hello", "public", -1, bad))
    mine = {"training": {"alpha": 0.1}}
    for unreadable in ("[" * 100_000, '{"training": {"alpha": NaN}}', "[1, 2]", "\u00e9"):
        assert differences(mine, unreadable, "B", "A") == "the peer sent unreadable settings"
    long = differences(mine, '{"training": {"alpha": "' + "x" * 500 + '"}}', "B", "A")
    assert long.startswith("training.alpha = 0.1 at B, 'xxx") and long.endswith("x... at A") and len(long) < 120


# --------------------------------------------------------------------------- any number of feature parties

NAMED = {"telco": "feature", "bank": "label", "shop": "feature", "hub": "coordinator", "web-2": "feature"}


def named_parties(roles=NAMED):
    return {name: {"role": role, "address": f"127.0.0.1:{7100 + i}", "certificate": f"certs/{name}.pem",
                   "key": f"certs/{name}.key"} for i, (name, role) in enumerate(roles.items())}


def test_named_parties_with_roles(tmp_path):
    config = load_config(write_config(tmp_path / "f.toml", "ca.pem", named_parties(), TRAINING))
    # feature parties in the order of their names, whatever the order of the tables in the file
    assert config.roster == Roster(("shop", "telco", "web-2"), "bank", "hub")
    assert config.role_of("web-2") == "feature" and config.party("hub").address == ("127.0.0.1", 7103)
    assert config.shared("train")["roles"] == NAMED
    swapped = load_config(write_config(tmp_path / "g.toml", "ca.pem",
                                       named_parties(dict(NAMED, telco="label", bank="feature")), TRAINING))
    assert swapped.roster.label == "telco" and swapped.fingerprint("train") != config.fingerprint("train")
    assert differences(config.shared("train"), json.dumps(swapped.shared("train")), "shop", "telco") == \
        "roles.bank = 'label' at shop, 'feature' at telco; roles.telco = 'feature' at shop, 'label' at telco"
    with pytest.raises(ConfigurationError, match=re.escape(f"{tmp_path / 'f.toml'}: no party 'A'")):
        config.role_of("A")


def test_a_file_naming_a_b_and_c_may_leave_out_the_roles(tmp_path):
    legacy = load_config(write_config(tmp_path / "f.toml", "ca.pem", PARTIES, TRAINING))
    assert legacy.roster == Roster(("A",), "B", "C")
    explicit = {r: dict(p, role=k) for (r, p), k in zip(PARTIES.items(), ("feature", "label", "coordinator"))}
    same = load_config(write_config(tmp_path / "g.toml", "ca.pem", explicit, TRAINING))
    assert same.fingerprint("train") == legacy.fingerprint("train")


@pytest.mark.parametrize("roles, edit, message", [
    (dict(NAMED, shop=None), None, "[parties.shop]: 'role' is missing: give every party a role"),
    (dict(NAMED, shop="features"), None, "[parties.shop]: role must be one of ['feature', 'label', 'coordinator'], "
                                         "got 'features'"),
    (dict(NAMED, shop="label"), None, "exactly one party must have role = 'label' (the party holding the labels); "
                                      "parties bank, shop have it"),
    (dict(NAMED, hub="feature"), None, "exactly one party must have role = 'coordinator' (the key holder); none has"),
    ({"bank": "label", "hub": "coordinator"}, None, "no party has role = 'feature'"),
    (NAMED, lambda t: t.replace("[parties.shop]", "[parties.shop_1]"), "'shop_1' is not a valid party name"),
    (NAMED, lambda t: t.replace("[parties.shop]", '[parties."shop.example.org"]'),
     "'shop.example.org' is not a valid party name"),
    (NAMED, lambda t: t.replace("[parties.shop]", "[parties.Telco]"),
     "parties 'Telco' and 'telco' differ only in case"),
    (NAMED, lambda t: t.replace('role = "feature"', 'role = 1', 1), "role must be one of"),
    (NAMED, lambda t: t.replace('role = "feature"', 'rol = "feature"', 1), "unknown key(s) ['rol']"),
    ({"A": "feature", "B": "label", "C": None}, None, "[parties.C]: 'role' is missing"),
])
def test_party_roles_errors_name_the_file_and_the_party(tmp_path, roles, edit, message):
    parties = named_parties({n: r for n, r in roles.items()})
    for entry in parties.values():
        if entry["role"] is None:
            del entry["role"]
    path = write_config(tmp_path / "f.toml", "ca.pem", parties, TRAINING)
    if edit:
        path.write_text(edit(path.read_text()))
    with pytest.raises(ConfigurationError, match=re.escape(str(path)) + ".*" + re.escape(message)):
        load_config(path)


def _data_parties(tmp_path, rows, columns, training=None):
    """Feature parties and the label party "bank" run hello, rows check and column counts in threads.

    Returns each party's result: the column counts, or the error that stopped it.
    """
    roles = {name: "feature" for name in rows if name != "bank"}
    roles.update(bank="label", hub="coordinator")
    config = load_config(write_config(tmp_path / "f.toml", "ca.pem", named_parties(roles),
                                      dict(TRAINING, **(training or {}))))
    roster = config.roster
    network, results = InProcessNetwork(roster.data_parties), {}

    def program(name):
        def run():
            session = Session(config, name, "train")
            peers = roster.features if name == "bank" else ["bank"]
            session.endpoint = Endpoint(network.transport(name), peers, timeout=5)
            n = len(rows[name])
            data = PartyData(sorted(rows[name]), [f"x{j}" for j in range(columns[name])], np.zeros((n, columns[name])))
            extra = dict(rows_hello(data), n_columns=columns[name])
            try:
                theirs = session.hello(extra)
                check_rows(session.endpoint, name, data, extra, theirs, roster)
                counts = share_columns(session.endpoint, name, data, theirs, roster)
                check_equations(n, counts, config.training, roster)
                results[name] = counts
            except Exception as exc:  # noqa: BLE001 - inspected by the test
                results[name] = exc
                network.fail(name, str(exc))  # the others stop at once, as over the network (abort)
        return run

    run_roles(network, {name: program(name) for name in roster.data_parties})
    return results


def test_every_data_party_learns_every_column_count(tmp_path):
    ids = [f"r{i}" for i in range(30)]
    results = _data_parties(tmp_path, {"telco": ids, "shop": ids[::-1], "bank": ids},
                            {"telco": 3, "shop": 1, "bank": 2})
    assert results == {name: {"shop": 1, "telco": 3, "bank": 2} for name in ("telco", "shop", "bank")}
    assert list(results["shop"]) == ["shop", "telco", "bank"]


def test_rows_check_is_hub_and_spoke(tmp_path):
    ids = [f"r{i}" for i in range(30)]
    results = _data_parties(tmp_path, {"telco": ids, "shop": ids[:29] + ["x"], "bank": ids},
                            {"telco": 1, "shop": 1, "bank": 1})
    assert isinstance(results["bank"], DataError) and isinstance(results["shop"], DataError)
    assert "parties bank and shop hold different row ids (30 rows at bank, 30 at shop)" in str(results["bank"])
    assert "parties shop and bank hold different row ids" in str(results["shop"])
    assert isinstance(results["telco"], PeerError)  # its own rows match; it stops because bank stopped


def test_every_data_party_refuses_a_party_that_could_solve_for_labels(tmp_path):
    """shop has 12 columns; with mini-batches over 30 epochs it would gather more equations than unknowns."""
    ids = [f"r{i}" for i in range(100)]
    results = _data_parties(tmp_path, {"telco": ids, "shop": ids, "bank": ids}, {"telco": 1, "shop": 12, "bank": 1},
                            training={"iterations": 30, "batch_size": 20})
    messages = {name: str(exc) for name, exc in results.items()}
    assert all(isinstance(exc, ConfigurationError) for exc in results.values()), messages
    assert len(set(messages.values())) == 1 and messages["telco"].startswith("party shop: 30 epochs of 5 batches")


def test_a_malformed_columns_message_is_refused(tmp_path):
    config = load_config(write_config(tmp_path / "f.toml", "ca.pem", named_parties(), TRAINING))
    network = InProcessNetwork(["bank", "telco"])
    bank, telco = Endpoint(network.transport("bank"), ["telco"]), Endpoint(network.transport("telco"), ["bank"])
    data = PartyData(["r1"], ["x"], np.zeros((1, 1)))
    for fields, problem in (({"parties": "shop,telco,web-2,bank", "counts": np.array([1, 2, 1, 1])},
                             "it says telco has 2 columns, not 1"),
                            ({"parties": "telco,bank", "counts": np.array([1, 1])},
                             "it lists the parties 'telco,bank'"),
                            ({"parties": "shop,telco,web-2,bank", "counts": np.array([1, 1, 0, 1])},
                             "it does not give one positive column count per data party"),
                            ({"parties": "shop,telco,web-2,bank", "counts": np.array([1.0, 1, 1, 1])},
                             "it does not give one positive column count per data party")):
        bank.send("telco", "columns", "public", **fields)
        with pytest.raises(ProtocolError, match=re.escape(f"telco: waiting for 'columns' from bank: bank sent a "
                                                          f"malformed message: {problem}")):
            share_columns(telco, "telco", data, {}, config.roster)


def test_two_party_shards_are_still_read(tmp_path):
    path = tmp_path / "model_A.json"
    path.write_text(json.dumps({"format": "vfl-model-shard/1", "role": "A", "objective": "logistic", "columns": ["x"],
                                "coef": [0.5], "initial_coef": [0.0], "trained_with": "fp"}))
    shard = read_shard(path, "A", "feature")
    assert shard["party"] == "A" and shard["role"] == "feature" and shard["coef"] == [0.5]
    with pytest.raises(DataError, match="not party B's model shard"):
        read_shard(path, "B", "label")


def test_sample_weight_column(tmp_path):
    """[data] sample_weight names the label party's weight column: never a feature, checked row by row."""
    (tmp_path / "b.csv").write_text("id,x,label,w\n2,1.5,yes,0.5\n1,2.5,no,2\n")
    data = load_csv(tmp_path / "b.csv", "B", label="label", weight="w")
    assert data.columns == ["x"] and data.weights.tolist() == [2.0, 0.5]       # rows in id order
    assert data.take([1]).weights.tolist() == [0.5]
    for row, message in (("3,1,no,-1", "sample weight column 'w': -1.0 at id '3'"),
                         ("3,1,no,", "sample weight column 'w': nan at id '3'"),
                         ("3,1,no,1e6", "1000000.0 at id '3' is not a finite number from 0 to 65536")):
        (tmp_path / "bad.csv").write_text(f"id,x,label,w\n{row}\n")
        with pytest.raises(DataError, match=re.escape(message)):
            load_csv(tmp_path / "bad.csv", "B", label="label", weight="w")
    with pytest.raises(DataError, match="party B .*the sample weight column 'v' is missing"):
        load_csv(tmp_path / "b.csv", "B", label="label", weight="v")
    # prediction: the weight column may be there, and is not a feature
    assert load_csv(tmp_path / "b.csv", "B", label="label", weight="w", columns=["x"], label_required=False).columns \
        == ["x"]
    config = load_config(write_config(tmp_path / "f.toml", "ca.pem", PARTIES, TRAINING, sample_weight="w"))
    assert config.sample_weight == "w" and config.training.sample_weighted
    unweighted = load_config(write_config(tmp_path / "g.toml", "ca.pem", PARTIES, TRAINING))
    assert unweighted.fingerprint("train") != config.fingerprint("train")
    for kwargs, message in (({"sample_weight": "label"}, "sample_weight 'label' is also the id or label column"),
                            ({"sample_weight": "w", "training": dict(TRAINING, packing=True)},
                             "[data] sample_weight: packed ciphertexts do not take row")):
        training = kwargs.pop("training", TRAINING)
        path = write_config(tmp_path / "h.toml", "ca.pem", PARTIES, training, **kwargs)
        with pytest.raises(ConfigurationError, match=re.escape(message)):
            load_config(path)


def test_warm_start_key(tmp_path):
    """[training] warm_start: a real boolean, part of the shared settings every party compares."""
    cold = load_config(write_config(tmp_path / "f.toml", "ca.pem", PARTIES, TRAINING))
    warm = load_config(write_config(tmp_path / "g.toml", "ca.pem", PARTIES, dict(TRAINING, warm_start=True)))
    assert warm.warm_start and not cold.warm_start and warm.fingerprint("train") != cold.fingerprint("train")
    path = write_config(tmp_path / "h.toml", "ca.pem", PARTIES, dict(TRAINING, warm_start="yes"))
    with pytest.raises(ConfigurationError, match=r"\[training\]: warm_start must be true or false, got 'yes'"):
        load_config(path)


def test_the_shared_protocol_in_the_file(tmp_path):
    """[training] protocol and reveal: named values, checked with the rest of the settings, fingerprinted."""
    yang = load_config(write_config(tmp_path / "f.toml", "ca.pem", PARTIES, TRAINING))
    shared = load_config(write_config(tmp_path / "g.toml", "ca.pem", PARTIES,
                                      dict(TRAINING, protocol="shared", reveal="never")))
    assert shared.training.shared and shared.training.reveal == "never" and not yang.training.shared
    assert shared.fingerprint("train") != yang.fingerprint("train")
    for edit, message in [({"protocol": "sshe"}, r"\[training\]: protocol must be one of \('yang', 'shared'\)"),
                          ({"protocol": "shared", "reveal": True}, "reveal must be one of"),
                          ({"reveal": "never"}, "only protocol='shared' does"),
                          ({"protocol": "shared", "optimizer": "adam"}, "linear rules only"),
                          ({"protocol": "shared", "reveal": "never", "warm_start": True}, "warm_start .* reveal")]:
        with pytest.raises(ConfigurationError, match=message):
            load_config(write_config(tmp_path / "h.toml", "ca.pem", PARTIES, dict(TRAINING, **edit)))


def test_shards_of_a_model_that_stays_shared(tmp_path):
    """A data party's shard holds its share (whole numbers as text) instead of weights; the coordinator's, its own."""
    share = {"values": [str(2 ** 130 + 7), "-12", "5"]}
    path = write_shard(tmp_path / "b.json", "B", "label", "logistic", ["x", "y"], None, True, "fp",
                       classes=["no", "yes"], label="label", shares=[share])
    shard = read_shard(path, "B", "label")
    assert "coef" not in shard and "intercept" not in shard and shard_shares(shard) == [[2 ** 130 + 7, -12, 5]]
    broken = dict(shard, share={"values": ["1", "2.5", "3"]})
    path.write_text(json.dumps(broken))
    with pytest.raises(DataError, match="share 0 must hold 3 whole numbers, written as text"):
        read_shard(path, "B", "label")
    mine = write_coordinator_shard(tmp_path / "c.json", "C", "fp", [{"A": share, "B": share}])
    assert stat.S_IMODE(mine.stat().st_mode) == 0o600
    assert read_coordinator_shard(mine, "C")["shares"][0]["A"]["values"] == share["values"]
    with pytest.raises(DataError, match="not coordinator D's shard"):
        read_coordinator_shard(mine, "D")



def test_a_step_setting_under_conjugate_gradient_in_the_file_is_refused(tmp_path):
    """[training] goes through the same check as the estimators: solver 'cg' takes no optimizer."""
    parties = {name: {"address": f"127.0.0.1:{7100 + i}", "certificate": "c.pem", "key": "k.pem"}
               for i, name in enumerate("ABC")}
    with pytest.raises(ConfigurationError, match=r"\[training\]: solver='cg' .* optimizer='adam' would go unused"):
        load_config(write_config(tmp_path / "f.toml", "ca.pem", parties, {"solver": "cg", "optimizer": "adam"}))
    auto = load_config(write_config(tmp_path / "g.toml", "ca.pem", parties, {"optimizer": "adam"}))
    assert not auto.training.conjugate


def _deep(path, levels=100_000):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[" * levels + "]" * levels)
    return path


def test_every_shard_and_checkpoint_reader_refuses_deep_nesting_naming_the_file(tmp_path):
    """A 100,000-level JSON file is a DataError naming it, at every reader: never a RecursionError."""
    from vfl.federation import credit as pipeline
    from vfl.deploy.shards.trees import read_shard as read_boosting_shard
    from vfl.serving.models import load_share

    path = _deep(tmp_path / "model_A.json")
    readers = [lambda: read_shard(path, "A", "feature"), lambda: read_boosting_shard(path, "A", "feature"),
               lambda: read_coordinator_shard(path, "C"), lambda: pipeline.read_shard(path, "A", "feature")]
    for read in readers:
        with pytest.raises(DataError, match=re.escape(str(path)) + ": its JSON nests too deeply"):
            read()
    _deep(tmp_path / "models" / "1" / "model_A.json")
    for family in ("linear", "trees", "credit", "mlp"):      # what the feature party's serving link loads
        with pytest.raises(DataError, match="its JSON nests too deeply"):
            load_share(tmp_path / "models", "1", "A", "feature", family)
    store = CheckpointStore(tmp_path / "checkpoints", "A", "fp")
    store.save(0, {"weights": [1.0]})
    _deep(tmp_path / "checkpoints" / "epoch-000000.json")
    with pytest.raises(DataError, match="its JSON nests too deeply"):
        store.load()


def test_a_boosting_shard_with_a_huge_leaf_value_is_refused_when_read(tmp_path):
    from vfl.deploy.shards.trees import FORMAT as BOOSTING_FORMAT, read_shard as read_boosting_shard

    tree = {"left": [-1], "right": [-1], "owner": [-1], "value": [0.5], "gain": [0.0]}
    shard = {"format": BOOSTING_FORMAT, "party": "B", "role": "label", "columns": ["x"], "trained_with": "fp",
             "binning": {"max_bins": 32, "thresholds": [[0.5]], "has_missing": [False]},
             "loss": {"name": "binary_log_loss"}, "data_parties": ["A", "B"], "trees": [{"tree": tree, "splits": []}]}
    path = tmp_path / "model_B.json"
    path.write_text(json.dumps(shard))
    assert read_boosting_shard(path, "B", "label")["trees"]
    tree["value"] = [1e300]
    path.write_text(json.dumps(shard))
    with pytest.raises(DataError, match=re.escape(str(path)) + r": .*tree 0: leaf values must be finite numbers"):
        read_boosting_shard(path, "B", "label")
