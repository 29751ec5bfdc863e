"""Private queries (vfl/serving/private.py): a feature party answers without learning which ids are scored.

In one process, the numbers of both sides: a linear round through tables equals
the by-id round's sum exactly (packed and not, one model and three); statuses per
id; what the feature party receives holds no id and its view of two request
streams of the same count is the same (an attack that links or recognises ids
fails); a table does not open for rows never asked; tampered tables are refused
by name.  The services run private queries by default: the process tests of
test_serving_linear.py, test_serving_trees.py and test_serving_mlp.py go through them.
"""

from types import SimpleNamespace

import numpy as np
import pytest

from vfl.crypto import EncryptedVector, oprf
from vfl.errors import ConfigurationError, ProtocolError
from vfl.parties import Coordinator
from vfl.serving import private
from vfl.serving.messages import INCOMPLETE, OK, OUT_OF_RANGE, UNKNOWN
from vfl.serving.rounds import Layout, decrypted, masked_total, unmasked
from vfl.serving.scorers.linear import packed_sum
from vfl.transport.message import Message, decode, encode


def _wire(name, kind, fields):
    return decode(encode(Message(name, kind, -1, fields)))


def _share(coef, role="telco"):
    from vfl.serving.scorers.linear import LinearShare

    coef = np.atleast_2d(coef)
    share = object.__new__(LinearShare)             # its payloads, of these partial scores
    share.role, share.width, share.scores = role, len(coef), lambda x: x @ coef.T
    return share


def _held(table, party="telco"):
    return private.HeldTable(party, table.version, table.ident, table.kind, table.payload_bytes, table.count,
                             table.entries, table.key_fingerprint)


def _query(table, held, ids):
    """One private request, both sides: what the feature party receives, and the label party's opened payloads."""
    points, blinds = private.blind(held, ids)
    request = _wire("evaluate", "masked", {"table": held.ident, "points": points})
    answer = _wire("evaluated", "masked", {"points": private.evaluate(table, request.fields["points"], "bank")})
    return request, private.open_payloads(held, ids, answer.fields["points"], blinds, "telco")


@pytest.fixture(scope="module")
def coordinator():
    c = Coordinator(1024, insecure=True)
    c.generate_keys()
    return c


@pytest.mark.parametrize("packed, width", [(True, 1), (True, 3), (False, 1)])
def test_a_private_linear_round_equals_the_sum_of_the_partial_scores(coordinator, packed, width):
    layout = Layout(coordinator.context, packed, 2 ** 12, 3)
    rng = np.random.default_rng(5)                                  # test data only
    stores = {k: (["a", "b", "c", "d", "e"], rng.uniform(-3, 3, (5, 2))) for k in ("telco", "shop")}
    stores["shop"][1][3, 0] = np.nan                                # shop's row d is incomplete
    coef = {k: rng.uniform(-2, 2, (width, 2)) for k in stores}
    tables, held, opened = {}, {}, {}
    asked = ["e", "a", "zz", "c", "d"]                              # zz: held by nobody
    for k, (ids, values) in stores.items():
        bodies = private.payloads(_share(coef[k], k), values, layout)
        tables[k] = private.build_table(k, "1", "linear", ids, bodies, layout.context.public_key.fingerprint)
        held[k] = _held(tables[k], k)
        _, opened[k] = _query(tables[k], held[k], asked)
    assert opened["telco"][0].tolist() == [OK, OK, UNKNOWN, OK, OK]
    assert opened["shop"][0].tolist() == [OK, OK, UNKNOWN, OK, INCOMPLETE]
    u_b = rng.uniform(-3, 3, (len(asked), width))
    total = EncryptedVector(layout.context, packed_sum(layout, opened, len(asked), width),
                            layout.context.frac_bits)
    request, secret = masked_total(layout, total, u_b, "bank")
    reply = _wire("decrypted", "masked", decrypted(layout, coordinator.context,
                                                   _wire("decrypt", "ciphertext", request), "bank", 10 ** 6))
    z = unmasked(layout, reply, secret, len(asked) * width, "bank").reshape(len(asked), width)
    expected = u_b.copy()
    for k, (ids, values) in stores.items():
        for j, key in enumerate(asked):
            if key in ids and opened[k][0][j] == OK:
                expected[j] += values[ids.index(key)] @ coef[k].T
    assert np.allclose(z, expected, atol=1e-8)


def test_a_partial_score_beyond_the_bound_is_that_rows_status(coordinator):
    layout = Layout(coordinator.context, True, 2 ** 4, 2)
    bodies = private.payloads(_share([1.0]), np.array([[3.0], [100.0]]), layout)
    table = private.build_table("telco", "1", "linear", ["ok", "big"], bodies)
    _, (status, _) = _query(table, _held(table), ["big", "ok"])
    assert status.tolist() == [OUT_OF_RANGE, OK]


def test_what_the_feature_party_receives_names_no_id_and_two_streams_look_alike():
    """The attack: the feature party, with its key and every id it holds, tries to tell which of two request
    streams of the same count it is answering, by recognising its ids' points (blinded or not) and by linking
    points that repeat.  It finds nothing to go on, and guesses at chance."""
    ids = [f"customer-{i}" for i in range(64)]
    table = private.build_table("telco", "1", "trees", ids, np.zeros((64, 2), dtype=np.uint8))
    held = _held(table)
    known = {}
    for key in ids:                                 # everything the feature party can compute about its own ids
        hashed = oprf.hash_to_group(key.encode(), held.context)
        known[hashed] = key
        known[oprf.evaluate(table.key, [hashed])[0]] = key
    rng = np.random.default_rng(0)                  # which stream each trial asks: the game's coin, not a secret
    correct, seen = 0, set()
    stream_a, stream_b = ids[:8], ids[8:16]         # different customers, the same count
    for _ in range(40):
        coin = int(rng.integers(2))
        request, (status, _) = _query(table, held, stream_a if coin == 0 else stream_b)
        assert status.tolist() == [OK] * 8
        data = encode(request)
        assert not any(key.encode() in data for key in ids) and set(request.fields) == {"table", "points"}
        points = [request.fields["points"][i:i + 32] for i in range(0, 256, 32)]
        recognised = [known[p] for p in points if p in known]
        linked = [p for p in points if p in seen]
        seen.update(points)
        assert not recognised and not linked
        guess = 0 if any(k in stream_a for k in recognised) else int(rng.integers(2))
        correct += guess == coin
    assert len(request.fields["points"]) == 32 * 8    # what it learns: the count
    assert 8 <= correct <= 32                       # chance (a binomial 40, 1/2 lands here but 1 in 10^4)


def test_the_table_opens_only_for_ids_asked_and_hides_the_row_count_and_order():
    ids = [f"{i:05d}" for i in range(1500)]
    bodies = np.full((1500, 3), OK, dtype=np.uint8)
    table = private.build_table("telco", "7", "trees", ids, bodies)
    held = _held(table)
    assert table.count == private.padded_count(1500) == 2048 and private.padded_count(3) == 1024
    assert private.padded_count(10 ** 6) == 1 << 20        # within 1/16 above
    tags = [table.entries[i * held.entry_bytes:i * held.entry_bytes + 16] for i in range(table.count)]
    assert tags == sorted(tags)                     # sorted by tag: not by id, not by insertion
    _, (status, bodies_found) = _query(table, held, ["00007", "nobody"])
    assert status.tolist() == [OK, UNKNOWN] and bodies_found[0] == bytes([OK, OK])
    # without F_k(x), an entry does not open: a guessed output, or another table's, fails
    other = private.build_table("telco", "7", "trees", ids, bodies)
    output = oprf.prf(other.key, b"00007", held.context)
    assert held.find(oprf.tag(output)) is None
    box = held.find(oprf.tag(oprf.prf(table.key, b"00007", held.context)))
    with pytest.raises(ProtocolError, match="does not open"):
        oprf.open_sealed(output, box, held.context)


def test_tables_and_answers_that_do_not_fit_are_refused_by_name():
    table = private.build_table("telco", "1", "trees", ["a", "b"], np.zeros((2, 2), dtype=np.uint8))
    size = table.entry_bytes
    with pytest.raises(ProtocolError, match="telco sent a table of .* bytes, not 1024 entries"):
        private.HeldTable("telco", "1", table.ident, "trees", 2, 1024, table.entries[:-1])
    swapped = table.entries[size:2 * size] + table.entries[:size] + table.entries[2 * size:]
    if swapped[:8] != table.entries[:8]:
        with pytest.raises(ProtocolError, match="not sorted by tag"):
            private.HeldTable("telco", "1", table.ident, "trees", 2, table.count, swapped)
    held = _held(table)
    points, blinds = private.blind(held, ["a"])
    with pytest.raises(ProtocolError, match="telco sent an 'evaluated' answer that is not 1 points"):
        private.open_payloads(held, ["a"], b"\x01" * 31, blinds, "telco")
    with pytest.raises(ProtocolError, match="bank sent blinded points that are not whole 32-byte points"):
        private.evaluate(table, points[:-1], "bank")
    with pytest.raises(ProtocolError, match="not a point of the prime-order group"):
        private.evaluate(table, b"\x01" + bytes(31), "bank")
    # an entry tampered with: its box does not open, and the label party names the party
    at = next(i for i in range(table.count)
              if table.entries[i * size:i * size + 16] == oprf.tag(oprf.prf(table.key, b"a", held.context)))
    broken = bytearray(table.entries)
    broken[at * size + 20] ^= 1
    tampered = private.HeldTable("telco", "1", table.ident, "trees", 2, table.count, bytes(broken))
    answer = private.evaluate(table, points, "bank")
    with pytest.raises(ProtocolError, match="telco sent a table entry that does not open"):
        private.open_payloads(tampered, ["a"], answer, blinds, "telco")


def test_a_split_network_of_two_feature_parties_is_served_by_id_and_private_says_why():
    from vfl.deploy.serving_settings import ServingSettings
    from vfl.serving.label import LabelService

    service = object.__new__(LabelService)
    service.role, service.features = "bank", ["A1", "A2"]
    from vfl.serving.scorers.mlp import MLPShare
    from vfl.serving.scorers.trees import TreeShare

    network, trees = object.__new__(MLPShare), object.__new__(TreeShare)
    network.version = trees.version = "3"
    for queries, expected in (("auto", False), ("by_id", False)):
        service.settings = ServingSettings(queries=queries)
        assert service.private(network) is expected
    service.settings = ServingSettings(queries="private")
    with pytest.raises(ConfigurationError, match="split network of 2 feature parties, which is served by id only"):
        service.private(network)
    assert service.private(trees)
    service.features = ["A1"]
    assert service.private(network)


def test_a_feature_party_set_to_private_refuses_to_look_ids_up():
    from vfl.deploy.serving_settings import ServingSettings
    from vfl.serving.feature import FeatureService
    from vfl.serving.messages import pack_ids

    service = object.__new__(FeatureService)
    service.settings, service.label = ServingSettings(queries="private"), "bank"
    message = Message("leaves", "public", 1, {"ids": pack_ids(["a"])})
    with pytest.raises(ConfigurationError, match="answers private queries only"):
        service.rows(message, None)


# -- a feature party's table builds, and the label party holding them ------------------------------------------
def _feature_service(monkeypatch, tmp_path, store):
    """A feature party's service with its handlers, a trees share and tiny payloads (no links, no key)."""
    import threading

    import vfl.serving.feature as feature
    for version in ("1", "2"):
        (tmp_path / version).mkdir()
        (tmp_path / version / "model_A.json").write_text("{}")
    # the stub share has no splits: its release check at load is left out here (tests/trees/test_trees_release.py
    # runs it on a real share)
    share = SimpleNamespace(kind="trees", version="1", columns=["x"], trees=[0], width=1, keyed=False, trained_with="t",
                            check_release=lambda *a: None, loaded_fields=lambda role, sign: {})
    monkeypatch.setattr(feature, "load_share", lambda *a, **k: share)
    monkeypatch.setattr(private, "payloads", lambda share, values, layout=None, frac_bits=0, noise=None:
                        np.zeros((len(values), 2), dtype=np.uint8))
    service = feature.FeatureService.__new__(feature.FeatureService)
    service.role, service.label, service.coordinator, service.workdir = "A", "B", None, None
    from vfl.families import FAMILIES

    service.config = SimpleNamespace(family=FAMILIES["trees"], pipeline=None, training=SimpleNamespace(frac_bits=16),
                                     party=lambda name: SimpleNamespace(reason_columns=None))
    service.settings = SimpleNamespace(models=tmp_path)
    service.store, service.shares, service.tables, service.named = store, {}, {}, {}
    service._tables, service._lock = threading.Lock(), threading.Lock()
    return service


def _load(service, version, keep, tables):
    import time
    service._load(Message("load", "public", -1, {"round": 1, "version": version, "keep": keep, "tables": tables}))
    while service.tables.get(version) is not None and service.tables[version].building:
        time.sleep(0.01)


def test_a_refresh_that_failed_leaves_the_label_party_its_table_across_a_relink(monkeypatch, tmp_path):
    """The rebuild fails at A (its store); the reload says so, A still serves its table, and a relink of A keeps it."""
    import concurrent.futures as cf
    import itertools
    import threading

    from vfl.serving.label import LabelService

    class Store:
        calls = 0

        def rows(self, columns):
            Store.calls += 1
            if Store.calls > 1:
                raise ConfigurationError("party A's store: reading its rows failed: database is locked")
            return [f"id{i}" for i in range(50)], np.zeros((50, 1))

        def check_columns(self, columns):
            pass

    feature = _feature_service(monkeypatch, tmp_path, Store())

    class Link:                         # the label party's link to A, answered by A's own handlers
        peer, closed = "A", False

        def request(self, round_id, name, kind, **fields):
            answer = cf.Future()
            try:
                got = feature._table(Message(name, kind, -1, dict(fields, round=round_id)))
                answer.set_result(_wire(*got))
            except ConfigurationError as exc:
                answer.set_result(_wire("failed", "public", {"reason": f"party A: {exc}"}))
            return answer

        def forget(self, round_id):
            pass

    label = LabelService.__new__(LabelService)
    label.role, label._closed, label.held, label._tables, label._held, label.layout = \
        "B", False, {}, {}, threading.Condition(), None
    label._rounds, link, key = itertools.count(1), Link(), ("A", "1")
    _load(feature, "1", "1", 1)
    label._fetch("A", link, "1", None)
    first = label.held[key]
    _load(feature, "1", "1", 2)                             # a refresh: A's store fails
    label._fetch("A", link, "1", first)                     # (what a reload does)
    assert label.held[key] is first and label._tables[key].startswith("failed: its private table of model version 1 "
                                                                       "could not be built: party A's store")
    label._fetch("A", link, "1", label.held.pop(key))       # A relinks: the table held is asked for again
    assert label.held.get(key) is first and [t.ident for t in feature.named.values()] == [first.ident]


def test_a_table_built_for_a_version_dropped_meanwhile_is_not_kept(monkeypatch, tmp_path):
    import time

    class SlowStore:
        def rows(self, columns):
            time.sleep(0.5)
            return [f"id{i}" for i in range(50)], np.zeros((50, 1))

        def check_columns(self, columns):
            pass

    feature = _feature_service(monkeypatch, tmp_path, SlowStore())
    feature._load(Message("load", "public", -1, {"round": 1, "version": "1", "keep": "1", "tables": 1}))
    building = feature.tables["1"]
    _load(feature, "2", "2", 0)                             # version 1 dropped while its table builds
    while building.building:
        time.sleep(0.01)
    assert feature.tables == {} and feature.named == {} and "dropped" in building.error


def test_a_kept_table_and_json_are_owner_only_even_over_a_file_a_crash_left(tmp_path):
    """Written aside then renamed: a leftover aside file readable by others does not lend the table its mode."""
    import os
    import stat

    from vfl.deploy.jsonfile import write_json
    table = SimpleNamespace(version="1", kind="trees", ident=b"\x01" * private.IDENT_BYTES, key=b"\x02" * 32,
                            payload_bytes=2, count=1, key_fingerprint="", entries=b"\x00" * 8)
    (tmp_path / "1.tmp").write_bytes(b"left by a crash")
    os.chmod(tmp_path / "1.tmp", 0o644)
    private.write_table(tmp_path / "1.table", table, "digest")
    (tmp_path / ".model.json.tmp").write_text("{}")
    os.chmod(tmp_path / ".model.json.tmp", 0o644)
    write_json(tmp_path / "model.json", {"a": 1})
    for name in ("1.table", "model.json"):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o600, name


def test_a_fault_answering_one_message_fails_that_round_and_keeps_the_link(monkeypatch, tmp_path):
    """A feature party's handler that fails unexpectedly: a 'failed' answer naming the party, then the next message."""
    service = _feature_service(monkeypatch, tmp_path, store=None)
    service._round = lambda message: 1 / 0
    sent = []

    class Link:
        peer = "B"
        inbox = [Message("score", "public", -1, {"round": 7}), Message("unknown", "public", -1, {"round": 8})]

        def recv(self, timeout):
            if not self.inbox:
                raise EOFError("the link closed")
            return self.inbox.pop(0)

        def send(self, name, kind, **fields):
            sent.append((name, fields))

    with pytest.raises(EOFError):
        service._answer(Link())
    assert [(name, fields["round"]) for name, fields in sent] == [("failed", 7), ("failed", 8)]
    assert sent[0][1]["reason"] == "party A: internal error (ZeroDivisionError) answering 'score'; its log says more"
