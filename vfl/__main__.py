"""``python -m vfl``: the same as the ``vfl`` command."""

import sys

from vfl.cli import main

if __name__ == "__main__":
    sys.exit(main())
