"""``python -m gpubench.compare`` is ``gpubench compare``."""

import sys

from gpubench.cli import main

if __name__ == "__main__":
    main(["compare", *sys.argv[1:]])
