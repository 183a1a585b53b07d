"""``python -m fastgru``: see ``fastgru._cli``."""

import sys

from ._cli import main

sys.exit(main())
