"""The kernel's launcher: the process between the interpreter and its kernel.

    python -I -S launcher.py [--status FILE] [--cgroup DIR] [--linger --status-fd N] -- COMMAND...

jupyter_client starts this (as it would start the kernel, in a session of its own) with the environment the code may
see; it starts COMMAND (the kernel, or bubblewrap with the kernel inside) as its child and waits for it. So:

* the kernel's parent holds no secrets: ``/proc/<parent>/environ`` is this process's environment, already scrubbed,
  where it would otherwise have been the interpreter's, API keys included;
* it is a child subreaper: a process the code starts and orphans (``setsid`` and a double fork) is handed to it, not
  to init, and stays in its process tree, where the interpreter finds it;
* it joins the cgroup given (before it starts anything), so that every process started below it is in it;
* when the kernel ends, it ends what the kernel left behind and writes how the kernel ended (``exit N`` or
  ``signal N``) in the status file; when its own parent dies (even killed), it ends the kernel and all of that, and
  the processes the interpreter's shell commands left (they carry the interpreter's part of the mark).

With ``--linger`` (a shell command's launcher), what the command left running is not ended when it ends: its
status goes to the descriptor ``--status-fd`` (``exit N`` or ``signal N``), and the launcher stays, without its
output, as long as a process it found is alive, so that orphans keep coming to it; a SIGTERM or SIGHUP, or the
death of its parent, ends them all.

Standard library only, loaded with ``-I -S`` (no site, no user paths), so that it adds next to nothing to the
kernel's start.
"""

import ctypes
import importlib.util
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _load_processes():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "processes.py")
    spec = importlib.util.spec_from_file_location("_jarvis_processes", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _parse(argv):
    options = {"--status": None, "--cgroup": None, "--status-fd": None, "--linger": False}
    args = list(argv)
    while args and args[0] != "--":
        name = args.pop(0)
        if name == "--linger":
            options[name] = True
            continue
        if name not in options or not args:
            raise SystemExit(f"launcher: unknown option or missing value: {name}")
        options[name] = args.pop(0)
    if not args[1:]:
        raise SystemExit("launcher: no command after --")
    return options, args[1:]


def _write_status(path, text):
    if not path:
        return
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError:
        pass


def _status_text(status):
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    code = os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else os.WEXITSTATUS(status)
    return f"exit {code}"


def _send_status(fd, text):
    """Say how the command ended on the descriptor ``fd`` (a pipe the interpreter reads), and close it."""
    if fd is None:
        return
    try:
        os.write(fd, (text + "\n").encode())
    except OSError:
        pass
    try:
        os.close(fd)
    except OSError:
        pass


def _drop_output():
    """Let go of the command's output pipe: its reader sees its end when the command's processes close it."""
    try:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
    except OSError:
        pass


def main(argv):
    options, command = _parse(argv)
    parent = os.getppid()
    processes = _load_processes()
    # SIGUSR1 only wakes the loop below when the parent (thread) goes, at once rather than at its next look: until
    # then a killed interpreter's processes run on, and on a busy machine that look can come late
    waited = {signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1}
    signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGUSR1), 0, 0, 0)
    except (OSError, AttributeError):
        pass
    cgroup = processes.Cgroup(options["--cgroup"]) if options["--cgroup"] else None
    if cgroup is not None and not cgroup.add(os.getpid()):
        print("launcher: could not join the cgroup " + cgroup.path, file=sys.stderr, flush=True)
        cgroup = None
    status_fd = int(options["--status-fd"]) if options["--status-fd"] is not None else None
    marker = os.environ.get(processes.MARKER_VARIABLE, "")
    # Ctrl+C reaches the whole process group (jupyter_client interrupts the kernel so): it is the kernel's, not ours.
    # Ignored for the command too (bubblewrap would die of it, and the kernel with it): ipykernel ignores it anyway
    # and sets its own handler while it runs code, and a program the code starts gets the default back.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    env = dict(os.environ)
    env["JPY_PARENT_PID"] = str(os.getpid())  # ipykernel ends itself if its parent changes: this one is its parent
    status = None  # the kernel's wait status, once it has ended
    kernel = os.fork()
    if kernel == 0:
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            if status_fd is not None:
                os.close(status_fd)
            os.execvpe(command[0], command, env)
        except BaseException as error:
            print(f"launcher: could not start {command[0]}: {error}", file=sys.stderr, flush=True)
        finally:
            os._exit(127)

    def reap():
        """Collect the ended children: the kernel's status, and the orphans handed to this subreaper."""
        nonlocal status
        while True:
            try:
                pid, code = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == kernel:
                status = code

    def leftovers():
        """What the kernel started and left: below this process, with the kernel's mark, in its cgroup."""
        reap()
        found = {(pid, start) for pid, _group, start in processes.descendants(os.getpid())}
        found.update(processes.marked_processes(marker))
        if cgroup is not None:
            found.update((pid, None) for pid in cgroup.pids())
        return found

    def orphaned():
        """The interpreter's process is gone: nothing its code started may outlive it (its other shell commands'
        and kernels' processes too: they carry the interpreter's part of the mark)."""
        interpreter = marker.split("/", 1)[0] + "/" if "/" in marker else marker
        processes.end_processes(lambda: leftovers() | set(processes.marked_processes(interpreter)))
        reap()
        _write_status(options["--status"], "orphaned")
        os._exit(1)

    ended_by_signal = False
    while status is None:
        info = signal.sigtimedwait(waited, 1.0)
        reap()
        if status is not None:
            break
        if info is not None and info.si_signo in (signal.SIGTERM, signal.SIGHUP):
            if options["--linger"]:  # a shell command stopped (its timeout, close()): it and all it started
                processes.end_processes(leftovers)
                ended_by_signal = True
                reap()
                continue
            try:
                os.kill(kernel, signal.SIGTERM)
            except OSError:
                pass
        if os.getppid() != parent:
            orphaned()
    if options["--linger"]:
        _send_status(status_fd, _status_text(status))
        _drop_output()
        # stay while what the command left runs: orphans keep coming to this subreaper, and end with it
        while not ended_by_signal and leftovers():
            info = signal.sigtimedwait(waited, 1.0)
            if os.getppid() != parent:
                orphaned()
            if info is not None and info.si_signo in (signal.SIGTERM, signal.SIGHUP):
                processes.end_processes(leftovers)
                break
    else:
        processes.end_processes(leftovers)
    reap()
    text = _status_text(status)
    _write_status(options["--status"], text)
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return int(text.split()[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
