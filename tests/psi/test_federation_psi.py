"""Unaligned CSVs: vfl party and vfl predict align the rows by private set intersection, and vfl align alone."""

import json

import numpy as np
import pandas as pd
import pytest

from vfl.deploy.config import load_config
from vfl_net_helpers import (Party, _free_ports, federation_certs, kill_all, start_parties,  # noqa: F401 - fixtures
                             write_federation_file)
from vfl_net_helpers import finish_all as finish_parties

pytestmark = pytest.mark.slow    # processes, TLS links, servers or kernels


def finish_all(parties, timeout=90):
    try:
        return finish_parties(parties, timeout)
    finally:
        kill_all(parties)


def overlapping_csvs(folder, n=100, overlap=0.7, seed=5):
    """A's and B's CSVs: 70% of the ids in common, each file in its own order, ids written differently."""
    rng = np.random.default_rng(seed)
    shared = int(n * overlap)
    x = rng.normal(size=(n + (n - shared), 5))
    y = (x @ np.array([1.0, -1.0, 0.5, 2.0, -0.5]) > 0).astype(int)
    ids = np.array([f"c{i:04d}" for i in range(len(x))])
    rows_a = np.r_[:shared, shared:n]                 # A: the shared rows and its own 30
    rows_b = np.r_[:shared, n:n + (n - shared)]       # B: the shared rows and 30 others
    paths = {}
    for role, rows, cols in (("A", rows_a, [0, 1, 2]), ("B", rows_b, [3, 4])):
        frame = pd.DataFrame(x[np.ix_(rows, cols)], columns=[f"{role.lower()}{j}" for j in range(len(cols))])
        frame.insert(0, "id", [f"  {i} " if role == "A" else i for i in ids[rows]])   # A pads its ids
        if role == "B":
            frame["label"] = np.where(y[rows] == 1, "yes", "no")
        frame = frame.iloc[rng.permutation(len(frame))]
        paths[(role, "train")] = paths[(role, "test")] = folder / f"{role}.csv"
        frame.to_csv(paths[(role, "train")], index=False)
    return paths, ids[:shared], x, y


@pytest.mark.parametrize("protocol", ["dh", "kkrt"])
def test_unaligned_csvs_train_and_predict_on_the_intersection(tmp_path, federation_certs, protocol):
    data, shared_ids, x, y = overlapping_csvs(tmp_path)
    config = write_federation_file(tmp_path / "federation.toml", federation_certs[0], _free_ports(3),
                                   {"iterations": 3, "batch_size": 0, "init": "zeros"},
                                   data={"psi_protocol": protocol} if protocol != "dh" else None)
    assert load_config(config).align == "psi"                       # the default
    assert load_config(config).psi_protocol == protocol
    results = finish_all(start_parties("party", config, data, tmp_path / "work"))
    for role, (code, out, err) in results.items():
        assert code == 0, f"{role}: {err}"
    how = " (KKRT)" if protocol == "kkrt" else ""
    for role in ("A", "B"):
        assert f"aligned by private set intersection{how}: A 100 rows, B 100 rows; 70 shared" in results[role][1]
    # the model is the one trained on the plaintext join of the 70 shared rows
    a = json.loads((tmp_path / "work" / "A" / "model_A.json").read_text())
    b = json.loads((tmp_path / "work" / "B" / "model_B.json").read_text())
    from vfl.centralized import fit_gradient_descent
    rows = np.arange(70)
    settings = load_config(config).training
    order = np.argsort(np.array([f"c{i:04d}" for i in rows]))   # any common order: full batch sums every row
    ref = fit_gradient_descent(x[rows][order], np.where(y[rows][order] == 1, 1.0, -1.0), settings)
    np.testing.assert_allclose(a["coef"] + b["coef"], ref["coef"], atol=1e-7)

    predicted = finish_all(start_parties("predict", config, data, tmp_path / "work"))
    for role, (code, out, err) in predicted.items():
        assert code == 0, f"{role}: {err}"
    scores = pd.read_csv(tmp_path / "work" / "B" / "scores.csv")
    assert sorted(scores["id"]) == sorted(shared_ids)                # exactly the overlapping rows
    expected = x[:70, :3] @ a["coef"] + x[:70, 3:] @ b["coef"] + b["intercept"]
    by_id = dict(zip(shared_ids, expected))
    np.testing.assert_allclose(scores["score"], [by_id[i] for i in scores["id"]], atol=1e-6)


def test_vfl_align_writes_each_partys_rows_in_one_common_order(tmp_path, federation_certs):
    data, shared_ids, _, _ = overlapping_csvs(tmp_path, seed=8)
    frame = pd.read_csv(data[("A", "train")], dtype={"id": str})
    gap = frame.index[frame["id"].str.strip() == shared_ids[3]][0]
    frame.loc[gap, "a1"] = np.nan                    # an empty cell: aligning takes it, whatever trains after
    frame.to_csv(data[("A", "train")], index=False)
    config = write_federation_file(tmp_path / "federation.toml", federation_certs[0], _free_ports(3))
    out = {role: tmp_path / f"aligned_{role}.csv" for role in ("A", "B")}
    # only the data parties run it: the coordinator has no rows
    procs = {role: Party(["align", "--config", config, "--role", role, "--data", data[(role, "train")],
                          "--out", out[role], "--workdir", tmp_path / role], tmp_path / "output") for role in ("A", "B")}
    results = finish_all(procs)
    for role, (code, stdout, err) in results.items():
        assert code == 0, f"{role}: {err}"
        assert "70 shared" in stdout and f"its 70 aligned rows written to {out[role]}" in stdout
        (record,) = (tmp_path / role / "runs").iterdir()            # its run record, for vfl board
        info = json.loads((record / "run.json").read_text())
        assert info["task"] == "align" and info["family"] == "alignment" and info["status"] == "finished"
        assert json.loads((record / "result.json").read_text())["alignment"]["shared"] == 70
    a, b = pd.read_csv(out["A"], dtype={"id": str}), pd.read_csv(out["B"], dtype={"id": str})
    assert list(a["id"]) == list(b["id"]) and sorted(a["id"]) == sorted(shared_ids)
    assert list(b.columns) == ["id", "b0", "b1", "label"] and list(a.columns) == ["id", "a0", "a1", "a2"]
    assert a.loc[a["id"] == shared_ids[3], "a1"].isna().all() and a["a1"].isna().sum() == 1


def test_the_coordinator_has_nothing_to_align(tmp_path, federation_certs):
    data, _, _, _ = overlapping_csvs(tmp_path)
    config = write_federation_file(tmp_path / "federation.toml", federation_certs[0], _free_ports(3))
    code, _, err = finish_all({"C": Party(["align", "--config", config, "--role", "C", "--data", data[("A", "train")],
                                           "--out", tmp_path / "c.csv", "--workdir", tmp_path / "C"],
                                          tmp_path / "output")})["C"]
    assert code == 2 and "party C is the coordinator: it holds no rows to align" in err


def test_vfl_align_with_kkrt_finds_the_same_rows(tmp_path, federation_certs):
    """``[data] psi_protocol = "kkrt"``: vfl align runs KKRT's PSI between the two processes, says so, and writes
    the rows the Diffie–Hellman PSI finds, in one common order."""
    data, shared_ids, _, _ = overlapping_csvs(tmp_path, seed=9)
    config = write_federation_file(tmp_path / "federation.toml", federation_certs[0], _free_ports(3),
                                   data={"psi_protocol": "kkrt"})
    assert load_config(config).psi_protocol == "kkrt"
    out = {role: tmp_path / f"aligned_{role}.csv" for role in ("A", "B")}
    procs = {role: Party(["align", "--config", config, "--role", role, "--data", data[(role, "train")],
                          "--out", out[role], "--workdir", tmp_path / role], tmp_path / "output") for role in ("A", "B")}
    results = finish_all(procs)
    for role, (code, stdout, err) in results.items():
        assert code == 0, f"{role}: {err}"
        assert "aligned by private set intersection (KKRT): A 100 rows, B 100 rows; 70 shared" in stdout
        (record,) = (tmp_path / role / "runs").iterdir()
        assert json.loads((record / "result.json").read_text())["alignment"]["protocol"] == "kkrt"
    a, b = pd.read_csv(out["A"], dtype={"id": str}), pd.read_csv(out["B"], dtype={"id": str})
    assert list(a["id"]) == list(b["id"]) and sorted(a["id"]) == sorted(shared_ids)


def test_vfl_align_with_the_unbalanced_psi_reuses_its_caches_on_the_second_run(tmp_path, federation_certs):
    """psi_protocol = "unbalanced": B (the label party, 100 rows) against A (60 rows after a cut): B keeps its key and
    outputs in WORKDIR/psi-cache, A its copy; the second run fetches nothing and evaluates nothing again."""
    data, shared_ids, _, _ = overlapping_csvs(tmp_path, seed=9)
    frame = pd.read_csv(data[("A", "train")], dtype={"id": str})
    frame = frame[frame["id"].str.strip().isin(shared_ids[:50]) | ~frame["id"].str.strip().isin(shared_ids)]
    frame.iloc[:60].to_csv(data[("A", "train")], index=False)
    kept = sorted(set(frame.iloc[:60]["id"].str.strip()) & set(shared_ids))
    config = write_federation_file(tmp_path / "federation.toml", federation_certs[0], _free_ports(3),
                                   data={"psi_protocol": "unbalanced"})
    assert load_config(config).psi_protocol == "unbalanced"
    out = {role: tmp_path / f"aligned_{role}.csv" for role in ("A", "B")}
    for run in (1, 2):
        procs = {role: Party(["align", "--config", config, "--role", role, "--data", data[(role, "train")],
                              "--out", out[role], "--workdir", tmp_path / role], tmp_path / f"output{run}")
                 for role in ("A", "B")}
        results = finish_all(procs)
        for role, (code, stdout, err) in results.items():
            assert code == 0, f"{role}: {err}"
            assert f"aligned by private set intersection (unbalanced): A 60 rows, B 100 rows; {len(kept)} shared" \
                in stdout
        a, b = pd.read_csv(out["A"], dtype={"id": str}), pd.read_csv(out["B"], dtype={"id": str})
        assert list(a["id"]) == list(b["id"]) == kept
        caches = {}
        for role in ("A", "B"):
            record = sorted((tmp_path / role / "runs").iterdir())[-1]
            caches[role] = json.loads((record / "result.json").read_text())["alignment"]["cache"]
        assert caches["B"]["built"] == (run == 1) and caches["A"]["fetched"] == (["B"] if run == 1 else [])
        assert caches["A"]["large"] == {"B": "B"}
    assert (tmp_path / "B" / "psi-cache" / "unbalanced-psi-key.bin").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "A" / "psi-cache" / "unbalanced-psi-from-B.bin").stat().st_mode & 0o777 == 0o600
