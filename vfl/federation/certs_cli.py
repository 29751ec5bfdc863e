"""``vfl certs`` between organisations: ``request``, ``ca``, ``sign``, ``revoke`` and ``fingerprint``.

``vfl certs DIRECTORY`` (one CA and every party's key in one folder: the demo's and
the tests') stays as it was; a first word naming one of these steps runs the step
instead (a folder of that name is ``./request``).  Each organisation makes its own
private key and a request (``request``), a CA signs the request (``ca``, ``sign``), and
a CA removes a certificate it signed (``revoke``, a revocation list that federation.toml
names).  See docs/network.md, "Certificates between organisations".
"""

from __future__ import annotations

import argparse
from pathlib import Path

from vfl.deploy.commands import run_command, wrap
from vfl.errors import ConfigurationError

STEPS_EPILOG = """\
between organisations (each keeps its own private key; docs/network.md):
  vfl certs request --party NAME --out DIR            the party: its key (0600) and NAME.csr
  vfl certs ca --out DIR                              a CA (ca.pem, ca.key), once
  vfl certs sign --ca-dir DIR --request NAME.csr --party NAME --out NAME.pem
  vfl certs revoke --ca-dir DIR --certificate NAME.pem  add it to DIR/crl.pem
  vfl certs fingerprint NAME.pem                      what federation.toml pins
each step has its own --help: vfl certs sign --help
"""


class CertsParser(argparse.ArgumentParser):
    """``vfl certs``: the all-in-one form (``vfl certs DIRECTORY``), or a step when the first word names one."""

    steps: dict[str, argparse.ArgumentParser]

    def __init__(self, *args, **kwargs):
        kwargs["allow_abbrev"] = False          # as every vfl command: no abbreviated option
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        steps = getattr(self, "steps", {})
        if args and args[0] in steps:
            return steps[args[0]].parse_known_args(list(args[1:]), namespace)
        return super().parse_known_args(args, namespace)


def add_steps(certs: CertsParser) -> None:
    """Give the ``vfl certs`` parser its steps (each a parser of its own, ``vfl certs STEP --help``)."""
    def step(name: str, description: str, func) -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(prog=f"{certs.prog} {name}", description=wrap(description),
                                         allow_abbrev=certs.allow_abbrev)
        parser.set_defaults(func=func, command=f"certs {name}")
        certs.steps[name] = parser
        return parser

    certs.steps = {}
    p = step("request", "An organisation makes its own private key (NAME.key, mode 0600: it never leaves this "
                        "machine) and a certificate signing request (NAME.csr: the public key and the party's name, "
                        "no private key) to send to the federation's CA.", _request)
    p.add_argument("--party", required=True, metavar="NAME", help="the party's name in federation.toml")
    p.add_argument("--host", "--hosts", dest="hosts", nargs="*", default=None, metavar="HOST",
                   help="host names or IP addresses to add beside the name (default: localhost 127.0.0.1); "
                        "informative: peers are checked by name")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder to write NAME.key and NAME.csr into")
    p.add_argument("--force", action="store_true", help="replace an existing NAME.key (a renewal with a new key)")

    p = step("ca", "Make a certificate authority: ca.pem (its certificate, for every party) and ca.key (its "
                   "private key, mode 0600: keep it offline, it signs parties).", _ca)
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder to write ca.pem and ca.key into")
    p.add_argument("--name", default="vfl federation CA", help="the CA's name (default: vfl federation CA); "
                                                              "e.g. 'telco CA' when each organisation keeps its own")
    p.add_argument("--days", type=_days, default=3650, help="validity in days (default: 3650)")
    p.add_argument("--force", action="store_true", help="replace an existing CA (every certificate it signed "
                                                        "then needs signing again)")

    p = step("sign", "The CA signs a party's request: checks its signature, that it names the party (CN and DNS "
                     "name) and its key (ECDSA P-256/384/521 or RSA of 2048 bits or more), and writes the "
                     "certificate.", _sign)
    p.add_argument("--ca-dir", type=Path, required=True, metavar="DIR", help="the CA's folder (ca.pem, ca.key)")
    p.add_argument("--request", type=Path, required=True, metavar="FILE.csr", help="the party's request")
    p.add_argument("--party", required=True, metavar="NAME",
                   help="the party the request must be for (its name in federation.toml)")
    p.add_argument("--out", type=Path, required=True, metavar="FILE.pem", help="where to write the certificate")
    p.add_argument("--days", type=_days, default=365, help="validity in days (default: 365; never beyond the CA's)")
    p.add_argument("--force", action="store_true", help="replace an existing FILE.pem")

    p = step("revoke", "The CA removes a certificate it signed: adds it to its certificate revocation list "
                       "(DIR/crl.pem, signed by the CA, earlier entries kept). Parties whose federation.toml names "
                       "the list refuse that certificate at the handshake.", _revoke)
    p.add_argument("--ca-dir", type=Path, required=True, metavar="DIR", help="the CA's folder (ca.pem, ca.key)")
    p.add_argument("--certificate", type=Path, required=True, metavar="FILE.pem", help="the certificate to revoke")
    p.add_argument("--crl", type=Path, default=None, metavar="FILE", help="the revocation list (default: DIR/crl.pem)")

    p = step("fingerprint", "Print each certificate's party name, SHA-256 fingerprint (as federation.toml pins "
                            "it: fingerprint = \"sha256:...\") and dates.", _fingerprint)
    p.add_argument("certificates", type=Path, nargs="+", metavar="FILE.pem")


def _days(text: str) -> int:
    try:
        days = int(text)
    except ValueError:
        days = 0
    if days < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number of days, got {text!r}")
    return days


def _refuse_existing(path: Path, force: bool, what: str) -> None:
    if path.exists() and not force:
        raise ConfigurationError(f"{path} exists; pass --force to replace {what}")


def _request(args) -> int:
    from vfl.transport.tls import DEFAULT_HOSTS, check_role, make_request, write_private_key, write_request

    def action():
        name = check_role(args.party)
        key_path, csr_path = args.out / f"{name}.key", args.out / f"{name}.csr"
        _refuse_existing(key_path, args.force, "it (the key of the certificate in use, perhaps: a renewal can also "
                                               "go to another --out folder)")
        key, request = make_request(name, DEFAULT_HOSTS if args.hosts is None else args.hosts)
        args.out.mkdir(parents=True, exist_ok=True)
        write_private_key(key_path, key)
        write_request(csr_path, request)
        print(f"party {name}: private key {key_path} (mode 0600): it stays on this machine")
        print(f"party {name}: request {csr_path} (no private key in it): send it to the federation's CA, which "
              f"runs vfl certs sign --request {csr_path.name} --party {name} ...")

    return run_command(args, action)


def _ca(args) -> int:
    from vfl.transport.tls import CA_FILE, write_ca

    def action():
        _refuse_existing(args.out / CA_FILE, args.force, "the CA (every certificate it signed then needs signing "
                                                         "again)")
        cert, key = write_ca(args.out, args.name, args.days)
        print(f"CA {args.name!r}: {cert} (give to every party) and {key} (mode 0600: keep it offline, it signs "
              "parties)")

    return run_command(args, action)


def _sign(args) -> int:
    from vfl.transport.tls import (check_role, fingerprint, load_ca, load_request, sign_request, validity,
                                   write_certificate)

    def action():
        name = check_role(args.party)
        ca_key, ca_cert = load_ca(args.ca_dir)
        request = load_request(args.request)
        _refuse_existing(args.out, args.force, "it")
        try:
            cert = sign_request(ca_key, ca_cert, request, name, args.days)
        except ConfigurationError as exc:
            raise ConfigurationError(f"not signed: {args.request}: {exc}") from None
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_certificate(args.out, cert)
        print(f"party {name}: certificate {args.out} signed: serial {cert.serial_number:#x}, {fingerprint(cert)}, "
              f"valid until {validity(cert)[1]:%Y-%m-%d}; send it back to {name} with {args.ca_dir / 'ca.pem'}")

    return run_command(args, action)


def _revoke(args) -> int:
    from vfl.transport.tls import CRL_FILE, certificate_role, fingerprint, load_ca, load_certificate, revoke

    def action():
        ca_key, ca_cert = load_ca(args.ca_dir)
        cert = load_certificate(args.certificate)
        crl_path = args.crl or args.ca_dir / CRL_FILE
        crl = revoke(ca_key, ca_cert, cert, crl_path)
        print(f"party {certificate_role(cert)}: certificate {args.certificate} revoked (serial "
              f"{cert.serial_number:#x}, {fingerprint(cert)}); {crl_path} lists {len(list(crl))} revoked: give it to "
              f"every party (federation.toml: crl = \"{crl_path.name}\" in [federation], or in the party's own table "
              "for its own CA)")

    return run_command(args, action)


def _fingerprint(args) -> int:
    from cryptography import x509

    from vfl.transport.tls import certificate_role, fingerprint, load_certificate, validity

    def action():
        for path in args.certificates:
            cert = load_certificate(path)
            start, end = validity(cert)
            try:
                is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
            except x509.ExtensionNotFound:
                is_ca = False
            who = f"CA {certificate_role(cert)!r}" if is_ca else f"party {certificate_role(cert)}"
            print(f"{path}: {who}, {fingerprint(cert)}, valid from {start:%Y-%m-%d} to {end:%Y-%m-%d}")

    return run_command(args, action)
