"""``python -m gpubench.validate`` is ``gpubench validate``."""

import sys

from gpubench.cli import main

if __name__ == "__main__":
    main(["validate", *sys.argv[1:]])
