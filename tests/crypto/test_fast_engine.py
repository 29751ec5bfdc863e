"""The fast engine against the simple one and against phe's own decryption (correctness only, no timing)."""

import gmpy2
import numpy as np
import pytest
from phe import paillier

from vfl.crypto import Context, FastEngine, PublicKey, SimpleEngine, generate_keypair, get_engine
from vfl.crypto import djn, multiexp

SIMPLE = SimpleEngine()


@pytest.fixture(scope="module")
def keys(keypair_1024):
    return keypair_1024


@pytest.fixture(scope="module")
def fast():
    return FastEngine()


def signed(residue, n):
    return residue - n if residue > n // 2 else residue


def test_fast_engine_is_the_default():
    assert get_engine().name == "fast"
    assert get_engine("simple").name == "simple"


def test_hs_is_derived_from_n_and_is_an_nth_residue(keys):
    pk, sk = keys
    hs = djn.derive_hs(pk.n)
    assert hs == djn.derive_hs(int(pk.n)) == pk.h_s            # deterministic, every party agrees
    assert PublicKey.from_bytes(pk.to_bytes()).h_s == hs       # the wire form needs only n
    assert PublicKey.from_phe(pk.to_phe()).h_s == hs           # and so does a key imported from phe
    assert 1 < hs < pk.nsquare and gmpy2.gcd(hs, pk.n) == 1
    assert sk.to_phe().raw_decrypt(int(hs)) == 0               # an n-th residue: an encryption of 0


def test_comb_powers_equal_powmod(keys):
    pk, _ = keys
    hs, comb = djn.djn_tables(pk.n)
    assert comb.bits >= pk.key_bits // 2                        # r has at least half the modulus length
    rows = comb.random_indices(4)
    for row, power in zip(rows, comb.powers(rows)):
        assert power == gmpy2.powmod(hs, comb.exponent(row), pk.nsquare)
    _, large = djn.djn_tables(pk.n, 14, 8)                    # the table for long calls
    assert large.bits >= pk.key_bits // 2 and large.cells < comb.cells
    rows = large.random_indices(2)
    for row, power in zip(rows, large.powers(rows)):
        assert power == gmpy2.powmod(hs, large.exponent(row), pk.nsquare)
    # a small table with a ragged last block, on a small modulus
    small = djn.FixedBaseComb(7, 1000003, 23, rows=5, blocks=3)
    rows = small.random_indices(20)
    for row, power in zip(rows, small.powers(rows)):
        assert power == pow(7, small.exponent(row), 1000003)


def test_owner_comb_gives_the_public_tables_group_elements(keys):
    """The key owner's CRT tables give h_s^r mod n^2 for the same r as the public table: the same obfuscator."""
    pk, sk = keys
    hs, comb = djn.djn_tables(pk.n)
    owner = djn.owner_tables(sk.p, sk.q)
    assert owner is djn.owner_tables(sk.p, sk.q)                # built once per process
    rows = comb.random_indices(6)
    assert owner.powers(rows) == comb.powers(rows)
    for row, power in zip(rows[:2], owner.powers(rows[:2])):
        assert power == gmpy2.powmod(hs, comb.exponent(row), pk.nsquare)
    large = djn.OwnerComb(sk.p, sk.q, 14, 8)
    rows = djn.djn_tables(pk.n, 14, 8)[1].random_indices(2)
    assert large.powers(rows) == djn.djn_tables(pk.n, 14, 8)[1].powers(rows)


def test_owner_encryptions_decrypt_and_are_fresh(keys, fast, low_thresholds):
    pk, sk = keys
    values = [0, 1, -1, 2 ** 40 + 3, -(2 ** 70), int(pk.max_int)] * 30       # several tasks
    cts = fast.encrypt_owned(sk, values)
    assert [signed(r, int(pk.n)) for r in fast.decrypt(sk, cts)] == values
    assert len(set(cts)) == len(cts)                              # a fresh obfuscator each
    assert SIMPLE.encrypt_owned(sk, [5]) != SIMPLE.encrypt_owned(sk, [5])


def test_obfuscator_randomness_comes_from_os_urandom(monkeypatch, keys):
    calls = []
    real = djn.os.urandom

    def spy(k):
        calls.append(k)
        return real(k)

    monkeypatch.setattr(djn.os, "urandom", spy)
    djn.djn_tables(keys[0].n)[1].random_powers(3)
    assert calls


def test_encryptions_decrypt_with_phe(keys, fast):
    pk, sk = keys
    phe_sk = sk.to_phe()
    values = [0, 1, -1, 2 ** 40 + 3, -(2 ** 70), int(pk.max_int)]
    cts = fast.encrypt(pk, values)
    assert [signed(phe_sk.raw_decrypt(int(c)), int(pk.n)) for c in cts] == values
    # phe's own EncryptedNumber on our ciphertexts (2**-32 is phe's exponent -8 in base 16)
    ctx = Context(pk, private_key=sk, engine=fast)
    ev = ctx.encrypt([1.25, -3.5])
    phe_pk = pk.to_phe()
    assert [phe_sk.decrypt(paillier.EncryptedNumber(phe_pk, int(c), -8)) for c in ev.ciphertexts] == [1.25, -3.5]


def test_crt_decrypt_matches_phe(keys, fast):
    pk, sk = keys
    cts = SIMPLE.encrypt(pk, list(range(-5, 15)))
    assert fast.decrypt(sk, cts) == [gmpy2.mpz(sk.to_phe().raw_decrypt(int(c))) for c in cts]


def test_deterministic_operations_give_identical_ciphertexts(keys, fast):
    pk, _ = keys
    rng = np.random.default_rng(1)
    cts = SIMPLE.encrypt(pk, [int(v) for v in rng.integers(-2 ** 50, 2 ** 50, 40)])
    other = SIMPLE.encrypt(pk, [int(v) for v in rng.integers(-2 ** 50, 2 ** 50, 40)])
    plain = [int(v) for v in rng.integers(-2 ** 60, 2 ** 60, 40)]
    scalars = [int(v) for v in rng.integers(-2 ** 40, 2 ** 40, 40)]
    assert fast.add(pk, cts, other) == SIMPLE.add(pk, cts, other)
    assert fast.add_plain(pk, cts, plain) == SIMPLE.add_plain(pk, cts, plain)
    assert fast.mul_plain(pk, cts, scalars) == SIMPLE.mul_plain(pk, cts, scalars)
    assert fast.sum(pk, cts) == SIMPLE.lincomb(pk, cts, [[1] * 40])[0]


@pytest.mark.parametrize("shape", [(1, 37), (6, 37), (20, 50), (3, 1), (2, 0)])
def test_lincomb_is_the_same_group_element(keys, fast, shape):
    pk, _ = keys
    m, n = shape
    rng = np.random.default_rng(m * 100 + n)
    cts = SIMPLE.encrypt(pk, [int(v) for v in rng.integers(-2 ** 30, 2 ** 30, n)])
    matrix = np.rint(rng.normal(scale=3.0, size=(m, n)) * 2 ** 32).astype(np.int64)
    if m >= 3 and n:
        matrix[1] = 0                      # a zero column
        matrix[2] = 2 ** 32                # an intercept: all entries equal
    if m >= 6 and n:
        matrix[3] = np.abs(matrix[3])      # no negatives
        matrix[4] = -np.abs(matrix[4])     # all negative
        matrix[5] = -7                     # constant negative
    assert fast.lincomb(pk, cts, matrix) == SIMPLE.lincomb(pk, cts, matrix.tolist())


def test_many_columns_over_few_bases_share_one_offset(keys, fast, low_thresholds):
    """``X [[c]]`` (one column per data row, a few weights as bases): columns of similar range finish with one
    ``D^-O``; a column of a much wider range keeps its own offset; the same group elements as term by term,
    whichever schedule the workers get (thresholds lowered: the columns are split among them)."""
    pk, _ = keys
    rng = np.random.default_rng(3)
    cts = SIMPLE.encrypt(pk, [int(v) for v in rng.integers(-2 ** 60, 2 ** 60, 12)])
    matrix = np.rint(rng.normal(scale=2.0, size=(300, 12)) * 2 ** 32).astype(np.int64)
    matrix[5] = -np.abs(matrix[5]) * 2 ** 20          # a column of a much wider range
    matrix[6] = np.abs(matrix[6])                    # no negatives
    matrix[7] = 3                                    # constant
    plan = multiexp.Plan(matrix)
    assert sum(plan.shared) >= 290 and not plan.shared[plan.varying.index(5)]
    expected = SIMPLE.lincomb(pk, cts, matrix.tolist())
    assert multiexp.lincomb(cts, matrix, pk.nsquare) == expected
    assert fast.lincomb(pk, cts, matrix) == expected


def test_both_multiexp_methods_and_chunking_agree(keys):
    pk, _ = keys
    n2 = pk.nsquare
    rng = np.random.default_rng(7)
    cts = SIMPLE.encrypt(pk, list(range(61)))
    matrix = rng.integers(-2 ** 45, 2 ** 45, size=(4, 61))
    expected = SIMPLE.lincomb(pk, cts, matrix.tolist())
    plan = multiexp.Plan(matrix)
    for method, t in [("subset", 1), ("subset", 5), ("subset", 8), ("buckets", 0)]:
        partials, total = [gmpy2.mpz(1)] * 4, gmpy2.mpz(1)
        for lo, hi in [(0, 17), (17, 18), (18, 61)]:        # uneven chunks, one of a single row
            part, sub = multiexp.chunk_products(cts[lo:hi], plan.lifted[:, lo:hi], plan.bits, n2, method, t, True)
            partials = [a * b % n2 for a, b in zip(partials, part)]
            total = total * sub % n2
        assert plan.finish(partials, total, n2) == expected, method
    assert multiexp.lincomb(cts, matrix, n2) == expected


def test_lincomb_falls_back_for_huge_exponents(keys, fast):
    pk, _ = keys
    cts = SIMPLE.encrypt(pk, [3, 4, 5])
    columns = [[2 ** 100, -(2 ** 90), 1], [1, 2, 3]]
    assert fast.lincomb(pk, cts, columns) == SIMPLE.lincomb(pk, cts, columns)


def test_rerandomize_never_repeats(keys, fast):
    pk, sk = keys
    ct = fast.encrypt(pk, [42])
    again = fast.rerandomize(pk, ct * 300)
    assert len(set(again)) == 300 and ct[0] not in again
    assert set(fast.decrypt(sk, again)) == {42}
    zeros = fast.encrypt(pk, [0] * 300)
    assert len(set(zeros)) == 300


def test_cost_model_picks_sensible_methods():
    assert multiexp.choose(569, [36] * 20)[0] == "subset"        # many columns, few rows
    assert multiexp.choose(50_000, [36] * 20)[0] == "buckets"    # long columns
    assert multiexp.window_widths(36, 5) == [8, 7, 7, 7, 7]


def test_2048_bit_round_trip_with_phe():
    pk, sk = generate_keypair(2048)
    ctx = Context(pk, private_key=sk)
    x = np.array([0.5, -1.25, 3.0])
    ev = ctx.encrypt(x)
    phe_sk = sk.to_phe()
    got = [signed(phe_sk.raw_decrypt(int(c)), int(pk.n)) / 2 ** 32 for c in ev.ciphertexts]
    np.testing.assert_allclose(got, x)
    np.testing.assert_allclose(ctx.decrypt(np.ones((2, 3)) @ ev), [x.sum()] * 2)
