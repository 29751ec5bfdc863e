"""federation.toml's reader (vfl.deploy.config): its keys and errors, the parties and their roles, the fingerprint."""

import json
import re

import pytest

from credit_data import config
from vfl.deploy.config import load_config, write_config
from vfl.deploy.data import load_csv
from vfl.deploy.session import differences
from vfl.errors import ConfigurationError, DataError
from vfl.protocols import Roster

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


def test_label_that_is_the_id_column_is_refused(tmp_path):
    (tmp_path / "b.csv").write_text("id,x\n1,2\n2,3\n")
    with pytest.raises(DataError, match="party B .*: the label column 'id' is also the id column"):
        load_csv(tmp_path / "b.csv", "B", id_column="id", label="id")
    path = write_config(tmp_path / "f.toml", "ca.pem", PARTIES, TRAINING, id_column="key", label="key")
    with pytest.raises(ConfigurationError, match=r"\[data\]: label and id_column are both 'key'"):
        load_config(path)


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


def test_a_step_setting_under_conjugate_gradient_in_the_file_is_refused(tmp_path):
    """[training] goes through the same check as the estimators: solver 'cg' takes no optimizer."""
    parties = {name: {"address": f"127.0.0.1:{7100 + i}", "certificate": "c.pem", "key": "k.pem"}
               for i, name in enumerate("ABC")}
    with pytest.raises(ConfigurationError, match=r"\[training\]: solver='cg' .* optimizer='adam' would go unused"):
        load_config(write_config(tmp_path / "f.toml", "ca.pem", parties, {"solver": "cg", "optimizer": "adam"}))
    auto = load_config(write_config(tmp_path / "g.toml", "ca.pem", parties, {"optimizer": "adam"}))
    assert not auto.training.conjugate


def test_pipeline_table_is_parsed_and_fingerprinted(tmp_path):
    loaded = config(tmp_path, {"max_bins": 8, "share_woe": True, "top_k": 3, "pdo": 40})
    assert loaded.pipeline.max_bins == 8 and loaded.pipeline.share_woe is True
    assert loaded.pipeline.rules.top_k == 3 and loaded.pipeline.rules.iv_threshold == 0.02
    assert loaded.pipeline.scale.pdo == 40
    other = config(tmp_path, {"max_bins": 8, "share_woe": False, "top_k": 3, "pdo": 40})
    assert loaded.fingerprint("train") != other.fingerprint("train")


@pytest.mark.parametrize("table, message", [
    ({"share_woe": "false"}, "share_woe must be true or false"),
    ({"max_bins": 1}, "max_bins"),
    ({"strategy": "monotone"}, "only the label party bins monotonically"),
    ({"top_k": 0}, "top_k"),
    ({"max_vif": 0.5}, "max_vif"),
    ({"pdo": -1}, "pdo"),
    ({"bins": 5}, "unknown key"),
])
def test_bad_pipeline_settings_are_refused_by_name(tmp_path, table, message):
    with pytest.raises(ConfigurationError, match=message):
        config(tmp_path, table)


def test_the_pipeline_needs_logistic_regression(tmp_path):
    with pytest.raises(ConfigurationError, match="model = \"logistic\""):
        config(tmp_path, {}, {"model": "linear"})
