"""python -m benchmarks.faults: see benchmarks/faults/__init__.py."""

import sys

from .harness import main

sys.exit(main())
