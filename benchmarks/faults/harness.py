"""The machinery of the fault suite: cases, the context a case checks with, the runner and the report.

A case is a function registered with ``@case(klass, name, handled=..., lost=...)``. It gets a ``Ctx`` holding an
empty temporary folder, and says what it expects with ``ctx.expect(condition, what)`` (not handled when false) and
``ctx.keep(condition, what)`` (data lost when false). Each case runs in a forked child of the runner, in a session of
its own, its output going to a log file; the runner kills the session and every process working in the case's folder
when the case ends (or after its time limit), unmounts what the case mounted there, and removes the folder.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any, Callable, Dict, Iterable, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for _path in (os.path.join(ROOT, "tests"), ROOT):
    if _path not in sys.path:
        sys.path.insert(0, _path)

#: The classes, in the order they are reported, with what they try.
CLASSES = {
    "terminal": "LLM, server and file text with escape sequences, OSC 52, bidi; odd outputs (ASCII, closed pipe)",
    "llm_outage": "5xx, timeouts, invalid UTF-8 and malformed bodies, refused connections, 401/429",
    "malformed_reply": "controller replies that are not commands, huge ones, plans replaced by 'ok'",
    "memory_folder": "symbolic links, a folder that is a file or read-only, cut logs, deleted files, stale .tmp",
    "bad_input": "bad --config _target_, non-UTF-8 goal, binary --replay, bad --trace / JARVIS_TRACE, bad options",
    "concurrency": "two runs on one memory folder, two processes saving into one library.py, stale locks",
    "signals": "SIGINT, SIGTERM, SIGHUP at each stage of a run",
    "kill9": "kill -9 during writes and at random points of a run",
    "disk_full": "a full disk at the start and in the middle of a run",
    "kernel": "secrets in the kernel's environment and /proc, children that leave its process group, limits",
    "resume": "--resume after an interruption inside Coder and ExtendLibrary, after kill -9, with bad run files",
    "scale": "a 5 MB library.py, 50 MB logs, a 5 MB log without headers, 200 MB printed at once",
    "mcp": "MCP servers missing, crashing or hanging at start, printing to stdout, leaving a process; a 10 MB result, "
    "a tool that never answers under --max-time, an unset ${VAR}, a secret in env",
}


@dataclasses.dataclass
class Case:
    klass: str
    name: str
    function: Callable[["Ctx"], None]
    handled: str  # what "handled" means for this case
    lost: str  # what "data lost" means for this case
    slow: bool = False
    timeout: float = 180.0
    exclusive: bool = False  # runs alone (kill timings, memory hogs)

    @property
    def id(self) -> str:
        return f"{self.klass}/{self.name}"


REGISTRY: List[Case] = []


def case(
    klass: str,
    name: str,
    *,
    handled: str,
    lost: str,
    slow: bool = False,
    timeout: float = 180.0,
    exclusive: bool = False,
):
    """Register a case of class ``klass``; ``handled`` and ``lost`` say what the words mean for it."""
    if klass not in CLASSES:
        raise ValueError(f"unknown class {klass!r}")

    def register(function):
        found = Case(klass, name, function, handled, lost, slow, timeout, exclusive)
        if any(c.id == found.id for c in REGISTRY):
            raise ValueError(f"two cases named {found.id}")
        REGISTRY.append(found)
        return function

    return register


class Skip(Exception):
    """The case cannot be tried here (e.g. nothing can be mounted): it is not counted."""


_SHOWN_AS_IS = {"\n", "\t"}


def visible(text: Any) -> str:
    """``text`` with what a terminal would act on (C0/C1 controls, DEL, bidirectional controls) written as escapes:
    the report quotes hostile text and must not obey it."""
    return "".join(
        c
        if (c.isprintable() or c in _SHOWN_AS_IS) and not 0x202A <= ord(c) <= 0x202E and not 0x2066 <= ord(c) <= 0x2069
        else repr(c)[1:-1]
        for c in str(text)
    )


def _short(text: Any, limit: int = 400) -> str:
    text = visible(text)
    return text if len(text) <= limit else text[: limit - 20] + f" ... [{len(text) - limit + 20} more]"


class Ctx:
    """What a case works in (``folder``, empty) and checks with."""

    def __init__(self, found: Case, folder: str):
        self.case = found
        self.folder = pathlib.Path(folder)
        self.failures: List[str] = []
        self.losses: List[str] = []
        self.notes: List[str] = []
        self.figures: Dict[str, Any] = {}
        self._cleanups: List[Callable[[], None]] = []

    def expect(self, ok: Any, what: str) -> bool:
        """A condition of "handled"; ``what`` says what was expected (shown when it is not met)."""
        if not ok:
            self.failures.append(_short(what))
        return bool(ok)

    def keep(self, ok: Any, what: str) -> bool:
        """A condition of "nothing lost"; ``what`` says what was lost (shown when it is not met)."""
        if not ok:
            self.losses.append(_short(what))
        return bool(ok)

    def note(self, text: str) -> None:
        self.notes.append(_short(text))

    def figure(self, name: str, value: Any) -> None:
        self.figures[name] = value

    def skip(self, reason: str) -> None:
        raise Skip(reason)

    def on_exit(self, cleanup: Callable[[], None]) -> None:
        """Run ``cleanup`` when the case ends, however it ends (last registered, first run)."""
        self._cleanups.append(cleanup)

    def path(self, *parts: str) -> pathlib.Path:
        return self.folder.joinpath(*parts)

    def run_cleanups(self) -> None:
        while self._cleanups:
            try:
                self._cleanups.pop()()
            except BaseException as error:  # noqa: BLE001 - a clean-up that fails is said, the others still run
                self.note(f"clean-up failed: {type(error).__name__}: {error}")


# ~~~ The runner ~~~
@dataclasses.dataclass
class _Running:
    found: Case
    pid: int
    folder: str
    fd: int
    started: float
    chunks: List[bytes] = dataclasses.field(default_factory=list)
    done: bool = False


def _crash_text(error: BaseException) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    where = next(
        (
            f"{os.path.relpath(f.filename, HERE)}:{f.lineno}"
            for f in reversed(frames)
            if os.path.abspath(f.filename).startswith(HERE + os.sep)
        ),
        "",
    )
    return f"the case crashed: {type(error).__name__}: {error}" + (f" ({where})" if where else "")


def _run_in_child(found: Case, folder: str, write_fd: int) -> None:
    """In the forked child: run the case, write its result as JSON to ``write_fd``, exit."""
    code = 0
    try:
        os.setsid()
        log = os.open(folder + ".log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(number, signal.SIG_DFL)
        # SIGPIPE stays ignored, as Python sets it: a case's loopback server writing a reply the client stopped
        # reading (a stream closed early) gets BrokenPipeError in its thread, not the whole case killed. The
        # processes a case starts get the default back (subprocess restores it), as from a shell.
        ctx = Ctx(found, folder)
        started = time.monotonic()
        skipped = None
        try:
            found.function(ctx)
        except Skip as reason:
            skipped = str(reason)
        except BaseException as error:  # noqa: BLE001 - a case that crashes is not handled; the suite goes on
            ctx.failures.append(_crash_text(error))
        finally:
            ctx.run_cleanups()
        result = {
            "seconds": round(time.monotonic() - started, 2),
            "skipped": skipped,
            "failures": ctx.failures,
            "losses": ctx.losses,
            "notes": ctx.notes,
            "figures": ctx.figures,
        }
        data = json.dumps(result, default=str).encode()
        while data:
            data = data[os.write(write_fd, data) :]
    except BaseException:  # noqa: BLE001
        code = 70
    finally:
        os._exit(code)


def _processes() -> Iterable[int]:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            yield int(entry)


def _stragglers(session: int, folder: str) -> List[int]:
    """Processes of the case's session, or working in its folder (a kernel, a double-forked child)."""
    found, me = [], os.getpid()
    for pid in _processes():
        if pid == me:
            continue
        try:
            if os.getsid(pid) == session:
                found.append(pid)
                continue
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd == folder or cwd.startswith(folder + os.sep):
            found.append(pid)
    return found


def _command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:120]
    except OSError:
        return "?"


def _unmount_under(folder: str) -> None:
    try:
        with open("/proc/mounts") as f:
            points = [line.split()[1].encode().decode("unicode_escape") for line in f]
    except OSError:
        return
    for point in sorted(points, key=len, reverse=True):
        if point == folder or point.startswith(folder + os.sep):
            subprocess.run(["umount", "-l", point], capture_output=True)


def _remove(folder: str) -> None:
    def writable(function, path, _):
        try:
            os.chmod(os.path.dirname(path), 0o755)
            function(path)
        except OSError:
            pass

    shutil.rmtree(folder, onerror=writable)
    try:
        os.remove(folder + ".log")
    except OSError:
        pass


def _clean_up(pid: int, folder: str) -> List[str]:
    """Kill what the case left (its session, processes working in its folder); unmount; remove the folder."""
    left = []
    for _ in range(3):  # processes may start one another while being killed
        stragglers = _stragglers(pid, folder)
        if not stragglers:
            break
        for straggler in stragglers:
            left.append(_command_line(straggler))
            try:
                os.kill(straggler, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.2)
    _unmount_under(folder)
    _remove(folder)
    return sorted(set(left))


def _log_tail(folder: str, limit: int = 600) -> str:
    try:
        with open(folder + ".log", "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _finish(running: _Running, timed_out: bool, keep: bool) -> Dict[str, Any]:
    found, pid = running.found, running.pid
    if timed_out:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    os.close(running.fd)
    try:
        result = json.loads(b"".join(running.chunks).decode())
    except ValueError:
        why = (
            f"the case took longer than its limit of {found.timeout:.0f} s and was killed"
            if timed_out
            else "the case's process died without a result"
        )
        tail = _log_tail(running.folder).strip().splitlines()
        result = {
            "seconds": round(time.monotonic() - running.started, 2),
            "skipped": None,
            "failures": [why + (f" (its log ends: {_short(tail[-1], 200)})" if tail else "")],
            "losses": [],
            "notes": [],
            "figures": {},
        }
    if keep:
        result["notes"].append(f"kept: {running.folder} (log {running.folder}.log)")
        left = []
    else:
        left = _clean_up(pid, running.folder)
    if left:
        result["notes"].append(f"{len(left)} process(es) left behind were killed: " + "; ".join(left[:3]))
    result.update(
        id=found.id,
        klass=found.klass,
        name=found.name,
        slow=found.slow,
        handled_means=found.handled,
        lost_means=found.lost,
    )
    result["handled"] = not result["failures"] and not result["skipped"]
    result["data_lost"] = bool(result["losses"])
    return result


def run_cases(
    cases: List[Case],
    jobs: int = 2,
    keep: bool = False,
    progress: Optional[Callable[[Dict[str, Any], int, int], None]] = None,
) -> List[Dict[str, Any]]:
    """Run ``cases``, ``jobs`` at a time (an exclusive case alone); returns their results in the order given."""
    root = tempfile.mkdtemp(prefix="jarvis-faults-")
    queue = list(cases)
    running: Dict[int, _Running] = {}
    results: Dict[str, Dict[str, Any]] = {}
    try:
        while queue or running:
            while queue and len(running) < jobs:
                nxt = queue[0]
                if running and (nxt.exclusive or any(r.found.exclusive for r in running.values())):
                    break
                queue.pop(0)
                folder = tempfile.mkdtemp(prefix=nxt.name[:40] + "-", dir=root)
                read_fd, write_fd = os.pipe()
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    os.close(read_fd)
                    _run_in_child(nxt, folder, write_fd)
                os.close(write_fd)
                running[pid] = _Running(nxt, pid, folder, read_fd, time.monotonic())
            readable, _, _ = select.select([r.fd for r in running.values()], [], [], 0.2)
            for entry in running.values():
                if entry.fd in readable:
                    data = os.read(entry.fd, 1 << 16)
                    if data:
                        entry.chunks.append(data)
                    else:
                        entry.done = True
            for pid, entry in list(running.items()):
                late = time.monotonic() - entry.started > entry.found.timeout
                if entry.done or late:
                    del running[pid]
                    result = _finish(entry, timed_out=late and not entry.done, keep=keep)
                    results[result["id"]] = result
                    if progress:
                        progress(result, len(results), len(cases))
    finally:
        for pid, entry in running.items():  # interrupted: nothing is left running
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
            _clean_up(pid, entry.folder)
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    return [results[c.id] for c in cases if c.id in results]


# ~~~ The report ~~~
def summary(results: List[Dict[str, Any]], pending: Dict[str, str]) -> Dict[str, Dict[str, int]]:
    rows: Dict[str, Dict[str, int]] = {}
    for klass in list(CLASSES) + ["total"]:
        rows[klass] = {"tried": 0, "handled": 0, "data_lost": 0, "pending": 0, "skipped": 0}
    for result in results:
        for key in (result["klass"], "total"):
            row = rows[key]
            if result["skipped"]:
                row["skipped"] += 1
                continue
            row["tried"] += 1
            row["handled"] += result["handled"]
            row["data_lost"] += result["data_lost"]
            row["pending"] += (not result["handled"]) and result["id"] in pending
    return {k: v for k, v in rows.items() if v["tried"] or v["skipped"] or k == "total"}


def report(results: List[Dict[str, Any]], pending: Dict[str, str], seconds: float, part: str) -> str:
    rows = summary(results, pending)
    lines = [f"{'class':<16}{'tried':>7}{'handled':>9}{'data-lost':>11}{'pending':>9}"]
    for klass, row in rows.items():
        if klass == "total":
            lines.append("-" * 52)
        skipped = f"   ({row['skipped']} skipped)" if row["skipped"] else ""
        lines.append(
            f"{klass:<16}{row['tried']:>7}{row['handled']:>9}{row['data_lost']:>11}{row['pending']:>9}{skipped}"
        )
    lines.append(f"{part}: {len(results)} cases in {seconds:.0f} s")
    lost = [r for r in results if r["data_lost"]]
    if lost:
        lines.append("\nDATA LOST:")
        lines += [f"  {r['id']}: {'; '.join(r['losses'][:2])}" for r in lost]
    failed = [r for r in results if not r["handled"] and not r["skipped"]]
    if failed:
        lines.append("\nnot handled:")
        for r in failed:
            tag = f" [pending: {pending[r['id']]}]" if r["id"] in pending else ""
            first = r["failures"][0] if r["failures"] else "?"
            lines.append(f"  {r['id']}{tag}: {' '.join(first.split())}")
    fixed = [r["id"] for r in results if r["handled"] and r["id"] in pending]
    if fixed:
        lines.append("\npending but handled now (remove from PENDING): " + ", ".join(fixed))
    skipped = [r for r in results if r["skipped"]]
    if skipped:
        lines.append("\nskipped:")
        lines += [f"  {r['id']}: {r['skipped']}" for r in skipped]
    noted = [r for r in results if r["notes"]]
    if noted:
        lines.append("\nnotes:")
        lines += [f"  {r['id']}: " + "; ".join(r["notes"]) for r in noted]
    figures = [r for r in results if r["figures"]]
    if figures:
        lines.append("\nfigures:")
        lines += [f"  {r['id']}: " + ", ".join(f"{k} {v}" for k, v in r["figures"].items()) for r in figures]
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    from . import (
        PENDING,
        cases,  # noqa: F401  (registers every case)
    )

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.faults",
        description="Jarvis tried as a careless or hostile user would: per class of "
        "fault, the cases tried, handled and with data lost "
        "(see benchmarks/faults/__init__.py).",
    )
    parser.add_argument("--fast", action="store_true", help="only the fast part (what CI runs)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument(
        "-k", dest="only", action="append", metavar="NAME", help="only the cases whose id contains NAME (repeatable)"
    )
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="cases run at once (2)")
    parser.add_argument("--list", action="store_true", help="list the cases and what they check")
    parser.add_argument("--keep", action="store_true", help="keep each case's folder and log (for debugging)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    # aiflows (imported by the cases) wraps stdout in colorama; the report is plain text, written as it is
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    try:
        return _main(args, PENDING)
    except KeyboardInterrupt:  # the cases running were killed and their folders removed (run_cases)
        print("\nStopped.", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 141


def _main(args: argparse.Namespace, PENDING: Dict[str, str]) -> int:
    chosen = [c for c in REGISTRY if not (args.fast and c.slow)]
    if args.only:
        chosen = [c for c in chosen if any(part in c.id for part in args.only)]
    chosen.sort(key=lambda c: list(CLASSES).index(c.klass))
    if args.list:
        for c in chosen:
            print(
                f"{c.id}  ({'slow' if c.slow else 'fast'}){'  PENDING: ' + PENDING[c.id] if c.id in PENDING else ''}"
                f"\n    handled: {c.handled}\n    data lost: {c.lost}"
            )
        return 0
    unknown = sorted(set(PENDING) - {c.id for c in REGISTRY})
    if unknown:
        print(f"PENDING names cases that do not exist: {', '.join(unknown)}", file=sys.stderr)
        return 2

    def progress(result, done, total):
        if args.quiet:
            return
        state = (
            "skipped"
            if result["skipped"]
            else "handled"
            if result["handled"]
            else "pending"
            if result["id"] in PENDING
            else "NOT handled"
        )
        lost = "  DATA LOST" if result["data_lost"] else ""
        print(
            f"[{done:>3}/{total}] {result['id']:<48} {state}{lost}  {result['seconds']:.1f}s",
            file=sys.stderr,
            flush=True,
        )

    started = time.monotonic()
    results = run_cases(chosen, jobs=max(1, args.jobs), keep=args.keep, progress=progress)
    seconds = time.monotonic() - started
    part = "fast part" if args.fast else "all cases"
    for result in results:
        result["pending"] = PENDING.get(result["id"])
    if args.json:
        print(
            json.dumps(
                {"part": part, "seconds": round(seconds, 1), "classes": summary(results, PENDING), "cases": results},
                indent=1,
            )
        )
    else:
        print(report(results, PENDING, seconds, part))
    bad = [r for r in results if r["data_lost"] or (not r["handled"] and not r["skipped"] and r["id"] not in PENDING)]
    return 1 if bad else 0
