"""The one set of checks of an export, and its writing: for the estimators' ``export`` and ``vfl export`` alike.

:func:`make_consent` signs a party's consent (:mod:`vfl.export.consent`) after checking that the family exports to
the format.  :func:`export` takes the shards the recipient holds (its own; an estimator holds every party's), the
other parties' consents and the CAs it trusts for each party, and refuses — writing nothing — unless the family
exports to the format and every party the export needs has signed a consent to exactly this export: this model
(its fingerprint and run), this family, this format, this recipient, and the very shard it signed.  Then it
calls the family's writer (:mod:`vfl.export`'s contract) through a temporary name.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from vfl.deploy.jsonfile import write_json
from vfl.errors import ConfigurationError, DataError
from vfl.export import COMBINER, check_format, exporter, is_whole
from vfl.export import consent as consents_
from vfl.export.files import written, written_folder
from vfl.families import FAMILIES
from vfl.transport.tls import TLSFiles, load_certificate, load_private_key


def make_consent(shard: dict, *, family: str, export_format: str, recipient: str, roles: dict[str, str], key,
                 certificate) -> dict:
    """Party ``shard["party"]``'s signed consent to export this model as ``export_format`` to ``recipient``.

    ``roles`` maps every data party of the model to its role (the recipient must be one of them); ``key`` and
    ``certificate`` are the party's federation key and certificate, PEM files or ``cryptography`` objects.  A
    consent to a whole-model format carries the shard; one to the split export does not.
    """
    check_format(family, export_format)
    party = shard["party"]
    if recipient not in roles:
        raise ConfigurationError(f"party {party}: the recipient {recipient!r} is not a data party of this model "
                                 f"(its parties: {sorted(roles)})")
    if recipient == party:
        raise ConfigurationError(f"party {party} is the recipient itself: a party needs no consent to its own shard")
    if not is_whole(export_format) and roles[recipient] != "label":
        raise ConfigurationError(f"party {party}: the split export's combiner goes to the label party, not to "
                                 f"{recipient}")
    if isinstance(key, (str, Path)):
        key = load_private_key(key)
    if isinstance(certificate, (str, Path)):
        certificate = load_certificate(certificate)
    return consents_.sign(shard, family=family, export_format=export_format, recipient=recipient, key=key,
                          certificate=certificate, carry_shard=is_whole(export_format))


def own_shard(shards: dict[str, dict], party: str) -> dict:
    """Party ``party``'s shard among ``shards``; a :class:`ConfigurationError` naming the parties if none."""
    if party not in shards:
        raise ConfigurationError(f"no data party {party!r} in this model (its parties: {sorted(shards)})")
    return shards[party]


def roles_of(shards: dict[str, dict]) -> dict[str, str]:
    """Every data party's role, as its shard says (``"feature"``, ``"label"``)."""
    return {name: shard["role"] for name, shard in shards.items()}


def label_of(roles: dict[str, str]) -> str:
    """The label party among ``roles``: the default recipient."""
    labels = [name for name, role in roles.items() if role == "label"]
    if len(labels) != 1:
        raise DataError(f"a model has one label party; its shards name {len(labels)} ({labels})")
    return labels[0]


def trust_of(ca) -> TLSFiles:
    """What a recipient trusts for the parties' certificates: a party's ``TLSFiles`` (its pins), or one CA
    certificate's path for every party."""
    if ca is None:
        raise ConfigurationError("an export needs ca=: the CA certificate that signed the parties' certificates "
                                 "(or the recipient's TLSFiles)")
    return ca if isinstance(ca, TLSFiles) else TLSFiles(Path(ca), None, None)


def needed(fmt: str, recipient: str, roles: dict[str, str]) -> list[str]:
    """The parties whose consents an export needs: for a whole-model format, every data party but the recipient;
    for the split export, the feature parties when the label party writes its combiner, nobody when a feature
    party writes its own part."""
    if not is_whole(fmt) and roles[recipient] != "label":
        return []
    return [p for p in roles if p != recipient]


def export(out, *, family: str, fmt: str, recipient: str, roles: dict[str, str], shards: dict[str, dict],
           consents=(), trust: TLSFiles) -> Path:
    """Check the consents of an export and write it to ``out`` (a file; the split export: a new folder).

    Parameters
    ----------
    out : path
    family, fmt : str
        The model's family and the format (:func:`vfl.export.formats`).
    recipient : str
        The party that gets the export (a whole model), or writes its part (split; the label party also writes
        the combiner).
    roles : dict
        Every data party of the model, to its role (``"feature"``, ``"label"``).
    shards : dict
        The checked shards the recipient holds, by party: its own at least.
    consents : iterable of dict
        The other parties' consents (:func:`make_consent`, or read from their files).
    trust : TLSFiles
        What the recipient trusts for each party's certificate (``FederationConfig.tls``).

    Returns
    -------
    Path
        ``out``.

    Raises
    ------
    ConfigurationError
        A family or format that is not exported, a recipient that is not a data party, or whose shard is not given.
    DataError
        A missing, duplicated or failing consent (naming the party and what fails); nothing is written then.
    """
    module = exporter(family)
    check_format(family, fmt)
    if recipient not in roles:
        raise ConfigurationError(f"the recipient {recipient!r} is not a data party of this model (its parties: "
                                 f"{sorted(roles)})")
    if recipient not in shards:
        raise ConfigurationError(f"party {recipient}: its own shard is needed to export the model")
    fingerprint = shards[recipient]["trained_with"]
    by_party = _by_party(consents, roles)
    missing = [p for p in needed(fmt, recipient, roles) if p not in by_party]
    if missing:
        raise DataError(f"party {missing[0]} has not signed a consent to this export ({fmt}, to {recipient}); "
                        f"{missing[0]} signs one with: vfl export consent --role {missing[0]} --format {fmt} "
                        f"--to {recipient} (or the estimator's consent())")
    held = dict(shards)
    consented = {}
    for party, consent in by_party.items():
        carried = consents_.verify(consent, party=party, family=family, fingerprint=fingerprint, export_format=fmt,
                                   recipient=recipient, trust=trust, shard=shards.get(party))
        if carried is not None and party not in held:
            held[party] = _checked(family, carried, party, roles[party])
        consented[party] = {"shard_sha256": consent["consent"]["shard_sha256"],
                            "signed_at": consent["consent"]["signed_at"]}
    if is_whole(fmt):
        return module.FORMATS[fmt](held, Path(out))
    own = held if roles[recipient] == "label" and len(held) == len(roles) else {recipient: held[recipient]}
    with written_folder(out) as folder:
        combiners = [Path(path) for path in module.split(own, folder, roles).values() if Path(path).name == COMBINER]
        for combiner in combiners:
            _add_consents(combiner, consented)
    return Path(out)


def _by_party(consents, roles: dict[str, str]) -> dict[str, dict]:
    out = {}
    for consent in consents:
        party = consents_.party_of(consent)
        if party is None:
            raise DataError("a consent names no party: it is not a consent vfl export consent wrote")
        if party not in roles:
            raise DataError(f"a consent by {party!r}, which is not a data party of this model (its parties: "
                            f"{sorted(roles)})")
        if party in out:
            raise DataError(f"two consents by party {party}: give one per party")
        out[party] = consent
    return out


def _checked(family: str, shard, party: str, role: str) -> dict:
    """A shard a consent carried, checked as the family's shard reader checks a file (it comes from a peer)."""
    if not isinstance(shard, dict):
        raise DataError(f"party {party}'s consent carries a shard that is not a JSON object")
    read_shard = FAMILIES[family].module("shard").read_shard
    with tempfile.TemporaryDirectory() as tmp:
        path = write_json(Path(tmp) / f"{party}.json", shard)
        try:
            return read_shard(path, party, role)
        except DataError as exc:
            raise DataError(f"party {party}'s consent carries a shard that is not valid: {exc}") from None


def _add_consents(path: Path, consented: dict) -> None:
    """Record in the combiner which shard each party consented to (its parts must be made from those)."""
    combiner = json.loads(Path(path).read_text())
    combiner["consented"] = consented
    with written(path) as tmp:
        tmp.write_text(json.dumps(combiner, allow_nan=False))


def read_consent(path) -> dict:
    """A consent file (JSON only; its checks are :func:`vfl.export.consent.verify`'s)."""
    from vfl.deploy.jsonfile import read_json

    return read_json(path, "consent")


def write_consent(path, consent: dict) -> Path:
    """Write a consent atomically, owner-only (it may carry the party's shard)."""
    return write_json(path, consent, private=True)
