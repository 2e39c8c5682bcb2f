"""``python -m dpviz``: see :mod:`dpviz.cli`."""

from dpviz.cli import main

if __name__ == "__main__":
    import sys

    sys.exit(main())
