"""The label party's HTTP boundary (``vfl serve``): tokens, the bind rule, inline features, and HTTP hardening.

The API is the real one (:func:`vfl.serving.api.create_app`) over a stand-in
for the label party's service that scores a linear model of its own columns
plus a feature party's partial score per id, and records every round it is
asked for (a round is what reaches the feature parties).  The timeouts and the
chunked body run against a real uvicorn on a loopback port, as ``vfl serve``
starts it.
"""

import os
import socket
import threading
import time

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient

from vfl.errors import ConfigurationError
from vfl.serving.api import create_app, http_protocol
from vfl.serving.auth import ADMIN_TOKEN_ENV, TOKEN_ENV, Credentials, check_bind, is_loopback, load_credentials
from vfl.serving.metrics import Metrics
from vfl.deploy.serving_settings import ServingSettings, parse_serving

SCORE_TOKEN, ADMIN_TOKEN = "s" * 20 + "-score", "a" * 20 + "-admin"
COLUMNS, WEIGHTS, INTERCEPT = ["income", "age"], np.array([0.8, -1.7]), 0.25


class LabelStandIn:
    """The label party's service as the API sees it: its rows, a feature party's partial scores, the rounds."""

    role, current = "bank", "1"

    def __init__(self, settings):
        from types import SimpleNamespace

        self.settings = settings
        self.share = SimpleNamespace(columns=COLUMNS, kind="linear", version="1")
        self.rows = {"10023": [1.0, 2.0]}                     # the label party's store
        self.theirs = {"10023": 0.5, "10099": -0.3}          # the feature party's partial scores
        self.rounds = []

    def score(self, ids, inline, deadline):
        self.rounds.append(list(ids))
        answers = []
        for key, row in zip(ids, inline):
            x = [row[c] for c in COLUMNS] if row is not None else self.rows.get(key)
            if x is None:
                answers.append({"id": key, "error": {"code": "unknown_id", "party": "bank",
                                                     "message": "party bank holds no row for this id"}})
            elif key not in self.theirs:
                answers.append({"id": key, "error": {"code": "unknown_id", "party": "telco",
                                                     "message": "party telco holds no row for this id"}})
            else:
                z = float(np.dot(WEIGHTS, x) + INTERCEPT + self.theirs[key])
                answers.append({"id": key, "score": z, "probability": 1 / (1 + np.exp(-z))})
        return "1", answers

    def health(self):
        return {"status": "ok", "party": "bank", "model_version": "1", "model": "linear",
                "parties": {"telco": {"state": "up"}}}

    def reload(self, version):
        return {"model_version": version, "previous": "1"}


def client(credentials=None, **settings):
    service = LabelStandIn(ServingSettings(**settings))
    http = TestClient(create_app(service, Metrics(), credentials))
    http.service = service
    return http


def bearer(token):
    return {"authorization": f"Bearer {token}"}


# -- tokens --------------------------------------------------------------------------------------------
def test_without_tokens_every_endpoint_is_open_on_loopback():
    with client() as http:
        assert http.post("/score", json={"ids": ["10023"]}).status_code == 200
        assert http.get("/metrics").status_code == 200
        assert http.post("/admin/reload", json={"version": "2"}).status_code == 200


def test_tokens_guard_each_endpoint_and_the_admin_token_is_separate():
    credentials = Credentials.of(SCORE_TOKEN, ADMIN_TOKEN)
    with client(credentials) as http:
        for method, path, body in [("POST", "/score", {"ids": ["10023"]}), ("GET", "/metrics", None),
                                   ("POST", "/admin/reload", {"version": "2"}), ("GET", "/openapi.json", None)]:
            for headers in ({}, bearer("not-the-token-at-all"), {"authorization": f"Basic {SCORE_TOKEN}"}):
                response = http.request(method, path, json=body, headers=headers)
                assert response.status_code == 401, (path, headers, response.text)
                assert response.json()["error"]["code"] == "unauthorized"
                assert response.headers["www-authenticate"] == "Bearer"
        assert not http.service.rounds                       # nothing unauthenticated reached a round
        assert http.post("/score", json={"ids": ["10023"]}, headers=bearer(SCORE_TOKEN)).status_code == 200
        refused = http.post("/admin/reload", json={"version": "2"}, headers=bearer(SCORE_TOKEN))
        assert refused.status_code == 403 and "needs the admin token" in refused.json()["error"]["message"]
        refused = http.post("/score", json={"ids": ["10023"]}, headers=bearer(ADMIN_TOKEN))
        assert refused.status_code == 403 and "needs the scoring token" in refused.json()["error"]["message"]
        assert http.post("/admin/reload", json={"version": "2"}, headers=bearer(ADMIN_TOKEN)).status_code == 200
        counted = http.get("/metrics", headers=bearer(ADMIN_TOKEN)).text
        assert 'vfl_serve_requests_total{status="401"} 3.0' in counted      # the refusals of /score, counted
        for token in (SCORE_TOKEN, ADMIN_TOKEN):
            assert http.get("/metrics", headers=bearer(token)).status_code == 200
            assert "/score" in http.get("/openapi.json", headers=bearer(token)).json()["paths"]
        assert http.get("/health").json() == {"status": "ok"}        # open, the status only
        assert http.get("/health", headers=bearer(SCORE_TOKEN)).json()["parties"] == {"telco": {"state": "up"}}
        assert http.get("/docs").status_code == 401
        assert http.get("/docs", headers=bearer(ADMIN_TOKEN)).status_code == 404   # no /docs page at all


def test_a_scoring_token_alone_turns_reload_off():
    with client(Credentials.of(SCORE_TOKEN)) as http:
        response = http.post("/admin/reload", json={"version": "2"}, headers=bearer(SCORE_TOKEN))
        assert response.status_code == 403 and "no admin token is configured" in response.json()["error"]["message"]


def test_tokens_are_compared_as_whole_tokens():
    credentials = Credentials.of(SCORE_TOKEN, ADMIN_TOKEN)
    assert credentials.rights(f"Bearer {SCORE_TOKEN}") == {"score"}
    assert credentials.rights(f"bearer  {ADMIN_TOKEN} ") == {"admin"}
    for wrong in (SCORE_TOKEN[:-1], SCORE_TOKEN + "x", "", ADMIN_TOKEN.upper()):
        assert credentials.rights(f"Bearer {wrong}") == set()
    assert credentials.score != SCORE_TOKEN.encode()         # only its digest is kept


def token_file(path, token, mode=0o600):
    path.write_text(token + "\n")
    path.chmod(mode)
    return path


def test_tokens_from_files_or_the_environment(tmp_path):
    settings = ServingSettings(token_file=token_file(tmp_path / "s.token", SCORE_TOKEN),
                               admin_token_file=token_file(tmp_path / "a.token", ADMIN_TOKEN))
    got = load_credentials(settings, "bank", environ={})
    assert got.rights(f"Bearer {SCORE_TOKEN}") == {"score"} and got.rights(f"Bearer {ADMIN_TOKEN}") == {"admin"}
    got = load_credentials(ServingSettings(), "bank", environ={TOKEN_ENV: SCORE_TOKEN, ADMIN_TOKEN_ENV: ADMIN_TOKEN})
    assert got.rights(f"Bearer {ADMIN_TOKEN}") == {"admin"}
    assert not load_credentials(ServingSettings(), "bank", environ={}).required
    parsed = parse_serving("f.toml", {"bank": {"token_file": "s.token", "allow_inline_features": True}},
                           ["bank"], tmp_path)["bank"]
    assert parsed.token_file == tmp_path / "s.token" and parsed.allow_inline_features


@pytest.mark.parametrize("case, words", [
    ("missing", "token_file: no file"),
    ("readable by others", "may be read by other users of this machine (mode 0644); make it the owner's only: "
                           "chmod 600"),
    ("short", "at least 16 characters"),
    ("spaces", "at least 16 characters of letters"),
    ("twice", "the token is given twice"),
    ("same", "the admin token must differ from the scoring token"),
    ("admin alone", "an admin token needs a scoring token too"),
])
def test_bad_tokens_are_refused_by_name(tmp_path, case, words):
    good = token_file(tmp_path / "s.token", SCORE_TOKEN)
    settings, environ = ServingSettings(token_file=good), {}
    if case == "missing":
        settings = ServingSettings(token_file=tmp_path / "nowhere.token")
    elif case == "readable by others":
        token_file(good, SCORE_TOKEN, 0o644)
    elif case == "short":
        token_file(good, "abc123")
    elif case == "spaces":
        token_file(good, "a token with spaces in it")
    elif case == "twice":
        environ = {TOKEN_ENV: SCORE_TOKEN}
    elif case == "same":
        settings = ServingSettings(token_file=good, admin_token_file=good)
    elif case == "admin alone":
        settings = ServingSettings(admin_token_file=good)
    with pytest.raises(ConfigurationError) as caught:
        load_credentials(settings, "bank", environ=environ)
    assert words in str(caught.value) and "party bank" in str(caught.value)


def test_a_bind_beyond_loopback_needs_a_token():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3") and not is_loopback("::")
    check_bind("127.0.0.1", 8080, Credentials(), "bank")
    check_bind("0.0.0.0", 8080, Credentials.of(SCORE_TOKEN), "bank")
    with pytest.raises(ConfigurationError) as caught:
        check_bind("0.0.0.0", 8080, Credentials(), "bank")
    message = str(caught.value)
    assert "0.0.0.0:8080, beyond this machine, and it has no token" in message
    assert "token_file" in message and TOKEN_ENV in message and "--token-file" in message


def test_vfl_serve_refuses_a_public_bind_without_a_token(tmp_path):
    import subprocess
    import sys

    (tmp_path / "federation.toml").write_text(
        '[federation]\nca = "ca.pem"\n'
        '[parties.bank]\nrole = "label"\naddress = "127.0.0.1:1"\ncertificate = "b.pem"\nkey = "b.key"\n'
        '[parties.telco]\nrole = "feature"\naddress = "127.0.0.1:2"\ncertificate = "t.pem"\nkey = "t.key"\n'
        '[parties.C]\nrole = "coordinator"\naddress = "127.0.0.1:3"\ncertificate = "c.pem"\nkey = "c.key"\n'
        '[training]\nmodel = "logistic"\n[data]\nid_column = "id"\nlabel = "y"\n')
    env = {k: v for k, v in os.environ.items() if k not in (TOKEN_ENV, ADMIN_TOKEN_ENV)}
    done = subprocess.run([sys.executable, "-m", "vfl", "serve", "--config", str(tmp_path / "federation.toml"),
                           "--role", "bank", "--http", "0.0.0.0:8080"], capture_output=True, text=True,
                          timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "beyond this machine, and it has no token" in done.stderr and "Traceback" not in done.stderr


# -- inline features -------------------------------------------------------------------------------------
def solve_weights(http, headers=None):
    """The attack: three inline-feature queries for one id give the label party's weights (and a constant)."""
    rows = [{"income": 0.0, "age": 0.0}, {"income": 1.0, "age": 0.0}, {"income": 0.0, "age": 1.0}]
    scores = []
    for row in rows:
        response = http.post("/score", json={"ids": ["10099"], "features": [row]}, headers=headers)
        if response.status_code != 200:
            return response
        scores.append(response.json()["results"][0]["score"])
    return np.array([scores[1] - scores[0], scores[2] - scores[0]]), scores[0]


def test_inline_features_are_off_by_default_so_the_weights_attack_fails():
    with client() as http:
        response = solve_weights(http)
        assert response.status_code == 403 and response.json()["error"]["code"] == "inline_features_off"
        assert "allow_inline_features" in response.json()["error"]["message"]
        assert "income" not in response.text                 # not even the label party's column names
        assert not http.service.rounds                        # nothing reached a round
        allowed = http.post("/score", json={"ids": ["10023"], "features": [None]})   # null: the store
        assert allowed.status_code == 200 and "score" in allowed.json()["results"][0]


def test_with_inline_features_on_a_client_reads_the_weights_as_documented():
    with client(allow_inline_features=True) as http:
        weights, constant = solve_weights(http)
    assert np.allclose(weights, WEIGHTS, atol=1e-12)          # exact: docs/serving.md says so
    assert constant == pytest.approx(INTERCEPT + LabelStandIn(None).theirs["10099"])


def test_an_id_the_label_party_does_not_hold_is_unknown_there_whatever_the_feature_party_holds():
    with client() as http:
        held_by_telco, held_by_none = http.post("/score", json={"ids": ["10099", "nobody"]}).json()["results"]
    assert held_by_telco["error"] == held_by_none["error"] == {
        "code": "unknown_id", "party": "bank", "message": "party bank holds no row for this id"}


# -- requests ------------------------------------------------------------------------------------------------
def test_every_error_is_in_the_envelope():
    with client() as http:
        for method, path, body, status, code in [
                ("GET", "/nowhere", None, 404, "not_found"), ("GET", "/score", None, 405, "method_not_allowed"),
                ("DELETE", "/admin/reload", None, 405, "method_not_allowed"),
                ("POST", "/score", {"ids": "10023"}, 422, "invalid_request"),
                ("POST", "/score", [1, 2], 422, "invalid_request")]:
            response = http.request(method, path, json=body)
            assert response.status_code == status, (path, response.text)
            assert set(response.json()) == {"error"} and response.json()["error"]["code"] == code
            assert path in response.json()["error"]["message"] or status == 422


@pytest.mark.parametrize("raw", [b'{"ids": [', b'{"ids": [' + b"9" * 5000 + b"]}",
                                 b'{"ids": ["1"], "deadline_ms": 1' + b"0" * 4300 + b"}", b'{"ids": ["\xff"]}'],
                         ids=["cut short", "a long id number", "a long deadline", "not UTF-8"])
def test_a_body_json_cannot_parse_is_a_422_invalid_request_and_counted(raw):
    """Malformed JSON, a number beyond Python's 4300 digits, bytes that are not UTF-8: one answer for all."""
    metrics = Metrics()
    with TestClient(create_app(LabelStandIn(ServingSettings()), metrics)) as http:
        response = http.post("/score", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_request"
    assert b'vfl_serve_requests_total{status="422"} 1.0' in metrics.text()


def test_a_wrong_content_type_is_a_415_naming_the_expected_one():
    with client() as http:
        for kind in ("text/plain", "application/x-www-form-urlencoded", None):
            headers = {} if kind is None else {"content-type": kind}
            response = http.post("/score", content=b'{"ids": ["10023"]}', headers=headers)
            assert response.status_code == 415, response.text
            assert "content-type: application/json" in response.json()["error"]["message"]
        ok = http.post("/score", content=b'{"ids": ["10023"]}',
                       headers={"content-type": "application/json; charset=utf-8"})
        assert ok.status_code == 200


@pytest.mark.parametrize("deadline", [True, False, 1.5, "100", 0, -5])
def test_deadline_ms_must_be_a_positive_whole_number(deadline):
    with client() as http:
        response = http.post("/score", json={"ids": ["10023"], "deadline_ms": deadline})
    assert response.status_code in (400, 422) and "deadline_ms" in response.json()["error"]["message"]
    assert not http.service.rounds


# -- a real uvicorn: timeouts, chunked bodies ------------------------------------------------------------------
@pytest.fixture
def served():
    """The API under uvicorn on a loopback port, as vfl serve runs it (1-s request and idle timeouts)."""
    import uvicorn

    settings = ServingSettings(max_ids=10, request_timeout_ms=1000, idle_timeout_ms=1000)
    app = create_app(LabelStandIn(settings), Metrics())
    sock = socket.create_server(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", http=http_protocol(1.0), timeout_keep_alive=1.0))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield sock.getsockname()[1]
    server.should_exit = True
    thread.join(10)


def exchange(port, data: bytes, wait: float = 5.0) -> tuple[bytes, float]:
    """Send ``data`` raw, then read until the server closes: what came back, and when it closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        started = time.monotonic()
        if data:
            sock.sendall(data)
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except socket.timeout:
            return answer + b"<still open>", time.monotonic() - started
        return answer, time.monotonic() - started


def test_a_body_shorter_than_its_content_length_gets_a_408_and_the_connection_closes(served):
    head = b"POST /score HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n"
    answer, took = exchange(served, head + b'{"ids": [')
    assert answer.startswith(b"HTTP/1.1 408") and b'"request_timeout"' in answer, answer
    assert b"<still open>" not in answer and took < 3.0


def test_silent_and_half_sent_connections_are_closed(served):
    answer, took = exchange(served, b"")
    assert answer == b"" and took < 3.0                      # never a byte: closed after the idle timeout
    answer, took = exchange(served, b"GET /health HTTP/1.1\r\nhost: x\r\n")     # the head never ends
    assert answer == b"" and took < 3.0
    with socket.create_connection(("127.0.0.1", served), timeout=5) as sock:   # idle after an answer
        sock.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n")
        started, answer = time.monotonic(), b""
        while chunk := sock.recv(65536):
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 200") and time.monotonic() - started < 3.0


def test_a_chunked_body_over_the_bound_is_a_413(served):
    def chunks():
        for _ in range(200):                      # 200 x 64 KiB: far above the 80 KiB bound of 10 ids
            yield b"x" * 65536

    response = httpx.post(f"http://127.0.0.1:{served}/score", content=chunks(),
                          headers={"content-type": "application/json"}, timeout=10)
    assert response.status_code == 413 and response.json()["error"]["code"] == "request_too_large"
    ok = httpx.post(f"http://127.0.0.1:{served}/score", content=iter([b'{"ids": ', b'["10023"]}']),
                    headers={"content-type": "application/json"}, timeout=10)
    assert ok.status_code == 200 and "score" in ok.json()["results"][0]


@pytest.mark.parametrize("queries", ["by_id", "private"])
def test_the_label_party_asks_no_feature_party_about_an_id_it_does_not_hold(queries):
    from types import SimpleNamespace

    from vfl.families import FAMILIES
    from vfl.serving import private
    from vfl.serving.label import LabelService, RoundError
    from vfl.serving.messages import unpack_ids
    from vfl.transport.message import Message

    class Store:
        def lookup(self, ids, columns):
            found = np.array([key == "held" for key in ids])
            return np.where(found[:, None], 1.0, np.nan) * np.ones((len(ids), len(columns))), found

    from vfl.serving.scorers.trees import TreeShare

    share = object.__new__(TreeShare)               # a label party's trees, as far as the round goes
    share.__dict__.update(version="1", columns=["x"], owners={"telco": [0]}, feature_parties=["telco"],
                          widths={"telco": 2})
    service = object.__new__(LabelService)          # no links: the requests a round would send are recorded
    service.shares, service.current, service.store, service.metrics = {"1": share}, "1", Store(), None
    service.role, service.features, service._rounds = "bank", ["telco"], iter(range(1, 100))
    service.config = SimpleNamespace(family=FAMILIES["trees"])      # the round is its family's scorer's
    service.settings = ServingSettings(queries=queries)
    table = private.build_table("telco", "1", "trees", ["held"], np.zeros((1, 2), dtype=np.uint8))
    service.held, service._tables = {("telco", "1"): private.HeldTable(
        "telco", "1", table.ident, "trees", table.payload_bytes, table.count, table.entries)}, {}
    asked = []

    def ask(round_id, requests, deadline):
        for name, _, fields in requests.values():   # private: the blinded points of the ids only
            asked.append(unpack_ids(Message("leaves", "public", round_id, {"ids": fields["ids"]}), "bank", 100)
                         if name == "leaves" else ["held"] * (len(fields["points"]) // 32))
        raise RoundError("recorded", "telco")

    service.ask = ask
    version, answers = service.score(["nobody", "also-nobody"], [None, None], time.monotonic() + 5)
    assert not asked and {a["error"]["party"] for a in answers} == {"bank"}
    with pytest.raises(RoundError):
        service.score(["nobody", "held"], [None, None], time.monotonic() + 5)
    assert asked == [["held"]]


def test_a_reload_under_way_keeps_rounds_going_and_refuses_a_second_and_the_client_waits_for_it():
    """A reload that takes longer than the client's timeout: the client gets its answer; a second reload meanwhile
    is a 409 naming the first; rounds run in the batcher's own threads, so none waits behind reloads."""
    import uvicorn

    from vfl.serving.client import ScoringClient, ScoringError

    release = threading.Event()

    class SlowReload(LabelStandIn):
        def reload(self, version):
            release.wait(30)
            return {"model_version": version, "previous": "1"}

    app = create_app(SlowReload(ServingSettings()), Metrics())
    sock = socket.create_server(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    answers = []
    try:
        with ScoringClient(url, timeout=0.5) as admin, ScoringClient(url, timeout=5.0) as user:
            first = threading.Thread(target=lambda: answers.append(admin.reload("2")))
            first.start()
            time.sleep(0.3)
            with pytest.raises(ScoringError) as caught:
                user.reload("2")
            assert caught.value.status == 409 and caught.value.code == "reload_in_progress"
            started = time.monotonic()
            scored = [user.score(["10023"], deadline_ms=2000) for _ in range(10)]
            assert time.monotonic() - started < 5 and all("score" in s["results"][0] for s in scored)
            time.sleep(0.5)                                  # the first reload has outlasted its client's timeout
            release.set()
            first.join(10)
            assert answers == [{"model_version": "2", "previous": "1"}]
            assert user.reload("3") == {"model_version": "3", "previous": "1"}     # the next one runs
    finally:
        release.set()
        server.should_exit = True
        thread.join(10)
