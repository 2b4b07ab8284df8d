"""The code library imported block by block (InterpreterFlowModule/library_loader.py): the module `import` makes,
compiled once per block of text: a process importing a version with one function more compiles its last block only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from aiflows_jarvis.InterpreterFlowModule.executor import library_loader_code

PROBE = textwrap.dedent("""
    import builtins, inspect, json, sys
    sys.path.insert(0, sys.argv[1])
    compiled = []
    real = builtins.compile
    def counting(source, filename="", *args, **kwargs):
        if isinstance(source, str) and str(filename).endswith("library.py"):
            compiled.append(len(source.lstrip("\\n")))
        return real(source, filename, *args, **kwargs)
    builtins.compile = counting
    exec(sys.argv[2])
    try:
        import library
    except SyntaxError as error:
        print(json.dumps({"error": [error.msg, error.lineno]}))
        raise SystemExit(0)
    names = [n for n in vars(library) if n.startswith("f_")]
    last = getattr(library, names[-1])
    print(json.dumps({"names": len(names), "compiled": sum(compiled), "line": inspect.getsourcelines(last)[1],
                      "file": library.__file__, "late": library.late.__annotations__}))
""")


def a_library(functions: int, extra: str = "") -> str:
    return (
        "from __future__ import annotations\n\n"
        + "".join(f'def f_{n}(x: int) -> int:\n    """Adds {n}."""\n    return x + {n}\n\n\n' for n in range(functions))
        + "def late(x: NotDefinedAnywhere) -> None:\n    pass\n"
        + extra
    )


def probe(folder, module="library"):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # (as Python runs by default)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(folder), library_loader_code(module)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_library_is_the_module_import_makes_and_a_new_version_compiles_its_last_block_only(tmp_path):
    source = a_library(3000)  # about 230 KB: several blocks
    (tmp_path / "library.py").write_text(source)
    first = probe(tmp_path)
    assert first["names"] == 3000 and first["file"] == str(tmp_path / "library.py")
    assert first["line"] == source.splitlines().index("def f_2999(x: int) -> int:") + 1, "the file's line numbers"
    assert first["late"] == {"x": "NotDefinedAnywhere", "return": "None"}, "the first block's future import applies"
    assert first["compiled"] < 1.5 * len(source)
    assert probe(tmp_path)["compiled"] == 0, "an unchanged library is not compiled again"
    (tmp_path / "library.py").write_text(source + "\n\ndef f_new(x):\n    return x\n")
    after = probe(tmp_path)
    assert after["names"] == 3001 and 0 < after["compiled"] < 70_000, "only the last block was compiled"
    assert len(list((tmp_path / "__pycache__" / "library.blocks").iterdir())) < 20, "earlier versions' blocks go"


def test_a_library_that_does_not_compile_gives_the_files_own_error(tmp_path):
    (tmp_path / "library.py").write_text(a_library(2000, extra="\ndef broken(:\n    pass\n"))
    error = probe(tmp_path)["error"]
    lines = (tmp_path / "library.py").read_text().splitlines()
    assert error[1] == lines.index("def broken(:") + 1
    (tmp_path / "library.py").write_text(a_library(2000, extra="\nfrom __future__ import division\n"))
    assert "__future__" in probe(tmp_path)["error"][0], "a future import after the start is refused, as import does"
