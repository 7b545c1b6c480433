#!/usr/bin/env python
"""Django's command-line utility; `salon <command>` is the same thing installed on PATH."""

import sys

from salon.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
