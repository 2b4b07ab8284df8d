"""Importing the code library block by block, each block's bytecode cached by the digest of its text.

A library of megabytes took seconds and hundreds of megabytes to compile, at every process that imported a new
version of it (each test of a function, the kernel after each save): one function more made the whole file compile
again. This loader compiles the file in blocks of top-level statements (a block cut inside a statement does not
compile alone and is tried again twice as long), keeps each block's code in ``__pycache__/<module>.blocks/`` beside
the file, and runs the blocks in order in the module's namespace: a version that appends a function compiles its last
block only. The module is otherwise the one ``import`` makes (same file, ``__file__``, line numbers, tracebacks,
``from __future__`` imports of the first block applied to all, the same SyntaxError for a file that does not compile).

This file's text is also written into the test script and sent to the kernel: it imports nothing at module level and
defines one function, which installs the loader for the module named ``module`` found on ``sys.path`` and, when it
is a package (the library's modules), for its submodules (its ``__init__`` is imported as usual).
"""


def __jarvis_library_loader(module, block_chars=1 << 15):
    import __future__

    import hashlib
    import importlib.abc
    import importlib.machinery
    import importlib.util
    import marshal
    import os
    import re
    import sys

    statement = re.compile(r"^(?![\s#)\]}]|(?:else|elif|except|finally)\b)", re.M)
    futures = 0
    for feature in __future__.all_feature_names:
        futures |= getattr(__future__, feature).compiler_flag
    magic = importlib.util.MAGIC_NUMBER

    def block_end(source, start, size):
        position = start + size
        found = statement.search(source, position) if position < len(source) else None
        return len(source) if found is None else found.start()

    class BlockLoader(importlib.abc.Loader):
        def __init__(self, name, path):
            self.name, self.path = name, path

        def create_module(self, spec):
            return None

        def exec_module(self, target):
            with open(self.path, "rb") as f:
                source = importlib.util.decode_source(f.read())
            folder = os.path.join(os.path.dirname(self.path), "__pycache__", self.name + ".blocks")
            used, flags, start, line, size = set(), 0, 0, 0, block_chars
            codes = []
            while start < len(source):
                end = block_end(source, start, size)
                text = source[start:end]
                key = hashlib.sha1(magic + b"%d:%d:" % (flags, line) + text.encode("utf-8", "surrogatepass"))
                name = key.hexdigest() + ".bin"
                code = self._cached(folder, name)
                if code is None:
                    try:
                        code = compile("\n" * line + text, self.path, "exec", flags=flags, dont_inherit=True)
                    except (SyntaxError, ValueError):
                        if end < len(source):
                            size *= 2
                            continue
                        compile(source, self.path, "exec", dont_inherit=True)  # the file's own error
                        raise
                    self._keep(folder, name, code)
                if start and code.co_flags & futures & ~flags:  # a future import after the first block
                    compile(source, self.path, "exec", dont_inherit=True)
                used.add(name)
                codes.append(code)
                flags |= code.co_flags & futures
                start, line, size = end, line + text.count("\n"), block_chars
            self._prune(folder, used)
            for code in codes:
                exec(code, target.__dict__)

        @staticmethod
        def _cached(folder, name):
            try:
                with open(os.path.join(folder, name), "rb") as f:
                    return marshal.loads(f.read())
            except (OSError, ValueError, EOFError, TypeError):
                return None

        @staticmethod
        def _keep(folder, name, code):
            if sys.dont_write_bytecode:
                return
            try:
                os.makedirs(folder, exist_ok=True)
                temporary = os.path.join(folder, "%s.%d.tmp" % (name, os.getpid()))
                with open(temporary, "wb") as f:
                    f.write(marshal.dumps(code))
                os.replace(temporary, os.path.join(folder, name))
            except OSError:
                pass

        @staticmethod
        def _prune(folder, used):
            """Remove the blocks of earlier versions (of this file: the folder is the module's)."""
            try:
                for entry in os.listdir(folder):
                    if entry.endswith(".bin") and entry not in used:
                        os.remove(os.path.join(folder, entry))
            except OSError:
                pass

    class BlockFinder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path=None, target=None):
            if fullname != module and not fullname.startswith(module + "."):
                return None
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            if (
                spec is None
                or not isinstance(spec.loader, importlib.machinery.SourceFileLoader)
                or spec.submodule_search_locations is not None
            ):  # a package's __init__: imported as usual
                return spec
            loader = BlockLoader(fullname, spec.origin)
            return importlib.util.spec_from_file_location(fullname, spec.origin, loader=loader)

    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "BlockFinder"]
    sys.meta_path.insert(0, BlockFinder())
