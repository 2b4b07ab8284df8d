"""Syncing a staged module's dependencies into a project's `flow_modules/` folder, without FlowVerse's prompts and
deletions.

A staged module's `__init__.py` (scripts/publish.py stages it, with a copy of this file beside it as
`_dependency_sync.py`) calls ``sync_dependencies`` instead of aiflows 0.1.7's ``flow_verse.sync_dependencies``.
It writes the same layout and the same `flow_modules/flow.mod` (aiflows' own classes read and write it), so
FlowVerse and it share a project, but it decides differently (docs/using-the-flows.md says why):

* It never asks (FlowVerse's Y/N ``input()`` raises EOFError with stdin closed, and answering Y switched the link
  under a process that kept running the old code). A dependency already in `flow_modules/` is taken as it is when it
  is the same folder (symbolic links resolved), the revision flow.mod records, or the same code (the content digest
  the staging recorded); anything else is a ``DependencyConflict`` that names the folders and what to run.
* It never deletes or replaces a folder or link: it only creates links (and fetches from the hub, through
  FlowVerse's own fetch, into a place that does not exist yet).
* It never rewrites `flow_modules/.gitignore`: a `flow_modules/` it creates gets FlowVerse's `*`; in one that was
  already there it only appends a line for each module it links.

This file must import nothing but the standard library and aiflows: it runs before any dependency is synced.
"""

from __future__ import annotations

import hashlib
import os
import sys
from typing import Dict, List, Optional

# the files that differ between two stagings of the same code (dependency revisions, the README's sync snippet,
# publish.py's mark, the hub's own file), and folders that are never part of a module
DIGEST_SKIP_FILES = {"__init__.py", "README.md", ".jarvis-staged", ".gitattributes"}
DIGEST_SKIP_DIRS = {"__pycache__", "flow_modules", "memory", ".flow_cache", ".git"}
GITIGNORE_HEADER = "# modules linked by a staged Jarvis module's dependency sync (one line each)"


class DependencyConflict(ImportError):
    """A dependency is already in `flow_modules/` as something else than what the importing module needs."""


def content_digest(folder: str) -> str:
    """sha256 over the relative paths and contents of a module folder's files, those that two stagings of the same
    code share (DIGEST_SKIP_FILES and DIGEST_SKIP_DIRS left out, and compiled files)."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(folder, followlinks=True):
        dirs[:] = sorted(d for d in dirs if d not in DIGEST_SKIP_DIRS)
        for name in sorted(files):
            if name in DIGEST_SKIP_FILES and root == folder or name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, folder).replace(os.sep, "/").encode("utf-8") + b"\0")
            with open(path, "rb") as f:
                digest.update(hashlib.sha256(f.read()).digest())
    return digest.hexdigest()


def _describe(sync_dir: str, previous) -> str:
    if os.path.islink(sync_dir):
        return f"a link to {os.path.realpath(sync_dir)}"
    if previous is not None:
        return f"synced by FlowVerse from {previous.revision}"
    return "a folder of your own (FlowVerse's flow.mod does not list it)"


def _conflict(caller: str, url: str, sync_dir: str, previous, wanted: str, base: str) -> DependencyConflict:
    shown = os.path.relpath(sync_dir, base)  # as seen from the project folder, where the sync runs
    loaded = sys.modules.get("flow_modules." + url.replace("/", "."))
    if os.path.islink(sync_dir):
        fix = (
            f"`rm {shown}` (it removes the link only), then run again: {caller} links its own {url}. "
            f"Or restage all the modules you use from one checkout (scripts/publish.py --out DIR), so that they "
            f"share one {url}"
        )
    else:
        fix = (
            f"move it away, e.g. `mv {shown} {shown}.mine` (nothing is deleted), then run again: {caller} links "
            f"its own {url}"
        )
    if loaded is not None:
        fix += f". This process has already imported {url}: start a new process after that"
    return DependencyConflict(
        f"{caller} needs {url} from {wanted}, but {shown} is already there as {_describe(sync_dir, previous)}, with "
        f"other code. Nothing was changed. To use the one {caller} needs: {fix}."
    )


def _append_gitignore(sync_root: str, line: str) -> None:
    path = os.path.join(sync_root, ".gitignore")
    text = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            text = f.read()
    lines = text.splitlines()
    if line in lines or "*" in lines:
        return
    with open(path, "a", encoding="utf-8") as f:
        if text and not text.endswith("\n"):
            f.write("\n")
        if GITIGNORE_HEADER not in lines:
            f.write(GITIGNORE_HEADER + "\n")
        f.write(line + "\n")


def project_of(module_file: str) -> Optional[str]:
    """The project a module was synced into: ``<project>`` for a file of `<project>/flow_modules/<user>/<Module>`,
    as imported (symbolic links not resolved); None for a module anywhere else."""
    module_dir = os.path.dirname(os.path.abspath(module_file))
    sync_root = os.path.dirname(os.path.dirname(module_dir))
    return os.path.dirname(sync_root) if os.path.basename(sync_root) == "flow_modules" else None


def sync_dependencies(
    dependencies: List[Dict[str, str]], caller: str = "<this module>", base_dir: Optional[str] = None
) -> List[str]:
    """Make each dependency (``{"url": "user/Repo", "revision": <folder or hub revision>, "digest"?: <content
    digest>}``) importable as `flow_modules.user.Repo` from `<base_dir>/flow_modules`, and return the sync folders.
    ``base_dir``: the working directory by default, as with FlowVerse; a staged module passes the project it was
    synced into (``project_of(__file__)``), so that its dependencies land beside it wherever the process started.
    Never prompts, deletes or replaces; raises DependencyConflict when a dependency is already there as something
    else."""
    from aiflows.flow_verse import loading

    base = os.path.abspath(base_dir or os.curdir)
    with loading._lock:
        loading.add_to_sys_path(base)
        loading.add_to_sys_path(os.path.join(base, loading.DEFAULT_FLOW_MODULE_FOLDER))
        sync_root = os.path.join(base, loading.DEFAULT_FLOW_MODULE_FOLDER)
        created_root = not os.path.lexists(sync_root)
        if created_root:
            os.mkdir(sync_root)
            loading.create_init_py(sync_root)
            with open(os.path.join(sync_root, ".gitignore"), "w", encoding="utf-8") as f:
                f.write("# auto-generated by aiflows, all synced modules will be ignored by default\n*\n")
        elif not os.path.isdir(sync_root):
            raise DependencyConflict(f"{sync_root} is not a folder: FlowVerse syncs modules into it")
        mod_file = os.path.join(sync_root, loading.FLOW_MODULE_SUMMARY_FILE_NAME)
        if os.path.exists(mod_file):
            summary = loading.FlowModuleSpecSummary.from_flow_mod_file(mod_file)
        else:
            summary = loading.FlowModuleSpecSummary(sync_root, loading.DEFAULT_CACHE_PATH)
            _append_gitignore(sync_root, "/" + loading.FLOW_MODULE_SUMMARY_FILE_NAME)
        changed = not os.path.exists(mod_file)
        synced: List[str] = []
        for dependency in dependencies:
            dependency = dict(dependency)
            local = loading.validate_and_augment_dependency(dependency, caller)
            url, revision, mod_name = dependency["url"], dependency["revision"], dependency["mod_name"]
            sync_dir = os.path.join(sync_root, *mod_name.split("/"))
            previous = summary.get_mod(url)
            if os.path.lexists(sync_dir):
                if local and os.path.realpath(sync_dir) == os.path.realpath(revision):
                    pass  # the same folder (perhaps reached through another path)
                elif (
                    not local
                    and previous is not None
                    and revision in (previous.revision, previous.commit_hash)
                    and not os.path.islink(sync_dir)
                ):
                    pass  # synced from the hub at this revision
                elif (
                    dependency.get("digest")
                    and os.path.isdir(sync_dir)
                    and content_digest(sync_dir) == dependency["digest"]
                ):
                    pass  # the same code, from another staging: taken as it is
                else:
                    raise _conflict(caller, url, sync_dir, previous, revision, base)
                synced.append(sync_dir)  # taken as it is; a folder FlowVerse did not sync stays out of flow.mod
                continue
            os.makedirs(os.path.dirname(sync_dir), exist_ok=True)
            if local:
                spec = loading.fetch_local(url, os.path.realpath(revision), sync_dir)
            else:  # fetch_remote removes nothing here: sync_dir does not exist
                spec = loading.fetch_remote(url, revision, sync_dir, summary.cache_root)
            summary.add_mod(spec)
            synced.append(sync_dir)
            changed = True
            if not created_root:
                _append_gitignore(sync_root, "/" + mod_name)
        if changed:
            loading.write_flow_mod_summary(mod_file, summary)
        return synced
