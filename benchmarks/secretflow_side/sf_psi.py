"""One party of SecretFlow's PSI (spu 0.9.5, ``psi_execute``) for ``python -m benchmarks --psi --against secretflow``.

Run by SecretFlow's interpreter only (it imports ``spu``; vfl never imports this folder, which has no
``__init__.py``)::

    SF_PYTHON sf_psi.py ROLE N OVERLAP PROTOCOL HUB_ADDRESS SPOKE_ADDRESS CERTS FOLDER

ROLE is ``B`` (the hub of vfl's bench: rank 0, the receiver) or ``A``; PROTOCOL one of ``ECDH`` (curve
25519, spu's default curve), ``RR22``, ``KKRT``; both parties receive the intersection
(``broadcast_result``), as both of vfl's do.  The ids are vfl's bench's (:func:`benchmarks.psi.party_ids`,
copied here so that this interpreter needs no vfl): B holds ``customer-0..n-1``, A the ``n - OVERLAP * n``
following ones, each in its own order.  The link is brpc with mutual TLS on CERTS/{ca,ROLE}.pem and
ROLE.key (what vfl's bench uses too).  Prints one JSON line: wall and CPU seconds of ``psi_execute``
(the process with all its threads, plus the ``sort`` processes the engine runs), the bytes it sent
(the kernel's ``tcpi_bytes_acked`` summed over the process's TCP sockets when the engine returns: on the
wire, TLS records included), the intersection.
"""

import json
import os
import resource
import socket
import struct
import sys
import time

import numpy as np

HUB, SPOKE = "B", "A"


def party_ids(role: str, n: int, overlap: float) -> list[str]:
    """vfl's bench's ids (benchmarks/psi.py), as text."""
    start = 0 if role == HUB else n - int(round(overlap * n))
    values = np.arange(start, start + n)
    np.random.default_rng(1 if role == HUB else 2).shuffle(values)   # data layout only, nothing secret
    return ["customer-%09d" % v for v in values.tolist()]


def cpu_seconds() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def bytes_sent() -> int:
    """Bytes this process's open TCP sockets have sent (and had acknowledged), from the kernel's tcp_info."""
    total = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                continue
            sock = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue
        try:
            if sock.type == socket.SOCK_STREAM and sock.family in (socket.AF_INET, socket.AF_INET6):
                info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
                if len(info) >= 128:
                    total += struct.unpack_from("Q", info, 120)[0]      # tcpi_bytes_acked
        except OSError:
            pass
        finally:
            sock.close()
    return total


def main(argv) -> int:
    role, n, overlap, protocol, hub_address, spoke_address, certs, folder = argv
    n, overlap = int(n), float(overlap)
    import spu.libspu.link as link
    import spu.psi as psi

    path_in, path_out = os.path.join(folder, f"ids_{role}.csv"), os.path.join(folder, f"out_{role}.csv")
    with open(path_in, "w") as f:
        f.write("id\n" + "\n".join(party_ids(role, n, overlap)) + "\n")
    desc = link.Desc()
    desc.id = f"bench-{protocol}-{n}"
    desc.add_party(HUB, hub_address)
    desc.add_party(SPOKE, spoke_address)
    desc.connect_retry_times, desc.connect_retry_interval_ms, desc.recv_timeout_ms = 120, 500, 600_000
    desc.enable_ssl = True
    for options in (desc.client_ssl_opts, desc.server_ssl_opts):
        options.cert.certificate_path = os.path.join(certs, f"{role}.pem")
        options.cert.private_key_path = os.path.join(certs, f"{role}.key")
        options.verify.ca_file_path = os.path.join(certs, "ca.pem")
        options.verify.verify_depth = 1
    context = link.create_brpc(desc, 0 if role == HUB else 1)
    config = psi.PsiExecuteConfig(
        protocol_conf=psi.PsiProtocolConfig(
            protocol=getattr(psi.PsiProtocol, f"PROTOCOL_{protocol}"), receiver_rank=0, broadcast_result=True,
            ecdh_params=psi.EcdhParams(curve=psi.EllipticCurveType.CURVE_25519)),
        input_params=psi.InputParams(path=path_in, selected_keys=["id"], keys_unique=True),
        output_params=psi.OutputParams(path=path_out))
    cpu0, start = cpu_seconds(), time.perf_counter()
    report = psi.psi_execute(config, context)
    seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu0
    sent = bytes_sent()
    with open(path_out) as f:
        found = sum(1 for line in f) - 1
    result = {"role": role, "n": n, "protocol": protocol, "seconds": seconds, "cpu_seconds": cpu,
              "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
              "intersection": int(report.intersection_count), "output_rows": found, "bytes_sent": sent}
    print(json.dumps(result), flush=True)
    sys.stdin.read()           # the bench closes it once both parties have reported: no engine leaves first
    os._exit(0)                # without brpc's teardown


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
