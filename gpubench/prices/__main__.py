"""``python -m gpubench.prices`` is ``gpubench prices``."""

import sys

from gpubench.cli import main

if __name__ == "__main__":
    main(["prices", *sys.argv[1:]])
