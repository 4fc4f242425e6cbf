"""``python -m gpubench.compare A B``: the command-line entry point of :mod:`gpubench.output.compare`."""

from gpubench.output.compare import main

if __name__ == "__main__":
    raise SystemExit(main())
