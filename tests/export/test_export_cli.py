"""``vfl export``: each party signs its consent with the key of its ``[parties.NAME]`` table, the recipient exports;
the same checks as the estimators', one line and exit code 2 on a refusal, and nothing written."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tree_data import make_tree_data, opted_in
from vfl.cli import main
from vfl.deploy.config import write_config
from vfl.ensemble import VerticalGradientBoostingClassifier
from vfl.export import trees as exported
from vfl.transport.tls import write_federation_certs

xgb = pytest.importorskip("xgboost")

ROOT = Path(__file__).resolve().parents[2]
PARTIES = ("shop", "telco", "bank")          # bank holds the label


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    """A fitted model, each party's shard in its own work folder (as vfl party leaves it), and federation.toml."""
    root = tmp_path_factory.mktemp("federation")
    data, _ = make_tree_data(200, parties=PARTIES, seed=9)
    model = VerticalGradientBoostingClassifier(max_iter=3, key_bits=1024, insecure=True, early_stopping=False,
                                               min_samples_leaf=5, **opted_in(data)).fit(data)
    certs = write_federation_certs(root / "certs", PARTIES)
    parties = {}
    for i, name in enumerate(PARTIES):
        model._write_shard(root / name / f"model_{name}.json", name)
        parties[name] = {"address": f"localhost:{9100 + i}", "certificate": certs[name].certificate,
                         "key": certs[name].key, "role": "label" if name == "bank" else "feature"}
    config = write_config(root / "federation.toml", certs["bank"].ca, parties, {"model": "gradient_boosting"})
    return model, data, root, config


def _vfl(config, role, *args, action=()):
    return main(["export", *action, "--config", str(config), "--role", role, *map(str, args)])


def _consent(root, config, role, fmt="xgboost-json", to="bank"):
    out = root / f"{role}.{fmt}.consent.json"
    assert _vfl(config, role, "--model", root / role, "--format", fmt, "--to", to, "--out", out,
                action=["consent"]) == 0
    return out


def test_each_party_consents_and_the_recipient_exports(federation, tmp_path, capsys):
    model, data, root, config = federation
    consents = [_consent(root, config, p) for p in ("shop", "telco")]
    assert "it carries shop's shard" in capsys.readouterr().out
    assert all(path.stat().st_mode & 0o777 == 0o600 for path in consents)       # it holds the party's shard
    out = tmp_path / "model.json"
    assert _vfl(config, "bank", "--model", root / "bank", "--format", "xgboost-json", "--consents", *consents,
                "--out", out) == 0
    assert out.stat().st_mode & 0o777 == 0o600
    booster = xgb.Booster()
    booster.load_model(str(out))
    x = np.column_stack([data.features(p) for p in PARTIES])
    margin = booster.predict(xgb.DMatrix(x, feature_names=booster.feature_names), output_margin=True)
    assert np.abs(margin - model.decision_function(data)).max() < 1e-5


def test_a_missing_consent_is_one_line_and_nothing_is_written(federation, tmp_path, capsys):
    _, _, root, config = federation
    out = tmp_path / "model.json"
    code = _vfl(config, "bank", "--model", root / "bank", "--format", "xgboost-json", "--consents",
                _consent(root, config, "shop"), "--out", out)
    err = capsys.readouterr().err
    assert code == 2 and "vfl export bank: error: party telco has not signed a consent" in err
    assert not out.exists() and os.listdir(tmp_path) == []


def test_a_consent_to_another_format_is_refused(federation, tmp_path, capsys):
    _, _, root, config = federation
    consents = [_consent(root, config, "shop", "onnx"), _consent(root, config, "telco")]
    out = tmp_path / "model.json"
    code = _vfl(config, "bank", "--model", root / "bank", "--format", "xgboost-json", "--consents", *consents,
                "--out", out)
    assert code == 2 and "shop's consent is for format onnx, not xgboost-json" in capsys.readouterr().err
    assert not out.exists()


def test_a_consent_handed_over_twice_is_refused(federation, tmp_path, capsys):
    """telco hands over shop's consent file as its own: it names shop, and telco's is still missing."""
    _, _, root, config = federation
    shop = _consent(root, config, "shop")
    out = tmp_path / "model.json"
    code = _vfl(config, "bank", "--model", root / "bank", "--format", "xgboost-json", "--consents", shop, shop,
                "--out", out)
    assert code == 2 and "two consents by party shop" in capsys.readouterr().err and not out.exists()


def test_the_split_export_each_party_its_part_and_the_label_party_the_combiner(federation, tmp_path):
    model, data, root, config = federation
    for party in ("shop", "telco"):         # a feature party writes its own part: nobody else's consent needed
        assert _vfl(config, party, "--model", root / party, "--format", "split", "--out", tmp_path / party) == 0
        assert sorted(os.listdir(tmp_path / party)) == [f"{party}.json"]
    consents = [_consent(root, config, p, "split") for p in ("shop", "telco")]
    assert _vfl(config, "bank", "--model", root / "bank", "--format", "split", "--consents", *consents,
                "--out", tmp_path / "bank") == 0
    assert sorted(os.listdir(tmp_path / "bank")) == ["bank.json", "combiner.json"]
    parts = {p: json.loads((tmp_path / p / f"{p}.json").read_text()) for p in PARTIES}
    combiner = json.loads((tmp_path / "bank" / "combiner.json").read_text())
    answers = {p: exported.part_leaves(parts[p], data.features(p)) for p in PARTIES}
    assert np.array_equal(exported.combine(combiner, parts, answers)[:, 0], model.decision_function(data))


def test_bad_command_lines_are_refused(federation, tmp_path, capsys):
    _, _, root, config = federation
    out = tmp_path / "x.json"
    assert _vfl(config, "shop", "--model", root / "shop", "--format", "xgboost-json", "--out", out,
                action=["consent"]) == 2
    assert "takes --to" in capsys.readouterr().err
    assert _vfl(config, "shop", "--model", tmp_path, "--format", "onnx", "--to", "bank", "--out", out,
                action=["consent"]) == 2
    assert "holds no model shard" in capsys.readouterr().err
    assert _vfl(config, "shop", "--model", root / "shop", "--format", "pmml", "--to", "bank", "--out", out,
                action=["consent"]) == 2
    assert "does not export to 'pmml'" in capsys.readouterr().err
    assert _vfl(config, "shop", "--model", root / "telco" / "model_telco.json", "--format", "split", "--out",
                out) == 2                    # another party's shard
    err = capsys.readouterr().err
    assert "is not party shop's" in err and "--model must hold shop's own trees shard" in err
    assert not out.exists()


@pytest.mark.slow
def test_the_command_runs_as_a_process(federation, tmp_path):
    _, _, root, config = federation
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-m", "vfl", "export", "consent", "--config", str(config), "--role", "shop",
                           "--model", str(root / "shop"), "--format", "onnx", "--to", "bank", "--out",
                           str(tmp_path / "shop.json")], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "shop.json").read_text())["consent"]["export_format"] == "onnx"


def test_a_run_records_folder_holds_the_shard(federation, tmp_path):
    """--model may name the folder of a run record (``save_run`` keeps the party's shard as model.json)."""
    model, _, root, config = federation
    run = model.save_run(tmp_path / "records", party="shop")
    assert (run / "model.json").is_file()
    out = tmp_path / "shop.consent.json"
    assert _vfl(config, "shop", "--model", run, "--format", "onnx", "--to", "bank", "--out", out,
                action=["consent"]) == 0
    assert json.loads(out.read_text())["shard"] == json.loads((root / "shop" / "model_shop.json").read_text())


def test_a_party_pinned_to_its_own_ca_signs_with_a_certificate_of_that_ca(federation, tmp_path, capsys):
    """shop's organisation has its own CA, pinned in [parties.shop]: its consent holds; one signed with a
    certificate of the federation's CA naming shop does not."""
    from vfl.deploy.jsonfile import read_json
    from vfl.deploy.shards.trees import read_shard
    from vfl.export import assemble

    root = federation[2]
    own = write_federation_certs(tmp_path / "shop-ca", ["shop"])["shop"]
    federation_ca = write_federation_certs(tmp_path / "again", PARTIES)
    config_text = (root / "federation.toml").read_text()
    pinned = tmp_path / "federation.toml"
    pinned.write_text(config_text.replace(f'certificate = "{root / "certs" / "shop.pem"}"',
                                          f'certificate = "{own.certificate}"\nca = "{own.ca}"')
                      .replace(f'key = "{root / "certs" / "shop.key"}"', f'key = "{own.key}"'))
    assert f'ca = "{own.ca}"' in pinned.read_text()
    telco = _consent(root, pinned, "telco")
    shop = _consent(root, pinned, "shop")
    out = tmp_path / "model.json"
    assert _vfl(pinned, "bank", "--model", root / "bank", "--format", "xgboost-json", "--consents", shop, telco,
                "--out", out) == 0
    roles = {"shop": "feature", "telco": "feature", "bank": "label"}
    forged = assemble.make_consent(read_shard(root / "shop" / "model_shop.json", "shop", "feature"),
                                   family="trees", export_format="xgboost-json", recipient="bank", roles=roles,
                                   key=federation_ca["shop"].key, certificate=federation_ca["shop"].certificate)
    assemble.write_consent(tmp_path / "forged.json", forged)
    assert read_json(tmp_path / "forged.json", "consent")["consent"]["party"] == "shop"
    out.unlink()
    code = _vfl(pinned, "bank", "--model", root / "bank", "--format", "xgboost-json", "--consents",
                tmp_path / "forged.json", telco, "--out", out)
    err = capsys.readouterr().err
    assert code == 2 and "party shop's consent is signed by a certificate not issued for shop" in err
    assert "the CA pinned for shop" in err and not out.exists()


def _new_record(workdir, before):
    runs = workdir / "runs"
    made = sorted(set(os.listdir(runs)) - before)
    assert len(made) == 1, made
    return runs / made[0]


def _records(workdir):
    return set(os.listdir(workdir / "runs")) if (workdir / "runs").is_dir() else set()


def test_an_export_is_recorded_in_the_shards_work_folder_and_the_board_shows_it(federation, tmp_path):
    from fastapi.testclient import TestClient

    from vfl.board.app import create_app
    from vfl.board.runs import Workdir

    _, _, root, config = federation
    consents = [_consent(root, config, p, "split") for p in ("shop", "telco")]
    before = _records(root / "bank")
    assert _vfl(config, "bank", "--model", root / "bank", "--format", "split", "--consents", *consents,
                "--out", tmp_path / "bank") == 0
    record = _new_record(root / "bank", before)
    info = json.loads((record / "run.json").read_text())
    assert (info["task"], info["family"], info["party"], info["status"]) == ("export", "trees", "bank", "finished")
    export = json.loads((record / "result.json").read_text())["export"]
    assert export["format"] == "split" and export["files"] == ["bank.json", "combiner.json"]
    assert set(export["signed"]) == {"shop", "telco"} and export["out"] == str(tmp_path / "bank")
    before = _records(root / "shop")            # a refusal is recorded too (failed), and writes no export
    assert _vfl(config, "shop", "--model", root / "shop", "--format", "pmml", "--out", tmp_path / "no") == 2
    failed = json.loads((_new_record(root / "shop", before) / "run.json").read_text())
    assert failed["status"] == "failed" and "does not export to 'pmml'" in failed["error"]
    assert not (tmp_path / "no").exists()
    client = TestClient(create_app(Workdir(root / "bank")))
    assert record.name in client.get("/").text
    page = client.get(f"/runs/{record.name}").text
    assert 'id="export"' in page and "combiner.json" in page and "shop (signed" in page
