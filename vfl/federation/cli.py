"""The ``vfl certs``, ``vfl party``, ``vfl predict`` and ``vfl demo`` subcommands.

Exit codes: 0 success; 1 the federation failed (a peer gone, silent, refused,
a malformed message...) or an internal error; 2 bad input (configuration, data,
command line); 130 interrupted.  A failure is one line on standard error, never
a traceback.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from vfl.deploy.commands import add_command, add_party_options, party_workdir, run_command
from vfl.errors import ConfigurationError
from vfl.deploy.align import alignment_line

THREE_MACHINES = """\
one command per machine, each with its own data (see docs/network.md):
  machine A:  vfl party --config federation.toml --role A --data a.csv
  machine B:  vfl party --config federation.toml --role B --data b.csv
  machine C:  vfl party --config federation.toml --role C
--role is the party's name in federation.toml (A, B, C, or e.g. bank, telco, shop):
one such command for each feature party, the label party and the coordinator.
"""


def register(subparsers) -> None:
    """Add the federation subcommands to the ``vfl`` parser."""
    _register_certs(subparsers)
    _register_party(subparsers)
    _register_predict(subparsers)
    _register_align(subparsers)
    _register_demo(subparsers)


def _register_certs(subparsers) -> None:
    from vfl.federation.certs_cli import STEPS_EPILOG, CertsParser, add_steps

    parser_class, subparsers._parser_class = subparsers._parser_class, CertsParser   # vfl certs STEP ...
    try:
        p = add_command(
            subparsers, "certs",
            "make a federation CA and one key + certificate per party (or: request, ca, sign, revoke)",
            "Make a certificate authority (ca.pem, ca.key) and, for each party, a private key "
            "(NAME.key, mode 0600) and a certificate signed by the CA (NAME.pem) naming the party. "
            "Give each machine ca.pem, its own NAME.pem and NAME.key; keep ca.key offline. "
            "Whoever runs it holds every party's key: between organisations, each makes its own "
            "(vfl certs request) and a CA signs it (vfl certs sign).",
            epilog="example: vfl certs certs --parties bank telco shop C   (names as in federation.toml)\n\n"
                   + STEPS_EPILOG)
    finally:
        subparsers._parser_class = parser_class
    add_steps(p)
    p.add_argument("directory", type=Path, help="folder to write into (created if missing)")
    p.add_argument("--parties", nargs="+", default=["A", "B", "C"], metavar="NAME",
                   help="the parties' names, as in federation.toml: letters, digits and '-' (default: A B C)")
    p.add_argument("--hosts", nargs="*", default=None, metavar="HOST",
                   help="host names or IP addresses to add to every certificate, or NAME=HOST to add to one "
                        "(default: localhost 127.0.0.1); informative: peers are checked by name")
    p.add_argument("--days", type=int, default=365, help="validity in days (default: 365)")
    p.add_argument("--force", action="store_true", help="overwrite an existing ca.pem in DIRECTORY")
    p.set_defaults(func=_certs)


def _register_party(subparsers) -> None:
    p = add_command(
        subparsers, "party", "run one party of federated training (any party of federation.toml) as this process",
        "Run one party of vertical federated training over mutually authenticated TLS. "
        "Connects to its peers named in the federation file (retrying while they start): a feature "
        "party to the label party and the coordinator, those two to every party. Checks that all "
        "share the same settings, trains, and writes this party's model shard (feature and label "
        "parties) to WORKDIR/model_NAME.json. With [training] model = \"gradient_boosting\" the parties "
        "boost trees (SecureBoost) and no coordinator takes part; with model = \"mlp\" they train a split "
        "neural network (docs/mlp.md).", epilog=THREE_MACHINES)
    _common(p)
    p.add_argument("--resume", action="store_true",
                   help="continue after the last epoch every party completed (from WORKDIR/checkpoints)")
    p.set_defaults(func=_party)


def _register_predict(subparsers) -> None:
    p = add_command(
        subparsers, "predict", "run one party of federated prediction from its model shard",
        "Score new rows with the trained model, each party using only its own shard and data. "
        "The label party learns the scores and writes them (id, score, and for logistic models "
        "probability and prediction).", epilog=THREE_MACHINES.replace("vfl party", "vfl predict"))
    _common(p)
    p.add_argument("--model", type=Path, default=None,
                   help="this party's model shard (default: WORKDIR/model_NAME.json)")
    p.add_argument("--output", type=Path, default=None,
                   help="the label party: the scores CSV (default: WORKDIR/scores.csv)")
    p.set_defaults(func=_predict)


def _register_align(subparsers) -> None:
    p = add_command(
        subparsers, "align", "only align this party's rows with the others' by private set intersection",
        "Run only the private set intersection that vfl party and vfl predict run first: every data party "
        "(feature and label parties; not the coordinator) runs this command at once with its own CSV, and "
        "each writes its own rows of the intersection, in the order common to all, to --out. No id leaves "
        "its owner; every party learns the others' row counts and how many rows are shared.")
    add_party_options(p, "which party this process is (not the coordinator)")
    p.add_argument("--data", type=Path, required=True, help="this party's CSV with an id column")
    p.add_argument("--out", type=Path, required=True, help="where to write this party's aligned rows (CSV)")
    p.add_argument("--workdir", type=Path, default=None,
                   help="where this party keeps its record of the run (default: ./vfl-NAME)")
    p.add_argument("--narrate", action="store_true", help="print one line per protocol step")
    p.set_defaults(func=_align)


def _register_demo(subparsers) -> None:
    p = add_command(
        subparsers, "demo", "three parties as three processes on 127.0.0.1, narrated (breast cancer, 2048-bit keys)",
        "Make fresh certificates, start parties A, B and C as three processes on 127.0.0.1, "
        "train logistic regression on scikit-learn's breast cancer data split by columns, "
        "run federated prediction, and compare the AUC with centralized training. "
        "Narrates every protocol step. With --feature-parties K, the feature parties are A1 ... AK "
        "and K + 2 processes run.", raw=False)
    add_demo_arguments(p)
    p.set_defaults(func=_demo)


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``vfl demo`` to ``parser`` (shared with ``examples/three_party_demo.py``).

    Parameters
    ----------
    parser : argparse.ArgumentParser
        Gains ``--feature-parties``, ``--iterations``, ``--batch-size``, ``--key-bits``, ``--quiet``,
        ``--keep``, ``--board`` and ``--protocol``; :func:`demo_options` turns the parsed values into arguments of ``run_demo``.
    """
    parser.add_argument("--feature-parties", type=int, default=1, choices=range(1, 6), metavar="K",
                        help="feature parties besides the label party B and the coordinator C, 1 to 5 "
                             "(default: 1, party A; with K >= 2: A1 ... AK)")
    parser.add_argument("--iterations", type=int, default=None, help="training epochs (default: 5)")
    parser.add_argument("--batch-size", type=int, default=None, help="rows per gradient step (default: all training rows; mini-batches let a feature party infer the labels, see the README)")
    parser.add_argument("--key-bits", type=int, default=2048, help="Paillier key size (default: 2048; "
                                                                    "smaller keys are insecure, for quick looks)")
    parser.add_argument("--quiet", action="store_true", help="no per-step lines; only losses and the summary")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR",
                        help="work in DIR and keep it (certificates, CSVs, shards, transcripts)")
    parser.add_argument("--board", action="store_true",
                        help="start vfl board for every party first (their addresses are printed) and keep them "
                             "open after the demo until Ctrl-C or SIGTERM, whatever standard input is")
    parser.add_argument("--protocol", choices=["yang", "shared"], default="yang",
                        help="yang (default: each party learns its own gradient) or shared (no party learns a "
                             "gradient; docs/protocol.md)")


def demo_options(args: argparse.Namespace) -> dict:
    """The keyword arguments of :func:`vfl.federation.demo.run_demo` from :func:`add_demo_arguments`' options.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed by a parser that :func:`add_demo_arguments` set up.

    Returns
    -------
    dict
        ``feature_parties``, ``iterations``, ``batch_size``, ``key_bits``, ``quiet``, ``keep``, ``protocol`` and
        ``board``.
    """
    return {"feature_parties": args.feature_parties, "iterations": args.iterations, "batch_size": args.batch_size,
            "key_bits": args.key_bits, "quiet": args.quiet, "keep": args.keep, "protocol": args.protocol,
            "board": args.board}


def _common(p) -> None:
    add_party_options(p, "which party this process is: its name in the federation file (e.g. A, B, C, telco)")
    p.add_argument("--data", type=Path, default=None,
                   help="this party's CSV with an id column (feature and label parties; the label party's "
                        "holds the label); not for the coordinator")
    p.add_argument("--workdir", type=Path, default=None,
                   help="where this party keeps checkpoints, its shard and transcripts (default: ./vfl-NAME)")
    p.add_argument("--narrate", action="store_true", help="print one line per protocol step")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="on standard error: the peers waited for, the alignment, a bar per model over its epochs "
                        "(default: only if standard error is a terminal)")


def _workdir(args) -> Path:
    return party_workdir(args.workdir, args.role)


def _certs(args) -> int:
    from vfl.transport.tls import CA_FILE, DEFAULT_HOSTS, write_federation_certs

    def action():
        if (args.directory / CA_FILE).exists() and not args.force:
            raise ConfigurationError(f"{args.directory / CA_FILE} exists; pass --force to make a new CA "
                                     "(every party then needs new certificates)")
        hosts = _hosts(args.hosts, args.parties, DEFAULT_HOSTS)
        files = write_federation_certs(args.directory, args.parties, hosts=hosts, days=args.days)
        print(f"CA: {args.directory / CA_FILE} (give to every party); "
              f"{args.directory / 'ca.key'} (keep offline: it signs parties)")
        for name, tls in files.items():
            print(f"party {name}: {tls.certificate} and {tls.key} (mode 0600): copy to {name}'s machine only")

    return run_command(args, action)


def _hosts(given, names, default):
    if given is None:
        return list(default)
    common = [h for h in given if "=" not in h]
    per_party = {n: list(common) for n in names}
    for item in given:
        if "=" in item:
            name, host = item.split("=", 1)
            if name not in per_party:
                raise ConfigurationError(f"--hosts {item}: {name!r} is not one of the parties {names}")
            per_party[name].append(host)
    return per_party


def _recorded(task: str, run):
    """The command of ``task``: read ``--config``, then ``run(args, config, record)`` under this party's record of
    the run (``WORKDIR/runs/``: what ``vfl board`` shows), which ends finished with the summary ``run`` returns, or
    failed with the line the command prints."""
    def command(args) -> int:
        from vfl.deploy.commands import failure_line
        from vfl.deploy.config import load_config
        from vfl.deploy.record import RunRecord

        def action():
            config = load_config(args.config)
            with RunRecord.for_config(_workdir(args), task, config, args.role, failure_line) as record:
                record.finish(run(args, config, record))

        return run_command(args, action)
    return command


def _train(args, config, record) -> dict:
    """``vfl party``: run this party's part of its family's training (:mod:`vfl.families`), then say what it did."""
    party = config.family.module("party")
    summary = party.train(config, args.role, args.data, _workdir(args), args.resume, narrate=args.narrate,
                          progress=args.progress, record=record)
    _say(args.role, summary, lambda: party.say_trained(args.role, summary, config), classes=True)
    return summary


def _predict_family(args, config, record) -> dict:
    """``vfl predict``: run this party's part of its family's prediction, then say what it did."""
    party = config.family.module("party")
    summary = party.predict(config, args.role, args.data, args.model, _workdir(args), args.output,
                            narrate=args.narrate, progress=args.progress, record=record)
    _say(args.role, summary, lambda: party.say_predicted(args.role, summary), classes=False)
    return summary


def _align_rows(args, config, record) -> dict:
    """``vfl align``: only the private set intersection; this party's aligned rows written."""
    from vfl.federation.linear import align_only

    summary = align_only(config, args.role, args.data, args.out, narrate=args.narrate, record=record,
                         workdir=_workdir(args))
    print(alignment_line(args.role, summary["alignment"]))
    print(f"party {args.role}: its {summary['alignment']['shared']:,} aligned rows written to {summary['output']}")
    return summary


_party, _predict, _align = _recorded("train", _train), _recorded("predict", _predict_family), \
    _recorded("align", _align_rows)


def _say(role: str, summary: dict, lines, classes: bool) -> None:
    """Print what a party did: idle, or its alignment, its family's own ``lines()``, and the label party's report."""
    from vfl.deploy.report import label_report

    if "idle" in summary:
        print(f"party {role}: {summary['idle']}")
        return
    if "alignment" in summary:
        print(alignment_line(role, summary["alignment"]))
    for line in lines():
        print(line)
    for line in label_report(role, summary, classes=classes):
        print(line)


def _demo(args) -> int:
    from vfl.federation.demo import run_demo

    return run_command(args, lambda: run_demo(**demo_options(args)))
