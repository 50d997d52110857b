"""``python -m runner.cli``: the ``xferlab`` command."""
import sys

from runner.cli import main

sys.exit(main())
