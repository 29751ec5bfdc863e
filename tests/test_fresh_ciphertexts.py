"""Every ciphertext that leaves a party is fresh: made by an encryption or a re-randomization, in every family.

A ciphertext computed from a peer's ciphertexts (a product over rows, a bin's
sum, a shifted slot) carries randomness that peer knows; sent as it is, the key
holder could test which of its own ciphertexts went into it (which rows share
a bin, a node, a leaf). So every such value is re-randomized before it is sent.

The check is by provenance, the same for every family: the engines' encrypt,
encrypt_owned and rerandomize are wrapped to remember what they return, every
frame a transport carries is kept, and every ciphertext in every message must
be one of those values. It fails as soon as any family sends a product it did
not re-randomize (tested below by making re-randomization the identity).
"""

import threading
import warnings

import numpy as np
import pandas as pd
import pytest

from vfl import (VerticalDataset, VerticalGradientBoostingClassifier, VerticalLinearRegression,
                 VerticalLogisticRegression, VerticalMLPClassifier)
from vfl.crypto.engine import SimpleEngine
from vfl.crypto.fast import FastEngine
from vfl.transport import BigInts, Transcript, decode

KEYS = dict(key_bits=1024, insecure=True)
CIPHERTEXT_BYTES = 256                                 # 1024-bit keys: ciphertexts below n^2, 2048 bits


@pytest.fixture
def watched(monkeypatch):
    """``(made, sent)``: who made each ciphertext fresh (an encryption, a re-randomization, or an operation on a
    fresh one of its own), and every frame with the thread that sent it."""
    made, sent = {}, []

    def mark(out):
        me = threading.get_ident()
        made.update((int(c), me) for c in out)

    def own(values) -> bool:
        me = threading.get_ident()
        return any(made.get(int(c)) == me for c in values)

    for engine in (FastEngine, SimpleEngine):
        for name in ("encrypt", "encrypt_owned", "rerandomize"):
            def fresh_op(self, *args, _original=getattr(engine, name), **kwargs):
                out = _original(self, *args, **kwargs)
                mark(out)
                return out
            monkeypatch.setattr(engine, name, fresh_op)
        for name in ("add", "add_plain", "mul_plain"):          # element by element: fresh where an input is
            def elementwise(self, public_key, a, b, _original=getattr(engine, name), _name=name):
                out = _original(self, public_key, a, b)
                me = threading.get_ident()
                for k, c in enumerate(out):
                    inputs = [a[k], b[k]] if _name == "add" else [a[k]]
                    if _name == "mul_plain" and int(b[k]) == 0:
                        continue
                    if any(made.get(int(x)) == me for x in inputs):
                        made[int(c)] = me
                return out
            monkeypatch.setattr(engine, name, elementwise)
        for name in [n for n in ("lincomb", "sum") if hasattr(engine, n)]:   # a product over its own fresh values
            def combined(self, public_key, ciphertexts, *args, _original=getattr(engine, name)):
                out = _original(self, public_key, ciphertexts, *args)
                if own(ciphertexts):
                    mark(out if isinstance(out, list) else [out])
                return out
            monkeypatch.setattr(engine, name, combined)
    record = Transcript.record

    def keep(self, message, sender, receiver, frame, model=None):
        sent.append((threading.get_ident(), sender, receiver, frame))
        return record(self, message, sender, receiver, frame, model)
    monkeypatch.setattr(Transcript, "record", keep)
    return made, sent


def stale_ciphertexts(made, sent) -> list:
    """``(sender, receiver, message, field)`` of every ciphertext sent that its sender did not make fresh."""
    stale = []
    for thread, sender, receiver, frame in sent:
        message = decode(frame)
        for field, value in message.fields.items():
            if isinstance(value, BigInts) and value.width == CIPHERTEXT_BYTES:
                stale += [(sender, receiver, message.name, field) for c in value.to_ints() if made.get(c) != thread]
    return stale


def data(n=160):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 4))
    y = (x @ np.array([1.0, -1.0, 0.5, 1.5]) > 0).astype(int)
    return VerticalDataset({"A": pd.DataFrame(x[:, :2], columns=["a0", "a1"]),
                            "B": pd.DataFrame(x[:, 2:], columns=["b0", "b1"]).assign(y=y)}, label="y")


def credit_pipeline():
    from vfl.preprocessing import VerticalBinning, VerticalPipeline, VerticalScorecard, VerticalSelection, VerticalWOE

    return VerticalPipeline([("woe", VerticalWOE(VerticalBinning(max_bins=4), **KEYS)),
                             ("selection", VerticalSelection(iv_threshold=0.0, max_correlation=0.95)),
                             # A's part of a score is a function of its bins, which it gives away: A opts in
                             ("card", VerticalScorecard(VerticalLogisticRegression(max_iter=2, allow_reconstruction=["A"],
                                                                                   **KEYS)))])


FITS = {
    "yang, packed": lambda d: VerticalLogisticRegression(max_iter=2, solver="gd", allow_reconstruction=["A"],
                                                         **KEYS).fit(d).predict_proba(d),
    "yang, unpacked": lambda d: VerticalLogisticRegression(max_iter=2, solver="gd", packing=False, **KEYS).fit(d),
    "conjugate gradient": lambda d: VerticalLinearRegression(max_iter=2, **KEYS).fit(d),
    # A's part of the score from a secret start can be nearly one column: A opts in (this test is about freshness)
    "shared protocol": lambda d: VerticalLogisticRegression(max_iter=2, solver="gd", protocol="shared",
                                                            allow_reconstruction=["A"], **KEYS).fit(d).predict_proba(d),
    "trees": lambda d: VerticalGradientBoostingClassifier(max_iter=2, max_depth=2, **KEYS).fit(d).predict_proba(d),
    "trees, hidden membership": lambda d: VerticalGradientBoostingClassifier(max_iter=2, max_depth=2,
                                                                             hide_membership=True, **KEYS).fit(d),
    "split network": lambda d: VerticalMLPClassifier(max_iter=2, random_state=0, allow_reconstruction=["A"]).fit(d).predict_proba(d),
    "credit pipeline": lambda d: credit_pipeline().fit(d).predict_score(d),
}


@pytest.mark.parametrize("family", list(FITS))
def test_every_ciphertext_a_party_sends_is_fresh(watched, family):
    made, sent = watched
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        FITS[family](data())
    crossed = [f for f in sent if any(isinstance(v, BigInts) and v.width == CIPHERTEXT_BYTES
                                      for v in decode(f[3]).fields.values())]
    assert crossed or family == "split network", "no ciphertext crossed: the check would check nothing"
    assert stale_ciphertexts(made, sent) == []


@pytest.mark.parametrize("family", ["trees", "credit pipeline", "yang, packed"])
def test_the_check_sees_a_product_sent_without_re_randomizing(watched, monkeypatch, family):
    """With re-randomization made the identity (a sender forgetting it), the same run sends stale ciphertexts."""
    made, sent = watched
    for engine in (FastEngine, SimpleEngine):
        monkeypatch.setattr(engine, "rerandomize", lambda self, public_key, ciphertexts: list(ciphertexts))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        FITS[family](data())
    assert stale_ciphertexts(made, sent)
