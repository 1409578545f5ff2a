"""`python -m sxctl`: the command line, as the `sxctl` script runs it."""

from .cli import main

if __name__ == "__main__":
    main()
