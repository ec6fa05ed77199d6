import sys

from sdfgsparse.cli import main

sys.exit(main())
