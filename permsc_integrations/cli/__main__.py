"""``python -m permsc_integrations.cli`` runs the ``permsc`` command."""

import sys

from permsc_integrations.cli import main

sys.exit(main())
