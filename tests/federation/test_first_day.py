"""A first day that goes right: prompt aborts naming who stopped and why, progress, metrics, plain words.

Real party processes (small data, 1024-bit keys) where the behaviour is about processes; the transport's
plain words are checked with transports in threads and fake peers speaking something other than TLS.
"""

import json
import socket
import threading
import time

import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from vfl.cli import main as vfl_main
from vfl.errors import ConfigurationError, DataError, HandshakeError
from vfl.deploy.config import load_config
from vfl.metrics import ks_statistic
from vfl.transport.network import NetworkSettings, NetworkTransport
from vfl.transport.tls import ca_name, load_certificate
from vfl_net_helpers import (_free_ports, assert_succeeded, federation, federation_certs, free_ports,  # noqa: F401
                             kill_all, listen_in_thread, run_parties, start_parties)

pytestmark = pytest.mark.slow    # processes, TLS links, servers or kernels


def shard(work, role):
    return json.loads((work / role / f"model_{role}.json").read_text())


# --------------------------------------------------------------------------- a party stops on its own error

def test_a_data_error_after_the_federation_formed_stops_every_party_at_once(federation):
    """A's column fails the fixed-point range check once C's key arrives: B and C stop within seconds of A,
    far from their 60 s timeout, each naming A and its data."""
    data = dict(federation["data"])
    frame = pd.read_csv(data[("A", "train")])
    frame.loc[5, "a1"] = 1e300                      # finite, so the CSV loads; beyond any 1024-bit fixed point
    data[("A", "train")] = federation["dir"] / "A_huge.csv"
    frame.to_csv(data[("A", "train")], index=False)
    config = federation["make"](network={"timeout": 60, "connect_timeout": 30})
    parties = start_parties("party", config, data, federation["dir"])
    try:
        a = parties["A"].finish(60)
        stopped = time.monotonic()
        others = {role: parties[role].finish(30) for role in ("B", "C")}
        assert time.monotonic() - stopped < 5
    finally:
        kill_all(parties)
    assert a[0] == 2 and "party A, column 'a1'" in a[2] and "fixed-point range" in a[2], a[2]
    for role, (code, out, err) in others.items():
        assert code == 1, err
        errors = [line for line in err.splitlines() if ": warning: " not in line]   # B warns of mini-batches
        assert len(errors) == 1 and "Traceback" not in err
        assert "party A stopped on an error in its data (FixedPointOverflowError" in err, err
        assert "the details stay with A" in err and "1e+300" not in err and "a1" not in err, err
    # C, waiting for A, hears it from A; B, waiting for C, hears it passed on (or from A itself).
    assert "A stopped while C waited for" in others["C"][2], others["C"][2]


@pytest.mark.slow
def test_a_party_that_stops_on_its_data_before_it_connects_tells_its_peers_why(federation):
    """A's CSV has a column that is not numeric, found as A reads it, before any link: A still reaches B and C
    to say why it stops, so they stop within seconds (not after their 60 s connect timeout) naming A and its
    data, and nobody says that A never connected."""
    data = dict(federation["data"])
    frame = pd.read_csv(data[("A", "train")])
    frame["a1"] = frame["a1"].astype(object)
    frame.loc[3, "a1"] = "unknown"
    data[("A", "train")] = federation["dir"] / "A_text.csv"
    frame.to_csv(data[("A", "train")], index=False)
    config = federation["make"](network={"timeout": 60, "connect_timeout": 60})
    started = time.monotonic()
    parties = start_parties("party", config, data, federation["dir"])
    try:
        results = {role: parties[role].finish(50) for role in ("A", "B", "C")}
    finally:
        kill_all(parties)
    assert time.monotonic() - started < 40
    code, _, err = results["A"]
    assert code == 2 and "column 'a1'" in err and "not numeric" in err, err
    for role in ("B", "C"):
        code, _, err = results[role]
        assert code == 1, err
        assert "party A stopped on an error in its data (DataError)" in err and "the details stay with A" in err, err
        assert "never connected" not in err and "unknown" not in err, err


def test_a_party_that_never_appeared_is_named_as_such(federation):
    """Without A: B and C, which listen for A, say that A never connected; nobody says a link was closed."""
    config = federation["make"](network={"connect_timeout": 3})
    results = run_parties("party", config, federation["data"], federation["dir"], roles=("B", "C"), timeout=30)
    for role, (code, out, err) in results.items():
        assert code == 1, err
        assert f"A never connected to {role} within 3 s" in err, err
        assert "closed the connection" not in err


# --------------------------------------------------------------------------- progress, metrics, positive class

def test_training_reports_metrics_and_the_positive_class_and_prediction_reads_them_back(federation):
    """B prints its positive class and its training metrics (the AUC and KS of the scores the shards give on
    its training rows); `vfl predict` on rows with labels prints the same metrics; A and C print neither.
    --progress forces the progress lines on standard error."""
    config, data, work = federation["make"](training={"iterations": 4}), federation["data"], federation["dir"]
    trained = assert_succeeded(run_parties("party", config, data, work, extra=["--progress"]))
    a, b = shard(work, "A"), shard(work, "B")
    assert b["classes"] == ["no", "yes"] and b["positive_class"] == "yes" and "positive_class" not in a
    out = trained["B"][1].splitlines()
    assert "party B: positive class 'yes' (the other: 'no'); scores and probabilities are those of 'yes'" in out

    frame_a = pd.read_csv(data[("A", "train")]).set_index("id")
    frame_b = pd.read_csv(data[("B", "train")]).set_index("id").loc[frame_a.index]
    z = frame_a[a["columns"]].to_numpy() @ a["coef"] + frame_b[b["columns"]].to_numpy() @ b["coef"] + b["intercept"]
    y = (frame_b["label"] == "yes").to_numpy().astype(int)
    assert f"party B: training metrics on 60 rows: AUC {roc_auc_score(y, z):.4f}, KS {ks_statistic(y, z):.4f}" in out
    for role in ("A", "C"):
        assert " metrics on " not in trained[role][1] and "positive class" not in trained[role][1]

    err = trained["B"][2]
    assert "party B: waiting for A, C…" in err and "party B: connected to A, C" in err
    assert "party B: aligned by private set intersection: A 60 rows, B 60 rows; 60 shared" in err
    assert "epoch" in err and "4/4" in err
    assert "loss=" in trained["C"][2]                          # only the coordinator knows the loss

    predicted = assert_succeeded(run_parties("predict", config, data, work, split="train"))
    out = predicted["B"][1].splitlines()
    assert "party B: positive class 'yes' (the other: 'no'); scores and probabilities are those of 'yes'" in out
    assert f"party B: prediction metrics on 60 rows: AUC {roc_auc_score(y, z):.4f}, KS {ks_statistic(y, z):.4f}" \
        in out
    assert predicted["B"][2] == ""                             # not a terminal: no progress by default


def test_validation_metrics_with_early_stopping_and_none_when_switched_off(federation):
    """With early stopping B also reports its validation rows; report_metrics = false runs no extra prediction."""
    config = federation["make"](training={"iterations": 4, "early_stopping": True, "validation_fraction": 0.25,
                                          "n_iter_no_change": 4})
    data, work = federation["data"], federation["dir"]
    out = assert_succeeded(run_parties("party", config, data, work))["B"][1]
    assert "party B: training metrics on 45 rows: AUC " in out and "party B: validation metrics on 15 rows: AUC " \
        in out
    quiet = federation["make"]("quiet.toml", training={"iterations": 4, "report_metrics": False}, fresh_ports=True)
    results = assert_succeeded(run_parties("party", quiet, data, work / "quiet"))
    assert " metrics on " not in results["B"][1]
    names = set(pd.read_csv(work / "quiet" / "C" / "transcript_train.csv")["name"])
    assert "masked_scores" not in names                       # no prediction round at all


# --------------------------------------------------------------------------- plain words for common mistakes

def test_a_port_already_in_use_is_named_with_its_setting(federation, capsys):
    """B's port is taken (a second `vfl party B`, say): B stops at once, exit 2, pointing at its address setting."""
    config = federation["make"]()
    port = load_config(config).party("B").address[1]
    holder = socket.create_server(("127.0.0.1", port))
    try:
        start = time.monotonic()
        code = vfl_main(["party", "--config", str(config), "--role", "B", "--data",
                         str(federation["data"][("B", "train")]), "--workdir", str(federation["dir"] / "B")])
        assert time.monotonic() - start < 5
    finally:
        holder.close()
    err = capsys.readouterr().err
    assert code == 2
    assert err == (f"vfl party B: error: party B: another process, perhaps a second `vfl party B`, listens on "
                   f"127.0.0.1:{port}; see [parties.B] address in {config}\n")


def test_the_transport_says_an_address_is_in_use(federation_certs, free_ports):
    ours, _ = federation_certs
    addresses = dict(zip("AB", (("127.0.0.1", p) for p in free_ports(2))))
    holder = socket.create_server(addresses["B"])
    try:
        with pytest.raises(ConfigurationError, match=r"B: cannot listen on 127\.0\.0\.1:\d+: another process listens "
                                                     r"there already \(perhaps a second copy of B\)"):
            NetworkTransport.connect("B", addresses, ours["B"], NetworkSettings(connect_timeout=2))
    finally:
        holder.close()


def test_a_peer_of_another_federation_is_named_by_its_ca(federation_certs, free_ports):
    """B holds another federation's CA and certificate: A names the CA B's certificate names, and its own."""
    ours, theirs = federation_certs
    addresses = dict(zip("AB", (("127.0.0.1", p) for p in free_ports(2))))
    settings = NetworkSettings(connect_timeout=2)
    thread, outcome = listen_in_thread("B", addresses, theirs["B"], settings)
    time.sleep(0.3)
    with pytest.raises(HandshakeError) as refused:
        NetworkTransport.connect("A", addresses, ours["A"], settings)
    thread.join(10)
    ours_ca, theirs_ca = ca_name(load_certificate(ours["A"].ca)), ca_name(load_certificate(theirs["B"].ca))
    assert ours_ca != theirs_ca                    # same name, different key ids
    assert f"its certificate is signed by another CA, {theirs_ca}" in str(refused.value)
    assert f"this party trusts only the CA of {ours['A'].ca}, {ours_ca}" in str(refused.value)
    assert "give every party the same ca.pem" in str(refused.value)
    # B, refused by A or refusing A's certificate, names its own CA.
    assert "A never connected to B" in str(outcome["B"]) and theirs_ca in str(outcome["B"]), outcome


def _fake_server(reply: bytes):
    """A TCP server on 127.0.0.1 that answers anything with ``reply`` and closes: not TLS."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve():
        try:
            conn, _ = server.accept()
            conn.recv(4096)
            conn.sendall(reply)
            conn.close()
        except OSError:
            pass

    threading.Thread(target=serve, daemon=True).start()
    return server


@pytest.mark.parametrize("reply", [b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
                                   bytes(range(256)) * 2])
def test_a_dialled_address_that_does_not_speak_tls(federation_certs, reply):
    ours, _ = federation_certs
    server = _fake_server(reply)
    addresses = {"A": ("127.0.0.1", _free_ports(1)[0]), "B": server.getsockname()[:2]}
    try:
        with pytest.raises(HandshakeError) as refused:
            NetworkTransport.connect("A", addresses, ours["A"], NetworkSettings(connect_timeout=3))
    finally:
        server.close()
    assert "what listens there does not speak TLS (its first bytes are not a TLS record" in str(refused.value)
    assert "another program has B's port, or the address of B is wrong" in str(refused.value)


@pytest.mark.parametrize("junk, words", [
    (b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", "not TLS: it sent a plain HTTP request"),
    (b"\x00\xff" * 150, "not TLS: its first bytes are not a TLS record"),
])
def test_a_listener_names_a_caller_that_does_not_speak_tls(federation_certs, free_ports, junk, words):
    ours, _ = federation_certs
    addresses = dict(zip("AB", (("127.0.0.1", p) for p in free_ports(2))))
    thread, outcome = listen_in_thread("B", addresses, ours["B"], NetworkSettings(connect_timeout=2))
    for _ in range(50):
        try:
            sock = socket.create_connection(addresses["B"])
            break
        except ConnectionRefusedError:
            time.sleep(0.05)
    sock.sendall(junk)
    thread.join(10)
    sock.close()
    assert str(outcome["B"]).startswith("B: connecting: A never connected to B within 2 s; refused: ")
    assert words in str(outcome["B"]), outcome["B"]


# --------------------------------------------------------------------------- vfl demo

def test_demo_keeps_the_folder_it_names(tmp_path, capsys):
    """With --keep the files are where the demo says; without, it says it removes its folder
    (tests/federation/test_federation_processes.py::test_demo_runs_end_to_end)."""
    from vfl.federation.demo import run_demo

    run_demo(iterations=1, key_bits=1024, quiet=True, keep=tmp_path / "kept")
    out = capsys.readouterr().out
    assert f"certificates in {tmp_path / 'kept' / 'certs'}" in out and "removed" not in out
    assert (tmp_path / "kept" / "certs" / "ca.pem").exists() and (tmp_path / "kept" / "B" / "scores.csv").exists()


def test_the_demo_defaults_train_without_the_label_leak(tmp_path):
    """vfl demo with no options: full batches (the README's safe default), so no LabelLeakWarning; mini-batches,
    which the README says leak the labels, only when asked for with --batch-size (and then warned about)."""
    import warnings

    from vfl.errors import LabelLeakWarning
    from vfl.federation.demo import DEFAULTS, prepare
    from vfl.protocols.linear.checks import warn_mini_batch_labels

    prep = prepare(tmp_path / "default", key_bits=1024, iterations=DEFAULTS["iterations"],
                   batch_size=DEFAULTS["batch_size"])
    settings = load_config(prep["config"]).training
    assert settings.batch_size is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", LabelLeakWarning)
        warn_mini_batch_labels(settings, len(prep["train"]))
    asked = load_config(prepare(tmp_path / "asked", key_bits=1024, batch_size=64)["config"]).training
    with pytest.warns(LabelLeakWarning):
        warn_mini_batch_labels(asked, len(prep["train"]))
