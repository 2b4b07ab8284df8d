#!/usr/bin/env bash
# Rename this repository's package `flow_modules.aiflows` (source folder flow_modules/aiflows) to the top-level
# package `aiflows_jarvis` (source folder aiflows_jarvis), in any checkout of this repository.
#
#     scripts/dev/rename_package.sh [REPOSITORY]      # default: the checkout this script is in
#
# 1. Every file under flow_modules/aiflows (tracked: `git mv`; untracked and not ignored: `mv`) moves to the same
#    place under aiflows_jarvis/; an ignored leftover (__pycache__) is deleted, and so is the `flow_modules/`
#    package that only held it (its __init__.py, the pkgutil one of this repository). A file that exists at both
#    places stops the script before anything is moved.
# 2. In every tracked or untracked, not ignored, text file (this script and the generated module READMEs excepted,
#    see below) the names of THIS repository's package are rewritten:
#      flow_modules.aiflows (also regex-escaped: flow_modules\.aiflows)  -> aiflows_jarvis
#      flow_modules/aiflows (a source path)                            -> aiflows_jarvis
#      "flow_modules", "aiflows" (a path built with os.path.join)      -> "aiflows_jarvis"
#    plus a few exact, file-specific rewrites (pyproject's packages.find, .gitignore, scripts/publish.py, two
#    tests). Not rewritten: FlowVerse's staging layout `flow_modules/<namespace>/` and `flow_modules.NAME`, which
#    publish.py and its tests mean, and the aiflows authors' hub namespace `aiflows/<Module>` (dependency urls).
#    A line holding the text `rename_package: keep` is never rewritten (for code that means FlowVerse's
#    flow_modules/aiflows folder of the aiflows authors, e.g. a test that simulates one), nor is a file holding
#    `rename_package: keep-file` (e.g. docs/using-the-flows.md, which explains the old name).
#    aiflows_jarvis/<Module>/README.md is generated: run `python scripts/update_readmes.py` after this script.
#
# Idempotent: a second run changes nothing. It never commits; review with `git status` / `git diff`.
set -euo pipefail

repo="${1:-$(dirname "$0")}"
cd "$(git -C "$repo" rev-parse --show-toplevel)"
OLD=flow_modules/aiflows
NEW=aiflows_jarvis

# --- 1. move the files -------------------------------------------------------------------------------------------
if [ -d "$OLD" ]; then
  tracked=$(git ls-files -- "$OLD")
  untracked=$(git ls-files -o --exclude-standard -- "$OLD")
  for f in $tracked $untracked; do
    if [ -e "$NEW/${f#"$OLD"/}" ]; then
      echo "rename_package: both $f and $NEW/${f#"$OLD"/} exist; nothing was moved" >&2
      exit 1
    fi
  done
  for f in $tracked; do
    mkdir -p "$(dirname "$NEW/${f#"$OLD"/}")"
    git mv -- "$f" "$NEW/${f#"$OLD"/}"
  done
  for f in $untracked; do
    mkdir -p "$(dirname "$NEW/${f#"$OLD"/}")"
    mv -- "$f" "$NEW/${f#"$OLD"/}"
  done
  # what is left is ignored (caches): delete it, then the empty folders
  find "$OLD" -name __pycache__ -type d -prune -exec rm -rf {} +
  find "$OLD" -name '*.py[co]' -type f -delete
  find "$OLD" -depth -type d -empty -delete
  if [ -e "$OLD" ]; then
    echo "rename_package: $OLD still holds files git ignores; moved everything else" >&2
  fi
fi
# the `flow_modules` package of this repository: its __init__.py only extended __path__ for flow_modules.aiflows
if [ -f flow_modules/__init__.py ] && grep -q 'extend_path' flow_modules/__init__.py \
   && [ -z "$(find flow_modules -mindepth 1 -not -path 'flow_modules/__init__.py' -not -path '*__pycache__*' | head -1)" ]; then
  if git ls-files --error-unmatch flow_modules/__init__.py >/dev/null 2>&1; then
    git rm -q flow_modules/__init__.py
  fi
  rm -rf flow_modules
fi

# --- 2. rewrite the names ----------------------------------------------------------------------------------------
git ls-files -z -co --exclude-standard | python3 -c '
import re, sys

SELF = "scripts/dev/rename_package.sh"
KEEP = "rename_package: keep"
GENERATED_README = re.compile(r"^aiflows_jarvis/\w+Module/README\.md$")  # written by scripts/update_readmes.py

# exact rewrites, file by file (applied before the general ones)
EXACT = {
    "pyproject.toml": [("include = [\"flow_modules*\"]", "include = [\"aiflows_jarvis*\"]")],
    ".gitignore": [("/flow_modules/flow.mod\n", "/flow_modules/\n")],
    "tests/test_module_configs.py": [("{\"flow_modules\", \"aiflows\"}", "{\"aiflows_jarvis\", \"aiflows\"}")],
    "tests/test_publish.py": [("{\"flow_modules\", \"__future__\"}",
                               "{\"flow_modules\", \"__future__\", publish.SOURCE_PACKAGE}")],
    "tests/test_performance_behaviour.py": [("os.sep + \"flow_modules\" + os.sep", "os.sep + \"aiflows_jarvis\" + os.sep")],
    "scripts/publish.py": [
        ("SOURCE_NAMESPACE = \"aiflows\"\n",
         "SOURCE_PACKAGE = \"aiflows_jarvis\"  # this repository'"'"'s package: staged code imports flow_modules.NAME instead\n"
         "SOURCE_NAMESPACE = \"aiflows\"  # the namespace of the source modules'"'"' `dependencies` urls\n"),
        ("    return (text.replace(f\"flow_modules.{SOURCE_NAMESPACE}.\", f\"flow_modules.{namespace}.\")\n"
         "                .replace(",
         "    return (re.sub(rf\"\\b{SOURCE_PACKAGE}\\.\", f\"flow_modules.{namespace}.\", text)\n"
         "                .replace("),
        # the check processes must not reach the installed source package either
        ("        if fullname != \"flow_modules\" and not fullname.startswith(\"flow_modules.\"):\n"
         "            return None\n",
         "        if fullname == \"aiflows_jarvis\" or fullname.startswith(\"aiflows_jarvis.\"):\n"
         "            raise ModuleNotFoundError(f\"No module named {fullname!r} (the source package is out of reach)\",\n"
         "                                      name=fullname)\n"
         "        if fullname != \"flow_modules\" and not fullname.startswith(\"flow_modules.\"):\n"
         "            return None\n"),
        ("    \"\"\"Finds `flow_modules` in PROJECT only, and its submodules in their parent package'"'"'s folders only.\"\"\"",
         "    \"\"\"Finds `flow_modules` in PROJECT only, and its submodules in their parent package'"'"'s folders only;\n"
         "    never this repository'"'"'s `aiflows_jarvis`.\"\"\""),
        ("for _name in [n for n in _sys.modules if n == \"flow_modules\" or n.startswith(\"flow_modules.\")]:",
         "for _name in [n for n in _sys.modules if n.split(\".\")[0] in (\"flow_modules\", \"aiflows_jarvis\")]:"),
    ],
}
GENERAL = [
    (re.compile(r"flow_modules\\\.aiflows(?!\w)"), "aiflows_jarvis"),  # inside a regular expression
    (re.compile(r"flow_modules\.aiflows(?!\w)"), "aiflows_jarvis"),
    (re.compile(r"flow_modules/aiflows(?!\w)"), "aiflows_jarvis"),
    (re.compile(r"([\"\x27])flow_modules\1,\s*([\"\x27])aiflows\2"), r"\1aiflows_jarvis\1"),
]

changed = []
for path in sys.stdin.read().split("\0"):
    if not path or path == SELF or GENERATED_README.match(path):
        continue
    try:
        with open(path, "rb") as f:
            data = f.read()
    except (FileNotFoundError, IsADirectoryError):
        continue
    if b"\0" in data:
        continue  # binary
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        continue
    if KEEP + "-file" in text:
        continue
    new = text
    for old, replacement in EXACT.get(path, []):
        if replacement not in new:  # a replacement may hold what it replaces
            new = new.replace(old, replacement)
    lines = new.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if KEEP in line:
            continue
        for pattern, replacement in GENERAL:
            line = pattern.sub(replacement, line)
        lines[i] = line
    new = "".join(lines)
    if new != text:
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(new)
        changed.append(path)
print(f"rename_package: rewrote {len(changed)} file(s)" + "".join(f"\n  {p}" for p in changed))
'
