"""One run, two faces: the same tables through the estimators and through ``vfl party`` give the same pipeline.

The credit pipeline's run (:mod:`vfl.runs.credit`) is written once; the
estimators of :mod:`vfl.preprocessing` run it in threads, ``vfl party`` with a
``[pipeline]`` table one process per party.  A telco (feature party) and a bank
(label party) with the same customers: the estimators' shards and the parties'
shards hold the same bins, IVs, selection, weights and points, and the same bad
tables and settings are refused with the same error type and message (``vfl
party`` prints ``vfl party NAME: error: MESSAGE``; a setting refused while the
file is read is named with its place in the file, ``PATH [pipeline]: MESSAGE``).
"""

import json

import numpy as np
import pandas as pd
import pytest

from credit_data import credit_frames
from vfl import VerticalDataset, VerticalLogisticRegression
from vfl.deploy.config import write_config
from vfl.errors import ConfigurationError, DataError
from vfl.preprocessing import VerticalBinning, VerticalPipeline, VerticalScorecard, VerticalSelection, VerticalWOE
from vfl.transport.tls import write_federation_certs
from vfl_net_helpers import _free_ports, run_parties, scaled, start_parties

pytestmark = pytest.mark.slow    # processes and TLS links

ROLES = {"telco": "feature", "bank": "label", "hub": "coordinator"}
TRAINING = {"model": "logistic", "iterations": 12, "alpha": 0.01, "key_bits": 1024, "insecure": True,
            "init": "zeros"}
PIPELINE = {"max_bins": 6, "iv_threshold": 0.02, "max_correlation": 0.9, "base_score": 600, "base_odds": 50,
            "pdo": 20}


def estimators(max_bins=6, strategy="quantile", min_bin_fraction=0.05):
    """The estimators' pipeline with the settings of ``TRAINING`` and ``PIPELINE`` (``[pipeline]``'s names)."""
    model = VerticalLogisticRegression(max_iter=12, alpha=0.01, key_bits=1024, insecure=True, init="zeros",
                                       allow_score_span=["telco"])
    return VerticalPipeline([
        ("woe", VerticalWOE(VerticalBinning(max_bins, strategy, min_bin_fraction=min_bin_fraction), key_bits=1024,
                            insecure=True)),
        ("selection", VerticalSelection(iv_threshold=0.02, max_correlation=0.9)),
        ("scorecard", VerticalScorecard(model, base_score=600, base_odds=50, pdo=20)),
    ])


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    """Certificates, free ports, and a function writing a federation.toml with a ``[pipeline]`` table."""
    folder = tmp_path_factory.mktemp("one_run")
    tls = write_federation_certs(folder / "certs", tuple(ROLES))
    parties = {n: {"role": role, "address": f"127.0.0.1:{port}", "certificate": tls[n].certificate,
                   "key": tls[n].key} for (n, role), port in zip(ROLES.items(), _free_ports(len(ROLES)))}
    parties["telco"]["allow_score_span"] = True

    def config(name, **pipeline):
        return write_config(folder / f"{name}.toml", tls["bank"].ca, parties, TRAINING,
                            {"connect_timeout": scaled(30), "timeout": scaled(60)}, align="same-ids",
                            pipeline=dict(PIPELINE, **pipeline))

    return {"folder": folder, "config": config}


def tables(folder, change=None, n=500):
    """Each party's CSV of the same customers (ids in order), ``change(telco, bank)`` applied first."""
    telco, bank = credit_frames(n=n, seed=4)
    ids = [f"c{i:05d}" for i in range(n)]
    telco, bank = telco.assign(id=ids), bank.rename(columns={"default": "label"}).assign(id=ids)
    if change is not None:
        change(telco, bank)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, frame in (("telco", telco), ("bank", bank)):
        paths[(name, "train")] = folder / f"{name}.csv"
        frame.to_csv(paths[(name, "train")], index=False)
    return paths


def dataset(paths) -> VerticalDataset:
    frames = {name: pd.read_csv(paths[(name, "train")], dtype={"id": str}) for name in ("telco", "bank")}
    return VerticalDataset(frames, label="label", id_column="id")


def through_processes(federation, name, paths, roles=tuple(ROLES)):
    """``vfl party`` for ``roles``: ``{party: (exit code, stdout, stderr)}``."""
    work = federation["folder"] / name
    return run_parties("party", federation["config"](name), paths, work, timeout=scaled(180), roles=roles,
                       coordinator="hub")


def error_line(stderr: str, party: str) -> str:
    """The message of ``vfl party PARTY: error: MESSAGE``."""
    prefix = f"vfl party {party}: error: "
    lines = [line[len(prefix):] for line in stderr.splitlines() if line.startswith(prefix)]
    assert lines, stderr
    return lines[-1]


def test_the_same_tables_give_the_same_bins_ivs_selection_model_and_points(federation):
    paths = tables(federation["folder"] / "good")
    results = through_processes(federation, "good", paths)
    for name, (code, out, err) in results.items():
        assert code == 0, f"{name}: {err}"
    api = estimators().fit(dataset(paths)).shards()
    for name in ("telco", "bank"):
        cli = json.loads((federation["folder"] / "good" / name / f"model_{name}.json").read_text())
        ours = api[name]
        for key in ("columns", "binning", "bin_counts", "selected", "coding"):
            assert cli[key] == ours[key], (name, key)
        assert cli.get("iv") == ours.get("iv")
        assert cli["model"]["columns"] == ours["model"]["columns"]
        for key in ("mean", "scale", "coef"):     # the linear model's own scaling, summed in another order
            np.testing.assert_allclose(cli["model"][key], ours["model"][key], rtol=1e-12, atol=1e-12)
        assert len(cli["points"]) == len(ours["points"])
        for theirs, mine in zip(cli["points"], ours["points"]):
            np.testing.assert_allclose(theirs, mine, rtol=0, atol=1e-6)
    assert api["bank"]["selected"] and api["telco"]["selected"]     # both parties are in the model
    np.testing.assert_allclose(
        json.loads((federation["folder"] / "good" / "bank" / "model_bank.json").read_text())["scorecard"]
        ["base_points"], api["bank"]["scorecard"]["base_points"], rtol=0, atol=1e-6)


def _three_classes(telco, bank):
    bank.loc[:40, "label"] = "late"


def _infinity(telco, bank):
    telco.loc[7, "tenure"] = np.inf


def _one_class(telco, bank):
    bank["label"] = "no"


@pytest.mark.parametrize("name, change, party", [
    ("three_classes", _three_classes, "bank"),
    ("one_class", _one_class, "bank"),
    ("infinity", _infinity, "telco"),
])
def test_a_bad_table_is_refused_alike(federation, name, change, party):
    paths = tables(federation["folder"] / name, change, n=200)
    with pytest.raises(DataError) as refused:
        estimators().fit(dataset(paths))
    # a table refused as it is read: that party alone (its peers would wait for it to connect)
    read = name == "infinity"
    code, _, err = through_processes(federation, name, paths, (party,) if read else tuple(ROLES))[party]
    assert code == 2
    message = error_line(err, party)
    if read:        # the file's error names the file too
        message = message.replace(f" ({paths[(party, 'train')]})", "", 1)
    assert message == str(refused.value)


@pytest.mark.parametrize("setting", [{"strategy": "monotone"}, {"max_bins": 1}, {"min_bin_fraction": 0.6}])
def test_a_bad_setting_is_refused_alike(federation, setting):
    with pytest.raises(ConfigurationError) as refused:
        estimators(**setting).fit(dataset(tables(federation["folder"] / "setting")))
    config = federation["config"]("setting", **setting)
    parties = start_parties("party", config, tables(federation["folder"] / "setting"), federation["folder"] / "s",
                            roles=("bank",), coordinator="hub")
    code, _, err = parties["bank"].finish(scaled(60))
    assert code == 2
    assert error_line(err, "bank") == f"{config} [pipeline]: {refused.value}"
