"""Three parties, three processes, one machine: vertical federated learning over mutual TLS.

    python examples/three_party_demo.py            # the same as: vfl demo

What it does (the code is in vfl/federation/demo.py):

1. Makes a fresh federation CA and one certificate per party (A, B, C) in a
   temporary folder, like ``vfl certs DIR --parties A B C``.
2. Splits scikit-learn's breast cancer data by columns: A gets 20 lab
   measurements, B the other 10 and the diagnosis.  Each writes its own CSV
   with an ``id`` column, in its own row order.
3. Starts three operating-system processes on 127.0.0.1, exactly what three
   machines would run::

       vfl party --config federation.toml --role A --data A_train.csv
       vfl party --config federation.toml --role B --data B_train.csv
       vfl party --config federation.toml --role C

   They connect over TLS 1.3 with mutual authentication, compare the
   fingerprint of their shared settings, and train logistic regression with
   2048-bit Paillier keys (Yang et al. 2019, Table 2).  Each process narrates
   every message it sends: to whom, what it is, its kind (ciphertext, masked,
   public) and its size; C prints the loss it decrypts after each epoch.
4. Runs federated prediction the same way (``vfl predict``) from the model
   shards each party wrote; B writes the scores.
5. Prints the AUC beside the AUC of centralized training, and the bytes each
   link carried.

Options, the same as ``vfl demo``'s: ``--feature-parties K`` (feature parties
A1 ... AK share A's columns; ``K + 2`` processes), ``--quiet`` (losses and summary
only), ``--iterations N``, ``--batch-size N``, ``--key-bits 1024`` (insecure,
faster), ``--keep DIR`` (keep every file).
"""

import argparse

from vfl.cli import run_script
from vfl.federation.cli import add_demo_arguments, demo_options
from vfl.federation.demo import run_demo


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_demo_arguments(parser)
    args = parser.parse_args(argv)
    run_demo(**demo_options(args))      # vfl's own errors: one line (run_script)
    return 0


if __name__ == "__main__":
    raise SystemExit(run_script(main))
