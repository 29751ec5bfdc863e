"""Differential privacy on what a feature party releases per row, noise drawn once per row and model version.

A feature party that would rather give a formal bound than trust the release
check's attacks (:mod:`vfl.protocols.release`) adds noise to what it sends per
row, before encryption:

* a real-valued release (a partial score, a network's interactive part) is clipped
  (each row's vector to L2 norm ``clip``) and gets Gaussian noise of standard
  deviation ``sigma = 2 clip z``, ``z`` the noise multiplier of one Gaussian
  mechanism that is ``(epsilon, delta)``-DP (``dp_accounting``'s PLD accountant):
  the release of one row is then ``(epsilon, delta)``-DP with respect to that
  row's values (replacing the row changes the clipped release by at most
  ``2 clip``);
* bits (the sides of a party's splits) go through randomized response: each bit
  is kept with probability ``e^eps_b / (1 + e^eps_b)``, ``eps_b = epsilon / bits``
  for ``bits`` bits per row, so the row's bits together are ``epsilon``-DP.

The noise of a row is a function of the party's secret :class:`NoiseKey`, the
model version and the row's id (AES under a key derived for the version, on a
digest of the id): the same row of the same version always gets the same noise,
so asking again averages nothing away, and a new version is a new release whose
budget composes (:func:`composed_epsilon`, kept in the release ledger).
Floating-point subtleties of sampling (Mironov 2012) are not addressed.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import secrets
from pathlib import Path

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from vfl.errors import ConfigurationError, DataError
from vfl.parties.privacy import epsilon_spent, noise_multiplier

#: The noise key's file in a party's work directory (owner-only).
KEY_FILE = "release_noise.key"
#: The default total epsilon a label party may receive from one feature party over every version.
DEFAULT_BUDGET = 10.0

_PROCESS_KEYS: dict[str, bytes] = {}


class NoiseKey:
    """A feature party's secret for its release noise: 32 bytes from the CSPRNG, kept owner-only."""

    def __init__(self, secret: bytes):
        if len(secret) != 32:
            raise ConfigurationError("a release noise key is 32 bytes")
        self.secret = secret

    @classmethod
    def at(cls, workdir, party: str) -> NoiseKey:
        path = Path(workdir) / KEY_FILE
        if path.exists():
            data = path.read_bytes()
            if len(data) != 32:
                raise DataError(f"party {party}: its release noise key {path} is damaged (not 32 bytes); restore it "
                                "(a new key would give every released row new noise, averaging the old away)")
            return cls(data)
        path.parent.mkdir(parents=True, exist_ok=True)
        secret = secrets.token_bytes(32)
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(handle, "wb") as out:
            out.write(secret)
        return cls(secret)

    @classmethod
    def in_memory(cls, scope: str) -> NoiseKey:
        """This process's key for ``scope`` (in-process runs)."""
        return cls(_PROCESS_KEYS.setdefault(scope, secrets.token_bytes(32)))


def _uniforms(key: NoiseKey, version: str, ids, count: int) -> np.ndarray:
    """``count`` uniforms in (0, 1) per id, a function of (key, version, id) only: shape (len(ids), count)."""
    version_key = hmac.new(key.secret, b"vfl-release-noise|" + version.encode(), hashlib.sha256).digest()[:16]
    digests = np.frombuffer(b"".join(hashlib.blake2b(str(i).encode("utf-8"), digest_size=12,
                                                     key=version_key).digest() for i in ids),
                            dtype=np.uint8).reshape(len(ids), 12)
    blocks = (count + 1) // 2
    plain = np.zeros((len(ids), blocks, 16), dtype=np.uint8)
    plain[:, :, :12] = digests[:, None, :]
    plain[:, :, 12:] = np.arange(blocks, dtype=">u4").view(np.uint8).reshape(blocks, 4)[None]
    encryptor = Cipher(algorithms.AES(version_key), modes.ECB()).encryptor()
    words = np.frombuffer(encryptor.update(plain.tobytes()) + encryptor.finalize(), dtype="<u8")
    words = words.reshape(len(ids), blocks * 2)[:, :count]
    return ((words >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0 ** -53


def row_normals(key: NoiseKey, version: str, ids, width: int) -> np.ndarray:
    """Standard normal noise, ``width`` values per id, the same for the same (key, version, id)."""
    u = _uniforms(key, version, ids, 2 * width)
    return np.sqrt(-2.0 * np.log(u[:, :width])) * np.cos(2.0 * math.pi * u[:, width:])


def _check_ids(ids, n: int, party: str) -> list:
    ids = list(ids)
    if len(ids) != n:
        raise DataError(f"party {party}: noise needs one id per released row ({len(ids)} ids for {n} rows)")
    if len(set(map(str, ids))) != len(ids):
        raise DataError(f"party {party}: noise drawn once per row needs distinct row ids")
    return ids


def gaussian_release(values, ids, key: NoiseKey, version: str, epsilon: float, delta: float, clip: float,
                     party: str = "", compositions: int = 1) -> tuple[np.ndarray, dict]:
    """Clip each row of ``values`` to L2 norm ``clip`` and add the row's Gaussian noise; returns it and the DP record.

    ``compositions``: how many such releases of each row together are (``epsilon``, ``delta``)-DP (a network's
    training releases each row once per epoch)."""
    check_parameters(epsilon, delta, clip)
    v = np.asarray(values, dtype=np.float64)
    matrix = v.reshape(len(v), -1)
    ids = _check_ids(ids, len(matrix), party)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    clipped = matrix * np.minimum(1.0, clip / np.where(norms > 0, norms, 1.0))
    z = noise_multiplier(epsilon, delta, compositions)
    sigma = 2.0 * clip * z
    noisy = clipped + sigma * row_normals(key, version, ids, matrix.shape[1])
    record = {"mechanism": "gaussian", "noise_multiplier": z / np.sqrt(compositions), "epsilon": float(epsilon),
              "delta": float(delta), "clip": float(clip), "sigma": sigma, "version": version,
              "compositions": int(compositions)}
    return noisy.reshape(v.shape), record


def randomized_response(bits, ids, key: NoiseKey, version: str, epsilon: float,
                        party: str = "") -> tuple[np.ndarray, dict]:
    """Flip each of a row's bits with probability ``1 / (1 + e^(epsilon / bits))``; returns them and the DP record."""
    check_parameters(epsilon, 0.5, 1.0)
    b = np.asarray(bits, dtype=bool).reshape(len(bits), -1)
    ids = _check_ids(ids, len(b), party)
    per_bit = epsilon / max(1, b.shape[1])
    flip = _uniforms(key, version, ids, max(1, b.shape[1]))[:, :b.shape[1]] < 1.0 / (1.0 + math.exp(per_bit))
    record = {"mechanism": "randomized_response", "epsilon": float(epsilon), "delta": 0.0,
              "bits": int(b.shape[1]), "version": version}
    return b ^ flip, record


def check_parameters(epsilon, delta, clip) -> None:
    for name, value, low, high in (("release_epsilon", epsilon, 0.0, math.inf), ("release_delta", delta, 0.0, 1.0),
                                   ("release_clip", clip, 0.0, math.inf)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (low < value < high):
            raise ConfigurationError(f"{name} must be a number in ({low}, {high}), got {value!r}")


def composed_epsilon(records, delta: float) -> float:
    """The epsilon at ``delta`` of every DP release in ``records`` together.

    Gaussian releases compose exactly (multipliers ``z_i`` make one of
    ``(sum z_i^-2)^-1/2``, evaluated by the PLD accountant at what is left of
    ``delta``); randomized responses add their epsilons; the two add (basic
    composition).
    """
    gaussian = [r["noise_multiplier"] for r in records if r and r.get("mechanism") == "gaussian"]
    pure = sum(float(r["epsilon"]) for r in records if r and r.get("mechanism") == "randomized_response")
    if not gaussian:
        return pure
    z = sum(1.0 / g ** 2 for g in gaussian) ** -0.5
    return pure + epsilon_spent(z, delta, 1)


def check_budget(party: str, label_party: str, earlier, new: dict, budget: float, how: str) -> float:
    """Refuse a DP release whose epsilon with ``earlier`` ones (to ``label_party``) exceeds ``budget``."""
    records = [r for r in earlier if r] + [new]
    delta = max(r.get("delta", 0.0) for r in records) or new.get("delta", 1e-6) or 1e-6
    total = composed_epsilon(records, max(delta, 1e-12) * len(records))
    if total > budget:
        raise ConfigurationError(
            f"party {party}: this release would bring what the label party {label_party} received from {party} under "
            f"differential privacy to epsilon {total:.3g} over {len(records)} version(s), beyond its budget {budget:g}; "
            f"raise release_budget, release fewer versions, or use a smaller release_epsilon")
    return total
