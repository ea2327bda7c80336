"""`python -m fractal`: the command line."""
import sys

from fractal.cli import main

sys.exit(main())
