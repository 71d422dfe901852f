"""Write the chart's generated templates (the CRD, the prometheus-adapter rules) from their Python owners.

    .venv/bin/python scripts/chart_generate.py            # rewrite them
    .venv/bin/python scripts/chart_generate.py --check    # exit 1 when one is stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from liveplex.operator import chart

CHART = Path(__file__).resolve().parents[1] / "charts" / "liveplex"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale files")
    args = parser.parse_args()
    stale = []
    for relative, generate in chart.FILES.items():
        path, text = CHART / relative, generate()
        if path.exists() and path.read_text() == text:
            continue
        stale.append(relative)
        if not args.check:
            path.write_text(text)
    for relative in stale:
        print(f"{'stale' if args.check else 'wrote'} charts/liveplex/{relative}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
