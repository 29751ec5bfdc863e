"""Entity alignment by private set intersection: equals a plain-set join, refuses bad input and bad points."""

import hashlib
import inspect
import secrets

import numpy as np
import pandas as pd
import pytest

import vfl.psi
from vertical_data import make_vertical
from vfl import DataError, ProtocolError, VerticalDataset, VerticalLogisticRegression
from vfl.crypto import group
from vfl.protocols import psi as protocol
from vfl.transport import Endpoint, InProcessNetwork, Transcript, run_roles

from crypto.test_psi_group import REFUSED, bad_points, is_square


def random_sets(sizes, common, universe, seed, as_text=False):
    """Id lists of the given sizes sharing exactly ``common`` ids, each in its own random order."""
    rng = np.random.default_rng(seed)
    pool = rng.choice(universe, size=common + sum(n - common for n in sizes), replace=False)
    shared, rest = list(pool[:common]), list(pool[common:])
    out = []
    for n in sizes:
        own, rest = rest[:n - common], rest[n - common:]
        ids = shared + own
        rng.shuffle(ids)
        out.append([f"user-{v}" if as_text else int(v) for v in ids])
    return out


def frames_for(id_lists, names):
    """One frame per party: the id and a column that is a function of the id (to check rows stay whole)."""
    frames = {}
    for k, (name, ids) in enumerate(zip(names, id_lists)):
        frame = pd.DataFrame({"id": ids, f"v_{name}": [hash((name, str(v))) % 1000 for v in ids]})
        if k == 0:
            frame["y"] = [len(str(v)) % 2 for v in ids]
        frames[name] = frame
    return frames


@pytest.mark.parametrize("parties,sizes,common,as_text", [
    (2, (200, 300), 120, False),
    (2, (250, 250), 250, True),       # the same ids, in different orders
    (2, (400, 150), 1, False),        # one row in common
    (4, (300, 200, 250, 220), 90, True),   # a hub and K = 3 spokes
    (4, (150, 150, 150, 150), 150, False),
])
def test_intersection_equals_the_plain_set_reference(parties, sizes, common, as_text):
    names = ["B", "A", "C", "D"][:parties]
    id_lists = random_sets(sizes, common, 10 ** 9, seed=sum(sizes) + parties, as_text=as_text)
    frames = frames_for(id_lists, names)
    aligned = vfl.psi.intersect(frames, id_column="id", label="y")

    expected = set.intersection(*(set(map(str, ids)) for ids in id_lists))
    order = list(aligned["B"]["id"])
    assert set(order) == expected and len(order) == common
    for name in names:
        out = aligned[name]
        assert list(out["id"]) == order                       # the same common order at every party
        original = frames[name].assign(id=frames[name]["id"].map(str)).set_index("id").loc[order]
        assert out.drop(columns="id").equals(original.reset_index(drop=True))
        assert out.index.equals(pd.RangeIndex(common))


def test_the_common_order_is_fresh_each_run():
    ids = [list(range(200)), list(range(100, 300))]
    orders = [list(vfl.psi.intersect(frames_for(ids, ["B", "A"]), "id", label="y")["A"]["id"]) for _ in range(2)]
    assert sorted(orders[0]) == sorted(orders[1]) and orders[0] != orders[1]


def test_no_common_id_is_refused_with_the_sizes():
    frames = frames_for([list(range(50)), list(range(100, 140))], ["B", "A"])
    with pytest.raises(DataError, match=r"intersection is empty.*B: 50, A: 40"):
        vfl.psi.intersect(frames, "id", label="y")


def test_an_intersection_smaller_than_a_batch_is_refused():
    frames = frames_for([list(range(50)), list(range(40, 90))], ["B", "A"])
    with pytest.raises(DataError, match="has 10 rows, fewer than the 20 needed"):
        vfl.psi.intersect(frames, "id", label="y", min_rows=20)


def test_too_few_rows_are_refused_before_any_point_is_sent():
    frames = frames_for([list(range(50)), list(range(10))], ["B", "A"])
    transcript = Transcript()
    with pytest.raises(DataError, match="too few rows.*at least 20 rows.*A: 10"):
        vfl.psi.intersect(frames, "id", label="y", min_rows=20, transcript=transcript)
    assert {r[3] for r in transcript.records} == {"psi_hello", "psi_setup"}


def test_canonical_ids_match_across_types_whitespace_and_unicode_forms():
    frame_b = pd.DataFrame({"id": [" 7 ", "8", "caf\u00e9", "9"], "y": [1, 0, 1, 0]})        # composed é
    frame_a = pd.DataFrame({"id": pd.Series([7.0, 8, "cafe\u0301 ", 10], dtype=object),      # decomposed é
                            "f": [1, 2, 3, 4]})
    frame_c = pd.DataFrame({"id": pd.Series([np.int64(8), 7, "\tcaf\u00e9", 11], dtype=object), "g": [5, 6, 7, 8]})
    aligned = vfl.psi.intersect({"B": frame_b, "A": frame_a, "C": frame_c}, "id", label="y")
    assert sorted(aligned["A"]["id"]) == ["7", "8", "caf\u00e9"]
    assert dict(zip(aligned["A"]["id"], aligned["A"]["f"])) == {"7": 1, "8": 2, "caf\u00e9": 3}
    assert dict(zip(aligned["C"]["id"], aligned["C"]["g"])) == {"7": 6, "8": 5, "caf\u00e9": 7}
    assert dict(zip(aligned["B"]["id"], aligned["B"]["y"])) == {"7": 1, "8": 0, "caf\u00e9": 1}


@pytest.mark.parametrize("value,expected", [(" 7 ", "7"), (7, "7"), (7.0, "7"), (np.int32(7), "7"),
                                            (np.float32(7.0), "7"), (-0.0, "0"), (1.5, "1.5"),
                                            ("\u0065\u0301", "\u00e9"), ("  a b ", "a b")])
def test_canonical_id(value, expected):
    assert vfl.psi.canonical_id(value) == expected


@pytest.mark.parametrize("value,reason", [(None, "missing"), (float("nan"), "missing"), (pd.NA, "missing"),
                                          (True, "boolean"), (np.bool_(False), "boolean"),
                                          ("   ", "empty"), (float("inf"), "inf"), (b"7", "bytes"),
                                          ("ab\ud800", "not valid Unicode text")])
def test_bad_ids_are_named_with_their_row(value, reason):
    frame_a = pd.DataFrame({"id": pd.Series([1, 2, value, 4], dtype=object), "f": range(4)})
    frame_b = pd.DataFrame({"id": [1, 2, 3, 4], "y": range(4)})
    with pytest.raises(DataError, match=f"party A: id column 'id', row 2: .*{reason}"):
        vfl.psi.intersect({"A": frame_a, "B": frame_b}, "id", label="y")


def test_duplicate_ids_are_named_with_both_rows():
    frame_a = pd.DataFrame({"id": [1, 2, 3, " 2", 5], "f": range(5)})
    frame_b = pd.DataFrame({"id": [1, 2, 3, 4], "y": range(4)})
    with pytest.raises(DataError, match=r"party A: id '2' appears twice \(rows 1 and 3\)"):
        vfl.psi.intersect({"A": frame_a, "B": frame_b}, "id", label="y")


def test_a_missing_id_column_is_named():
    frame_a = pd.DataFrame({"key": [1, 2], "f": [0, 1]})
    frame_b = pd.DataFrame({"id": [1, 2], "y": [0, 1]})
    with pytest.raises(DataError, match="party A: the id column 'id' is missing"):
        vfl.psi.intersect({"A": frame_a, "B": frame_b}, "id", label="y")


def test_the_label_party_must_be_named_or_found():
    frames = frames_for([[1, 2], [2, 3]], ["B", "A"])
    with pytest.raises(DataError, match="label"):
        vfl.psi.intersect(frames, "id")
    with pytest.raises(DataError, match="exactly one party"):
        vfl.psi.intersect(frames, "id", label="nope")
    for kwargs, hub in (({"label": "y"}, "B"), ({"label_party": "A"}, "A")):
        transcript = Transcript()
        unlabelled = {p: f.drop(columns="y", errors="ignore") for p, f in frames.items()} if "label_party" in kwargs else frames
        aligned = vfl.psi.intersect(unlabelled, "id", transcript=transcript, **kwargs)
        assert list(aligned["A"]["id"]) == ["2"]
        assert {r[1] for r in transcript.records if r[3] == "psi_setup"} == {hub}


# -- the protocol under attack: a peer sends bad points -----------------------------------------
class Tampering(Endpoint):
    """An endpoint that replaces one point of the named message with ``bad``."""

    def __init__(self, *args, message: str, index: int, bad: bytes, **kwargs):
        super().__init__(*args, **kwargs)
        self.target, self.index, self.bad = message, index, bad

    def send(self, to, name, kind, **fields):
        if name == self.target and fields["start"] <= self.index < fields["start"] + len(fields["data"]) // 32:
            at = 32 * (self.index - fields["start"])
            data = fields["data"]
            fields["data"] = data[:at] + self.bad + data[at + 32:]
        return super().send(to, name, kind, **fields)


def run_protocol(ids: dict, hub: str, tamper: dict | None = None, min_rows=1):
    roles = list(ids)
    network = InProcessNetwork(roles)
    eps = {}
    for r in roles:
        peers = [p for p in roles if p != r]
        if tamper and tamper["role"] == r:
            eps[r] = Tampering(network.transport(r), peers, message=tamper["message"], index=tamper["index"],
                               bad=tamper["bad"])
        else:
            eps[r] = Endpoint(network.transport(r), peers)
    spokes = [r for r in roles if r != hub]
    return run_roles(network, {r: (lambda r=r: protocol.align_rows(eps[r], ids[r], hub, spokes, min_rows))
                               for r in roles})


BAD = REFUSED


@pytest.mark.parametrize("kind", BAD)
def test_a_bad_point_from_a_spoke_stops_the_hub_naming_the_spoke(kind):
    ids = {"B": [b"%d" % i for i in range(40)], "A": [b"%d" % i for i in range(20, 60)],
           "C": [b"%d" % i for i in range(10, 50)]}
    valid = group.hash_to_group([b"x"], b"d")
    tamper = {"role": "C", "message": "psi_spoke_points", "index": 17, "bad": bad_points(valid)[kind]}
    with pytest.raises(ProtocolError, match="B: C sent an invalid point \\(item 17 of 'psi_spoke_points'\\)"):
        run_protocol(ids, "B", tamper)


@pytest.mark.parametrize("kind", ["zero (order 2)", "order 8", "non-canonical", "on the twist"])
def test_a_bad_point_from_the_hub_stops_the_spoke_naming_the_hub(kind):
    ids = {"B": [b"%d" % i for i in range(40)], "A": [b"%d" % i for i in range(20, 60)]}
    valid = group.hash_to_group([b"x"], b"d")
    tamper = {"role": "B", "message": "psi_hub_points", "index": 3, "bad": bad_points(valid)[kind]}
    with pytest.raises(ProtocolError, match="A: B sent an invalid point \\(item 3 of 'psi_hub_points'\\)"):
        run_protocol(ids, "B", tamper)



class Garbling(Endpoint):
    """An endpoint whose ``psi_spoke_points`` chunks are replaced by ``fields``."""

    def __init__(self, *args, fields: dict, **kwargs):
        super().__init__(*args, **kwargs)
        self.garbled = fields

    def send(self, to, name, kind, **fields):
        return super().send(to, name, kind, **(self.garbled if name == "psi_spoke_points" else fields))


@pytest.mark.parametrize("fields", [{"start": 0}, {"data": b"\x09" + bytes(31)}, {"start": "0", "data": b"\x09" * 32},
                                    {"start": 5, "data": b"\x09" * 32}],
                         ids=["no data", "no start", "start as text", "a chunk out of order"])
def test_a_malformed_chunk_from_a_spoke_is_named_with_the_spoke(fields):
    roles = ["B", "A", "C"]
    network = InProcessNetwork(roles)
    eps = {r: (Garbling if r == "C" else Endpoint)(network.transport(r), [p for p in roles if p != r],
                                                   **({"fields": fields} if r == "C" else {})) for r in roles}
    ids = {r: [b"%d" % i for i in range(20)] for r in roles}
    with pytest.raises(ProtocolError, match="B: C sent a malformed 'psi_spoke_points' chunk"):
        run_roles(network, {r: (lambda r=r: protocol.align_rows(eps[r], ids[r], "B", ["A", "C"])) for r in roles})

def test_points_stream_in_chunks_and_results_match(monkeypatch):
    monkeypatch.setattr(protocol, "CHUNK_IDS", 16)
    ids = {"B": [b"%d" % i for i in range(100)], "A": [b"%d" % i for i in range(50, 130)],
           "C": [b"%d" % i for i in range(0, 200, 2)]}
    rows = run_protocol(ids, "B")
    common = [ids["B"][i] for i in rows["B"]]
    assert set(common) == {b"%d" % i for i in range(50, 100, 2)}
    for party in ("A", "C"):
        assert [ids[party][i] for i in rows[party]] == common


def test_duplicate_ids_are_refused_by_the_protocol_too():
    ids = {"B": [b"1", b"2", b"1"], "A": [b"1", b"2"]}
    with pytest.raises(DataError, match=r"party B: id '1' appears twice \(rows 0 and 2\)"):
        run_protocol(ids, "B")


# -- what crosses the transport ------------------------------------------------------------------
def test_no_message_carries_an_id_or_an_unblinded_hash():
    id_lists = random_sets((120, 100, 90), 40, 10 ** 9, seed=5, as_text=True)
    frames = frames_for(id_lists, ["B", "A", "C"])
    transcript = Transcript(keep_payloads=True)
    vfl.psi.intersect(frames, "id", label="y", transcript=transcript)
    ids = [vfl.psi.canonical_id(v).encode() for ids in id_lists for v in ids]

    messages = transcript.messages()
    setup = next(m for _, _, m in messages if m.name == "psi_setup")["salt_shares"]
    shares = [setup[i:i + 32] for i in range(0, len(setup), 32)]
    assert len(shares) == 3 and all(m["salt_share"] in shares for _, _, m in messages if m.name == "psi_hello")
    salt = protocol._combine_salt(shares)
    unblinded = group.split(group.hash_to_group(ids, protocol._HASH_TAG + salt))
    forbidden = set(ids) | {hashlib.sha512(v).digest() for v in ids} | set(unblinded)
    forbidden |= {hashlib.sha256(v).digest() for v in ids}
    payloads = transcript.payloads
    assert len(payloads) == len(messages) > 10
    for frame in payloads:
        for secret in forbidden:
            assert secret not in frame
    # every field that carries points carries blinded ones only
    sent_points = {p for _, _, m in messages if m.name in ("psi_hub_points", "psi_spoke_points")
                   for p in group.split(m["data"])}
    assert len(sent_points) == 120 + 100 + 90 and not sent_points & set(unblinded)


def test_the_curve_or_twist_bit_of_a_peers_points_tells_nothing_about_its_ids():
    """The attack docs/psi.md describes: a u-coordinate's curve (or twist) is public and blinding keeps it, so
    with ids hashed straight to u-coordinates a party could test one bit of ``H(guess)`` per blinded point.

    Against vfl it fails: every point a party receives lies on the curve, so the bit is the same for every id
    (checked on the real messages); against the straight hash the bit splits a party's ids about in half.
    """
    id_lists = random_sets((200, 180), 100, 10 ** 9, seed=8, as_text=True)
    transcript = Transcript(keep_payloads=True)
    vfl.psi.intersect(frames_for(id_lists, ["B", "A"]), "id", label="y", transcript=transcript)
    received = [p for _, _, m in transcript.messages() if m.name in ("psi_hub_points", "psi_spoke_points")
                for p in group.split(m["data"])]
    assert len(received) == 380
    assert all(is_square(int.from_bytes(p, "little")) for p in received)   # one value for every id: no information
    straight = [int.from_bytes(hashlib.sha512(str(v).encode()).digest()[:32], "little") & ((1 << 255) - 1)
                for v in id_lists[0]]
    on_curve = sum(is_square(u % (2 ** 255 - 19)) for u in straight)
    assert 60 < on_curve < 140              # the straight hash would leak this bit for each of the 200 ids


# -- a model trained after PSI equals one trained on the plaintext join ----------------------------
def test_model_after_psi_equals_model_on_the_plaintext_join():
    frame_a, frame_b, _, _ = make_vertical(n_rows=90, seed=11)
    frame_a = pd.concat([frame_a.iloc[:75], frame_a.iloc[:20].assign(id=lambda f: f["id"] + 5000)])
    frame_b = frame_b.iloc[10:].sample(frac=1.0, random_state=3)            # B: rows 10..89, shuffled
    frame_a = frame_a.sample(frac=1.0, random_state=4).reset_index(drop=True)
    aligned = vfl.psi.intersect({"A": frame_a, "B": frame_b}, "id", label="y", min_rows=30)

    order = [int(v) for v in aligned["B"]["id"]]
    assert sorted(order) == list(range(1010, 1075))
    join = frame_a.merge(frame_b, on="id", how="inner").set_index("id").loc[order].reset_index()
    plain_a = join[["id"] + [c for c in frame_a.columns if c != "id"]]
    plain_b = join[["id"] + [c for c in frame_b.columns if c != "id"]]
    for plain, psi_frame in ((plain_a, aligned["A"]), (plain_b, aligned["B"])):
        pd.testing.assert_frame_equal(psi_frame.drop(columns="id"), plain.drop(columns="id"))

    settings = dict(learning_rate=0.2, max_iter=3, batch_size=None, tol=None, key_bits=1024, insecure=True,
                    random_state=0)
    if "init" in inspect.signature(VerticalLogisticRegression).parameters:
        settings["init"] = "zeros"      # both fits from the same start
    after_psi = VerticalLogisticRegression(**settings).fit(VerticalDataset(aligned, label="y", id_column="id"))
    plain = VerticalLogisticRegression(**settings).fit(
        VerticalDataset({"A": plain_a.astype({"id": str}), "B": plain_b.astype({"id": str})}, label="y",
                        id_column="id"))
    for party in ("A", "B"):
        np.testing.assert_array_equal(after_psi.coef_[party], plain.coef_[party])
    assert after_psi.intercept_ == plain.intercept_
    np.testing.assert_array_equal(after_psi.loss_curve_, plain.loss_curve_)
    assert np.all(after_psi.coef_["A"] != 0)


# -- over TLS, as two processes (the benchmark's set-up) ---------------------------------------------
def test_two_processes_over_tls_find_half_of_the_ids():
    from benchmarks.__main__ import parse_args
    from benchmarks.psi import party_ids, run_size

    assert parse_args(["--psi-sizes", "1000"]).psi
    assert len(set(party_ids("A", 1000)) & set(party_ids("B", 1000))) == 500
    reports = run_size(1000, progress=False)
    assert {r["intersection"] for r in reports.values()} == {500}
    assert reports["A"]["bytes_sent"] >= 1000 * (32 + 16)      # its points, then digests of B's
    assert reports["B"]["bytes_sent"] >= 1000 * 32


def test_with_two_spokes_each_spoke_is_told_the_final_intersection_only():
    """Hub B, spokes A and C: A shares 60 ids with B, and 30 of them are C's too; A is told 30 positions, never
    its 60 pairwise matches, and receives nothing but the setup, B's blinded points and that result."""
    id_lists = [list(range(100)), list(range(60)), list(range(30, 90))]
    frames = frames_for([[str(v) for v in ids] for ids in id_lists], ["B", "A", "C"])
    transcript = Transcript(keep_payloads=True)
    aligned = vfl.psi.intersect(frames, "id", label="y", transcript=transcript)
    assert sorted(aligned["A"]["id"].astype(int)) == list(range(30, 60))
    to_a = [m for _, to, m in transcript.messages() if to == "A"]
    assert {m.name for m in to_a} == {"psi_setup", "psi_hub_points", "psi_result"}
    (result,) = [m for m in to_a if m.name == "psi_result"]
    assert result["size"] == 30 and len(result["positions"]) == 30
