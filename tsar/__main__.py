import sys

from tsar.cli.main import main

sys.exit(main())
