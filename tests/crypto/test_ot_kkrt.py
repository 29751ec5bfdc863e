"""The numbers of KKRT's PSI: the bit transpose, base OTs, the OT-extension identity, cuckoo tables, outputs."""

import os

import numpy as np
import pytest
from nacl import bindings as sodium

from vfl import ProtocolError
from vfl.crypto import cuckoo, kkrt, ot


def naive_transpose(bits: np.ndarray) -> np.ndarray:
    """Bit by bit, the reference: unpack, transpose, pack (least significant bit first)."""
    return np.packbits(np.unpackbits(bits, axis=1, bitorder="little").T, axis=1, bitorder="little")


@pytest.mark.parametrize("rows,cols", [(8, 8), (64, 512), (512, 1024), (24, 40), (512, 65536)])
def test_transpose_equals_the_bit_by_bit_reference(rows, cols):
    bits = np.frombuffer(os.urandom(rows * cols // 8), np.uint8).reshape(rows, cols // 8)
    out = ot.transpose(bits)
    assert out.shape == (cols, rows // 8)
    np.testing.assert_array_equal(out, naive_transpose(bits))
    np.testing.assert_array_equal(ot.transpose(out), bits)


def test_transpose_takes_a_strided_view():
    buffer = np.frombuffer(os.urandom(64 * 48), np.uint8).reshape(64, 48)
    view = buffer[:, :32]                          # rows 48 bytes apart, as Streams returns them
    np.testing.assert_array_equal(ot.transpose(view), naive_transpose(np.ascontiguousarray(view)))


def test_base_ots_give_the_receiver_the_seed_of_its_choice_only():
    a, big_a = ot.sender_start()
    choices = ot.random_bits(256)
    assert 80 < choices.sum() < 176
    points, chosen = ot.receiver_choose(big_a, choices)
    seeds0, seeds1 = ot.sender_seeds(a, big_a, points, 256)
    for c, mine, s0, s1 in zip(choices, chosen, seeds0, seeds1):
        assert len(mine) == ot.SEED_BYTES and s0 != s1
        assert mine == (s1 if c else s0)
    assert len(set(seeds0) | set(seeds1)) == 512


@pytest.mark.parametrize("bad", ["identity", "small order", "off the curve", "short"])
def test_base_ots_refuse_a_bad_point_by_position(bad):
    a, big_a = ot.sender_start()
    points, _ = ot.receiver_choose(big_a, ot.random_bits(8))
    forged = {"identity": (1).to_bytes(32, "little"),
              "small order": bytes.fromhex("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a"),
              "off the curve": (2).to_bytes(32, "little"),
              "short": bytes(31)}[bad]
    assert not (len(forged) == 32 and sodium.crypto_core_ed25519_is_valid_point(forged))
    tampered = points[:3 * 32] + forged + points[4 * 32:]
    with pytest.raises(ProtocolError, match="OT point 3 is not a point" if len(forged) == 32 else "bytes"):
        ot.sender_seeds(a, big_a, tampered, 8)
    with pytest.raises(ProtocolError, match="sender's point A"):
        ot.receiver_choose(forged, ot.random_bits(8))


def test_the_extension_gives_q_equal_t_xor_code_and_s():
    """IKNP/KKRT's identity, row by row: q_j = t_j xor (C(r_j) and s)."""
    a, big_a = ot.sender_start()
    s = ot.random_bits(kkrt.CODE_BITS)
    points, chosen = ot.receiver_choose(big_a, s)
    seeds0, seeds1 = ot.sender_seeds(a, big_a, points, kkrt.CODE_BITS)
    bins = 128
    code = np.frombuffer(os.urandom(bins * kkrt.CODE_BYTES), np.uint8).reshape(bins, kkrt.CODE_BYTES)
    t = ot.Streams(seeds0).next(bins // 8).copy()
    u = t ^ ot.Streams(seeds1).next(bins // 8) ^ ot.transpose(code)
    q = ot.Streams(chosen).next(bins // 8) ^ (u & (s * np.uint8(0xFF))[:, None])
    s_row = np.packbits(s, bitorder="little")
    np.testing.assert_array_equal(ot.transpose(q), ot.transpose(t) ^ (code & s_row))


def test_streams_continue_where_they_stopped():
    seeds = [os.urandom(16) for _ in range(3)]
    whole = ot.Streams(seeds).next(96).copy()
    parts = ot.Streams(seeds)
    np.testing.assert_array_equal(np.hstack([parts.next(32).copy(), parts.next(64).copy()]), whole)


# -- cuckoo hashing -------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 10, 100, 1000, 4096, 1 << 16])
def test_small_tables_meet_the_2_to_the_minus_40_bound(n):
    m = cuckoo.table_size(n)
    assert m % 8 == 0 and cuckoo.failure_bound(n, m) <= -40
    if n >= 2:
        assert cuckoo.failure_bound(n, m - 8) > -40 or m - 8 < n      # the fewest bins, to a multiple of 8


@pytest.mark.parametrize("n", [(1 << 16) + 1, 100_000, 1_000_000])
def test_large_tables_at_1_57_n_meet_the_bound(n):
    m = cuckoo.table_size(n)
    assert m >= 1.57 * n and cuckoo.failure_bound(n, m) <= -40


@pytest.mark.slow
def test_the_1_57_ratio_meets_the_bound_at_ten_million():
    assert cuckoo.failure_bound(10 ** 7, cuckoo.table_size(10 ** 7)) <= -60


def test_place_puts_each_item_in_one_of_its_bins_alone():
    n = 20_000
    m = cuckoo.table_size(n)
    bins = np.frombuffer(os.urandom(8 * 3 * n), np.uint64).reshape(n, 3) % np.uint64(m)
    table, chosen = cuckoo.place(bins, m)
    placed = table[table >= 0]
    assert len(placed) == n and len(np.unique(placed)) == n
    np.testing.assert_array_equal(table[bins[np.arange(n), chosen].astype(np.int64)], np.arange(n))


def test_place_uses_the_exact_search_when_the_rounds_run_out(monkeypatch):
    monkeypatch.setattr(cuckoo, "ROUNDS", 0)
    bins = np.array([[0, 1, 2], [0, 0, 0], [1, 1, 0], [3, 3, 3], [2, 3, 4]])
    table, chosen = cuckoo.place(bins, 5)
    assert sorted(table[table >= 0]) == [0, 1, 2, 3, 4]
    assert all(table[bins[i, chosen[i]]] == i for i in range(5))


def test_place_fails_when_no_placement_exists():
    bins = np.array([[0, 1, 0], [1, 0, 1], [0, 0, 1], [5, 6, 7]])      # three items, two bins
    with pytest.raises(cuckoo.CuckooFailure, match="no placement"):
        cuckoo.place(bins, 8)


# -- ids, code words, outputs ---------------------------------------------------------------------
def test_digests_are_salted_and_bins_in_range():
    ids = [b"%d" % i for i in range(1000)]
    keys1, bins1 = kkrt.digest_ids(ids, b"salt-1", 1500)
    keys2, _ = kkrt.digest_ids(ids, b"salt-2", 1500)
    assert keys1.shape == (1000, 16) and bins1.shape == (1000, 3)
    assert bins1.min() >= 0 and bins1.max() < 1500
    assert not np.any(np.all(keys1 == keys2, axis=1))
    again, _ = kkrt.digest_ids(ids[::-1], b"salt-1", 1500)
    np.testing.assert_array_equal(again[::-1], keys1)


def test_code_words_depend_on_the_hash_function_and_are_far_apart():
    keys, _ = kkrt.digest_ids([b"a", b"b"], b"salt", 64)
    key = kkrt.code_key(b"salt")
    rows = np.vstack([kkrt.code_rows(key, keys, f) for f in range(3)])
    assert rows.shape == (6, 64)
    distances = [np.unpackbits(rows[i] ^ rows[j]).sum() for i in range(6) for j in range(i)]
    assert min(distances) > 128
    np.testing.assert_array_equal(kkrt.code_rows(key, keys, np.array([1, 2])), rows[[2, 5]])


def test_output_length_keeps_false_matches_below_2_to_the_minus_40():
    assert kkrt.output_bytes(10 ** 6, 10 ** 6) == 10
    assert kkrt.output_bytes(10 ** 7, 10 ** 7) == 11
    assert kkrt.output_bytes(100, 100) == 8 and kkrt.output_bytes(1, 1) == 8     # one 8-byte sort key at least
    for n_r, n_s in ((1, 1), (10 ** 6, 5), (3 * 10 ** 7, 10 ** 7)):
        assert 8 * kkrt.output_bytes(n_r, n_s) - np.log2(n_r * n_s) >= 40


def test_sort_keys_order_values_as_their_bytes():
    values = np.frombuffer(bytearray(os.urandom(500 * 11)), np.uint8).reshape(500, 11)
    values[1, :8] = values[0, :8]                    # a tie in the first eight bytes
    hi, lo = kkrt.sort_keys(values)
    order = np.lexsort((lo, hi))
    assert [bytes(v) for v in values[order]] == sorted(bytes(v) for v in values)
