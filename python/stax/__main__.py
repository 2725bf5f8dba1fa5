"""`python -m stax ...` runs the stax command-line program (see stax._cli)."""
import sys

from ._cli import main

sys.exit(main())
