"""The cost of one oblivious-PRF round, per query: what online scoring of a few ids against many pays.

In the unbalanced case (a bank scores a few customers against a partner's 10^6-10^8), the querier does not
send its ids blinded to every row: it asks for ``k·H(x)`` of its own ids only, through an OPRF round
(RFC 9497's shape): the querier blinds ``H(x)`` with a fresh ``r``, the holder multiplies by its key ``k``,
the querier removes ``r``.  Unblinding needs a group of prime order with invertible scalars, which X25519's
clamped scalars are not, so this uses the prime-order subgroup of Edwards25519 through libsodium
(``crypto_scalarmult_ed25519_noclamp``, which also validates every point it is given).

``python -m benchmarks.oprf [QUERIES]`` prints the CPU microseconds of each step, in one process.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time

from nacl import bindings as sodium


def _hash_to_group(message: bytes) -> bytes:
    digest = hashlib.sha512(b"vfl-oprf-bench" + message).digest()
    return sodium.crypto_core_ed25519_add(sodium.crypto_core_ed25519_from_uniform(digest[:32]),
                                          sodium.crypto_core_ed25519_from_uniform(digest[32:]))


def _scalar() -> bytes:
    return sodium.crypto_core_ed25519_scalar_reduce(os.urandom(64))


def oprf_round(queries: int = 2000) -> dict:
    """CPU microseconds per query of each step of an OPRF round, and the check that the round is correct."""
    key = _scalar()
    ids = [b"customer-%09d" % i for i in range(queries)]
    steps = {}

    def timed(name, fn, values):
        start = time.process_time()
        out = [fn(v) for v in values]
        steps[name] = (time.process_time() - start) / len(values) * 1e6
        return out

    points = timed("hash to the group (querier)", _hash_to_group, ids)
    blinds = [_scalar() for _ in ids]
    blinded = timed("blind r·H(x) (querier)", lambda pr: sodium.crypto_scalarmult_ed25519_noclamp(pr[1], pr[0]),
                    list(zip(points, blinds)))
    evaluated = timed("evaluate k·(r·H(x)) (holder)", lambda p: sodium.crypto_scalarmult_ed25519_noclamp(key, p),
                      blinded)
    unblinded = timed("unblind r⁻¹·(k·r·H(x)) (querier)",
                      lambda pr: sodium.crypto_scalarmult_ed25519_noclamp(
                          sodium.crypto_core_ed25519_scalar_invert(pr[1]), pr[0]),
                      list(zip(evaluated, blinds)))
    direct = [sodium.crypto_scalarmult_ed25519_noclamp(key, p) for p in points[:50]]
    assert unblinded[:50] == direct, "the OPRF round does not give k·H(x)"
    steps["round, querier"] = sum(v for k, v in steps.items() if "querier" in k)
    steps["round, holder"] = steps["evaluate k·(r·H(x)) (holder)"]
    return steps


def main(argv) -> int:
    queries = int(argv[0]) if argv else 2000
    for name, micros in oprf_round(queries).items():
        print(f"{name:38s} {micros:8.1f} µs CPU per query")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
