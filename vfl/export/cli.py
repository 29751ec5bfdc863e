"""The ``vfl export`` command: a party's consent to an export, and the export at the recipient (docs/export.md).

::

    vfl export consent --config federation.toml --role telco --model WORKDIR --format xgboost-json --to bank \\
        --out telco.consent.json
    vfl export --config federation.toml --role bank --model WORKDIR --format xgboost-json \\
        --consents telco.consent.json shop.consent.json --out model.json

Both read the party's own shard (``--model``: the shard, or a folder holding it: a run record's folder, or the
work folder ``vfl party`` wrote it in) and its ``[parties.NAME]`` table of ``federation.toml``; the checks are
:mod:`vfl.export.assemble`'s, the estimators' too.  Exit codes: 0 written, 2 refused (nothing written).  The
export (not the consent) is recorded in the shard's work folder, ``WORKDIR/runs/`` (:mod:`vfl.deploy.record`,
task ``export``: the format, the files written, who signed), as ``vfl party`` records its runs.
"""

from __future__ import annotations

from pathlib import Path

from vfl.deploy.commands import add_command, add_party_options, failure_line, run_command
from vfl.errors import ConfigurationError, DataError


def register(subparsers) -> None:
    """Add ``vfl export`` to the ``vfl`` parser."""
    p = add_command(
        subparsers, "export", "export a trained model (XGBoost JSON, ONNX, split by party) once the parties consent",
        "Export this party's trained model. 'vfl export consent' signs, with this party's federation key, its "
        "consent to one export of this model (a format, a recipient); a consent to a whole-model format "
        "carries this party's shard: whoever receives it learns this party's part of the model. 'vfl export' "
        "(no action) writes the export at the recipient once every other data party's consent checks out; "
        "with --format split each party writes its own part, and the label party the combiner. "
        "See docs/export.md.",
        epilog="examples:\n"
               "  vfl export consent --config federation.toml --role telco --model work --format xgboost-json "
               "--to bank --out telco.consent.json\n"
               "  vfl export --config federation.toml --role bank --model work --format xgboost-json "
               "--consents telco.consent.json --out model.json")
    p.add_argument("action", nargs="?", choices=["consent"], default=None,
                   help="'consent': sign this party's consent (without it: write the export)")
    add_party_options(p, "this party's name in the federation file")
    p.add_argument("--model", type=Path, required=True,
                   help="this party's model shard, or a folder holding it (model.json or model_ROLE.json)")
    p.add_argument("--format", required=True, help="the export's format: trees xgboost-json, onnx or split; linear models and the "
                                                    "credit pipeline onnx, pmml or split; networks onnx or split")
    p.add_argument("--to", default=None, metavar="PARTY", help="consent: the party that receives the export")
    p.add_argument("--consents", nargs="+", type=Path, default=[], metavar="FILE",
                   help="export: the other data parties' consents")
    p.add_argument("--out", type=Path, required=True,
                   help="the file to write (the split export: a new folder)")
    p.set_defaults(func=lambda args: run_command(args, lambda: _run(args)))


def _run(args) -> None:
    from vfl.deploy.config import load_config
    from vfl.deploy.record import RunRecord
    from vfl.export import assemble, is_whole

    config = load_config(args.config)
    entry = config.party(args.role)
    roster = config.roster
    roles = {name: config.role_of(name) for name in roster.data_parties}
    if args.role not in roles:
        raise ConfigurationError(f"party {args.role} is the {entry.role}: only a data party's shard is exported")
    family = config.family.name
    shard_path = _shard_path(args.model, args.role)
    try:
        shard = config.family.module("shard").read_shard(shard_path, args.role, roles[args.role])
    except DataError as exc:
        raise DataError(f"party {args.role}: {exc}; --model must hold {args.role}'s own {family} shard (the work "
                        f"folder its vfl party wrote model_{args.role}.json in)") from None
    if args.action == "consent":
        if args.to is None or args.consents:
            raise ConfigurationError("vfl export consent takes --to (the recipient), and no --consents")
        consent = assemble.make_consent(shard, family=family, export_format=args.format, recipient=args.to,
                                        roles=roles, key=entry.key, certificate=entry.certificate)
        assemble.write_consent(args.out, consent)
        carried = (f"it carries {args.role}'s shard (its part of the model): hand it to {args.to} only"
                   if is_whole(args.format) else "it carries no shard")
        print(f"party {args.role}: consent to export the model as {args.format} to {args.to} written to "
              f"{args.out}; {carried}")
        return
    if args.to is not None:
        raise ConfigurationError("vfl export writes the export at the recipient, --role; --to is for vfl export "
                                 "consent")
    with RunRecord.for_config(_workdir(shard_path), "export", config, args.role, failure_line) as record:
        record.update(export_format=args.format, out=str(args.out))
        consents = [assemble.read_consent(path) for path in args.consents]
        out = assemble.export(args.out, family=family, fmt=args.format, recipient=args.role, roles=roles,
                              shards={args.role: shard}, consents=consents, trust=config.tls(args.role))
        record.finish(_summary(out, args.format, consents))
    print(f"party {args.role}: model exported as {args.format} to {out}")


def _summary(out: Path, fmt: str, consents: list[dict]) -> dict:
    """What the run record keeps of an export: its format, where it went, the files written, who signed what."""
    files = sorted(p.name for p in out.iterdir()) if out.is_dir() else [out.name]
    signed = {c["consent"]["party"]: {"shard_sha256": c["consent"]["shard_sha256"],
                                      "signed_at": c["consent"]["signed_at"]} for c in consents}
    return {"export": {"format": fmt, "out": str(out), "files": files, "signed": signed}}


def _workdir(shard: Path) -> Path:
    """The work folder of the party's shard, where the export's run record goes (``WORKDIR/runs/``): the folder
    ``vfl party`` wrote it in, or the work folder of the run record holding it."""
    from vfl.deploy.record import RECORD_ID

    folder = shard.resolve().parent
    return folder.parent.parent if folder.parent.name == "runs" and RECORD_ID.match(folder.name) else folder


def _shard_path(model: Path, role: str) -> Path:
    """The shard ``--model`` names: the file itself, or ``model.json`` / ``model_ROLE.json`` in a folder."""
    if not model.is_dir():
        return model
    for name in ("model.json", f"model_{role}.json"):
        if (model / name).is_file():
            return model / name
    raise ConfigurationError(f"{model} holds no model shard (model.json, a run record's, or model_{role}.json, "
                             "the one vfl party writes)")
