"""What the kernel runs once, silently, after it starts: this file's text is sent to it, then a call of
``__jarvis_install`` (see ``KernelExecutor._start_kernel`` in ``kernel.py``). Not imported by the package.

It must run in any IPython kernel: no ``from __future__`` (it would change how every later cell compiles), no
module-level import, nothing left in the user's namespace but what the install function registers.
"""


def __jarvis_install(
    workspace,
    library,
    figure_dir,
    mime,
    max_output=20000,
    memory_limit_mb=None,
    cpu_time_s=None,
    skip_mark="\0jarvis-skip:",
):
    import atexit
    import collections
    import contextlib
    import hashlib
    import importlib
    import io
    import math
    import os
    import sys
    import threading
    import time
    import warnings

    ip = get_ipython()  # noqa: F821  (a builtin in the kernel)
    if workspace in sys.path:
        sys.path.remove(workspace)
    sys.path.insert(0, workspace)
    warnings.filterwarnings("ignore", message=r".*is non-interactive, and thus cannot be shown")
    # per module of the library (the module, or the package and each of its modules imported): the module last seen,
    # the digest of its file then, and a copy of its namespace then
    libs = {}
    state = {"figures": 0}

    # ~~~ The code library: a module reloaded before a run when its file changed ~~~
    def digest_of(module):
        path = getattr(module, "__file__", None)
        if not path:
            return None
        try:
            with open(path, "rb") as f:
                return hashlib.sha1(f.read()).hexdigest()
        except OSError:
            return None

    def record(name, module, digest):
        libs[name] = {"module": module, "digest": digest, "snapshot": dict(vars(module)) if module is not None else {}}

    def rebind(name, module):
        """Point the user's names that held the module's old objects to the new ones of the same name."""
        seen = libs.get(name) or {}
        old = seen.get("snapshot") or {}
        ids = {}
        for attr, value in old.items():
            if not attr.startswith("__"):
                ids.setdefault(id(value), attr)
        fresh = vars(module)
        ns = ip.user_ns
        for user_name, value in list(ns.items()):
            attr = ids.get(id(value))
            if attr is None or value is module or value is seen.get("module") or old.get(attr) is not value:
                continue
            if (user_name == attr or getattr(value, "__module__", None) == name) and attr in fresh:
                ns[user_name] = fresh[attr]

    def shown(name, module):
        """How the module's file is named in messages: ``library.py``, ``library/data.py``."""
        path = getattr(module, "__file__", None) or ""
        if name == library or not path:
            return name + ".py"
        return name.replace(".", "/") + ".py"

    def reload_one(name):
        seen = libs.get(name) or {}
        module = sys.modules.get(name)
        if module is None:
            module = seen.get("module")
            if module is None:
                return
            # it failed to reload before (and was taken out of sys.modules): try again once its file changes
            digest = digest_of(module)
            if digest is None or digest == seen.get("digest"):
                return
            sys.modules[name] = module
        elif module is not seen.get("module"):
            after_import(name, module)
            return
        else:
            digest = digest_of(module)
            if digest is None or digest == seen.get("digest"):
                return
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                importlib.reload(module)
        except BaseException as error:
            # leave it out of sys.modules, so that the user's own `import library` shows the error
            sys.modules.pop(name, None)
            seen["digest"] = digest
            libs[name] = seen
            print(
                "[%s changed since the last run and could not be reloaded: %s: %s]"
                % (shown(name, module), type(error).__name__, error)
            )
            return
        rebind(name, module)
        record(name, module, digest)
        # said, so that the controller knows the new definitions are in use
        print("[%s changed since the last run: reloaded, its new functions can be imported]" % shown(name, module))

    def library_modules():
        names = set(libs)
        names.update(n for n in list(sys.modules) if n == library or n.startswith(library + "."))
        return sorted(names)

    def reload_library():
        if not library:
            return
        for name in library_modules():
            try:
                reload_one(name)
            except BaseException:
                pass

    def after_import(name, module):
        if (libs.get(name) or {}).get("module") is not None:
            rebind(name, module)
        record(name, module, digest_of(module))

    # ~~~ matplotlib figures left open: saved as PNG files ~~~
    def save_figures():
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        try:
            numbers = list(plt.get_fignums())
        except BaseException:
            return
        if not numbers:
            return
        paths = []
        stamp = time.strftime("%Y%m%d-%H%M%S")

        def unsaved(number, error, left):
            # an interrupt (at the run's timeout) has an empty message: say what it was
            text = str(error)
            what = "%s: %s" % (type(error).__name__, text) if text else type(error).__name__
            if isinstance(error, KeyboardInterrupt):
                what += " (the run was interrupted while the figure was saved"
                what += "; %d more figure(s) not saved)" % left if left else ")"
            print("[figure %s could not be saved: %s]" % (number, what), file=sys.stderr)

        for index, number in enumerate(numbers):
            try:
                figure = plt.figure(number)
                os.makedirs(figure_dir, exist_ok=True)
                while True:
                    state["figures"] += 1
                    path = os.path.join(figure_dir, "figure_%s_%d.png" % (stamp, state["figures"]))
                    try:
                        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                        break
                    except FileExistsError:
                        continue
                try:
                    with os.fdopen(fd, "wb") as f:
                        figure.savefig(f, format="png")
                    paths.append(path)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(path)
                    raise
            except BaseException as error:
                unsaved(number, error, len(numbers) - index - 1)
                if isinstance(error, KeyboardInterrupt):
                    break  # the time is up: do not start on the next figures
        try:
            plt.close("all")
        except BaseException:
            pass
        if paths:
            ip.display_pub.publish(data={mime: {"paths": paths}}, metadata={})  # what IPython.display's does

    # ~~~ Output bounded here, before it is sent ~~~
    # Past `max_output` characters in a run, stdout and stderr are held back: only the last `max_output` characters
    # are kept, and the count of the others. What is held is sent, after a skip mark with that count, when the
    # stream is flushed (a display, a result or a traceback flushes it first, so the order is kept) and at the end of
    # the run. The interpreter's own bound (a head and a tail) then shows what it would have shown had everything
    # been sent, while a run that prints without end sends at most about twice `max_output`.
    class Bound:
        def __init__(self):
            self.lock = threading.RLock()
            self.reset()

        def reset(self):
            self.sent = 0
            self.skipped = 0
            self.held = collections.deque()  # (write, text), the newest last
            self.held_len = 0

        def write(self, original, text):
            if not isinstance(text, str) or not text:
                return original(text)
            with self.lock:
                if not self.held and not self.skipped:
                    room = max_output - self.sent
                    if len(text) <= room:
                        self.sent += len(text)
                        return original(text)
                    if room > 0:
                        original(text[:room])
                        self.sent += room
                    rest = text[max(room, 0) :]
                else:
                    rest = text
                if len(rest) >= max_output:
                    self.skipped += self.held_len + len(rest) - max_output
                    self.held = collections.deque([(original, rest[len(rest) - max_output :])])
                    self.held_len = max_output
                else:
                    self.held.append((original, rest))
                    self.held_len += len(rest)
                    while self.held and self.held_len - len(self.held[0][1]) >= max_output:
                        self.skipped += len(self.held[0][1])
                        self.held_len -= len(self.held.popleft()[1])
                    excess = self.held_len - max_output
                    if excess > 0:
                        first_write, first = self.held[0]
                        self.held[0] = (first_write, first[excess:])
                        self.skipped += excess
                        self.held_len -= excess
                return len(text)

        def release(self):
            with self.lock:
                held, skipped = self.held, self.skipped
                self.held, self.held_len, self.skipped = collections.deque(), 0, 0
                if skipped:
                    (held[0][0] if held else sys.stdout.write)("%s%d\0" % (skip_mark, skipped))
                for original, text in held:
                    original(text)

    bound = Bound()

    def bound_writes(stream):
        """Route ``stream.write`` through the bound. Done before each run: IPython wraps ``write`` while a cell runs
        (to keep its output in the history) and puts back, at the end, the method it found."""
        write = getattr(stream, "write", None)
        if write is None or getattr(write, "_jarvis_bound", False):
            return

        def bounded_write(text):
            return bound.write(write, text)

        bounded_write._jarvis_bound = True
        try:
            stream.write = bounded_write
        except (AttributeError, TypeError):
            pass

    def bound_flushes(stream):
        """What is held is sent when the stream is flushed."""
        flush = getattr(stream, "flush", None)
        if flush is None or getattr(flush, "_jarvis_bound", False):
            return

        def bounded_flush():
            bound.release()
            return flush()

        bounded_flush._jarvis_bound = True
        try:
            stream.flush = bounded_flush
        except (AttributeError, TypeError):
            pass

    formatter = ip.display_formatter
    format_data = formatter.format

    def bounded_format(*args, **kwargs):
        """A result or display whose text is longer than twice the bound: its middle is not sent."""
        data, metadata = format_data(*args, **kwargs)
        text = data.get("text/plain") if isinstance(data, dict) else None
        if isinstance(text, str) and len(text) > 2 * max_output + 100:
            data = dict(data)
            data["text/plain"] = "%s%s%d\0%s" % (
                text[:max_output],
                skip_mark,
                len(text) - 2 * max_output,
                text[len(text) - max_output :],
            )
        return data, metadata

    formatter.format = bounded_format

    # ~~~ Limits: memory beyond the kernel's own, CPU time per run ~~~
    import resource

    if memory_limit_mb:
        # the kernel's own address space (most of it reserved, not used: thread stacks, allocator arenas) plus
        # what the code may add; processes the code starts get the same bound
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[0])
        size = pages * os.sysconf("SC_PAGE_SIZE") + int(memory_limit_mb) * 1024 * 1024
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            size = min(size, hard)
        resource.setrlimit(resource.RLIMIT_AS, (size, size))

    def cpu_budget():
        """The CPU time this process has used, plus one run's allowance (SIGXCPU, which ends the kernel, past it)."""
        if not cpu_time_s:
            return
        try:
            usage = resource.getrusage(resource.RUSAGE_SELF)
            soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
            limit = int(math.ceil(usage.ru_utime + usage.ru_stime + cpu_time_s))
            if hard != resource.RLIM_INFINITY:
                limit = min(limit, hard)
            resource.setrlimit(resource.RLIMIT_CPU, (limit, hard))
        except (OSError, ValueError):
            pass

    cpu_budget()

    # ~~~ Quick exit ~~~
    # A shutdown request makes the kernel run its exit handlers (the user's first: they were registered after this
    # one), then IPython, ipykernel and zmq are slow to wind down. Here what matters to the user is done (the user's
    # namespace dropped, so that its objects are finalized and their files closed; IPython's temporary files
    # removed; weakref finalizers run; logging handlers and the files still open flushed), and the process ends at
    # once.
    me = os.getpid()

    def quick_exit():
        if os.getpid() != me:  # a forked child going through its exit handlers
            return
        import gc
        import itertools
        import shutil
        import stat
        import weakref

        def drop_namespace():
            ip.user_ns.clear()
            for path in list(getattr(ip, "tempfiles", ())):
                with contextlib.suppress(OSError):
                    os.unlink(path)
            for path in list(getattr(ip, "tempdirs", ())):
                shutil.rmtree(path, ignore_errors=True)

        def flush_files():
            kinds = {io.TextIOWrapper, io.BufferedWriter, io.BufferedRandom}
            objects = gc.get_objects()
            for obj in itertools.compress(objects, map(kinds.__contains__, map(type, objects))):
                try:
                    if not obj.closed and stat.S_ISREG(os.fstat(obj.fileno()).st_mode):
                        obj.flush()
                except BaseException:
                    pass

        steps = [drop_namespace, getattr(weakref.finalize, "_exitfunc", None), flush_files]
        if "logging" in sys.modules:
            steps.append(sys.modules["logging"].shutdown)
        for step in steps:
            try:
                if step is not None:
                    step()
            except BaseException:
                pass
        os._exit(0)

    atexit.register(quick_exit)

    # ~~~ Quick flushes ~~~
    # ipykernel flushes stdout and stderr several times per run, each a round trip to its IOPub thread, and sleeps
    # before the reply against flushes "that do not seem to make it". The interpreter reads until the idle status,
    # which the IOPub thread sends after all that was flushed before it; so the sleep goes, and a flush with nothing
    # to send returns at once. What the code wrote to the file descriptors (subprocesses, C code) is read by a
    # thread of ours (FdReader), which says when it has passed on all of it: the end of each run waits for that, so
    # a quick flush never leaves such output behind (docs/architecture.md, "The warm run").
    import codecs
    import fcntl
    import select
    import struct
    import termios

    class FdReader:
        """Reads what is written to a stream's file descriptor (a pipe, since ipykernel's start) into the stream,
        as ipykernel's own reader did (which this one replaces), and says when what was written up to a moment is in
        the stream: ``taken`` counts the bytes read from the pipe, ``passed`` those whose text is in the stream."""

        def __init__(self, stream):
            self.stream, self.fd = stream, stream._fid
            self.reading = False  # True from before a read of the pipe until what it read is in the stream
            self.taken = self.passed = 0
            self.lock = threading.Lock()  # the decoder, and the writes of what it decodes
            self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            self.thread = threading.Thread(target=self.run, name="jarvis-fd-" + stream.name, daemon=True)

        def run(self):
            # ipykernel 6 sends what a thread writes as the output of the request that started it (here the setup,
            # which the interpreter does not read): this thread's output is the current request's, as a thread's
            # of ipykernel's own
            for out in (sys.stdout, sys.stderr):
                for table in ("_thread_to_parent_header", "_thread_to_parent"):
                    getattr(out, table, {}).pop(threading.get_ident(), None)
            stream, poller = self.stream, select.poll()
            poller.register(self.fd, select.POLLIN | select.POLLHUP)
            while stream._should_watch:
                try:
                    poller.poll()
                    self.reading = True
                    data = os.read(self.fd, 65536)
                    self.taken += len(data)
                    if not data or not stream._should_watch:
                        return
                    with self.lock:
                        text = self.decoder.decode(data)
                        if text:
                            stream.write(text)
                    self.passed = self.taken
                    os.write(stream._original_stdstream_copy, data)  # the kernel's own stdout, as ipykernel does
                except Exception:
                    stream._exc = sys.exc_info()
                    return
                finally:
                    self.reading = False

        def written_so_far(self):
            """What ``taken`` will be once all written to the descriptor until now is read; None while a read is
            under way. ``reading`` and ``taken`` are looked at again after the pipe: a read begun in between (it
            sets ``reading`` first) or done in between (it adds to ``taken``) is seen, and the look repeated."""
            while True:
                if self.reading:
                    return None
                taken = self.taken
                try:
                    unread = struct.unpack("i", fcntl.ioctl(self.fd, termios.FIONREAD, b"\0\0\0\0"))[0]
                except OSError:  # the pipe is gone: nothing more comes through it
                    unread = 0
                if self.reading:
                    return None
                if self.taken == taken:
                    return taken + unread

        def drain(self, limit):
            """Wait until all written to the descriptor until now is in the stream (at most ``limit`` seconds). What
            a process writes meanwhile is not waited for: one that writes without pause does not hold the run."""
            deadline = time.monotonic() + limit
            target = None
            while self.thread.is_alive() and threading.current_thread() is not self.thread:
                if target is None:
                    target = self.written_so_far()
                if (target is not None and self.passed >= target) or time.monotonic() >= deadline:
                    return
                time.sleep(0.00005)

        def finish(self):
            """At a run's end: bytes of a character not finished are said (U+FFFD), not carried into the next run."""
            with self.lock:
                text = self.decoder.decode(b"", final=True)
                if text:
                    self.stream.write(text)

    def read_fd_ourselves(stream):
        """Replace ipykernel's reader of ``stream``'s descriptor by a FdReader; None if the stream has none. Done as
        the kernel starts, when nothing writes to the pipe: ipykernel's reader drops the chunk it reads once told
        to stop, which is then the wake-up byte alone."""
        old = getattr(stream, "watch_fd_thread", None)
        if getattr(stream, "_fid", None) is None or old is None or not old.is_alive() or not stream._should_watch:
            return None
        reader = FdReader(stream)
        stream._should_watch = False
        os.write(stream._original_stdstream_fd, b"\0")  # wakes ipykernel's reader, which then ends (as at close)
        old.join(2.0)
        stream._should_watch = True
        if old.is_alive():
            return None
        stream.watch_fd_thread = reader.thread  # ipykernel's close() stops and joins this one
        reader.thread.start()
        return reader

    def quicken(stream, reader):
        base = type(stream)
        if not (hasattr(stream, "_buffers") and hasattr(stream, "pub_thread") and hasattr(base, "_flush")):
            return  # not ipykernel's stream as this knows it: left as it is

        class QuickFlushStream(base):
            _jarvis_flushing = 0  # _flush calls under way (in the IOPub thread)

            def _flush(self):
                self._jarvis_flushing += 1
                try:
                    base._flush(self)
                finally:
                    self._jarvis_flushing -= 1

            def flush(self):
                # what the descriptor got until now goes first, so that the order of output is kept (the limit only
                # guards against a reader that cannot go on: on a busy machine it may wait its turn for a while)
                if reader is not None:
                    reader.drain(2.0)
                # nothing written since the last _flush took it, none under way (whose message could be sent after
                # the caller's next one), and no forked child in this run (its output comes to the IOPub thread
                # through a socket of its own, which a round trip gives the time to be read): nothing to wait for
                if not self._buffers and not self._jarvis_flushing and self.echo is None and not forked[0]:
                    return
                base.flush(self)

        stream.__class__ = QuickFlushStream

    forked = [False]  # a child was forked during the current run
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_parent=lambda: forked.__setitem__(0, True))
    fd_readers = []
    for stream in (sys.stdout, sys.stderr):
        if type(stream).__name__ == "QuickFlushStream":
            continue
        reader = read_fd_ourselves(stream)
        if reader is not None:
            fd_readers.append(reader)
        # a stream whose descriptor ipykernel's reader still reads keeps its flushes (they give it time)
        if reader is not None or getattr(stream, "_fid", None) is None:
            quicken(stream, reader)
    if all(type(s).__name__ == "QuickFlushStream" for s in (sys.stdout, sys.stderr)) and isinstance(
        getattr(ip.kernel, "_execute_sleep", None), float
    ):
        ip.kernel._execute_sleep = 0.0

    def drain_fds():
        """At the end of a run: all the descriptors got is in the streams before their last flushes. The limit only
        guards against a reader that cannot go on; a busy machine can keep the reader's thread waiting for seconds,
        and what it had not passed on by then would show up in the next run."""
        for reader in fd_readers:
            reader.drain(10.0)
            reader.finish()

    # ~~~ Hooks ~~~
    def before_run(*args):
        forked[0] = False
        bound.reset()
        for stream in (sys.stdout, sys.stderr):
            bound_writes(stream)
            bound_flushes(stream)
        cpu_budget()
        reload_library()

    def after_run(*args):
        try:
            drain_fds()
        except KeyboardInterrupt:  # the run's time is up while it waited: the rest is the timeout's to say
            pass
        try:
            for name in library_modules() if library else ():
                module = sys.modules.get(name)
                if module is not None and module is not (libs.get(name) or {}).get("module"):
                    after_import(name, module)
        except BaseException:
            pass
        try:
            save_figures()
        finally:
            bound.release()
            bound.reset()
            cpu_budget()

    for event, callback in (("pre_run_cell", before_run), ("post_run_cell", after_run)):
        for old in [c for c in ip.events.callbacks[event] if getattr(c, "__name__", "") == callback.__name__]:
            ip.events.unregister(event, old)
        ip.events.register(event, callback)
