"""``python -m permsc_integrations.cli`` runs the ``permsc`` command."""

import sys

from . import main

sys.exit(main())
