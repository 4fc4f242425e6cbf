"""``python -m gpubench.launch`` is ``gpubench launch``."""

import sys

from gpubench.cli import main

if __name__ == "__main__":
    main(["launch", *sys.argv[1:]])
