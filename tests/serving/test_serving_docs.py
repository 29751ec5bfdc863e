"""docs/serving.md's commands and examples, run as written: the tokens, the three ``vfl serve`` lines, ``curl``, Python.

A bank (the label party: ``income``, ``age`` and the label), telco (a feature
party that holds no row for applicant 10024) and the coordinator C train a
logistic model with ``vfl party``, each put its shard in ``models/1``; the
documented ``[serving.bank]`` table is added to the federation file and the
documented token commands make the two tokens; then the documented ``vfl serve``
commands start from their folder (version 2 is put in place before the
documented reloads).  The documented ``curl`` requests and the Python client
block run against the label party's API (its port is the test's, not 8080), and
the answers have the documented shape; without the token, with the wrong one,
or with inline features (off by default) the API refuses; SIGTERM stops each
service with exit code 0.
"""

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest

from vfl.transport.tls import write_federation_certs
from vfl_net_helpers import _free_ports

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]    # processes, TLS links and servers

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "serving.md").read_text(encoding="utf-8")


def blocks(language):
    return re.findall(rf"```{language}\n(.*?)```", DOC, flags=re.S)


def documented(prefix):
    """The documented command lines starting with ``prefix``, without their comments."""
    lines = [line.split("  #")[0].strip() for block in blocks("bash") for line in block.splitlines()]
    return [line for line in lines if line.startswith(prefix)]


def vfl(command, folder, out):
    """``vfl ...`` (a documented line) as a process in ``folder``, importing this checkout's vfl."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    args = shlex.split(command)
    assert args[0] == "vfl", command
    with open(folder / f"{out}.out", "w") as stdout, open(folder / f"{out}.err", "w") as stderr:
        return subprocess.Popen([sys.executable, "-m", "vfl", *args[1:]], cwd=folder, env=env, stdout=stdout,
                                stderr=stderr)


def write_federation(folder, http):
    rng = np.random.default_rng(3)
    ids = np.arange(10000, 10200)
    income, age = rng.normal(50_000, 12_000, len(ids)), rng.integers(20, 70, len(ids)).astype(float)
    calls, tenure = rng.normal(100, 30, len(ids)), rng.normal(5, 2, len(ids))
    z = (income - 50_000) / 12_000 + (calls - 100) / 60 - (age - 45) / 15 + rng.normal(0, 0.5, len(ids))
    pd.DataFrame({"id": ids, "income": income, "age": age, "default": np.where(z > 0, "yes", "no")}).to_csv(
        folder / "bank.csv", index=False)
    held = ids != 10024
    pd.DataFrame({"id": ids[held], "calls": calls[held], "tenure": tenure[held]}).to_csv(folder / "telco.csv",
                                                                                          index=False)
    write_federation_certs(folder / "certs", ["bank", "telco", "C"])
    ports = _free_ports(3)
    # telco's two columns reach B through one projection; whether the release check refuses it depends on the
    # weights a secret random start leads to, so telco opts in here: this test is about the documented commands
    # (the refusal at reload runs in test_serving_linear.py).
    parties = "".join(f'[parties.{name}]\nrole = "{role}"\naddress = "127.0.0.1:{port}"\n'
                      f'certificate = "certs/{name}.pem"\nkey = "certs/{name}.key"\n'
                      + ("allow_reconstruction = true\n" if name == "telco" else "")
                      for (name, role), port in zip([("bank", "label"), ("telco", "feature"), ("C", "coordinator")],
                                                    ports))
    (folder / "federation.toml").write_text(
        f'[federation]\nca = "certs/ca.pem"\n{parties}'
        '[training]\nmodel = "logistic"\nlearning_rate = 0.15\niterations = 3\nbatch_size = 64\nalpha = 0.01\n'
        'key_bits = 1024\ninsecure = true\nrandom_state = 0\nstandardize = true\n'
        '[data]\nid_column = "id"\nlabel = "default"\n'
        '[network]\nconnect_timeout = 120\n'
        + serving_table().replace("127.0.0.1:8080", f"127.0.0.1:{http}"))


def serving_table():
    """The documented ``[serving.bank]`` table."""
    table = next(block for block in blocks("toml") if block.startswith("[serving.bank]"))
    assert "token_file" in table and "admin_token_file" in table
    return table


def shell(line, folder, **run):
    """A documented shell line, run by bash in ``folder``."""
    return subprocess.run(["bash", "-c", line], cwd=folder, capture_output=True, text=True, timeout=60,
                          check=True, **run)


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    folder = tmp_path_factory.mktemp("serving-docs")
    http = _free_ports(1)[0]
    write_federation(folder, http)
    training = [vfl("vfl party --config federation.toml --role C", folder, "train-C"),
                vfl("vfl party --config federation.toml --role telco --data telco.csv", folder, "train-telco"),
                vfl("vfl party --config federation.toml --role bank --data bank.csv", folder, "train-bank")]
    for process in training:
        assert process.wait(300) == 0, (folder / "train-bank.err").read_text()[-2000:]
    put_version(folder, "1")
    tokens = documented("(umask 077;")
    assert len(tokens) == 2, tokens
    for line in tokens:
        shell(line, folder)
    commands = documented("vfl serve")
    roles = [shlex.split(c)[shlex.split(c).index("--role") + 1] for c in commands]
    assert roles == ["C", "telco", "bank"], commands
    running = {role: vfl(c, folder, f"serve-{role}") for role, c in zip(roles, commands)}
    url = f"http://127.0.0.1:{http}"
    try:
        deadline, report = time.monotonic() + 120, None
        while time.monotonic() < deadline and (report or {}).get("status") != "ok":
            time.sleep(0.3)
            try:
                report = httpx.get(f"{url}/health", timeout=10).json()
            except httpx.HTTPError:
                pass
        assert report and report["status"] == "ok", (report, (folder / "serve-bank.err").read_text()[-2000:])
        yield folder, url, http, running
    finally:
        for process in running.values():
            if process.poll() is None:
                process.kill()
                process.wait(10)


def put_version(folder, version):
    """Every party's shard of the training as model ``version`` (as each operator would put it in place)."""
    (folder / "models" / version).mkdir(parents=True, exist_ok=True)
    for name in ("bank", "telco"):
        shutil.copy(folder / f"vfl-{name}" / f"model_{name}.json", folder / "models" / version)


def curl(line, port, folder):
    """A documented ``curl`` line against this test's port, in ``folder`` (its token files): its JSON answer."""
    line = line.replace("localhost:8080", f"127.0.0.1:{port}")
    if shutil.which("curl"):
        return json.loads(shell(line, folder).stdout)
    args = shlex.split(line)                    # without curl: the same request by httpx
    token = (folder / re.search(r"\$\(cat ([^)]+)\)", line).group(1)).read_text().strip()
    return httpx.post("http://" + args[2], content=args[args.index("-d") + 1], timeout=60,
                      headers={"content-type": "application/json", "authorization": f"Bearer {token}"}).json()


def test_the_documented_curl_requests_answer_as_documented(services):
    folder, _, port, _ = services
    score = curl(documented("curl -s localhost:8080/score")[0], port, folder)
    shown = json.loads(blocks("json")[0])
    assert score["model_version"] == "1" and len(score["results"]) == len(shown["results"]) == 2
    got, expected = score["results"], shown["results"]
    assert got[0]["id"] == expected[0]["id"] and set(got[0]) == set(expected[0])
    assert got[0]["probability"] == pytest.approx(1 / (1 + np.exp(-got[0]["score"])))
    assert got[0]["prediction"] == ("yes" if got[0]["probability"] >= 0.5 else "no")
    assert got[1] == expected[1]                # 10024: telco holds no row, named, in the documented words
    put_version(folder, "2")
    reload = curl(documented("curl -s localhost:8080/admin/reload")[0], port, folder)
    assert reload == {"model_version": "2", "previous": "1"}


def test_the_documented_python_client_runs_as_written(services, monkeypatch):
    folder, url, _, _ = services
    put_version(folder, "2")
    code = blocks("python")[0].replace("http://127.0.0.1:8080", url)
    namespace = {}
    monkeypatch.chdir(folder)                   # where the token files are
    exec(compile(code, "docs/serving.md", "exec"), namespace)
    result = namespace["result"]
    assert result["results"][0]["id"] == "10023" and 0 < result["results"][0]["probability"] < 1
    token = (folder / "score.token").read_text().strip()
    health = httpx.get(f"{url}/health", headers={"authorization": f"Bearer {token}"}, timeout=10).json()
    assert health["model_version"] == "2"


def test_the_documented_service_refuses_without_its_tokens_and_takes_no_inline_features(services):
    from vfl.serving.client import ScoringClient, ScoringError

    folder, url, _, _ = services
    score, admin = ((folder / name).read_text() for name in ("score.token", "admin.token"))
    calls = [(None, lambda c: c.score(["10023"]), 401), ("x" * 32, lambda c: c.score(["10023"]), 401),
             (admin, lambda c: c.score(["10023"]), 403), (score, lambda c: c.reload("1"), 403),
             (score, lambda c: c.score(["10099"], features=[{"income": 52000.0, "age": 31}]), 403)]
    for token, call, status in calls:
        with ScoringClient(url, token=token) as client, pytest.raises(ScoringError) as caught:
            call(client)
        assert caught.value.status == status, caught.value
    assert httpx.get(f"{url}/health", timeout=10).json() == {"status": "ok"}


def test_sigterm_stops_every_service_with_exit_code_0(services):
    folder, _, _, running = services
    for name in ("bank", "telco", "C"):
        running[name].send_signal(signal.SIGTERM)
        assert running[name].wait(60) == 0, (folder / f"serve-{name}.err").read_text()[-2000:]
