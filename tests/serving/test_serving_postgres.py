"""The SQLAlchemy store against a real PostgreSQL server, which this module starts (and stops).

The server is Debian's ``postgresql`` package (``.ci/run`` installs it where it is
missing): a cluster of its own in a temporary folder, on a free loopback port,
started with ``initdb`` and ``pg_ctl`` (as the ``postgres`` user when the tests
run as root, which PostgreSQL refuses).  Checked: ids with quotes and unicode
are found as themselves (bound parameters, never SQL text); a view that casts
an integer id to text serves; every row is read for a private-query table; a
missing column and a missing table are named; a server that goes away gives a
clear error, and the same store serves again once it is back.  Where no server
can start, the tests are skipped saying why (in CI, ``CI=true``, they fail).
"""

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from vfl.errors import ConfigurationError, DataError
from vfl.serving.store import SQLStore
from vfl_net_helpers import _free_ports

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]     # a server process


def _unavailable(why: str):
    message = f"no PostgreSQL server for the store's tests: {why}"
    if os.environ.get("CI") == "true":
        pytest.fail(message + " (.ci/run installs Debian's postgresql package)")
    pytest.skip(message)


def _binaries() -> Path | None:
    found = shutil.which("initdb")
    for folder in ([Path(found).parent] if found else []) + sorted(Path("/usr/lib/postgresql").glob("*/bin"),
                                                                  reverse=True):
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists():
            return folder
    return None


@pytest.fixture(scope="module")
def postgres():
    pytest.importorskip("psycopg", reason="the psycopg driver (pip install -e '.[test]')")
    binaries = _binaries()
    if binaries is None:
        _unavailable("initdb and pg_ctl not found (Debian: apt-get install postgresql)")
    folder = Path(tempfile.mkdtemp(prefix="vfl-postgres-"))
    folder.chmod(0o755)
    owner = []
    if os.geteuid() == 0:                                     # PostgreSQL will not run as root
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            _unavailable("the tests run as root and there is no postgres user to run the server as")
        os.chown(folder, user.pw_uid, user.pw_gid)
        owner = ["runuser", "-u", "postgres", "--"]
    port = _free_ports(1)[0]
    data, log = folder / "data", folder / "server.log"

    def run(*command):
        return subprocess.run(owner + [str(c) for c in command], capture_output=True, text=True, timeout=120)

    done = run(binaries / "initdb", "-D", data, "-U", "vfl", "--auth=trust", "-E", "UTF8", "--no-sync")
    if done.returncode:
        _unavailable(f"initdb failed: {done.stderr.strip()[-300:]}")
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"

    def start():
        done = run(binaries / "pg_ctl", "-D", data, "-l", log, "-o", options, "-w", "-t", "60", "start")
        if done.returncode:
            _unavailable(f"pg_ctl start failed: {done.stderr.strip()[-300:]} {log.read_text()[-300:]}")

    def stop():
        run(binaries / "pg_ctl", "-D", data, "-m", "fast", "-w", "stop")

    start()
    url = f"postgresql+psycopg://vfl@127.0.0.1:{port}/postgres"
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    with engine.begin() as db:
        db.execute(sa.text("CREATE TABLE features (id text PRIMARY KEY, income double precision, age integer)"))
        db.execute(sa.text("INSERT INTO features VALUES (:id, :income, :age)"), [
            {"id": "o'brien", "income": 52000.0, "age": 41}, {"id": "zoë-ü", "income": 61000.5, "age": 35},
            {"id": "7", "income": None, "age": 29}, {"id": "x\"); DROP TABLE features; --", "income": 1.0,
                                                      "age": 1}])
        db.execute(sa.text("CREATE TABLE numbered (id integer PRIMARY KEY, income double precision)"))
        db.execute(sa.text("INSERT INTO numbered VALUES (10023, 1.5), (10024, 2.5)"))
        db.execute(sa.text("CREATE VIEW numbered_text AS SELECT id::text AS id, income FROM numbered"))
    engine.dispose()
    yield SimpleNamespace(url=url, start=start, stop=stop)
    stop()
    shutil.rmtree(folder, ignore_errors=True)


def test_ids_with_quotes_and_unicode_are_found_as_themselves(postgres):
    store = SQLStore(postgres.url, "features", "id", "telco")
    try:
        values, found = store.lookup(["zoë-ü", "o'brien", "nobody", "x\"); DROP TABLE features; --", "7"],
                                     ["income", "age"])
        assert found.tolist() == [True, True, False, True, True]
        assert values[0].tolist() == [61000.5, 35.0] and values[1].tolist() == [52000.0, 41.0]
        assert np.isnan(values[4, 0]) and values[4, 1] == 29.0              # NULL: a missing value
        ids, rows = store.rows(["age", "income"])                        # a private-query table reads every row
        assert sorted(ids) == sorted(["o'brien", "zoë-ü", "7", "x\"); DROP TABLE features; --"])
        assert rows.shape == (4, 2) and rows[ids.index("o'brien")].tolist() == [41.0, 52000.0]
    finally:
        store.close()


def test_a_view_casting_an_integer_id_serves(postgres):
    store = SQLStore(postgres.url, "numbered_text", "id", "bank")
    try:
        values, found = store.lookup(["10024", "10023", "1"], ["income"])
        assert found.tolist() == [True, True, False] and values[:2, 0].tolist() == [2.5, 1.5]
    finally:
        store.close()


def test_a_missing_column_or_table_is_named(postgres):
    store = SQLStore(postgres.url, "features", "id", "telco")
    try:
        with pytest.raises(DataError, match=r"party telco's store \(table 'features' of .*\) has no column\(s\) "
                                            r"\['tenure'\]"):
            store.check_columns(["income", "tenure"])
    finally:
        store.close()
    with pytest.raises(ConfigurationError, match="no such table"):
        SQLStore(postgres.url, "nothing_here", "id", "telco")


def test_a_server_that_goes_away_is_a_clear_error_and_the_store_serves_again_when_it_is_back(postgres):
    store = SQLStore(postgres.url, "features", "id", "telco")
    try:
        assert store.lookup(["o'brien"], ["age"])[1].tolist() == [True]
        postgres.stop()
        try:
            with pytest.raises(ConfigurationError, match=r"party telco's store .* the lookup failed: .*"):
                store.lookup(["o'brien"], ["age"])
        finally:
            postgres.start()
        assert store.lookup(["o'brien"], ["age"])[1].tolist() == [True]     # the same store, no restart
    finally:
        store.close()
