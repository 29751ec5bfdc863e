"""Parties A, B and C as three operating-system processes on 127.0.0.1: runs, faults and resume.

Small data, 1024-bit keys (insecure, for speed) and timeouts of a few seconds.
"""

import json
import re
import runpy
import signal
import stat
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vfl.cli import main as vfl_main
from vfl.errors import DataError, PeerError, ProtocolError
from vfl.transport.tls import TLSFiles, ca_name, issuer_name, load_certificate
from vfl_net_helpers import (_free_ports, assert_succeeded, federation, federation_certs,  # noqa: F401 - fixtures
                             finish_all, kill_all, run_parties, same_model, scaled, slack, start_parties,
                             write_federation_file, write_party_data)

pytestmark = pytest.mark.slow    # processes, TLS links, servers or kernels


def shard(workdir, role):
    return json.loads((workdir / role / f"model_{role}.json").read_text())


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory, federation_certs):
    """One uninterrupted training run of 8 epochs, shared by the prediction and the resume tests."""
    folder = tmp_path_factory.mktemp("reference")
    data = write_party_data(folder)
    # Both runs start from zero, so the resumed run can be compared with this separate uninterrupted one
    # (tests/linear/test_estimator_api.py resumes from a secret random start).
    training = {"iterations": 8, "init": "zeros"}
    config = write_federation_file(folder / "federation.toml", federation_certs[0], _free_ports(3), training)
    parties = start_parties("party", config, data, folder / "run")
    try:
        results = finish_all(parties)
    finally:
        kill_all(parties)
    return {"config": config, "data": data, "work": folder / "run", "results": results, "training": training,
            "folder": folder}


def test_training_then_prediction(reference_run):
    config, data, work = reference_run["config"], reference_run["data"], reference_run["work"]
    for role, (code, out, err) in reference_run["results"].items():
        assert code == 0, f"{role}: {err}"
    a, b = shard(work, "A"), shard(work, "B")
    assert a["columns"] == ["a0", "a1", "a2"] and "intercept" not in a
    assert b["columns"] == ["b0", "b1"] and b["classes"] == ["no", "yes"]
    assert stat.S_IMODE((work / "A" / "model_A.json").stat().st_mode) == 0o600
    assert not list((work / "A" / "checkpoints").glob("*.json"))  # finished: checkpoints removed
    transcript = pd.read_csv(work / "C" / "transcript_train.csv")
    assert list(transcript.columns) == ["iteration", "sender", "receiver", "name", "kind", "bytes"]
    assert set(transcript["sender"]) == {"C"} and "gradient" in set(transcript["name"])

    results = assert_succeeded(run_parties("predict", config, data, work))
    assert results["A"][1].splitlines() == ["party A: aligned by private set intersection: A 25 rows, B 25 rows; "
                                            "25 shared", "party A: sent encrypted partial scores for 25 rows to B"]
    assert results["B"][1].splitlines()[-1].startswith("party B: scores of 25 rows written to ")
    assert results["C"][1] == "party C: decrypted 25 masked scores for B\n"
    scores = pd.read_csv(work / "B" / "scores.csv").set_index("id")
    xa = pd.read_csv(data[("A", "test")]).set_index("id")[a["columns"]]
    xb = pd.read_csv(data[("B", "test")]).set_index("id").loc[xa.index, b["columns"]]
    expected = xa.to_numpy() @ a["coef"] + xb.to_numpy() @ b["coef"] + b["intercept"]
    np.testing.assert_allclose(scores.loc[xa.index, "score"], expected, atol=1e-6)
    assert set(scores["prediction"]) <= {"yes", "no"}


def test_resumed_run_equals_uninterrupted_run(reference_run, federation_certs):
    data, base, whole = reference_run["data"], reference_run["folder"], reference_run["work"]
    config = write_federation_file(base / "cut.toml", federation_certs[0], _free_ports(3), reference_run["training"])
    interrupted = start_parties("party", config, data, base / "cut", extra=["--narrate"])
    try:
        interrupted["C"].wait_for_line("epoch 4/8 done")
        interrupted["A"].signal(signal.SIGKILL)
        cut = finish_all(interrupted)
    finally:
        kill_all(interrupted)
    assert cut["B"][0] != 0 and cut["C"][0] != 0
    assert list((base / "cut" / "B" / "checkpoints").glob("epoch-*.json"))

    results = assert_succeeded(run_parties("party", config, data, base / "cut", extra=["--resume", "--narrate"]))
    assert "resume: has checkpoints" in results["C"][1]
    epochs = pd.read_csv(base / "cut" / "C" / "transcript_train.csv")["iteration"]
    assert epochs.max() == 7 and epochs[epochs >= 0].min() >= 3  # started after epoch 4 (or 3), not from 0
    for role in ("A", "B"):
        assert same_model(shard(base / "cut", role), shard(whole, role))
    whole_c = json.loads((whole / "C" / "training_C.json").read_text())
    cut_c = json.loads((base / "cut" / "C" / "training_C.json").read_text())
    assert cut_c["loss_curve"] == whole_c["loss_curve"]


def test_peer_killed_mid_training(federation):
    config, data, work = federation["make"](training={"iterations": 500}), federation["data"], federation["dir"]
    parties = start_parties("party", config, data, work, extra=["--narrate"])
    try:
        parties["C"].wait_for_line("epoch 2/500 done")
        parties["B"].signal(signal.SIGKILL)
        start = time.monotonic()
        results = finish_all(parties, timeout=30)
        assert time.monotonic() - start < 10
    finally:
        kill_all(parties)
    for role in ("A", "C"):
        code, out, err = results[role]
        assert code == 1, err
        # The failure surfaces while receiving or while sending; either way the step and the peer are named.
        assert re.search(r"(waiting for '\w+' from B|sending '\w+' to B): ", err), err


def test_peer_stops_answering(federation):
    timeout = scaled(3)         # the message timeout under test; under load the live peers need longer
    config, data, work = federation["make"](training={"iterations": 500}, network={"timeout": timeout}), \
        federation["data"], federation["dir"]
    parties = start_parties("party", config, data, work, extra=["--narrate"])
    try:
        parties["C"].wait_for_line("epoch 2/500 done")
        parties["C"].signal(signal.SIGSTOP)
        start = time.monotonic()
        a, b = parties["A"].finish(30 * slack()), parties["B"].finish(30 * slack())
        # Within the timeout and a little: after a failure the links close at once, without lingering.
        assert time.monotonic() - start < timeout + 1.5 * slack()
    finally:
        kill_all(parties)
    assert a[0] == 1 and b[0] == 1
    assert f"within {timeout} s" in a[2] + b[2] and "from C" in a[2] + b[2]
    assert "waiting for" in a[2] and "waiting for" in b[2]


def test_peer_that_never_starts(federation):
    config, data, work = federation["make"](network={"connect_timeout": 3}), federation["data"], federation["dir"]
    parties = start_parties("party", config, data, work, roles=("A", "B"))
    try:
        results = finish_all(parties, timeout=30)
    finally:
        kill_all(parties)
    for role, (code, out, err) in results.items():
        assert code == 1, err
        assert "connecting" in err and "could not reach C" in err, err


def test_settings_that_differ_are_refused_at_connect(federation):
    data, work = federation["data"], federation["dir"]
    shared = federation["make"]()
    other = federation["make"]("other.toml", training={"learning_rate": 0.05})
    parties = start_parties("party", shared, data, work, roles=("A", "B"))
    parties.update(start_parties("party", other, data, work, roles=("C",)))
    try:
        results = finish_all(parties, timeout=30)
    finally:
        kill_all(parties)
    for role, (code, out, err) in results.items():
        assert code != 0, err
        assert "settings differ" in err, err
    assert "training.learning_rate = 0.05 at C" in results["C"][2] or "0.05 at C" in results["A"][2]


def test_certificate_from_another_ca_is_refused_before_connecting(federation):
    """A's certificate comes from another `vfl certs` run than its ca.pem: A says so at once; B and C name A as the
    party that never connected.  (A rogue party skipping the check is refused at the TLS handshake:
    tests/transport/test_tls_transport.py.)"""
    ours, theirs = federation["certs"]
    data, work = federation["data"], federation["dir"]
    tls = dict(ours, A=TLSFiles(ours["A"].ca, theirs["A"].certificate, theirs["A"].key))
    mixed = federation["make"]("mixed.toml", tls=tls, network={"connect_timeout": 30})
    honest = federation["make"](network={"connect_timeout": 3})
    parties = start_parties("party", mixed, data, work, roles=("A",))
    parties.update(start_parties("party", honest, data, work, roles=("B", "C")))
    try:
        results = finish_all(parties, timeout=30)
    finally:
        kill_all(parties)
    assert results["A"][0] == 2, results["A"][2]
    assert f"is signed by the CA {issuer_name(load_certificate(theirs['A'].certificate))}, not by the federation's " \
           f"CA {ours['A'].ca}, {ca_name(load_certificate(ours['A'].ca))}" in results["A"][2]
    assert results["B"][0] == 1 and "A never connected to B within 3 s" in results["B"][2]
    assert results["C"][0] == 1 and "A never connected to C within 3 s" in results["C"][2]


def test_certs_command_and_help(tmp_path, capsys):
    assert vfl_main(["certs", str(tmp_path / "c"), "--parties", "A", "B", "C", "--hosts", "B=10.0.0.2"]) == 0
    assert stat.S_IMODE((tmp_path / "c" / "B.key").stat().st_mode) == 0o600
    assert vfl_main(["certs", str(tmp_path / "c")]) == 2  # refuses to replace the CA without --force
    assert "exists" in capsys.readouterr().err
    for command in ("certs", "party", "predict", "demo"):
        with pytest.raises(SystemExit) as exit_:
            vfl_main([command, "--help"])
        assert exit_.value.code == 0


def test_demo_example_takes_the_options_of_vfl_demo(capsys):
    example = runpy.run_path(str(Path(__file__).parents[2] / "examples" / "three_party_demo.py"))

    def options(main, argv):
        with pytest.raises(SystemExit):
            main(argv)
        return set(re.findall(r"^  (--[a-z-]+)", capsys.readouterr().out, flags=re.M))

    assert options(example["main"], ["--help"]) == options(vfl_main, ["demo", "--help"]) >= {"--batch-size"}


def test_bad_configuration_exits_2(tmp_path, federation, capsys):
    config = federation["make"]()
    assert vfl_main(["party", "--config", str(config), "--role", "C", "--data", "x.csv",
                     "--workdir", str(tmp_path / "C")]) == 2
    assert "party C holds no data" in capsys.readouterr().err
    (record,) = (tmp_path / "C" / "runs").iterdir()          # the refused run is recorded, with the same error
    assert "party C holds no data" in json.loads((record / "run.json").read_text())["error"]
    bad = tmp_path / "bad.toml"
    bad.write_text(config.read_text().replace("learning_rate", "learnin_rate"))
    assert vfl_main(["party", "--config", str(bad), "--role", "A", "--data", "x.csv"]) == 2
    assert "unknown key(s) ['learnin_rate']" in capsys.readouterr().err


def test_demo_runs_end_to_end(capsys):
    from vfl.federation.demo import run_demo

    result = run_demo(iterations=4, key_bits=1024, quiet=True)
    out = capsys.readouterr().out
    folder = out.split("files in the temporary folder ", 1)[1].split(",", 1)[0]
    assert "removed at the end: --keep DIR keeps them" in out and f"removed the temporary folder {folder}" in out
    assert not Path(folder).exists()
    assert result["auc"] > 0.9 and result["weight_gap"] < 1e-6
    assert "decrypted loss over the epoch" in out and "bytes on each link" in out
    assert "full batches (all training rows) by conjugate gradient" in out and "mini-batch" not in out
    assert "progress: epoch 4/4" in out and "\r" not in out  # no terminal: plain lines, no bar
    assert result["bytes"]["train A->B"] > 0


@pytest.mark.parametrize("exc, code, text", [
    (RuntimeError("boom\n  on two lines\x1b[2J"), 1, "internal error (RuntimeError): boom on two lines\\x1b[2J"),
    (ValueError(""), 1, "internal error (ValueError)"),
    (ProtocolError("C: waiting for 'loss' from B: B sent a malformed message: bad magic"), 1,
     "C: waiting for 'loss' from B: B sent a malformed message: bad magic"),
    (DataError("party A: column 'x' is empty"), 2, "party A: column 'x' is empty"),
    (FileNotFoundError(2, "No such file or directory", "a.csv"), 2, "[Errno 2] No such file or directory: 'a.csv'"),
])
def test_a_failing_party_prints_one_line_and_no_traceback(capsys, exc, code, text):
    from argparse import Namespace

    from vfl.deploy.commands import run_command as _run

    def action():
        raise exc

    assert _run(Namespace(command="party", role="A"), action) == code
    err = capsys.readouterr().err
    assert err == f"vfl party A: error: {text}\n"


def test_an_interrupted_party_exits_130_with_one_line(capsys):
    from argparse import Namespace

    from vfl.deploy.commands import run_command as _run

    def action():
        raise KeyboardInterrupt

    assert _run(Namespace(command="party", role="C"), action) == 130
    assert capsys.readouterr().err == "vfl party C: interrupted\n"


def test_a_garbled_frame_from_a_peer_ends_the_party_with_one_line(federation):
    """A real ``vfl party C`` process; A and B are fakes in this process, and A sends a frame that does not decode."""
    import threading

    from vfl.deploy.config import load_config
    from vfl.transport import Endpoint
    from vfl.transport.network import NetworkSettings, NetworkTransport

    path = federation["make"](network={"connect_timeout": 20, "timeout": 10})
    config = load_config(path)
    parties = start_parties("party", path, federation["data"], federation["dir"], roles=("C",))
    fakes, errors = {}, []

    def connect(role):
        try:
            fakes[role] = NetworkTransport.connect(role, config.addresses(), config.tls(role),
                                                   NetworkSettings(connect_timeout=20, send_timeout=5))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=connect, args=(r,), daemon=True) for r in "AB"]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors, errors
        fakes["A"].send("C", b"VFL1\x00\x00\x00\x30" + b'{"name": "hello", "iteration": NaN, "kind": 1}  ')
        code, out, err = parties["C"].finish(30)
        b = Endpoint(fakes["B"], ["A", "C"], timeout=10)
        assert b.recv("C", "hello")["fingerprint"] == config.fingerprint("train")
        with pytest.raises(PeerError) as told:
            b.recv("C", "next")
    finally:
        kill_all(parties)
        for t in fakes.values():
            t.close(linger=0)
    assert code == 1
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("vfl party C: error: C: waiting for 'hello' from A: A sent a malformed message: "
                          "malformed message header: NaN is not a number JSON allows"), err
    # B learns what kind of fault stopped C, and from whom.
    assert ("party C stopped on a refused peer or a fault of the network: ProtocolError: C: waiting for 'hello' from "
            "A: A sent a malformed message") in str(told.value)


def test_differential_privacy_over_the_network(federation):
    """[training] dp_epsilon/dp_delta: B reports the budget spent; the mini-batch equations rule then does not apply."""
    config = federation["make"](training={"iterations": 3, "dp_epsilon": 2.0, "dp_delta": 1e-5})
    results = assert_succeeded(run_parties("party", config, federation["data"], federation["dir"]))
    line = next(x for x in results["B"][1].splitlines() if "differential privacy" in x)
    epsilon = float(re.search(r"\(([\d.]+), 1e-05\)-DP spent over 3 epochs", line).group(1))
    assert 1.99 <= epsilon <= 2.0 + 1e-6
    assert "differential privacy" not in results["A"][1]


def test_settings_that_let_a_party_solve_for_labels_are_refused(federation):
    """A with 10 columns against B's one, mini-batches over many epochs: both refuse before training."""
    rng = np.random.default_rng(4)
    ids = [f"r{i}" for i in range(100)]
    data = {("A", "train"): federation["dir"] / "wide_a.csv", ("B", "train"): federation["dir"] / "narrow_b.csv"}
    pd.DataFrame(rng.normal(size=(100, 10))).add_prefix("a").assign(id=ids).to_csv(data[("A", "train")], index=False)
    pd.DataFrame({"id": ids, "b0": rng.normal(size=100), "label": rng.integers(0, 2, 100)}).to_csv(
        data[("B", "train")], index=False)
    config = federation["make"](training={"iterations": 30, "batch_size": 20})
    parties = start_parties("party", config, data, federation["dir"])
    try:
        results = finish_all(parties, timeout=30)
    finally:
        kill_all(parties)
    for role in ("A", "B"):
        assert results[role][0] == 2 and "party A: 30 epochs of 5 batches give A 1500 exact gradient equations" \
            in results[role][2] and "use at most 4 epochs" in results[role][2], results[role][2]
    assert results["C"][0] == 1


def test_packed_training_and_prediction_over_the_network(reference_run, federation_certs):
    """``packing = true`` in [training]: the same model as the unpacked reference run, and the same scores."""
    data, base, whole = reference_run["data"], reference_run["folder"], reference_run["work"]
    training = {**reference_run["training"], "packing": True}
    config = write_federation_file(base / "packed.toml", federation_certs[0], _free_ports(3), training)
    results = assert_succeeded(run_parties("party", config, data, base / "packed", extra=["--narrate"]))
    assert "values per ciphertext" in results["A"][1]
    for role in ("A", "B"):
        packed, plain = shard(base / "packed", role), shard(whole, role)
        assert packed["coef"] == plain["coef"] and packed.get("intercept") == plain.get("intercept")
    results = assert_succeeded(run_parties("predict", config, data, base / "packed"))
    transcript = pd.read_csv(base / "packed" / "C" / "transcript_predict.csv")
    assert "packed_scores" in set(transcript["name"])      # C sends the decrypted, still masked, packed scores


def test_training_options_over_the_network_equal_centralized(federation):
    """[training] optimizer, elastic net, a schedule, early stopping and class weights through vfl party:
    the shards equal centralized training from the starts they record."""
    from vfl.centralized import fit_gradient_descent
    from vfl.deploy.config import load_config
    from vfl.parties import class_weights

    training = {"iterations": 8, "optimizer": "adam", "learning_rate": 0.1, "penalty": "elasticnet",
                "l1_ratio": 0.5, "learning_rate_schedule": "invscaling", "early_stopping": True,
                "validation_fraction": 0.2, "n_iter_no_change": 2, "scoring": "roc_auc", "class_weight": "balanced",
                "tol": 0}
    config = federation["make"](training=training)
    data, work = federation["data"], federation["dir"]
    results = assert_succeeded(run_parties("party", config, data, work))
    a, b = shard(work, "A"), shard(work, "B")
    frame_a = pd.read_csv(data[("A", "train")]).assign(id=lambda f: f["id"].astype(str)).sort_values("id")
    frame_b = pd.read_csv(data[("B", "train")]).assign(id=lambda f: f["id"].astype(str)).sort_values("id")
    x = np.hstack([frame_a[a["columns"]].to_numpy(), frame_b[b["columns"]].to_numpy()])
    y = np.where(frame_b["label"].to_numpy() == b["classes"][1], 1.0, -1.0)
    settings = load_config(config).training
    start = np.array(a["initial_coef"] + b["initial_coef"]), b["initial_intercept"]
    ref = fit_gradient_descent(x, y, settings, start=start, sample_weight=class_weights(frame_b["label"], "balanced"))
    np.testing.assert_allclose(a["coef"] + b["coef"], ref["coef"], atol=1e-7)
    assert b["intercept"] == pytest.approx(ref["intercept"], abs=1e-7)
