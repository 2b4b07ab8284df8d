"""Regenerate each module's README.md from its class docstrings and default configurations.

    python scripts/update_readmes.py [--check]

The READMEs are what the hub shows (scripts/publish.py writes the same text, for the chosen namespace). --check
exits with 1 and names the READMEs that are out of date, without writing.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _publish():
    spec = importlib.util.spec_from_file_location("publish", os.path.join(HERE, "publish.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only say which READMEs are out of date")
    args = parser.parse_args(argv)
    publish = _publish()
    stale = []
    for module in publish.module_names():
        text = publish.readme(module, publish.SOURCE_NAMESPACE, "main")
        path = os.path.join(publish.MODULES_DIR, module, "README.md")
        current = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if current != text:
            stale.append(module)
            if not args.check:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
    if args.check and stale:
        print("out of date (run python scripts/update_readmes.py): " + ", ".join(stale))
        return 1
    print(f"{'updated' if stale else 'up to date'}: {', '.join(stale) or 'all READMEs'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
