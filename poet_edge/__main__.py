import sys

from poet_edge.cli import main

sys.exit(main())
