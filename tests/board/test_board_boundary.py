"""``vfl board`` as a boundary: the Host check (DNS rebinding), the security headers, its own token, and no
listening beyond this machine without it (the same guard, vfl.deploy.webguard, stands before vfl serve)."""

import subprocess
import sys

import pytest
from fastapi.testclient import TestClient

from vfl.board.app import create_app
from vfl.board.cli import check_board_bind
from vfl.board.runs import Workdir
from vfl.deploy.webguard import Boundary, host_names
from vfl.errors import ConfigurationError

TOKEN = "board-token-0123456789abcdef"


def client(tmp_path, access=None, allow=()):
    (tmp_path / "runs").mkdir(exist_ok=True)
    app = Boundary(create_app(Workdir(tmp_path), access=access), host_names(allow), "vfl board")
    return TestClient(app, base_url="http://127.0.0.1:8765")


def test_a_page_of_another_site_rebinding_its_name_here_is_refused(tmp_path):
    c = client(tmp_path, allow=["board.proxy.example"])
    assert c.get("/").status_code == 200
    for host in ("localhost:8765", "127.0.0.1", "[::1]:8765", "10.1.2.3:8765", "board.proxy.example"):
        assert c.get("/", headers={"host": host}).status_code == 200, host
    for host in ("evil.example:8765", "127.0.0.1.evil.example", "localhost.evil.example", ""):
        refused = c.get("/", headers={"host": host})
        assert refused.status_code == 421 and "DNS rebinding" in refused.text, host
        assert refused.headers["x-frame-options"] == "DENY"
    assert c.get("/api/runs/nothing", headers={"host": "evil.example"}).status_code == 421


def test_every_answer_carries_the_security_headers(tmp_path):
    c = client(tmp_path)
    for path in ("/", "/api/runs/missing", "/static/board.css", "/runs/missing"):
        headers = c.get(path).headers
        assert "frame-ancestors 'none'" in headers["content-security-policy"], path
        assert "script-src 'self'" in headers["content-security-policy"]
        assert headers["x-frame-options"] == "DENY" and headers["referrer-policy"] == "no-referrer"
        assert headers["x-content-type-options"] == "nosniff"


def test_with_its_own_token_every_page_asks_for_it_once(tmp_path):
    c = client(tmp_path, access=TOKEN)
    first = c.get("/", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/login"
    assert c.get("/api/runs/x").status_code == 401
    assert c.post("/login", data={"token": "not-the-token-at-all"}).status_code == 401
    assert c.get("/", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200
    logged = c.post("/login", data={"token": TOKEN}, follow_redirects=False)
    assert logged.status_code == 303 and "httponly" in logged.headers["set-cookie"].lower()
    assert "samesite=strict" in logged.headers["set-cookie"].lower()
    assert c.get("/").status_code == 200                      # the cookie of this session


def test_beyond_this_machine_only_with_a_token_of_its_own():
    check_board_bind("127.0.0.1", 8765, None, True)
    check_board_bind("0.0.0.0", 8765, TOKEN, True)
    with pytest.raises(ConfigurationError, match=r"beyond this machine, with no token.* and the metrics it reads "
                                                 r"from vfl serve .*--access-token-file"):
        check_board_bind("0.0.0.0", 8765, None, True)


def test_the_command_refuses_a_wide_bind_before_listening(tmp_path):
    done = subprocess.run([sys.executable, "-m", "vfl", "board", "--workdir", str(tmp_path), "--host", "0.0.0.0",
                           "--port", "0"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--access-token-file" in done.stderr


def test_the_live_panel_goes_on_after_an_event_line_longer_than_a_read(tmp_path, monkeypatch):
    """A line over READ_BYTES (16 MiB) is skipped as damaged; the events after it are read."""
    import json

    from vfl.board import runs as board_runs
    from vfl.deploy.record import RunRecord

    monkeypatch.setattr(board_runs, "READ_BYTES", 1024)
    record = RunRecord(tmp_path, "train", "linear", "B", "label", {"A": "feature", "B": "label", "C": "coordinator"},
                       {"training": {"max_iter": 3}})
    record.event("epoch", epoch=0, loss=0.5)
    events = record.folder / "events.jsonl"
    with open(events, "a") as f:
        f.write(json.dumps({"event": "note", "text": "x" * 5000}) + "\n")
    record.event("epoch", epoch=1, loss=0.25)
    workdir = Workdir(tmp_path)
    run_id = record.folder.name
    for _ in range(8):
        live = workdir.live(run_id)
    assert live.damaged == 1 and live.offset == events.stat().st_size


def test_a_finished_run_with_an_empty_result_says_so(tmp_path):
    from vfl.board.results import sections

    said = sections({"status": "finished", "family": "linear", "task": "train"}, {}, tmp_path)
    assert [s["title"] for s in said] == ["Results"] and "recorded no results" in said[0]["html"]
    assert sections({"status": "running"}, None, tmp_path) == []
