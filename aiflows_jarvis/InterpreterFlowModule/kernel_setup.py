"""What the kernel runs once, silently, after it starts: this file's text is sent to it, then a call of
``__jarvis_install`` (see ``CodeInterpreter._start_kernel``). Not imported by the package.

It must run in any IPython kernel: no ``from __future__`` (it would change how every later cell compiles), no
module-level import, nothing left in the user's namespace but what the install function registers.
"""


def __jarvis_install(workspace, library, figure_dir, mime, max_output=20000, memory_limit_mb=None, cpu_time_s=None,
                     skip_mark="\0jarvis-skip:"):
    import atexit, collections, contextlib, hashlib, importlib, io, math, os, sys, threading, time, warnings
    ip = get_ipython()  # noqa: F821  (a builtin in the kernel)
    if workspace in sys.path:
        sys.path.remove(workspace)
    sys.path.insert(0, workspace)
    warnings.filterwarnings("ignore", message=r".*is non-interactive, and thus cannot be shown")
    # the library module last seen, the digest of its file then, and a copy of its namespace then
    state = {"module": None, "digest": None, "snapshot": {}, "figures": 0}

    # ~~~ The code library: reloaded before a run when its file changed ~~~
    def digest_of(module):
        path = getattr(module, "__file__", None)
        if not path:
            return None
        try:
            with open(path, "rb") as f:
                return hashlib.sha1(f.read()).hexdigest()
        except OSError:
            return None

    def record(module, digest):
        state["module"], state["digest"] = module, digest
        state["snapshot"] = dict(vars(module)) if module is not None else {}

    def rebind(module):
        """Point the user's names that held the library's old objects to the new ones of the same name."""
        old = state["snapshot"]
        ids = {}
        for attr, value in old.items():
            if not attr.startswith("__"):
                ids.setdefault(id(value), attr)
        fresh = vars(module)
        ns = ip.user_ns
        for name, value in list(ns.items()):
            attr = ids.get(id(value))
            if attr is None or value is module or value is state["module"] or old.get(attr) is not value:
                continue
            if (name == attr or getattr(value, "__module__", None) == library) and attr in fresh:
                ns[name] = fresh[attr]

    def reload_library():
        if not library:
            return
        try:
            module = sys.modules.get(library)
            if module is None:
                module = state["module"]
                if module is None:
                    return
                # it failed to reload before (and was taken out of sys.modules): try again once its file changes
                digest = digest_of(module)
                if digest is None or digest == state["digest"]:
                    return
                sys.modules[library] = module
            elif module is not state["module"]:
                after_import(module)
                return
            else:
                digest = digest_of(module)
                if digest is None or digest == state["digest"]:
                    return
            try:
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    importlib.reload(module)
            except BaseException as error:
                # leave it out of sys.modules, so that the user's own `import library` shows the error
                sys.modules.pop(library, None)
                state["digest"] = digest
                print("[%s.py changed since the last run and could not be reloaded: %s: %s]"
                      % (library, type(error).__name__, error))
                return
            rebind(module)
            record(module, digest)
            # said, as the original's RunCode said it by adding `importlib.reload(library)` to the code run
            print("[%s.py changed since the last run: reloaded, its new functions can be imported]" % library)
        except BaseException:
            pass

    def after_import(module):
        if state["module"] is not None:
            rebind(module)
        record(module, digest_of(module))

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
    # the run. The interpreter's own bound (a head and a tail of `max_output` characters in all) then shows what it
    # would have shown had everything been sent, and a run that prints 200 MB sends about 40 KB.
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
                    rest = text[max(room, 0):]
                else:
                    rest = text
                if len(rest) >= max_output:
                    self.skipped += self.held_len + len(rest) - max_output
                    self.held = collections.deque([(original, rest[len(rest) - max_output:])])
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
            data["text/plain"] = "%s%s%d\0%s" % (text[:max_output], skip_mark, len(text) - 2 * max_output,
                                                 text[len(text) - max_output:])
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
    # one), then IPython, ipykernel and zmq take 0.1 s to seconds to wind down. Here what matters to the user is done
    # (the user's namespace dropped, so that its objects are finalized and their files closed; IPython's temporary
    # files removed; weakref finalizers run; logging handlers and the files still open flushed), and the process
    # ends at once.
    me = os.getpid()

    def quick_exit():
        if os.getpid() != me:  # a forked child going through its exit handlers
            return
        import gc, itertools, shutil, stat, weakref

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

    # ~~~ Hooks ~~~
    def before_run(*args):
        bound.reset()
        for stream in (sys.stdout, sys.stderr):
            bound_writes(stream)
            bound_flushes(stream)
        cpu_budget()
        reload_library()

    def after_run(*args):
        try:
            module = sys.modules.get(library) if library else None
            if module is not None and module is not state["module"]:
                after_import(module)
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
