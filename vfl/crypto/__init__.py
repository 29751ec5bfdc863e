"""Paillier cryptography for vfl: keys, fixed-point encoding, batched vector operations.

Numbers only: nothing here knows about parties, messages or protocols.
"""

from vfl.crypto.encoding import DEFAULT_FRAC_BITS, FixedPoint
from vfl.crypto.engine import Engine, SimpleEngine, get_engine, register_engine
from vfl.crypto.fast import FastEngine
from vfl.crypto.pool import ObfuscatorPool
from vfl.crypto.keys import MIN_SECURE_BITS, PrivateKey, PublicKey, check_key_bits, generate_keypair
from vfl.crypto.vector import Context, EncryptedVector

register_engine(FastEngine(), default=True)
#: The fast engine with obfuscators computed ahead of need, refilled in the background:
#: for parties on machines of their own, whose cores idle while they wait for their peers.
register_engine(FastEngine(pool=ObfuscatorPool(refill=True), name="fast+pool"))

__all__ = [
    "Context", "DEFAULT_FRAC_BITS", "Engine", "EncryptedVector", "FastEngine", "FixedPoint", "MIN_SECURE_BITS",
    "ObfuscatorPool", "PrivateKey", "PublicKey", "SimpleEngine", "check_key_bits", "generate_keypair", "get_engine",
    "register_engine",
]
