"""``python -m inturn_reports --from ... --to ...``; ``spark-submit`` runs this file unchanged."""

import sys

from inturn_reports.job import main

if __name__ == "__main__":
    sys.exit(main())
