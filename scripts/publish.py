#!/usr/bin/env python
"""Stage the flow modules as they would stand on the aiflows hub (FlowVerse, on Hugging Face), check them, and
optionally push them.

    python scripts/publish.py --namespace NAME --out DIR [--modules A,B] [--revision REV | --local] [--verify-venv]
                              [--push | --dry-run] [--private] [--only A,B] [--no-pin]

For each module (and the modules it depends on), DIR/NAME/<Module>/ receives:
  * the module's code and YAML files, with `aiflows_jarvis.` rewritten to `flow_modules.NAME.`;
  * an `__init__.py` that declares its `dependencies` (`NAME/<Dep>` at REV; --push pins each at a commit) and syncs
    them with its own copy of scripts/publishing/dependency_sync.py, which never prompts, deletes or replaces;
  * `pip_requirements.txt`, `README.md` (generated from the docstrings and default configurations), and
    `demo.yaml` + `run.py`, which run the module on its own (`cd DIR/NAME/<Module> && python run.py`).

With --local, dependencies point at the staged sibling folders (real paths, as printed), so another project can use
the staged modules offline; such a staging cannot be pushed.

Before anything is written to DIR, every module is staged in a temporary folder and checked offline, each in its own
process started from an empty project folder: it syncs, imports, and its flow classes instantiate from their default
configurations (docs/architecture.md, "Publishing to the hub"). DIR/NAME/<Module> is replaced only if publish.py
wrote it (a `.jarvis-staged` file) and it holds no `.git`.

Nothing leaves the machine unless --push (or --dry-run). The token (HF_TOKEN, else `huggingface-cli login`'s) is
checked first: valid, not read-only, and NAME its user or one of its organisations. Each module is then pushed to
NAME/<Module> (branch REV; created private with --private) after the modules it depends on, stopping at the first
failure; a repository ends up holding exactly its staged folder, in one commit, and each module's `dependencies` name
the commits just pushed (--no-pin keeps REV), so it keeps working with the code it was pushed with. The summary says
what was pushed, what was not and why, and the command that pushes the rest (`--only A,B`). --dry-run makes read
requests only and says what --push would create, upload and delete.

--verify-venv also checks each module in a fresh virtual environment with only aiflows 0.1.7 and its
pip_requirements.txt, and runs the demos that need no LLM (`run.py --yes`); it needs pip to reach a package index.
If it fails, nothing is written to DIR.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
from typing import List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # the package beside this script, also when a test loads this file by its path
    sys.path.insert(0, HERE)

# The command's own names, and the parts' names its tests and scripts/update_*.py reach through `publish`
from publishing import checks, staging  # noqa: E402  (the modules: tests stand in for their functions there)
from publishing.checks import check_staged, project_env, project_python, verify_venv  # noqa: E402
from publishing.demos import DEMOS  # noqa: E402
from publishing.hub import check_hub_access, find_token, push, push_order, push_summary  # noqa: E402
from publishing.readmes import readme  # noqa: E402
from publishing.source import (  # noqa: E402
    MODULES_DIR,
    NAME_PATTERN,
    REVISION_PATTERN,
    ROOT,
    SOURCE_NAMESPACE,
    SOURCE_PACKAGE,
    STAGED_MARK,
    PublishError,
    declared_dependencies,
    dependency_closure,
    direct_dependencies,
    flow_classes,
    folder_files,
    module_files,
    module_names,
    requirements,
)
from publishing.staging import add_digests, check_out_folders, docstring_literal, stage_module, write_staging  # noqa: E402

__all__ = [
    "main",
    "retry_command",
    "checks",
    "staging",
    "project_env",
    "project_python",
    "DEMOS",
    "push_order",
    "push_summary",
    "readme",
    "MODULES_DIR",
    "REVISION_PATTERN",
    "ROOT",
    "SOURCE_NAMESPACE",
    "SOURCE_PACKAGE",
    "STAGED_MARK",
    "declared_dependencies",
    "direct_dependencies",
    "flow_classes",
    "folder_files",
    "module_files",
    "module_names",
    "requirements",
    "docstring_literal",
]


def retry_command(args: argparse.Namespace, out: str, rest: List[str]) -> str:
    """The command line that pushes ``rest`` with the options of this run."""
    script = os.path.relpath(os.path.abspath(__file__))
    parts = [
        os.path.normpath(sys.executable),
        script if not script.startswith("..") else os.path.abspath(__file__),
        "--namespace",
        args.namespace,
        "--out",
        out,
    ]
    if args.revision != "main":
        parts += ["--revision", args.revision]
    if args.modules:
        parts += ["--modules", args.modules]
    parts += ["--private"] * args.private + ["--no-pin"] * args.no_pin + ["--push", "--only", ",".join(rest)]
    return " ".join(shlex.quote(part) for part in parts)


# ~~~ Command line ~~~
def main(argv: Optional[List[str]] = None, api=None) -> int:
    """The command line. ``api`` stands in for huggingface_hub.HfApi (by default one is made with the token)."""
    parser = argparse.ArgumentParser(
        prog="publish.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--namespace",
        required=True,
        metavar="NAME",
        help="your Hugging Face user or organisation name, also the Python package flow_modules.NAME: "
        "ASCII letters, digits and '_', starting with a letter",
    )
    parser.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="the folder the modules are staged in (DIR/NAME/<Module>); its symlinks are resolved and "
        "the real paths printed: sync --local modules from those. A DIR/NAME/<Module> that "
        f"publish.py did not write (no {STAGED_MARK} file) or that holds a .git is never "
        "replaced",
    )
    parser.add_argument(
        "--modules", metavar="A,B", help="comma-separated module names (default: all); their dependencies come too"
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--revision",
        default="main",
        metavar="REV",
        help="the branch pushed to (default: main), which staged dependencies point at (a push pins "
        "them at commits, unless --no-pin); letters, digits and '_' only, as FlowVerse requires "
        "of a remote revision",
    )
    where.add_argument(
        "--local",
        action="store_true",
        help="dependencies point at the staged sibling folders, for use offline on this machine (not with --push)",
    )
    parser.add_argument(
        "--push",
        action="store_true",
        help="push each module to the hub repository NAME/<Module>, in dependency order (token: "
        "HF_TOKEN or `huggingface-cli login`)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="say what --push would create, upload and delete upstream, and push nothing (only read "
        "requests to the hub: the token check and each repository's file list)",
    )
    parser.add_argument("--private", action="store_true", help="repositories --push creates are private")
    parser.add_argument(
        "--only",
        metavar="A,B",
        help="push only these of the staged modules (the retry command a failed push prints uses it); "
        "their dependencies must already be on the hub",
    )
    parser.add_argument(
        "--no-pin",
        action="store_true",
        help="dependencies name the branch (--revision), not the commit this push gives them",
    )
    parser.add_argument(
        "--verify-venv",
        action="store_true",
        help="also check each module in a fresh venv with only aiflows 0.1.7 + its "
        "pip_requirements.txt (pip must reach a package index; dependencies come from the "
        "local staging, not the hub)",
    )
    args = parser.parse_args(argv)
    pushing = args.push or args.dry_run
    try:
        if not NAME_PATTERN.match(args.namespace):
            raise PublishError(
                f"--namespace {args.namespace!r}: use ASCII letters, digits and '_', starting with a "
                "letter. It is your Hugging Face user or organisation name and also a Python package "
                f"name: the staged code imports flow_modules.{args.namespace}, which a '-', a '.' or a "
                "leading digit would break"
            )
        if not args.local and not REVISION_PATTERN.match(args.revision):
            raise PublishError(
                f"--revision {args.revision!r}: aiflows 0.1.7's FlowVerse accepts only remote "
                "revisions made of letters, digits and '_' (no '.', '-' or '/'): e.g. v1_0, a branch "
                "named so, or a commit hash"
            )
        if args.local and pushing:
            raise PublishError(
                "--local stages modules whose __init__.py sync their dependencies from this "
                "machine's folders: they cannot be pushed. Push without --local (dependencies "
                "NAME/<Module> at --revision)"
            )
        if not pushing and (args.private or args.only or args.no_pin):
            raise PublishError("--private, --only and --no-pin are options of --push (or --dry-run)")
        out = os.path.realpath(args.out)  # a symlinked path and the real one would be two revisions to FlowVerse
        if args.local and "flow_modules" in out:
            raise PublishError(
                "--out must not be inside a folder named flow_modules: FlowVerse refuses to sync "
                "local revisions from there"
            )
        available = module_names()
        wanted = [m.strip() for m in args.modules.split(",")] if args.modules else available
        unknown = [m for m in wanted if m not in available]
        if unknown:
            raise PublishError(f"unknown module(s) {unknown}; the modules are: {', '.join(available)}")
        modules = dependency_closure(wanted)
        if set(modules) != set(wanted):
            print(f"also staging their dependencies: {', '.join(sorted(set(modules) - set(wanted)))}")
        only = [m.strip() for m in args.only.split(",")] if args.only else modules
        if set(only) - set(modules):
            raise PublishError(
                f"--only {args.only}: not among the modules staged ({', '.join(modules)}): "
                f"{', '.join(sorted(set(only) - set(modules)))}; add them to --modules"
            )
        check_out_folders(out, args.namespace, modules)  # before the long check, and again when writing
        token = None
        if pushing:  # the token and the namespace before anything is staged
            token = find_token()
            if api is None:
                from huggingface_hub import HfApi

                api = HfApi(token=token)
            user = check_hub_access(api, token, args.namespace)
            print(f"the token is {user}'s and may push to {args.namespace}")

        with tempfile.TemporaryDirectory(prefix="publish_stage_") as scratch:
            # The code as it will be published, with dependencies synced from the staged folders (offline, whatever
            # --revision says); real paths, for the same reason as --out's.
            checked = os.path.join(os.path.realpath(scratch), args.namespace)
            for module in modules:
                stage_module(module, os.path.dirname(checked), args.namespace, args.revision, local=True)
            add_digests(checked, modules, args.namespace, args.revision, local=True)
            report = check_staged(checked, args.namespace, modules)
            failed = {m: r for m, r in report.items() if r != "ok"}
            if failed:
                raise PublishError(
                    "the staged modules do not pass their check; nothing was written:\n"
                    + "\n".join(f"--- {m}:\n{r}" for m, r in failed.items())
                )
            if args.verify_venv:
                bad = {m: r for m, r in verify_venv(checked, args.namespace, modules).items() if r != "ok"}
                if bad:
                    raise PublishError(
                        "some modules do not work with only aiflows + their pip_requirements.txt; "
                        "nothing was written:\n" + "\n".join(f"--- {m}:\n{r}" for m, r in bad.items())
                    )
        staged_dir = write_staging(modules, out, args.namespace, args.revision, args.local)
        for module in modules:
            print(f"staged {module} -> {os.path.join(staged_dir, module)}")
        if pushing:
            result = push(
                staged_dir,
                args.namespace,
                [m for m in modules if m in only],
                args.revision,
                token,
                api,
                private=args.private,
                pin=not args.no_pin,
                dry_run=args.dry_run,
            )
            retry = retry_command(args, out, result.not_pushed)
            print(push_summary(result, args.namespace, args.revision, args.private, retry))
            return 1 if result.failed else 0
        print(f"{len(modules)} modules staged and checked in {staged_dir}; nothing was pushed (--push pushes).")
        if args.local:
            print(
                f'Use one from another project: flow_verse.sync_dependencies([{{"url": "{args.namespace}/'
                f'<Module>", "revision": "{staged_dir}/<Module>"}}]), as its README shows (which keeps a '
                "flow_modules/.gitignore of yours)"
            )
        return 0
    except PublishError as error:
        print(f"publish.py: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
