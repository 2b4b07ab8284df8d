"""The dependency sync of staged modules (scripts/publishing/dependency_sync.py, copied into each staged module by
scripts/publish.py): no prompt, no deletion, no rewritten .gitignore, two revisions of one dependency taken as they
are when they hold the same code and a clear error when they do not; in a separate process with stdin closed too."""

from __future__ import annotations

import builtins
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from helpers import load_script, publish

dependency_sync = load_script("publishing/dependency_sync")  # what a staged module syncs its dependencies with
DependencyConflict, content_digest, sync_dependencies = (
    dependency_sync.DependencyConflict,
    dependency_sync.content_digest,
    dependency_sync.sync_dependencies,
)

NS = "bob"


@pytest.fixture(autouse=True)
def no_prompt_and_sys_path_kept(monkeypatch):
    """A prompt fails the test; the sync's additions to sys.path are undone."""

    def refuse(*args):
        raise AssertionError("the sync asked a question")

    monkeypatch.setattr(builtins, "input", refuse)
    monkeypatch.setattr(sys, "path", list(sys.path))


def stage(out, modules=("CoreFlowModule", "CodeLibraryFlowModule", "UpdatePlanFlowModule", "MemoryReadingFlowModule")):
    """A --local staging of ``modules`` in OUT/bob (no check: what publish.py writes), as real paths."""
    staged = os.path.join(os.path.realpath(out), NS)
    for module in modules:
        publish.stage_module(module, os.path.realpath(out), NS, "main", local=True)
    publish.add_digests(staged, list(modules), NS, "main", local=True)
    return staged


def core(staged, digest=True):
    dep = {"url": f"{NS}/CoreFlowModule", "revision": os.path.join(staged, "CoreFlowModule")}
    if digest:
        dep["digest"] = content_digest(dep["revision"])
    return dep


def test_a_new_project_gets_links_flow_mod_and_flowverses_gitignore(tmp_path):
    staged = stage(tmp_path / "a")
    project = tmp_path / "project"
    project.mkdir()
    dirs = sync_dependencies([core(staged)], caller="test", base_dir=str(project))
    link = project / "flow_modules" / NS / "CoreFlowModule"
    assert dirs == [str(link)] and os.path.realpath(link) == os.path.join(staged, "CoreFlowModule")
    assert (project / "flow_modules" / "__init__.py").exists()
    assert (project / "flow_modules" / ".gitignore").read_text().splitlines()[-1] == "*", "as FlowVerse writes it"
    from aiflows.flow_verse import loading

    summary = loading.FlowModuleSpecSummary.from_flow_mod_file(str(project / "flow_modules" / "flow.mod"))
    assert summary.get_mod(f"{NS}/CoreFlowModule").revision == os.path.join(staged, "CoreFlowModule")
    assert sync_dependencies([core(staged)], caller="test", base_dir=str(project)) == [str(link)], (
        "again: nothing to do"
    )


def test_two_stagings_of_the_same_code_share_the_dependency_without_a_prompt(tmp_path):
    first, second = stage(tmp_path / "a"), stage(tmp_path / "b")
    project = tmp_path / "project"
    project.mkdir()
    sync_dependencies([core(first)], caller="test", base_dir=str(project))
    flow_mod = (project / "flow_modules" / "flow.mod").read_text()
    sync_dependencies([core(second)], caller="test", base_dir=str(project))  # FlowVerse asks Y/N here
    assert os.path.realpath(project / "flow_modules" / NS / "CoreFlowModule") == os.path.join(first, "CoreFlowModule")
    assert (project / "flow_modules" / "flow.mod").read_text() == flow_mod, "taken as it is: nothing flips"
    # a path through a symbolic link to the same folder is the same folder, digest or not
    os.symlink(first, tmp_path / "alias")
    sync_dependencies([core(str(tmp_path / "alias"), digest=False)], caller="test", base_dir=str(project))


def test_two_revisions_with_other_code_are_a_clear_error_and_nothing_changes(tmp_path):
    first, second = stage(tmp_path / "a"), stage(tmp_path / "b")
    with open(os.path.join(second, "CoreFlowModule", "text.py"), "a") as f:
        f.write("\n# another version\n")
    project = tmp_path / "project"
    project.mkdir()
    sync_dependencies([core(first)], caller="test", base_dir=str(project))
    before = (project / "flow_modules" / "flow.mod").read_text()
    with pytest.raises(DependencyConflict) as error:
        sync_dependencies([core(second)], caller=f"{NS}/UpdatePlanFlowModule", base_dir=str(project))
    message = str(error.value)
    assert (
        f"{NS}/UpdatePlanFlowModule needs {NS}/CoreFlowModule from {os.path.join(second, 'CoreFlowModule')}" in message
    )
    assert "Nothing was changed" in message and "rm flow_modules/bob/CoreFlowModule" in message.replace(os.sep, "/")
    assert os.path.realpath(project / "flow_modules" / NS / "CoreFlowModule") == os.path.join(first, "CoreFlowModule")
    assert (project / "flow_modules" / "flow.mod").read_text() == before


def test_a_users_own_copy_is_never_deleted(tmp_path):
    staged = stage(tmp_path / "a")
    project = tmp_path / "project"
    mine = project / "flow_modules" / NS / "CoreFlowModule"
    shutil.copytree(os.path.join(staged, "CoreFlowModule"), mine)
    (mine / "text.py").write_text((mine / "text.py").read_text() + "\n# my edit\n")
    with pytest.raises(DependencyConflict) as error:  # FlowVerse removes the folder without a question
        sync_dependencies([core(staged)], caller="test", base_dir=str(project))
    assert "a folder of your own" in str(error.value) and "mv flow_modules/bob/CoreFlowModule" in str(
        error.value
    ).replace(os.sep, "/")
    assert "# my edit" in (mine / "text.py").read_text() and not mine.is_symlink()
    # the same code as the staging's: taken as it is, still not FlowVerse's (flow.mod does not list it)
    (mine / "text.py").write_text(open(os.path.join(staged, "CoreFlowModule", "text.py")).read())
    sync_dependencies([core(staged)], caller="test", base_dir=str(project))
    assert not mine.is_symlink() and f"{NS}/CoreFlowModule" not in (project / "flow_modules" / "flow.mod").read_text()


def test_the_users_gitignore_keeps_its_lines(tmp_path):
    staged = stage(tmp_path / "a")
    project = tmp_path / "project"
    (project / "flow_modules" / "mine").mkdir(parents=True)
    (project / "flow_modules" / "__init__.py").write_text("")
    (project / "flow_modules" / ".gitignore").write_text("*.log\n!keep.log")
    sync_dependencies([core(staged)], caller="test", base_dir=str(project))
    lines = (project / "flow_modules" / ".gitignore").read_text().splitlines()
    assert lines[:2] == ["*.log", "!keep.log"] and "*" not in lines, "FlowVerse writes `*`: every module hidden"
    assert "/flow.mod" in lines and f"/{NS}/CoreFlowModule" in lines
    sync_dependencies([core(staged)], caller="test", base_dir=str(project))
    assert (project / "flow_modules" / ".gitignore").read_text().splitlines() == lines, "no line twice"


def test_the_sync_file_needs_only_the_standard_library_and_aiflows():
    import ast

    with open(dependency_sync.__file__, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    imported = {(node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {a.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    assert imported - set(sys.stdlib_module_names) == {"aiflows"}, "it runs before any dependency is synced"


SCRIPT = """
import json, os, sys
from aiflows import flow_verse
from aiflows.utils import logging
logging.set_verbosity_error()
flow_verse.sync_dependencies([{"url": "bob/MemoryReadingFlowModule", "revision": sys.argv[1]}])
from flow_modules.bob.MemoryReadingFlowModule import MemoryReadingAtomicFlow
flow_verse.sync_dependencies([{"url": "bob/UpdatePlanFlowModule", "revision": sys.argv[2]}])
try:
    from flow_modules.bob.UpdatePlanFlowModule import UpdatePlanAtomicFlow
    print(json.dumps({"ok": UpdatePlanAtomicFlow.instantiate_from_default_config().name}))
except ImportError as error:
    print(json.dumps({"error": type(error).__name__ + ": " + str(error)}))
"""


@pytest.mark.parametrize("same_code", [True, False])
def test_modules_of_two_stagings_in_one_project_with_stdin_closed(tmp_path, same_code):
    """Two modules that name CoreFlowModule at two revisions, imported by a separate aiflows project whose stdin is
    closed (FlowVerse's prompt raised EOFError there): the same code runs, other code is a clear ImportError."""
    first, second = stage(tmp_path / "a"), stage(tmp_path / "b")
    if not same_code:
        with open(os.path.join(second, "CoreFlowModule", "text.py"), "a") as f:
            f.write("\n# another version\n")
        publish.add_digests(second, ["UpdatePlanFlowModule"], NS, "main", local=True)
    project = tmp_path / "project"
    project.mkdir()
    (project / "main.py").write_text(textwrap.dedent(SCRIPT))
    runner = publish.project_python("import runpy\nrunpy.run_path('main.py', run_name='__main__')")
    done = subprocess.run(
        runner + [os.path.join(first, "MemoryReadingFlowModule"), os.path.join(second, "UpdatePlanFlowModule")],
        cwd=project,
        env=publish.project_env(),
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0 and "EOFError" not in done.stderr, done.stderr[-3000:]
    out = done.stdout.strip().splitlines()[-1]
    if same_code:
        assert '"ok"' in out, out
    else:
        assert "DependencyConflict: bob/UpdatePlanFlowModule needs bob/CoreFlowModule" in out, out
        assert "start a new process" in out, "CoreFlowModule is already imported: the process runs the first one"
    assert os.path.realpath(project / "flow_modules" / NS / "CoreFlowModule") == os.path.join(first, "CoreFlowModule")
