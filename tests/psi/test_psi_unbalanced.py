"""The unbalanced PSI: the DH protocol's rows, caches reused and rebuilt, bad caches refused, what each side sees."""

import hashlib
import os
import stat

import numpy as np
import pandas as pd
import pytest

import vfl.psi
from vfl import DataError, ProtocolError
from vfl.crypto import group, upsi
from vfl.protocols import psi_unbalanced, upsi_cache
from vfl.transport import Transcript

from psi.test_psi import frames_for, random_sets
from vfl_net_helpers import federation_certs  # noqa: F401 - a fixture


def run(frames, cache_dir, **kw):
    return vfl.psi.intersect(frames, "id", label="y", protocol="unbalanced", cache_dir=cache_dir, **kw)


def same_rows_as_dh(frames, aligned):
    reference = vfl.psi.intersect(frames, "id", label="y")
    names = list(frames)
    assert sorted(aligned[names[0]]["id"]) == sorted(reference[names[0]]["id"])
    for name in names:                                   # one common order, rows kept whole
        assert list(aligned[name]["id"]) == list(aligned[names[0]]["id"])
        expected = reference[name].set_index("id").loc[list(aligned[name]["id"])].reset_index()
        pd.testing.assert_frame_equal(aligned[name], expected[aligned[name].columns], check_dtype=False)


# -- the OPRF's numbers ----------------------------------------------------------------------------------
def test_the_blinded_query_gives_the_large_partys_own_outputs():
    key, key_id = upsi.new_key()
    ids = [b"a", b"bb", b"7"] + [os.urandom(9) for _ in range(40)]
    full = upsi.outputs(ids, key, key_id)
    for _ in range(3):
        r, c = upsi.blinding()
        inverse = int.from_bytes(c, "little") * int.from_bytes(r, "little") % group.ORDER
        assert inverse in (1, group.ORDER - 1)
        assert c[0] & 7 == 0 and c[31] & 0xC0 == 0x40            # clamped: X25519 takes it as it is
        seeds, points = upsi.query(ids, key_id, r)
        assert points != group.hash_to_group(ids, upsi.domain(key_id))
        unblinded = upsi.unblind(upsi.evaluate(points, key), c)
        assert upsi.finalize(seeds, unblinded, 16) == full
        assert upsi.finalize(seeds, unblinded, 10) == b"".join(full[i:i + 10] for i in range(0, len(full), 16))


@pytest.mark.parametrize("n_large,n_small,width", [(10 ** 7, 10 ** 4, 10), (10 ** 6, 10 ** 6, 11), (100, 10, 8),
                                                   (2 ** 40, 2 ** 40, 16)])
def test_the_output_width_bounds_a_false_match_by_2_to_the_minus_40(n_large, n_small, width):
    assert upsi.output_width(n_large, n_small) == width
    assert n_large * n_small * 2.0 ** (41 - 8 * width) <= 1.0


# -- the same rows as the DH protocol ------------------------------------------------------------------
@pytest.mark.parametrize("names,sizes,common", [
    (["B", "A"], (400, 60), 25),          # the hub (label party) is the large party
    (["B", "A"], (50, 300), 30),          # the spoke is
    (["B", "A"], (80, 80), 80),           # a tie: the hub; the same ids in other orders
    (["B", "A", "C"], (300, 40, 500), 20),   # two spokes: the hub large with A, small with C
])
def test_the_rows_equal_the_dh_protocols(tmp_path, names, sizes, common):
    frames = frames_for(random_sets(sizes, common, 10 ** 9, seed=sum(sizes), as_text=len(names) == 3), names)
    aligned = run(frames, tmp_path)
    assert aligned[names[0]].attrs["psi"]["shared"] == common
    same_rows_as_dh(frames, aligned)


def test_no_overlap_is_refused_with_the_sizes(tmp_path):
    frames = frames_for([list(range(100)), list(range(200, 230))], ["B", "A"])
    with pytest.raises(DataError, match="intersection is empty.*B: 100, A: 30"):
        run(frames, tmp_path)


def test_duplicate_and_empty_sets_are_refused_as_today(tmp_path):
    frames = frames_for([[1, 2, 3, 2], [1, 2]], ["B", "A"])
    with pytest.raises(DataError, match=r"party B: id '2' appears twice \(rows 1 and 3\)"):
        run(frames, tmp_path)
    frames = frames_for([[1, 2, 3], [1]], ["B", "A"])
    frames["A"] = frames["A"].iloc[:0]
    with pytest.raises(DataError, match="party A: no ids to intersect|too few rows"):
        run(frames, tmp_path)
    assert not any(tmp_path.rglob("*.bin"))              # refused before any cache was written


# -- the caches ---------------------------------------------------------------------------------------
def two_party(seed=3, large=2000, small=50, common=20):
    return frames_for(random_sets((large, small), common, 10 ** 9, seed=seed), ["B", "A"])


def test_the_second_run_reuses_both_caches_and_never_evaluates_the_large_set_again(tmp_path, monkeypatch):
    frames = two_party()
    first = run(frames, tmp_path)
    assert first["B"].attrs["psi"]["cache"]["built"] and first["A"].attrs["psi"]["cache"]["fetched"] == ["B"]
    key_file, copy = upsi_cache.own_path(tmp_path / "B"), upsi_cache.peer_path(tmp_path / "A", "B")
    for path in (key_file, copy):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "B").stat().st_mode) == 0o700
    before = key_file.read_bytes(), copy.read_bytes()

    def no_whole_set(*args, **kwargs):
        raise AssertionError("the large set was evaluated again")
    monkeypatch.setattr(upsi, "outputs", no_whole_set)
    transcript = Transcript(keep_payloads=True)
    second = run(frames, tmp_path, transcript=transcript)
    assert second["B"].attrs["psi"]["cache"] == {"built": False, "fetched": [], "notes": [], "large": {"A": "B"}}
    assert second["A"].attrs["psi"]["cache"]["fetched"] == []
    assert (key_file.read_bytes(), copy.read_bytes()) == before
    assert "upsi_outputs" not in {m.name for _, _, m in transcript.messages()}
    assert list(second["A"]["id"].sort_values()) == list(first["A"]["id"].sort_values())


def test_a_changed_set_rebuilds_with_a_fresh_key_and_the_partner_fetches_again(tmp_path):
    frames = two_party()
    run(frames, tmp_path)
    old = upsi_cache.read_own(tmp_path / "B", "B")
    frames["B"] = pd.concat([frames["B"], frames["B"].iloc[:1].assign(id=[123])], ignore_index=True)
    aligned = run(frames, tmp_path)
    b, a = aligned["B"].attrs["psi"]["cache"], aligned["A"].attrs["psi"]["cache"]
    assert b["built"] and "its ids have changed" in b["notes"][0] and "unbalanced-psi-key.bin" in b["notes"][0]
    assert a["fetched"] == ["B"] and "is stale (it belongs to an older key of B)" in a["notes"][0]
    assert str(upsi_cache.peer_path(tmp_path / "A", "B")) in a["notes"][0]
    new = upsi_cache.read_own(tmp_path / "B", "B")
    assert new.key != old.key and new.key_id != old.key_id
    same_rows_as_dh(frames, aligned)


def test_a_new_key_alone_makes_the_partner_fetch_again(tmp_path):
    frames = two_party()
    run(frames, tmp_path)
    upsi_cache.own_path(tmp_path / "B").unlink()              # the bank rotates its key
    aligned = run(frames, tmp_path)
    assert aligned["B"].attrs["psi"]["cache"]["built"] and aligned["A"].attrs["psi"]["cache"]["fetched"] == ["B"]


def test_the_set_digest_frames_every_list_apart_and_is_cheap_to_recompute():
    digest = upsi_cache.set_digest
    assert digest([b"a", b"bc"]) != digest([b"ab", b"c"]) != digest([b"a", b"b", b"c"])
    assert digest([b"a", b""]) != digest([b"a"]) and digest([b""]) != digest([b"", b""])
    assert digest([b"a\0", b"b"]) != digest([b"a", b"\0b"])          # NUL in an id: framed by lengths
    assert digest([b"a\0b"]) != digest([b"a", b"b"])
    many = [b"%d" % i for i in range(10_000)]                          # several chunks, and a short last one
    assert digest(many) == digest(list(many)) != digest(many[:-1] + [b"x"])
    assert all(d.startswith(upsi_cache.DIGEST_SCHEME + ":") for d in (digest(many), digest([b"a\0"])))
    with pytest.raises(TypeError):
        digest([b"a", 3])


def test_a_key_file_with_an_older_kind_of_digest_is_rebuilt_saying_why(tmp_path):
    frames = two_party()
    run(frames, tmp_path)
    old = upsi_cache.read_own(tmp_path / "B", "B")
    upsi_cache._write(old.path, {"format": upsi_cache.FORMAT, "kind": upsi_cache.OWN_KIND, "party": "B",
                                 "rows": len(old.rows), "digest": old.digest.split(":", 1)[1],
                                 "width": upsi.FULL_BYTES},
                      [old.key, old.key_id, old.outputs.tobytes(), old.rows.tobytes()])
    aligned = run(frames, tmp_path)
    b = aligned["B"].attrs["psi"]["cache"]
    assert b["built"] and "older kind" in b["notes"][0] and str(old.path) in b["notes"][0]
    assert upsi_cache.read_own(tmp_path / "B", "B").key != old.key
    same_rows_as_dh(frames, aligned)


def test_the_large_party_finds_matched_prefixes_among_its_full_outputs():
    rng = np.random.default_rng(5)
    full = np.unique(rng.integers(0, 3, size=(400, upsi.FULL_BYTES), dtype=np.uint8), axis=0)   # zero bytes, ties
    outputs = np.ascontiguousarray(full).view(f"S{upsi.FULL_BYTES}").reshape(-1)
    cache = upsi_cache.OwnCache(None, b"", b"", "", outputs, np.arange(len(full), dtype="<u4"))
    rows = [bytes(r) for r in full]
    for width in (8, 10, 16):
        wanted = [r[:width] for r in rows[::7]] + [bytes(rng.integers(0, 3, width, dtype=np.uint8))
                                                   for _ in range(50)]
        at, found, ambiguous = cache.find(np.array(wanted, dtype=f"V{width}").view(f"S{width}"))
        for k, prefix in enumerate(wanted):
            hits = [i for i, r in enumerate(rows) if r[:width] == prefix]
            assert found[k] == bool(hits) and (not hits or (at[k] == hits[0] and ambiguous[k] == (len(hits) > 1)))


def damage(path, where=-40):
    data = bytearray(path.read_bytes())
    data[where] ^= 1
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("whose", ["large", "small"])
def test_a_damaged_cache_is_refused_naming_the_file(tmp_path, whose):
    frames = two_party()
    run(frames, tmp_path)
    path = upsi_cache.own_path(tmp_path / "B") if whose == "large" else upsi_cache.peer_path(tmp_path / "A", "B")
    damage(path)
    with pytest.raises(DataError, match=f"{path} is damaged .*remove it and run again"):
        run(frames, tmp_path)
    path.write_bytes(b"not a cache")
    with pytest.raises(DataError, match=f"{path} is not an unbalanced-PSI cache file"):
        run(frames, tmp_path)
    path.unlink()
    run(frames, tmp_path)                                    # removed: rebuilt


def test_a_foreign_or_exposed_cache_is_refused_naming_the_file(tmp_path):
    frames = two_party()
    run(frames, tmp_path)
    ours = upsi_cache.own_path(tmp_path / "A")
    ours.write_bytes(upsi_cache.own_path(tmp_path / "B").read_bytes())   # B's key file in A's folder
    os.chmod(ours, 0o600)
    with pytest.raises(DataError, match=f"{ours} belongs to party 'B', not 'A': a foreign file"):
        upsi_cache.read_own(tmp_path / "A", "A")
    copy = upsi_cache.peer_path(tmp_path / "A", "B")
    copy.write_bytes(upsi_cache.own_path(tmp_path / "B").read_bytes())
    with pytest.raises(DataError, match=f"{copy} holds 'own-key', not 'peer-outputs': a foreign file"):
        run(frames, tmp_path)
    copy.unlink()
    key_file = upsi_cache.own_path(tmp_path / "B")
    os.chmod(key_file, 0o644)
    with pytest.raises(DataError, match=f"{key_file} holds party B's secret PSI key and is readable by others"):
        run(frames, tmp_path)


def test_a_format_version_from_elsewhere_is_refused(tmp_path, monkeypatch):
    frames = two_party()
    monkeypatch.setattr(upsi_cache, "FORMAT", 99)
    run(frames, tmp_path)
    monkeypatch.setattr(upsi_cache, "FORMAT", 1)
    with pytest.raises(DataError, match="has format version 99; this vfl reads version 1"):
        run(frames, tmp_path)


# -- what each side receives --------------------------------------------------------------------------------
@pytest.mark.parametrize("large", ["B", "A"])
def test_the_large_party_receives_blinded_points_and_the_matched_outputs_only(tmp_path, large):
    sizes = (600, 40) if large == "B" else (40, 600)
    id_lists = random_sets(sizes, 15, 10 ** 9, seed=21, as_text=True)
    small = "A" if large == "B" else "B"
    transcript = Transcript(keep_payloads=True)
    run(frames_for(id_lists, ["B", "A"]), tmp_path, transcript=transcript)
    own = upsi_cache.read_own(tmp_path / large, large)
    ids = [vfl.psi.canonical_id(v).encode() for ids in id_lists for v in ids]
    small_ids = [vfl.psi.canonical_id(v).encode() for v in id_lists[["B", "A"].index(small)]]
    unblinded = set(group.split(group.hash_to_group(ids, upsi.domain(own.key_id))))
    forbidden = set(ids) | unblinded | {hashlib.sha256(v).digest() for v in ids} \
        | {hashlib.sha512(v).digest()[:32] for v in ids}
    messages = transcript.messages()
    for (_, to, message), frame in zip(messages, transcript.payloads):
        if to == large:
            for secret in forbidden:
                assert secret not in frame

    to_large = [m for _, to, m in messages if to == large]
    expected = {"upsi_want", "upsi_query", "upsi_matches", "upsi_match_chunk"}
    expected |= {"upsi_hello"} if large == "B" else {"upsi_setup", "upsi_result"}
    assert {m.name for m in to_large} == expected
    queried = [p for m in to_large if m.name == "upsi_query" for p in group.split(m["data"])]
    assert len(queried) == len(small_ids) and not set(queried) & unblinded
    (count,) = [m["count"] for m in to_large if m.name == "upsi_matches"]
    matched = b"".join(m["data"] for m in to_large if m.name == "upsi_match_chunk")
    width = len(matched) // count
    assert count == 15
    shared = set(id_lists[0]) & set(id_lists[1])
    outs = upsi.outputs([vfl.psi.canonical_id(v).encode() for v in sorted(shared)], own.key, own.key_id)
    assert sorted(matched[i:i + width] for i in range(0, len(matched), width)) == \
        sorted(outs[i:i + width] for i in range(0, len(outs), 16))

    to_small = {m.name for _, to, m in messages if to == small}
    assert to_small == {"upsi_offer", "upsi_outputs", "upsi_evaluated"} | \
        ({"upsi_setup", "upsi_result"} if small == "A" else {"upsi_hello"})


def test_a_bad_point_from_the_small_party_stops_the_large_one_naming_it(tmp_path, monkeypatch):
    frames = two_party()
    real = upsi.query

    def twisted(ids, key_id, r):
        seeds, points = real(ids, key_id, r)
        return seeds, points[:32] + (2).to_bytes(32, "little") + points[64:]     # u = 2 is on the twist
    monkeypatch.setattr(upsi, "query", twisted)
    with pytest.raises(ProtocolError, match=r"A sent an invalid point \(item 1 of 'upsi_query'\)"):
        run(frames, tmp_path)


def test_unsorted_outputs_from_the_large_party_are_refused(tmp_path, monkeypatch):
    frames = two_party()
    real = upsi_cache.OwnCache.prefixes
    monkeypatch.setattr(upsi_cache.OwnCache, "prefixes", lambda self, w: real(self, w)[::-1].copy())
    with pytest.raises(ProtocolError, match="B sent its outputs out of order"):
        run(frames, tmp_path)
    assert not upsi_cache.peer_path(tmp_path / "A", "B").exists()


def test_the_large_party_is_the_one_with_more_rows_the_hub_on_a_tie():
    assert psi_unbalanced.large_party({"B": 10, "A": 10}, "B", "A") == "B"
    assert psi_unbalanced.large_party({"B": 9, "A": 10}, "B", "A") == "A"
    assert psi_unbalanced.large_party({"B": 11, "A": 10}, "B", "A") == "B"


def test_prepare_builds_the_key_offline_and_a_run_uses_it(tmp_path):
    frames = two_party()
    ids = [vfl.psi.canonical_id(v).encode() for v in frames["B"]["id"]]
    made = psi_unbalanced.prepare(ids, "B", tmp_path / "B")
    assert made["built"] and made["rows"] == len(ids)
    aligned = run(frames, tmp_path)
    assert not aligned["B"].attrs["psi"]["cache"]["built"]
    assert not psi_unbalanced.prepare(ids, "B", tmp_path / "B")["built"]


# -- the configuration key ----------------------------------------------------------------------------------
def test_the_config_key_is_checked_and_shared(tmp_path, federation_certs):
    from vfl.deploy.config import load_config
    from vfl.errors import ConfigurationError
    from vfl_net_helpers import _free_ports, write_federation_file

    tls = federation_certs[0]
    path = write_federation_file(tmp_path / "f.toml", tls, _free_ports(3), data={"psi_protocol": "unbalanced"})
    config = load_config(path)
    assert config.psi_protocol == "unbalanced" and config.shared("train")["psi_protocol"] == "unbalanced"
    assert "psi_protocol" not in load_config(write_federation_file(tmp_path / "g.toml", tls, _free_ports(3))
                                             ).shared("train")
    bad = write_federation_file(tmp_path / "h.toml", tls, _free_ports(3), data={"psi_protocol": "rr22"})
    with pytest.raises(ConfigurationError, match=r"psi_protocol must be one of \['dh', 'kkrt', 'unbalanced'\]"):
        load_config(bad)
    other = write_federation_file(tmp_path / "i.toml", tls, _free_ports(3),
                                  data={"psi_protocol": "unbalanced", "align": "same-ids"})
    with pytest.raises(ConfigurationError, match="align = 'same-ids' does not run one"):
        load_config(other)
