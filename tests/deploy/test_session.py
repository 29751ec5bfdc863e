"""A party's session (vfl.deploy.session): the hello, the rows check, column counts, abort reasons."""

import re

import numpy as np
import pytest

from test_config import PARTIES, TRAINING, named_parties
from vfl.deploy.config import load_config, write_config
from vfl.deploy.data import PartyData
from vfl.deploy.session import (Session, differences, abort_reason, check_equations, check_rows, fault_category,
                                rows_hello, share_columns)
from vfl.errors import ConfigurationError, DataError, FixedPointOverflowError, PeerError, ProtocolError
from vfl.transport import Endpoint, InProcessNetwork, Message, Transcript, run_roles


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
