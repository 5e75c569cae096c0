from conformance.apps.cli import main
import sys

sys.exit(main())
