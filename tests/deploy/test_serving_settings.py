"""The [serving] settings (vfl.deploy.serving_settings): common and per party, command-line options, refused by name."""

import pytest

from vfl.deploy.serving_settings import ServingSettings, parse_serving, resolve_store
from vfl.errors import ConfigurationError


# -- [serving] ----------------------------------------------------------------------------------------
def test_serving_settings_common_and_per_party(tmp_path):
    got = parse_serving("f.toml", {"deadline_ms": 500, "bank": {"http": "0.0.0.0:9000", "store": "rows.csv"}},
                        ["bank", "telco"], tmp_path)
    assert got["telco"].deadline_ms == 500 and got["telco"].http == ("127.0.0.1", 8080)
    assert got["bank"].http == ("0.0.0.0", 9000) and got["bank"].store == str(tmp_path / "rows.csv")
    assert got["bank"].models == tmp_path / "models"
    assert resolve_store("sqlite:///x.db", tmp_path) == f"sqlite:///{tmp_path / 'x.db'}"
    assert resolve_store("postgresql://u@h/db", tmp_path) == "postgresql://u@h/db"


@pytest.mark.parametrize("table, words", [
    ({"colour": 1}, "unknown key(s) ['colour']"),
    ({"shop": {"http": "x:1"}}, "[serving.shop] names no party"),
    ({"max_ids": 0}, "max_ids must be a whole number"),
    ({"max_batch": True}, "max_batch must be a whole number"),
    ({"batch_wait_ms": -1}, "batch_wait_ms must be"),
    ({"http": "nowhere"}, "http: invalid address"),
    ({"version": "../2"}, "not a model version name"),
    ({"table": "x; drop"}, "table must be a table name"),
    ({"deadline_ms": 9000, "max_deadline_ms": 1000}, "above max_deadline_ms"),
])
def test_serving_settings_refused_by_name(tmp_path, table, words):
    with pytest.raises(ConfigurationError) as caught:
        parse_serving("f.toml", table, ["bank"], tmp_path)
    assert words in str(caught.value)


def test_serving_settings_options():
    settings = ServingSettings().with_options(version="3", store=None)
    assert settings.version == "3" and settings.store is None


@pytest.mark.parametrize("table, words", [
    ({"allow_inline_features": "yes"}, "allow_inline_features must be true or false, got 'yes'"),
    ({"request_timeout_ms": 0}, "request_timeout_ms must be a whole number from 100"),
    ({"idle_timeout_ms": True}, "idle_timeout_ms must be a whole number"),
    ({"token_file": ""}, "token_file must be a non-empty string"),
    ({"token": "abc"}, "unknown key(s) ['token']"),
])
def test_the_new_serving_keys_are_checked_by_name(tmp_path, table, words):
    with pytest.raises(ConfigurationError) as caught:
        parse_serving("f.toml", table, ["bank"], tmp_path)
    assert words in str(caught.value)
