"""The HTTP faces' guard (vfl.deploy.webguard): the host names answered for, token files."""

import pytest

from vfl.deploy.webguard import host_allowed, host_names


def test_host_names_and_addresses():
    names = host_names(["Proxy.Example"])
    assert host_allowed("proxy.example:443", names) and host_allowed("192.168.1.9", names)
    assert not host_allowed("proxy.example.evil:443", names) and not host_allowed(None, names)


def test_a_token_given_where_its_file_goes_is_not_repeated(tmp_path):
    from vfl.deploy.webguard import read_token_file
    from vfl.errors import ConfigurationError

    with pytest.raises(ConfigurationError) as refused:
        read_token_file("Zx8-secret-token-value-0123456789", "vfl serve: --token-file")
    assert "looks like a token itself (not shown)" in str(refused.value) and "Zx8" not in str(refused.value)
    with pytest.raises(ConfigurationError, match=r"no file .*missing.token"):
        read_token_file(tmp_path / "missing.token", "vfl serve: --token-file")
