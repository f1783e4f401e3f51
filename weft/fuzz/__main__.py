"""``python -m weft.fuzz`` (see ``weft.fuzz.cli``)."""

import sys

from weft.fuzz.cli import main

sys.exit(main())
