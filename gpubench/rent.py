"""``python -m gpubench.rent`` is ``gpubench rent``."""

import sys

from gpubench.cli import main

if __name__ == "__main__":
    main(["rent", *sys.argv[1:]])
