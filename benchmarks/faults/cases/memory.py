"""The memory folder: symbolic links, a folder that is a file or read-only, cut logs, files deleted during a run,
stale temporary files, odd libraries."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

from ..harness import ROOT, case
from ..support import (
    ANSWER,
    CODER_GOAL,
    GOAL,
    PLAN,
    LoopbackLLMServer,
    coder_run,
    command,
    defined,
    file_kept,
    handled_exit,
    jarvis,
    library_names,
    library_source,
    memory_whole,
    previous_run,
    previous_run_untouched,
    python_child,
    read,
    short_run,
    stopped_run,
)


def _outside(ctx, name: str, text: str = "the user's own file\n"):
    path = ctx.path("outside", name)
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


@case(
    "memory_folder",
    "folder_is_a_file",
    handled="exit 2 at once: 'is a file, not a folder' and --memory-dir; "
    "no traceback, no 'Unexpected error', no --resume hint",
    lost="the file named memory is changed",
)
def folder_is_a_file(ctx):
    ctx.path("memory").write_bytes(b"a file, not a folder\n")
    done = jarvis(ctx, "--demo")
    handled_exit(ctx, done, [2], says=["is a file, not a folder", "--memory-dir"], not_says=["run again with --resume"])
    file_kept(ctx, ctx.path("memory"), b"a file, not a folder\n")


def _read_only_folder(ctx):
    """A read-only memory folder holding an earlier run: a read-only tmpfs when this process may mount (root
    writes into any folder whose mode says read-only), else chmod 555."""
    memory = ctx.path("memory")
    memory.mkdir()
    files = previous_run(memory)
    if os.geteuid() != 0:
        memory.chmod(0o555)
        ctx.on_exit(lambda: memory.chmod(0o755))
        return memory, files
    staging = ctx.path("staging")
    shutil.copytree(str(memory), str(staging))
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(memory)], capture_output=True)
    if mounted.returncode:
        ctx.skip("root, and a read-only tmpfs cannot be mounted here: " + mounted.stderr.decode().strip()[:100])
    ctx.on_exit(lambda: subprocess.run(["umount", "-l", str(memory)], capture_output=True))
    for name in os.listdir(str(staging)):
        shutil.copy(str(staging / name), str(memory / name))
    subprocess.run(["mount", "-o", "remount,ro", str(memory)], check=True, capture_output=True)
    return memory, files


@case(
    "memory_folder",
    "folder_is_read_only",
    handled="exit 2 at once: 'read-only' and --memory-dir; no traceback, no 'Unexpected error', no --resume hint",
    lost="a file of the earlier run in the folder is changed",
)
def folder_is_read_only(ctx):
    memory, files = _read_only_folder(ctx)
    done = jarvis(ctx, "--demo")
    handled_exit(ctx, done, [2], says=["read-only", "--memory-dir"], not_says=["run again with --resume"])
    previous_run_untouched(ctx, memory, files)


@case(
    "memory_folder",
    "memory_files_are_links",
    handled="exit 0: a new run in a folder whose jarvis_run.json, plan "
    "and log are links to files outside replaces the links and never writes through them",
    lost="a link's target (outside the memory folder) is changed; jarvis_run.json is not a file of its own",
)
def memory_files_are_links(ctx):
    memory = ctx.path("memory")
    memory.mkdir()
    targets = {
        name: _outside(ctx, name.replace(".", "_") + ".bak")
        for name in ("jarvis_run.json", "plan_jarvis.txt", "logs_jarvis.txt")
    }
    for name, target in targets.items():
        os.symlink(str(target), str(memory / name))
    with LoopbackLLMServer(replies=short_run()) as server:
        done = jarvis(ctx, GOAL, server=server)
    handled_exit(ctx, done, [0])
    for target in targets.values():
        file_kept(ctx, target, b"the user's own file\n", "a link's target")
    ctx.keep(not os.path.islink(str(memory / "jarvis_run.json")), "jarvis_run.json is still a link")
    memory_whole(ctx, memory, goal=GOAL, run_file=True)


@case(
    "memory_folder",
    "library_is_a_link",
    handled="no traceback: a library.py linking to a file outside is not "
    "read into prompts nor written through (exit 0, or exit 1/2 saying 'symbolic link')",
    lost="the link's target is changed",
)
def library_is_a_link(ctx):
    memory = ctx.path("memory")
    memory.mkdir()
    secret = _outside(ctx, "id_rsa", "-----BEGIN PRIVATE KEY----- secret\n")
    os.symlink(str(secret), str(memory / "library.py"))
    with LoopbackLLMServer(replies=short_run()) as server:
        done = jarvis(ctx, GOAL, server=server)
        sent = json.dumps([r["messages"] for r in server.requests])
    handled_exit(ctx, done, [0, 1, 2])
    if done.code:
        ctx.expect("symbolic link" in done.text, "the refusal does not say it is a symbolic link")
    ctx.expect("PRIVATE KEY" not in sent, "the link's target was sent to the LLM")
    file_kept(ctx, secret, b"-----BEGIN PRIVATE KEY----- secret\n", "the link's target")


@case(
    "memory_folder",
    "links_on_resume",
    slow=True,
    handled="--resume with plan and log linking outside: refused "
    "with exit 1 or 2 saying 'symbolic link', or run without writing through them; no traceback",
    lost="a link's target is changed",
)
def links_on_resume(ctx):
    memory = stopped_run(ctx, plan=None)
    plan = _outside(ctx, "plan.bak", PLAN + "\n")
    log = _outside(ctx, "log.bak")
    os.symlink(str(plan), str(memory / "plan_jarvis.txt"))
    os.symlink(str(log), str(memory / "logs_jarvis.txt"))
    with LoopbackLLMServer(replies=short_run()[1:] + short_run()) as server:
        done = jarvis(ctx, "--resume", server=server)
    handled_exit(ctx, done, [0, 1, 2])
    if done.code:
        ctx.expect("symbolic link" in done.text, "the refusal does not say it is a symbolic link")
    file_kept(ctx, plan, (PLAN + "\n").encode(), "the plan link's target")
    file_kept(ctx, log, b"the user's own file\n", "the log link's target")


@case(
    "memory_folder",
    "trace_link_in_memory",
    slow=True,
    handled="exit 2 before anything is archived: --trace names a link in the memory folder",
    lost="the link's target changed, or the earlier run archived",
)
def trace_link_in_memory(ctx):
    memory = ctx.path("memory")
    files = previous_run(memory)
    target = _outside(ctx, "profile")
    os.symlink(str(target), str(memory / "trace.jsonl"))
    done = jarvis(ctx, "--demo", "--trace", "memory/trace.jsonl")
    handled_exit(ctx, done, [2], says=["symbolic link"])
    file_kept(ctx, target, b"the user's own file\n", "the link's target")
    previous_run_untouched(ctx, memory, files)


@case(
    "memory_folder",
    "stale_temporary_files",
    handled="exit 0, and the 2.7 MB of .tmp files that killed writes "
    "left an hour ago are swept (in memory/ and memory/archive/)",
    lost="a fresh .tmp (another process's write in progress) or the user's own results.tmp is removed",
)
def stale_temporary_files(ctx):
    memory = ctx.path("memory")
    (memory / "archive").mkdir(parents=True)
    old = time.time() - 3600
    stale = [memory / f".library.py.{i:012x}.tmp" for i in range(20)]
    stale.append(memory / "archive" / ".plan.txt.0000000000ab.tmp")
    for path in stale:
        path.write_bytes(b"x" * 130_000)
        os.utime(str(path), (old, old))
    fresh, users = memory / ".plan_coder.txt.ba9876543210.tmp", memory / "results.tmp"
    fresh.write_text("another process writing now")
    users.write_text("the user's results")
    os.utime(str(users), (old, old))
    with LoopbackLLMServer(replies=short_run()) as server:
        done = jarvis(ctx, GOAL, server=server)
    handled_exit(ctx, done, [0])
    left = [p.name for p in stale if p.exists()]
    ctx.expect(not left, f"{len(left)} stale temporary files were not swept")
    file_kept(ctx, fresh, b"another process writing now", "a fresh temporary file")
    file_kept(ctx, users, b"the user's results")


@case(
    "memory_folder",
    "cut_log_entry_then_resume",
    handled="exit 0: --resume on a log whose last entry a kill cut; "
    "the cut entry is closed with a marker and the next entry is numbered after it",
    lost="an earlier log entry is gone, or an entry is glued to the cut one or numbered twice",
)
def cut_log_entry_then_resume(ctx):
    from aiflows_jarvis.CoreFlowModule import CUT_ENTRY_MARKER, format_log_entry

    memory = stopped_run(ctx)
    first = format_log_entry(1, "Coder", {"goal": "compute"}, "Coder finished: 6 * 7 = 42")
    cut = format_log_entry(2, "update_plan", {"updated_plan": PLAN + " [done]"}, "The plan was updated")
    (memory / "logs_jarvis.txt").write_text(first + "\n" + cut[:-25])
    with LoopbackLLMServer(replies=short_run()[1:]) as server:
        done = jarvis(ctx, "--resume", server=server)
    handled_exit(ctx, done, [0])
    log = read(memory / "logs_jarvis.txt")
    ctx.keep("Coder finished: 6 * 7 = 42" in log, "the first entry is gone")
    ctx.expect(CUT_ENTRY_MARKER in log, "the cut entry was not marked")
    memory_whole(ctx, memory, goal=GOAL, logs_end_whole=True)


@case(
    "memory_folder",
    "log_deleted_during_the_run",
    slow=True,
    handled="exit 0: logs_jarvis.txt deleted while the controller thinks; the run goes on and the log is written again",
    lost="jarvis_run.json or the plan is lost",
)
def log_deleted_during_the_run(ctx):
    log = ctx.path("memory", "logs_jarvis.txt")

    def delete_then(reply):
        def serve(_body):
            if log.exists():
                log.unlink()
            return reply

        return serve

    replies = [
        PLAN,
        command("update_plan", updated_plan=PLAN + " [done]"),
        delete_then(command("final_answer", answer=ANSWER)),
        command("finish", summary="Answered."),
    ]
    with LoopbackLLMServer(replies=replies) as server:
        done = jarvis(ctx, GOAL, server=server)
    handled_exit(ctx, done, [0])
    ctx.expect(log.exists() and "final_answer" in read(log), "the log was not written again")
    memory_whole(ctx, ctx.path("memory"), goal=GOAL, run_file=True, plan=PLAN)


@case(
    "memory_folder",
    "memory_folder_deleted_during_the_run",
    slow=True,
    handled="no traceback and no 'Unexpected "
    "error': the whole memory folder deleted mid-run ends the run with a clear message or is made again "
    "(exit 0 or 1)",
    lost="none can be (the user deleted it); the case checks the run's behaviour",
)
def memory_folder_deleted(ctx):
    memory = ctx.path("memory")

    def delete_then(_body):
        shutil.rmtree(str(memory), ignore_errors=True)
        return command("final_answer", answer=ANSWER)

    with LoopbackLLMServer(replies=[PLAN, delete_then, command("finish", summary="Answered.")]) as server:
        done = jarvis(ctx, GOAL, server=server)
    handled_exit(ctx, done, [0, 1])


@case(
    "memory_folder",
    "library_deleted_by_shell_code",
    slow=True,
    handled="exit 0, and Coder's log says the library was deleted while the code ran, and where its copy is",
    lost="the library (with the user's function) is neither in memory/ nor in memory/archive/",
)
def library_deleted_by_shell_code(ctx):
    memory = ctx.path("memory")
    memory.mkdir()
    library = b"def mine(x):\n    '''The user's own.'''\n    return x\n"
    (memory / "library.py").write_bytes(library)
    with LoopbackLLMServer(replies=coder_run(f"rm {memory / 'library' / 'general.py'}", "bash")) as server:
        done = jarvis(ctx, GOAL, server=server)
    handled_exit(ctx, done, [0])
    ctx.expect("was deleted while this code ran" in read(memory / "logs_coder.txt"), "Coder was not told")
    # (the run moved library.py into the package, library/general.py, and archived it: the copy sought is the
    # module's, kept when the code changed it)
    copies = [p for p in (memory / "archive").rglob("library.general-*.py")] if (memory / "archive").exists() else []
    ctx.keep(any(b"def mine(x):" in p.read_bytes() for p in copies), "the user's library is lost")


@case(
    "memory_folder",
    "run_code_overwrites_the_library",
    slow=True,
    handled="exit 0, and Coder's log says library.py was changed while the code ran",
    lost="the library as it was (the user's function) is not in memory/archive/",
)
def run_code_overwrites_the_library(ctx):
    memory = ctx.path("memory")
    memory.mkdir()
    library = b"def mine(x):\n    '''The user's own.'''\n    return x\n"
    (memory / "library.py").write_bytes(library)
    module = str(memory / "library" / "general.py")
    with LoopbackLLMServer(replies=coder_run(f"open({module!r}, 'w').write('x = 1\\n')")) as server:
        done = jarvis(ctx, GOAL, server=server)
    handled_exit(ctx, done, [0])
    ctx.expect("was changed while this code ran" in read(memory / "logs_coder.txt"), "Coder was not told")
    # (the run moved library.py into the package, library/general.py, and archived it: the copy sought is the
    # module's, kept when the code changed it)
    copies = [p for p in (memory / "archive").rglob("library.general-*.py")] if (memory / "archive").exists() else []
    ctx.keep(any(b"def mine(x):" in p.read_bytes() for p in copies), "the user's library is lost")


def save_with_flow(library: str, code: str, **args) -> str:
    from aiflows_jarvis.ExtendLibraryFlowModule import SaveCodeAtomicFlow

    flow = SaveCodeAtomicFlow.instantiate_from_default_config()
    return flow.run({"code": code, "memory_files": {"code_library": library}, **args})["result"]


@case(
    "memory_folder",
    "library_with_a_byte_order_mark",
    handled="SaveCodeAtomicFlow saves into a library.py that starts with a UTF-8 BOM ('Saved g')",
    lost="the function already in the library is gone",
)
def library_with_a_byte_order_mark(ctx):
    library = ctx.path("library.py")
    library.write_bytes(b"\xef\xbb\xbfdef f(x):\n    '''Doubles x.'''\n    return 2 * x\n")
    result = save_with_flow(str(library), "def g(x):\n    '''Triples x.'''\n    return 3 * x\n")
    ctx.expect(result.startswith("Saved g"), f"not saved: {result}")
    ctx.keep("def f(x):" in library_source(os.path.dirname(str(library))), "f is gone")


@case(
    "memory_folder",
    "library_that_does_not_compile",
    handled="SaveCodeAtomicFlow refuses to save into a "
    "library.py the user broke ('does not compile'), saying it must be fixed first",
    lost="the user's broken library.py is changed",
)
def library_that_does_not_compile(ctx):
    library = ctx.path("library.py")
    broken = b"def f(x):\n    return (x\n"
    library.write_bytes(broken)
    result = save_with_flow(str(library), "def g(x):\n    '''Triples x.'''\n    return 3 * x\n")
    ctx.expect("does not compile" in result and result.startswith("Nothing was saved"), f"result: {result}")
    file_kept(ctx, library, broken, "the library")


@case(
    "memory_folder",
    "library_search_index_is_a_link",
    handled="exit 0: the kept search index of a library of "
    "1,200 functions, replaced by a link to a file outside, is not read; the index is built again and kept in the "
    "link's place",
    lost="the link's target is changed, or a function of the library is missing",
)
def library_search_index_is_a_link(ctx):
    memory = ctx.path("memory")
    memory.mkdir()
    count = 1200  # over the count from which the index is kept (search_index._CACHE_FROM)
    functions = (
        f"def tide_{i}(hour):\n    '''The tide at harbour number {i}.'''\n    return hour + {i}\n" for i in range(count)
    )
    (memory / "library.py").write_text("\n\n".join(functions))
    from aiflows_jarvis.CodeLibraryFlowModule import migrate_library
    from aiflows_jarvis.MemoryReadingFlowModule.search_index import library_index

    migrate_library(str(memory / "library"))
    library_index(str(memory / "library"))  # (the reader indexes the library and keeps the index)
    kept = memory / "library" / "_index" / "search.bin"
    ctx.expect(kept.is_file(), "reading the library kept no search index")
    secret = _outside(ctx, "notes.bin", "the user's own notes\n")
    kept.unlink()
    os.symlink(str(secret), str(kept))
    code = "from library import tide_3\nprint(tide_3(1))"
    with LoopbackLLMServer(replies=coder_run(code)) as server:  # (Coder's prompts show the library)
        done = jarvis(ctx, CODER_GOAL, server=server)
        sent = json.dumps([r["messages"] for r in server.requests])
    handled_exit(ctx, done, [0])
    ctx.expect("own notes" not in sent, "the link's target was sent to the LLM")
    ctx.expect(kept.is_file() and not kept.is_symlink(), "the index was not built again in the link's place")
    file_kept(ctx, secret, b"the user's own notes\n", "the link's target")
    ctx.keep(set(library_names(memory) or []) >= {f"tide_{i}" for i in range(count)}, "a function is missing")


@case(
    "memory_folder",
    "function_named_like_a_module",
    handled="SaveCodeAtomicFlow refuses `def data(...)` into "
    "module charts when library/data.py exists ('Nothing was saved', naming library/data.py and proposing "
    "another name; charts.py does not define `data`), then saves it under that name",
    lost="library/data.py (the module and its function) changed",
)
def function_named_like_a_module(ctx):
    library = ctx.path("library.py")
    ctx.expect(
        save_with_flow(str(library), "def growth(v):\n    return v\n", module="data").startswith("Saved"), "no save"
    )
    data = ctx.path("library", "data.py").read_bytes()
    result = save_with_flow(str(library), "def data(points):\n    return points\n", module="charts")
    ctx.expect(result.startswith("Nothing was saved") and "library/data.py" in result, f"result: {result}")
    proposed = result.split("(e.g. `", 1)[-1].split("`", 1)[0]
    ctx.expect(proposed.isidentifier() and proposed != "data", f"no other name proposed: {result}")
    if proposed.isidentifier():
        renamed = save_with_flow(str(library), f"def {proposed}(points):\n    return points\n", module="charts")
        ctx.expect(renamed.startswith("Saved"), f"the name proposed is refused too: {renamed}")
    file_kept(ctx, ctx.path("library", "data.py"), data, "library/data.py")
    charts = ctx.path("library", "charts.py")
    ctx.expect(not charts.exists() or "def data(" not in read(charts), "charts.py defines data")


def _indexed_library(memory, count: int = 30) -> None:
    """``memory/library/``, indexed, with ``count`` functions `tide_<n>` (moved in from a library.py)."""
    memory.mkdir(exist_ok=True)
    functions = (
        f"def tide_{i}(hour):\n    '''The tide at harbour number {i}.'''\n    return hour + {i}\n" for i in range(count)
    )
    (memory / "library.py").write_text("\n\n".join(functions))
    from aiflows_jarvis.CodeLibraryFlowModule import migrate_library

    migrate_library(str(memory / "library"))


def _run_on_a_damaged_index(ctx, damaged, data: bytes, said: str):
    memory = ctx.path("memory")
    _indexed_library(memory)
    index = memory / "library" / "_index" / damaged
    ctx.expect(index.is_file(), f"the migration made no {damaged}")
    index.write_bytes(data)
    code = "from library import tide_3\nprint(tide_3(1))"
    with LoopbackLLMServer(replies=coder_run(code)) as server:  # (Coder's prompts show the library)
        done = jarvis(ctx, CODER_GOAL, server=server)
        sent = json.dumps([r["messages"] for r in server.requests])
    handled_exit(ctx, done, [0])
    lines = [line for line in done.text.splitlines() if damaged in line]
    ctx.expect(
        len(lines) == 1 and said in lines[0] and "built again" in lines[0],
        f"the run does not say in one line that {damaged} was built again: {lines}",
    )
    ctx.expect("def tide_29(hour)" in sent, "the library's functions are not in the prompts")
    ctx.expect(index.is_file() and json.loads(read(index)), f"{damaged} was not written again")
    ctx.keep(set(library_names(memory) or []) >= {f"tide_{i}" for i in range(30)}, "a function is missing")


@case(
    "memory_folder",
    "names_index_not_utf8",
    handled="exit 0: library/_index/names.json with a Latin-1 byte is "
    "built again from the modules, said in one line ('not UTF-8', 'built again'); the prompts show the library "
    "(it was 'Cannot read memory file' and exit 1 on every run)",
    lost="a function of the library is missing",
)
def names_index_not_utf8(ctx):
    _run_on_a_damaged_index(ctx, "names.json", b'{"version": 1, "modules": {"caf\xe9": {}}, "names": {}}', "not UTF-8")


@case(
    "memory_folder",
    "module_index_emptied",
    handled="exit 0: a module's index (library/_index/maths.json) "
    "emptied is built again from the module, said in one line ('empty', 'built again'); the prompts show its "
    "functions (they vanished from prompts and search for good)",
    lost="a function of the library is missing",
)
def module_index_emptied(ctx):
    _run_on_a_damaged_index(ctx, "maths.json", b"", "empty")


@case(
    "memory_folder",
    "names_index_is_a_fifo",
    timeout=120,
    handled="exit 0 within the case's time: a FIFO in "
    "place of library/_index/names.json is not opened blocking; the index is built again in its place, said in "
    "one line ('FIFO', 'built again') (the run hung with nothing said)",
    lost="a function of the library is missing",
)
def names_index_is_a_fifo(ctx):
    memory = ctx.path("memory")
    _indexed_library(memory)
    names = memory / "library" / "_index" / "names.json"
    names.unlink()
    os.mkfifo(str(names))
    with LoopbackLLMServer(replies=coder_run("from library import tide_3\nprint(tide_3(1))")) as server:
        done = jarvis(ctx, CODER_GOAL, server=server, timeout=100)
    handled_exit(ctx, done, [0])
    lines = [line for line in done.text.splitlines() if "names.json" in line]
    ctx.expect(len(lines) == 1 and "FIFO" in lines[0] and "built again" in lines[0], f"not said in one line: {lines}")
    ctx.expect(names.is_file(), "names.json was not written again in the FIFO's place")
    ctx.keep(set(library_names(memory) or []) >= {f"tide_{i}" for i in range(30)}, "a function is missing")


@case(
    "memory_folder",
    "log_index_is_a_fifo",
    timeout=120,
    handled="exit 0 within the case's time: a FIFO in place "
    "of the log's search index (memory/.index/logs_jarvis.txt.idx) is never opened by the run's writers; the "
    "reader that searches the log does not open it blocking: it says so ('FIFO', 'built again') and builds the "
    "index again in its place (the run hung with nothing said)",
    lost="the memory folder's plans or logs are missing",
)
def log_index_is_a_fifo(ctx):
    memory = ctx.path("memory")
    (memory / ".index").mkdir(parents=True)
    journal = memory / ".index" / "logs_jarvis.txt.idx"
    os.mkfifo(str(journal))
    with LoopbackLLMServer(replies=short_run()) as server:
        done = jarvis(ctx, GOAL, server=server, timeout=100)
    handled_exit(ctx, done, [0])
    search = python_child(ctx, SEARCH_LOG, str(memory / "logs_jarvis.txt"), ROOT)
    out, _ = search.communicate(timeout=60)
    lines = [line for line in out.splitlines() if "logs_jarvis.txt.idx" in line]
    ctx.expect(
        search.returncode == 0 and lines and "FIFO" in lines[0] and "built again" in lines[0],
        f"not said (exit {search.returncode}): {out[-500:]!r}",
    )
    ctx.expect(journal.is_file(), "the log's index was not written again in the FIFO's place")
    memory_whole(ctx, memory, goal=GOAL, run_file=True, plan=PLAN)


SEARCH_LOG = """
import sys
sys.path.insert(0, sys.argv[2])
from aiflows_jarvis.MemoryReadingFlowModule.search_index import log_index
print(len(log_index(sys.argv[1])), "entries indexed")
"""


@case(
    "memory_folder",
    "module_that_does_not_compile",
    handled="exit 0: a library module broken by hand "
    "(library/charts.py, line 3) is said once on the console ('does not compile', 'line 3'), and `from library "
    "import bar_chart` in run_code fails naming library/charts.py and line 3 (it said 'cannot import name')",
    lost="the broken module or another module's function is changed or missing",
)
def module_that_does_not_compile(ctx):
    memory = ctx.path("memory")
    _indexed_library(memory)
    broken = b"def bar_chart(values):\n    '''Bars.'''\n    return (values\n"
    (memory / "library" / "charts.py").write_bytes(broken)
    code = "from library import tide_3\nprint(tide_3(1))\nfrom library import bar_chart"
    replies = coder_run(code)  # the run fails (the import): Coder's controller is asked, and finishes
    replies.insert(-1, command("finish", summary="The import of bar_chart failed: library/charts.py is broken."))
    with LoopbackLLMServer(replies=replies) as server:
        done = jarvis(ctx, CODER_GOAL, server=server)
    handled_exit(ctx, done, [0])
    said = [line for line in done.out.splitlines() if "charts.py does not compile" in line]
    ctx.expect(len(said) == 1 and "line 3" in said[0], f"not said once on the console: {said}")
    result = read(memory / "logs_coder.txt")
    ctx.expect(
        "library/charts.py" in result and "line 3" in result,
        f"the import error does not name the module and line: {result[result.find('ImportError') :][:300]!r}",
    )
    file_kept(ctx, memory / "library" / "charts.py", broken, "the broken module")
    ctx.keep(
        set(defined(read(memory / "library" / "maths.py"))) >= {f"tide_{i}" for i in range(30)},
        "a function of library/maths.py is missing",
    )


@case(
    "memory_folder",
    "module_with_a_latin_1_byte",
    handled="exit 0: a library module edited by hand with one "
    "Latin-1 byte (library/charts.py) is skipped and said once ('not UTF-8', its line); the other modules' "
    "functions are in the prompts and import (it stopped every run with 'Cannot read memory file')",
    lost="the module's bytes changed, or another module's function is missing",
)
def module_with_a_latin_1_byte(ctx):
    memory = ctx.path("memory")
    _indexed_library(memory)
    latin = b"def bar_chart(values):\n    '''Barres du caf\xe9.'''\n    return values\n"
    (memory / "library" / "charts.py").write_bytes(latin)
    with LoopbackLLMServer(replies=coder_run("from library import tide_3\nprint(tide_3(1))")) as server:
        done = jarvis(ctx, CODER_GOAL, server=server)
        sent = json.dumps([r["messages"] for r in server.requests])
    handled_exit(ctx, done, [0])
    said = [line for line in done.out.splitlines() if "charts.py" in line]
    ctx.expect(len(said) == 1 and "not UTF-8" in said[0] and "line 2" in said[0], f"not said once: {said}")
    ctx.expect("def tide_29(hour)" in sent, "the other modules' functions are not in the prompts")
    file_kept(ctx, memory / "library" / "charts.py", latin, "the hand-edited module")
    ctx.keep(
        set(defined(read(memory / "library" / "maths.py"))) >= {f"tide_{i}" for i in range(30)},
        "a function of library/maths.py is missing",
    )
