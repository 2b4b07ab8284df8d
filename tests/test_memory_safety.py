"""Memory files under faults and hostile folders: links never followed, cut log entries repaired, temporary files of
killed writes swept, every check of a run done before its previous plans are archived, no performance cliff on a log
without headers, a library with a byte-order mark saved into."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest
from helpers import ROOT, not_blocked, run_jarvis

from aiflows_jarvis.CoreFlowModule import (
    CUT_ENTRY_MARKER,
    MemoryFileError,
    append_log_entry,
    append_text,
    atomic_write,
    format_log_entry,
    last_log_number,
    read_log_tail,
    read_text,
    split_log_entries,
    sweep_temporary_files,
)
from aiflows_jarvis.ExtendLibraryFlowModule import SaveCodeAtomicFlow


def numbers(path) -> list:
    return [n for n, _ in split_log_entries(read_text(str(path)))]


# ~~~ Symbolic links ~~~
def test_atomic_write_replaces_a_link_and_leaves_its_target_untouched(tmp_path):
    target = tmp_path / "outside.txt"
    target.write_text("the user's file\n")
    target.chmod(0o600)
    memory = tmp_path / "memory"
    memory.mkdir()
    (memory / "plan.txt").symlink_to(target)
    old_mask = os.umask(0o022)
    try:
        atomic_write(str(memory / "plan.txt"), "1. a step\n")
    finally:
        os.umask(old_mask)
    assert target.read_text() == "the user's file\n", "the link's target is never written"
    assert not (memory / "plan.txt").is_symlink() and (memory / "plan.txt").read_text() == "1. a step\n"
    assert (memory / "plan.txt").stat().st_mode & 0o777 == 0o644, "a new file's mode, not the target's"
    assert target.stat().st_mode & 0o777 == 0o600


def test_appending_to_a_linked_log_is_refused_and_the_target_is_untouched(tmp_path):
    target = tmp_path / "bashrc"
    target.write_text("export PATH=/usr/bin\n")
    log = tmp_path / "logs.txt"
    log.symlink_to(target)
    with pytest.raises(MemoryFileError, match="is a symbolic link") as refused:
        append_log_entry(str(log), "run_code", {"code": "x"}, "echo pwned")
    assert "replace the link" in str(refused.value), "the message says what to do"
    with pytest.raises(MemoryFileError, match="is a symbolic link"):
        append_text(str(log), "more\n")
    assert target.read_text() == "export PATH=/usr/bin\n"
    assert log.is_symlink(), "a refusal changes nothing"


def test_reading_a_linked_memory_file_is_refused(tmp_path):
    secret = tmp_path / "id_rsa"
    secret.write_text("PRIVATE KEY")
    (tmp_path / "library.py").symlink_to(secret)
    (tmp_path / "logs.txt").symlink_to(secret)
    with pytest.raises(MemoryFileError, match="is a symbolic link"):
        read_text(str(tmp_path / "library.py"))
    with pytest.raises(MemoryFileError, match="is a symbolic link"):
        read_log_tail(str(tmp_path / "logs.txt"), 5, 1000)


# ~~~ What is not a regular file ~~~
@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_memory_file_that_is_not_a_regular_file_is_refused_at_once(tmp_path, kind):
    plan, log = tmp_path / "plan.txt", tmp_path / "logs.txt"
    for path in (plan, log):
        os.mkfifo(path) if kind == "fifo" else path.mkdir()
    said = "a FIFO (named pipe), not a regular file" if kind == "fifo" else "a folder, not a regular file"
    for call in (
        lambda: read_text(str(plan)),
        lambda: read_log_tail(str(log), 5, 1000),
        lambda: last_log_number(str(log)),
        lambda: append_text(str(plan), "more\n"),
        lambda: append_log_entry(str(log), "run_code", {"code": "x"}, "ok"),
    ):
        with pytest.raises(MemoryFileError, match=re.escape(said)) as refused:
            not_blocked(call, plan, log)
        assert "Remove it" in str(refused.value), "the message says what to do"
    assert (plan.is_fifo() and log.is_fifo()) if kind == "fifo" else (plan.is_dir() and log.is_dir())


def test_a_fifo_in_place_of_an_index_is_built_again_in_its_place(tmp_path, quiet_console):
    from aiflows_jarvis.CodeLibraryFlowModule import library_entries
    from aiflows_jarvis.MemoryReadingFlowModule.search_index import forget_cached_indexes, log_index

    flow = SaveCodeAtomicFlow.instantiate_from_default_config()
    flow.run({"code": "def shout(t):\n    return t.upper()\n", "memory_files": {"code_library": str(tmp_path)}})
    names = tmp_path / "_index" / "names.json"
    names.unlink()
    os.mkfifo(names)
    assert [e["name"] for e in not_blocked(lambda: library_entries(str(tmp_path)), names)] == ["shout"]
    assert names.is_file() and "FIFO" in quiet_console.text and "built again" in quiet_console.text
    log = tmp_path / "logs.txt"
    append_log_entry(str(log), "run_code", {"code": "x"}, "zebra")
    journal = tmp_path / ".index" / "logs.txt.idx"
    journal.parent.mkdir(exist_ok=True)
    os.mkfifo(journal)  # (the writer never opens it: the reader below does)
    forget_cached_indexes()
    assert not_blocked(lambda: append_log_entry(str(log), "run_code", {}, "giraffe"), journal) == 2
    assert [key for key, _ in not_blocked(lambda: log_index(str(log)), journal).search("zebra", 3)] == ["1"]
    assert journal.is_file(), "the log's index is written again in the FIFO's place"


def test_a_run_does_not_write_through_links_in_the_memory_folder_and_sweeps_old_temporary_files(tmp_path):
    """A memory folder from elsewhere (a cloned repository) holds links named like Jarvis's files."""
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in ("run.json", "plan.txt", "logs.txt"):
        (outside / name).write_text(f"the user's {name}\n")
    memory = tmp_path / "memory"
    memory.mkdir()
    (memory / "jarvis_run.json").symlink_to(outside / "run.json")
    (memory / "plan_jarvis.txt").symlink_to(outside / "plan.txt")
    (memory / "logs_jarvis.txt").symlink_to(outside / "logs.txt")
    stale, fresh = memory / ".library.py.0123456789ab.tmp", memory / ".plan_coder.txt.ba9876543210.tmp"
    stale.write_text("a write killed long ago")
    fresh.write_text("another process writing now")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))

    done = run_jarvis(tmp_path, "--demo")

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    for name in ("run.json", "plan.txt", "logs.txt"):
        assert (outside / name).read_text() == f"the user's {name}\n", f"{name}: the link's target is untouched"
    run_file = memory / "jarvis_run.json"
    assert not run_file.is_symlink() and json.loads(run_file.read_text())["goal"], "the run file is Jarvis's own"
    log = memory / "logs_jarvis.txt"
    assert not log.is_symlink() and "final_answer" in read_text(str(log)), "the new run's log is a file of its own"
    archived = sorted(p.name for p in (memory / "archive").rglob("*") if p.is_symlink())
    assert archived == ["logs_jarvis.txt", "plan_jarvis.txt"], "the links were archived, as links"
    assert not stale.exists(), "a temporary file of a write killed an hour ago is swept at start"
    assert fresh.exists(), "a fresh one may be another live process's write: kept"


# ~~~ Cut log entries ~~~
def test_an_entry_cut_by_a_kill_is_closed_and_the_next_one_is_seen_with_the_next_number(tmp_path):
    log = tmp_path / "logs.txt"
    for _ in range(3):
        append_log_entry(str(log), "run_code", {"code": "x = 1"}, "ok")
    cut = format_log_entry(4, "run_code", {"code": "y = 2"}, "a result cut short")
    with open(log, "ab") as f:  # a kill in the middle of the write
        f.write(cut.encode()[:-8])

    assert append_log_entry(str(log), "save_code", {"code": "def f(): pass"}, "Saved f") == 5, (
        "the cut entry's number is taken: none repeats"
    )

    assert numbers(log) == [1, 2, 3, 4, 5], "the reader sees the cut entry and the new one"
    entries = dict(split_log_entries(read_text(str(log))))
    assert entries[4].endswith(CUT_ENTRY_MARKER), "the cut entry says it was cut"
    assert entries[5].startswith("--- [5] ") and "Saved f" in entries[5]
    tail = read_log_tail(str(log), 2, 6000)
    assert [n for n, _ in split_log_entries(tail)] == [4, 5] and CUT_ENTRY_MARKER in tail


def test_a_header_cut_by_a_kill_keeps_its_number(tmp_path):
    log = tmp_path / "logs.txt"
    append_log_entry(str(log), "run_code", {}, "ok")
    with open(log, "ab") as f:
        f.write(b"--- [2] 2026-01-0")
    assert last_log_number(str(log)) == 2
    assert append_log_entry(str(log), "run_code", {}, "again") == 3
    text = read_text(str(log))
    assert "--- [2] 2026-01-0\n" + CUT_ENTRY_MARKER in text and numbers(log) == [1, 3]
    assert append_log_entry(str(log), "run_code", {}, "and again") == 4
    assert text.count(CUT_ENTRY_MARKER) == read_text(str(log)).count(CUT_ENTRY_MARKER), "a whole entry needs no marker"


def test_an_entry_glued_to_a_cut_one_in_an_old_log_is_not_hidden(tmp_path):
    log = tmp_path / "logs.txt"
    first, second = format_log_entry(1, "run_code", {}, "ok"), format_log_entry(2, "run_code", {}, "long result")
    log.write_text(first + "\n" + second[:-6] + format_log_entry(3, "save_code", {}, "Saved f") + "\n")
    assert numbers(log) == [1, 2, 3]
    assert "Saved f" in dict(split_log_entries(read_text(str(log))))[3]
    assert last_log_number(str(log)) == 3
    quoted = format_log_entry(4, "ask_user", {}, "the log said: --- [1] 2026-01-01 10:00:00 run_code ---")
    append_text(str(log), quoted + "\n")
    assert numbers(log) == [1, 2, 3, 4], "a header quoted in a result, with an earlier number, starts no entry"


# ~~~ Temporary files ~~~
def test_only_old_temporary_files_of_atomic_writes_are_swept(tmp_path):
    old = time.time() - 3600
    stale = tmp_path / ".plan.txt.00112233aabb.tmp"
    stale_archive = tmp_path / "archive" / ".library-20260101-1.py.ccddeeff0011.tmp"
    fresh = tmp_path / ".plan.txt.445566778899.tmp"
    users = tmp_path / "results.tmp"
    stale_search = tmp_path / "library" / "_index" / ".search.bin.0123456789ab.tmp"  # the library's kept index
    stale_archive.parent.mkdir()
    stale_search.parent.mkdir(parents=True)
    for path in (stale, stale_archive, stale_search, fresh, users):
        path.write_text("x")
    target = tmp_path / "kept.txt"
    target.write_text("a link's target")
    link = tmp_path / ".notes.txt.aabbccddeeff.tmp"
    link.symlink_to(target)
    for path in (stale, stale_archive, stale_search, users, target):
        os.utime(path, (old, old))
    os.utime(link, (old, old), follow_symlinks=False)

    removed = sweep_temporary_files(str(tmp_path))

    assert sorted(removed) == sorted([str(stale), str(stale_archive), str(stale_search)])
    assert fresh.exists() and users.exists(), "a fresh temporary file and the user's own files are kept"
    assert link.is_symlink() and target.exists(), "a link is neither removed nor followed"


def test_a_killed_atomic_write_leaves_the_file_whole(tmp_path):
    path = tmp_path / "plan.txt"
    atomic_write(str(path), "1. the approved plan\n")
    script = (
        "import os, sys; sys.path.insert(0, %r)\n"
        "from aiflows_jarvis.CoreFlowModule import atomic_write\n"
        "os.fsync = lambda fd: os.kill(os.getpid(), 9)\n"
        "atomic_write(%r, 'half')\n"
    ) % (ROOT, str(path))
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert killed.returncode == -9
    assert path.read_text() == "1. the approved plan\n"
    leftovers = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert len(leftovers) == 1, "the killed write left its temporary file ..."
    os.utime(leftovers[0], (time.time() - 3600, time.time() - 3600))
    assert sweep_temporary_files(str(tmp_path)) == [str(leftovers[0])], "... which the next run sweeps"


# ~~~ Checks before anything is archived ~~~
def _previous_run(memory):
    memory.mkdir()
    (memory / "plan_jarvis.txt").write_text("1. the previous plan\n")
    (memory / "logs_jarvis.txt").write_text(format_log_entry(1, "run_code", {}, "ok") + "\n")
    (memory / "jarvis_run.json").write_text(json.dumps({"goal": "the previous goal"}))


@pytest.mark.parametrize("trace", ["a_folder", "a_file/trace.jsonl"])
def test_a_bad_trace_path_fails_with_exit_2_before_anything_is_archived(tmp_path, trace):
    (tmp_path / "a_folder").mkdir()
    (tmp_path / "a_file").write_text("not a folder")
    memory = tmp_path / "memory"
    _previous_run(memory)

    done = run_jarvis(tmp_path, "--demo", "--trace", trace)

    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "--trace" in done.stdout and "Unexpected error" not in done.stdout and "--resume" not in done.stdout
    assert (memory / "plan_jarvis.txt").read_text() == "1. the previous plan\n", "the previous plan is where it was"
    assert (memory / "logs_jarvis.txt").exists() and not (memory / "archive").exists()
    assert json.loads((memory / "jarvis_run.json").read_text()) == {"goal": "the previous goal"}


def test_a_linked_trace_file_in_the_memory_folder_is_refused(tmp_path):
    memory = tmp_path / "memory"
    _previous_run(memory)
    target = tmp_path / "profile"
    target.write_text("the user's file\n")
    (memory / "trace.jsonl").symlink_to(target)

    done = run_jarvis(tmp_path, "--demo", "--trace", "memory/trace.jsonl")

    assert done.returncode == 2 and "symbolic link" in done.stdout, done.stdout[-2000:]
    assert target.read_text() == "the user's file\n" and not (memory / "archive").exists()


def test_a_memory_folder_that_is_a_file_is_explained_with_exit_2(tmp_path):
    (tmp_path / "memory").write_text("a file, not a folder")

    done = run_jarvis(tmp_path, "--demo")

    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "is a file, not a folder" in done.stdout and "--memory-dir" in done.stdout
    assert "Unexpected error" not in done.stdout and "--resume" not in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    assert (tmp_path / "memory").read_text() == "a file, not a folder"
    done = run_jarvis(tmp_path, "--demo", "--memory-dir", "memory/sub")
    assert done.returncode == 2 and "is a file" in done.stdout


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_memory_folder_is_explained_with_exit_2(tmp_path):
    memory = tmp_path / "memory"
    memory.mkdir()
    memory.chmod(0o555)
    try:
        done = run_jarvis(tmp_path, "--demo")
    finally:
        memory.chmod(0o755)
    assert done.returncode == 2 and "read-only" in done.stdout, done.stdout[-2000:]


# ~~~ Performance cliffs and odd encodings ~~~
def test_a_large_log_without_headers_is_read_fast(tmp_path):
    log = tmp_path / "logs.txt"
    log.write_text(("x" * 99 + "\n") * 50_000 + "THE END\n")  # 5 MB, not a single entry header
    started = time.perf_counter()
    tail = read_log_tail(str(log), 20, 6000)
    number = last_log_number(str(log))
    print(f"5 MB log without headers: tail and last number read in {time.perf_counter() - started:.3f} s")
    assert tail.endswith("THE END") and len(tail) < 6200, "its end, bounded, not the whole file"
    assert "no entry headers" in tail, "saying why it is not entries"
    assert number == 0
    assert append_log_entry(str(log), "run_code", {}, "ok") == 1


def test_a_library_with_a_byte_order_mark_is_read_and_saved_into(tmp_path):
    library = tmp_path / "library.py"
    library.write_bytes(b"\xef\xbb\xbf" + b'def f(x):\n    """Doubles x."""\n    return 2 * x\n')
    saved = SaveCodeAtomicFlow.instantiate_from_default_config().run(
        {"code": 'def g(x):\n    """Triples x."""\n    return 3 * x\n', "memory_files": {"code_library": str(library)}}
    )
    assert saved["result"].startswith("Saved g"), saved["result"]
    module = tmp_path / "library" / "general.py"
    text = module.read_bytes()
    assert not text.startswith(b"\xef\xbb\xbf"), "the mark is dropped when the library is written back"
    assert b"def f(x):" in text and b"def g(x):" in text


def test_a_run_file_that_cannot_be_written_leaves_the_previous_run_whole(tmp_path, monkeypatch, capsys):
    """A full disk when the run starts: the run file is replaced atomically, before the previous plans are archived,
    so the previous run is still there, whole, for the --resume the error suggests."""
    monkeypatch.syspath_prepend(ROOT)
    import aiflows_jarvis.CoreFlowModule as memory_module  # run.py imports atomic_write from it when it runs
    from aiflows_jarvis.app import jarvis as cli

    memory = tmp_path / "memory"
    _previous_run(memory)
    real_write = memory_module.atomic_write

    def full_disk(path, text):
        if os.path.basename(path) == "jarvis_run.json":
            raise MemoryFileError(f"Cannot write memory file {path}: [Errno 28] No space left on device")
        return real_write(path, text)

    monkeypatch.setattr(memory_module, "atomic_write", full_disk)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["--demo"]) == 1
    out = capsys.readouterr().out
    assert "No space left on device" in out
    assert json.loads((memory / "jarvis_run.json").read_text()) == {"goal": "the previous goal"}
    assert (memory / "plan_jarvis.txt").read_text() == "1. the previous plan\n" and not (memory / "archive").exists()
