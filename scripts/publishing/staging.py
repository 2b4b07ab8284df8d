"""Writing a staged module: its files with the import names rewritten, an `__init__.py` that syncs its
dependencies, its README, requirements and demo; and moving a whole staging into place."""

from __future__ import annotations

import ast
import os
import shutil
import tempfile
from typing import Dict, List, Optional

from .demos import demo_files
from .readmes import readme
from .source import (
    MODULES_DIR,
    STAGED_MARK,
    SYNC_FILE,
    SYNC_SOURCE,
    PublishError,
    direct_dependencies,
    module_files,
    requirements,
    rewrite,
)


def docstring_literal(text: str) -> str:
    """``text`` as a triple-quoted docstring literal that parses back to ``text``: backslashes escaped (no escape
    sequence is interpreted), and so are a `\"\"\"` inside and a `"` at the end (either would close the literal)."""
    body = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if body.endswith('"'):
        body = body[:-1] + '\\"'
    return f'"""{body}"""'


def _sync_module():
    """scripts/publishing/dependency_sync.py, loaded on its own (it needs only the standard library and aiflows)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_jarvis_dependency_sync", SYNC_SOURCE)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def staged_digests(staged_namespace_dir: str, module: str) -> Dict[str, str]:
    """The content digest of each staged dependency of ``module`` (those staged in ``staged_namespace_dir``)."""
    digest = _sync_module().content_digest
    return {
        d: digest(os.path.join(staged_namespace_dir, d))
        for d in sorted(direct_dependencies(module))
        if os.path.isdir(os.path.join(staged_namespace_dir, d))
    }


def staged_init(
    module: str,
    namespace: str,
    revision: str,
    local: bool,
    pins: Optional[Dict[str, str]] = None,
    digests: Optional[Dict[str, str]] = None,
) -> str:
    """The module's `__init__.py` with its dependencies synced before its classes are imported: at ``revision``, or
    for a dependency in ``pins`` at its pinned revision (the commit a push made). The sync is the module's own copy
    of scripts/publishing/dependency_sync.py, not FlowVerse's: it never prompts, deletes or replaces (see
    docs/using-the-flows.md); a dependency already synced with the code of ``digests`` (two stagings of the same
    code) is taken as it is."""
    with open(os.path.join(MODULES_DIR, module, "__init__.py"), encoding="utf-8") as f:
        source = f.read()
    tree = ast.parse(source)
    lines = source.splitlines()
    docstring = ast.get_docstring(tree) or module
    body = []
    for node in tree.body:
        if (
            node is tree.body[0]
            and isinstance(node, ast.Expr)
            and isinstance(getattr(node, "value", None), ast.Constant)
        ):
            continue  # the docstring
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "dependencies" for t in node.targets):
            continue
        body.append("\n".join(lines[node.lineno - 1 : node.end_lineno]))
    deps = sorted(direct_dependencies(module))
    out = [docstring_literal(docstring)]
    if deps:
        digests = digests or {}

        def digest(d):
            return f', "digest": "{digests[d]}"' if d in digests else ""

        sync_import = (
            f"from .{SYNC_FILE[:-3]} import project_of, sync_dependencies  # never prompts, deletes or replaces"
        )
        if local:
            out += ["import os", "", sync_import, ""]
            out.append("_STAGED = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # the staged modules")
            entries = [
                f'    {{"url": "{namespace}/{d}", "revision": os.path.join(_STAGED, "{d}"){digest(d)}}},' for d in deps
            ]
        else:
            out += [sync_import, ""]
            entries = [
                f'    {{"url": "{namespace}/{d}", "revision": "{(pins or {}).get(d, revision)}"{digest(d)}}},'
                for d in deps
            ]
        out += (
            ["dependencies = ["]
            + entries
            + [
                "]",
                "# into the project this module was synced into (else the working directory's)",
                f'sync_dependencies(dependencies, caller="{namespace}/{module}", base_dir=project_of(__file__))',
                "",
            ]
        )
    else:
        out += ["", "dependencies = []", ""]
    out += [rewrite(b, namespace) for b in body]
    return "\n".join(out).rstrip() + "\n"


def stage_module(
    module: str, out_root: str, namespace: str, revision: str, local: bool, local_dir: Optional[str] = None
) -> str:
    """Write OUT_ROOT/NAMESPACE/<module> as it will stand on the hub (or, with ``local``, as a --local staging whose
    README syncs it from ``local_dir``, the folder the staged namespace finally lives in)."""
    source = os.path.join(MODULES_DIR, module)
    target = os.path.join(out_root, namespace, module)
    if os.path.exists(target):
        shutil.rmtree(target)
    for rel in module_files(module):
        destination = os.path.join(target, rel)
        os.makedirs(os.path.dirname(destination), exist_ok=True)
        if rel.endswith((".py", ".yaml", ".md", ".txt")) and rel != "__init__.py":
            with open(os.path.join(source, rel), encoding="utf-8") as f:
                text = f.read()
            with open(destination, "w", encoding="utf-8") as f:
                f.write(rewrite(text, namespace))
        elif rel != "__init__.py":
            shutil.copy2(os.path.join(source, rel), destination)
    readme_dir = (local_dir or os.path.realpath(os.path.join(out_root, namespace))) if local else None
    files = {
        "__init__.py": staged_init(module, namespace, revision, local),
        "pip_requirements.txt": "".join(f"{r}\n" for r in requirements(module)),
        "README.md": readme(module, namespace, revision, local_dir=readme_dir),
        **demo_files(module, namespace),
    }
    if direct_dependencies(module):
        shutil.copy2(SYNC_SOURCE, os.path.join(target, SYNC_FILE))
    for name, text in files.items():
        with open(os.path.join(target, name), "w", encoding="utf-8") as f:
            f.write(text)
    with open(os.path.join(target, STAGED_MARK), "w", encoding="utf-8") as f:
        f.write(
            "Written by scripts/publish.py, which replaces this folder at its next staging into the same --out.\n"
            "Delete this file to keep publish.py from replacing the folder. It is never pushed.\n"
        )
    return target


def add_digests(staged_namespace_dir: str, modules: List[str], namespace: str, revision: str, local: bool) -> None:
    """Rewrite the staged __init__.py of each of ``modules`` with the content digest of each dependency (the
    modules must all be staged in ``staged_namespace_dir``)."""
    for module in modules:
        if direct_dependencies(module):
            text = staged_init(module, namespace, revision, local, digests=staged_digests(staged_namespace_dir, module))
            with open(os.path.join(staged_namespace_dir, module, "__init__.py"), "w", encoding="utf-8") as f:
                f.write(text)


def check_out_folders(out: str, namespace: str, modules: List[str]) -> None:
    """Raise PublishError unless every OUT/NAMESPACE/<module> that exists is a staging publish.py wrote (it has the
    STAGED_MARK file) and holds no `.git` (a clone of a hub repository, whose history a staging must never delete)."""
    refused = []
    for module in modules:
        target = os.path.join(out, namespace, module)
        if os.path.islink(target):
            refused.append(f"{target} is a symbolic link (to {os.readlink(target)}), not a folder publish.py wrote")
        elif os.path.isdir(os.path.join(target, ".git")):
            refused.append(
                f"{target} holds a git repository (.git), e.g. a clone of the hub repository: publish.py "
                "never replaces it"
            )
        elif os.path.isdir(target) and not os.path.isfile(os.path.join(target, STAGED_MARK)):
            refused.append(f"{target} was not written by publish.py (it has no {STAGED_MARK} file)")
        elif os.path.lexists(target) and not os.path.isdir(target):
            refused.append(f"{target} is a file, not a folder publish.py wrote")
    if refused:
        raise PublishError(
            "--out would replace folders publish.py did not write; nothing was written:\n  "
            + "\n  ".join(refused)
            + "\nMove them out of the way or choose another --out (a staging "
            f"publish.py wrote has a {STAGED_MARK} file and is replaced at the next staging)."
        )


def write_staging(modules: List[str], out: str, namespace: str, revision: str, local: bool) -> str:
    """Stage ``modules`` into OUT/NAMESPACE and return that folder. All of them are staged in a temporary folder
    beside it first and only then moved into place, so a failure while writing leaves the previous folders. A
    folder publish.py did not write is never replaced (check_out_folders)."""
    check_out_folders(out, namespace, modules)
    staged_dir = os.path.join(out, namespace)
    os.makedirs(staged_dir, exist_ok=True)
    temporary = tempfile.mkdtemp(prefix=".publish_", dir=staged_dir)  # same file system: the moves are renames
    try:
        for module in modules:
            stage_module(module, temporary, namespace, revision, local, local_dir=staged_dir)
        add_digests(os.path.join(temporary, namespace), modules, namespace, revision, local)
        for module in modules:
            target = os.path.join(staged_dir, module)
            if os.path.exists(target):  # a staging of ours (checked just above)
                shutil.rmtree(target)
            os.rename(os.path.join(temporary, namespace, module), target)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return staged_dir
