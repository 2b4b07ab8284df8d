"""The interpreter (DESIGN section 6), each test against a real Jupyter kernel or a real bash.

One interpreter is shared by the tests whose kernel state does not matter; the tests that time out, crash, restart,
or need their own environment or workspace use their own. Every interpreter is closed by the test that made it, and
after the last test a sweep checks that none of the file's kernels is still running and no private folder is left.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import zlib

import pytest
from helpers import pid_gone
from waiting import HANG_GUARD, eventually, wait_until

from aiflows_jarvis.InterpreterFlowModule import InterpreterAtomicFlow
from aiflows_jarvis.InterpreterFlowModule import kernel as kernel_module
from aiflows_jarvis.InterpreterFlowModule import output as output_module
from aiflows_jarvis.InterpreterFlowModule import workspace as workspace_module
from aiflows_jarvis.InterpreterFlowModule.environment import scrubbed_environment
from aiflows_jarvis.InterpreterFlowModule.interpreter import CodeInterpreter
from aiflows_jarvis.InterpreterFlowModule.output import BoundedText, RunResult

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tiny_png(width: int = 2, height: int = 1) -> bytes:
    """A valid RGB PNG made by hand (no imaging library needed)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def kernel_processes(mark: str):
    """``{pid: command line}`` of the ipykernel processes (zombies left out) that this pytest process started, or
    whose command line mentions ``mark``."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                args = f.read().decode("utf-8", errors="replace").split("\0")
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()
        if fields[0] == b"Z" or not any("ipykernel" in arg for arg in args):
            continue
        if int(fields[1]) == os.getpid() or any(mark in arg for arg in args):
            found[int(name)] = " ".join(args)
    return found


@pytest.fixture(scope="module", autouse=True)
def no_kernel_left_behind(tmp_path_factory):
    """After the file's tests, no kernel they started is running and no private folder is left.

    The file's kernels (those of the subprocesses too, through TMPDIR) keep their folders under a temporary directory
    of their own, which tells them apart from the kernels of other test runs on the same machine. It is short: IPC
    socket paths are bounded."""
    tmp_path_factory.getbasetemp()  # pytest's own temporary folders stay where they are
    base = tempfile.gettempdir()
    root = tempfile.mkdtemp(prefix="jit-", dir=base if len(base) <= 40 else "/tmp")
    saved = tempfile.tempdir, os.environ.get("TMPDIR")
    tempfile.tempdir = os.environ["TMPDIR"] = root
    try:
        yield root
    finally:
        tempfile.tempdir = saved[0]
        if saved[1] is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved[1]
        # a kernel that is being shut down has a moment to go (long on a busy machine)
        eventually(lambda: not kernel_processes(root), poll=0.1)
        left = kernel_processes(root)
        for pid in left:  # do not leave them to the next tests
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        folders = glob.glob(os.path.join(root, "jarvis-interp-*"))
        shutil.rmtree(root, ignore_errors=True)
        assert not left, f"kernels left running after the tests: {left}"
        assert not folders, f"interpreter folders left after the tests: {folders}"


def test_the_leftover_kernel_sweep_sees_a_kernel_this_process_started(shared, no_kernel_left_behind):
    """The sweep above is not vacuous: a running kernel of this file is found (by its parent and its folder)."""
    pid = int(shared.run("import os; print(os.getpid())").output)
    assert pid in kernel_processes(no_kernel_left_behind)
    assert shared.context.scratch.startswith(no_kernel_left_behind + os.sep)


@pytest.fixture(scope="module")
def shared(tmp_path_factory, no_kernel_left_behind):
    interpreter = CodeInterpreter(str(tmp_path_factory.mktemp("shared_workspace")), timeout=30)
    yield interpreter
    interpreter.close()


# ~~~ Python basics ~~~
def test_variables_persist_and_the_working_directory_is_the_workspace(shared):
    assert not shared.run("answer = 41").failed
    result = shared.run("answer + 1")
    assert (result.output, result.failed, result.language) == ("42", False, "python")
    cwd = shared.run("import os, sys\nprint(os.getcwd())\nprint(sys.path[0])").output.splitlines()
    assert cwd == [shared.workspace, shared.workspace]
    assert shared.run("print(answer)", "py").output == "41"


def test_an_exception_fails_the_run_with_its_traceback_and_the_session_goes_on(shared):
    result = shared.run("print('before')\n1/0")
    assert result.failed and not result.restarted and not result.timed_out
    assert result.output.startswith("before\n")
    assert "ZeroDivisionError" in result.output and "\x1b[" not in result.output
    assert shared.run("print('after')").output == "after"


def test_empty_output_is_said(shared):
    assert shared.run("z = 0").output == "(no output)"
    assert shared.run("true", "shell").output == "(no output)"


def test_unsupported_language_fails_with_the_supported_ones(shared):
    result = shared.run("puts 1", "ruby")
    assert isinstance(result, RunResult) and result.failed
    assert "ruby" in result.output and "python" in result.output and "shell" in result.output


def test_results_and_display_text_are_shown(shared):
    result = shared.run("from IPython.display import display\ndisplay({'a': 1})\n[1, 2]")
    assert result.output == "{'a': 1}\n[1, 2]"


# ~~~ Timeouts, crashes, restarts ~~~
def test_timeout_interrupts_the_kernel_and_keeps_the_session(make_interpreter):
    interpreter = make_interpreter(timeout=2)
    interpreter.run("kept = 'still here'")
    result = interpreter.run("import time\nprint('started')\ntime.sleep(60)")
    assert result.failed and result.timed_out and not result.restarted
    assert "started" in result.output and "KeyboardInterrupt" in result.output
    assert "interrupted after 2 s" in result.output and "kept" in result.output
    after = interpreter.run("print(kept)")
    assert after.output == "still here" and not after.failed


def test_a_kernel_that_ignores_the_interrupt_is_restarted_and_the_loss_said(make_interpreter):
    interpreter = make_interpreter(timeout=1.5, interrupt_grace=1.0)
    interpreter.run("lost = 1")
    code = "import time\nwhile True:\n    try:\n        time.sleep(10)\n    except KeyboardInterrupt:\n        pass"
    result = interpreter.run(code)
    assert result.failed and result.timed_out and result.restarted
    assert "restarted" in result.output and "lost" in result.output
    assert interpreter.run("print('works')").output == "works"
    assert "NameError" in interpreter.run("lost").output


def test_a_dead_kernel_is_seen_at_once_restarted_and_the_loss_said(make_interpreter):
    interpreter = make_interpreter(timeout=60)
    interpreter.run("a = 1")
    result = interpreter.run("import os\nos._exit(1)")
    assert result.failed and result.restarted and not result.timed_out, "seen as dead, not after the 60 s timeout"
    assert "died" in result.output and "lost" in result.output
    assert interpreter.run("print('back')").output == "back"
    gone = interpreter.run("a")
    assert gone.failed and "NameError" in gone.output
    # exit() ends the session too: a new kernel, the loss said, not a failure
    interpreter.run("b = 2")
    ended = interpreter.run("exit()")
    assert ended.restarted and not ended.failed and "lost" in ended.output
    assert "NameError" in interpreter.run("b").output


def signal_once_written(path: str, send) -> threading.Thread:
    """A thread that calls ``send()`` once ``path`` exists (the code under test writes it when it is where the
    test wants it interrupted)."""
    thread = threading.Thread(
        target=lambda: eventually(lambda: os.path.exists(path), poll=0.01) and send(), daemon=True
    )
    thread.start()
    return thread


def test_keyboard_interrupt_interrupts_the_kernel_and_is_raised(make_interpreter, tmp_path):
    interpreter = make_interpreter(timeout=HANG_GUARD * 2)  # the Ctrl+C ends the run, not the timeout
    interpreter.run("survivor = 'yes'")
    sleeping = str(tmp_path / "sleeping")
    signal_once_written(sleeping, lambda: os.kill(os.getpid(), signal.SIGINT))
    with pytest.raises(KeyboardInterrupt):
        interpreter.run(f"import time\nopen({sleeping!r}, 'w').close()\ntime.sleep({HANG_GUARD})")
    assert interpreter.run("print(survivor)").output == "yes"


# ~~~ Output bounds ~~~
def test_ten_megabytes_of_output_are_cut_keeping_head_and_tail(shared):
    result = shared.run("print('a' * 10); print('x' * 10_000_000); print('the end')")
    assert result.truncated and not result.failed
    assert len(result.output) < shared.max_output_chars + 200
    assert result.output.startswith("aaaaaaaaaa\nxxx") and result.output.endswith("xxx\nthe end")
    cut = 11 + 10_000_001 + 8 - shared.max_output_chars
    assert f"[... {cut:,} characters cut ...]" in result.output


def test_shell_output_is_bounded_too(shared):
    result = shared.run("head -c 3000000 /dev/zero | tr '\\0' 'y'; echo; echo done", "bash")
    assert result.truncated and result.output.endswith("done") and "characters cut" in result.output
    assert len(result.output) < shared.max_output_chars + 200


def test_bounded_text_keeps_memory_bounded_over_many_chunks():
    text = BoundedText(100)
    for i in range(100_000):
        text.add(f"line {i}\n")
        assert text.head_len <= 60 and len(text.tail) <= 40
    rendered = text.render()
    assert rendered.startswith("line 0\n") and rendered.endswith("line 99999\n")
    assert text.cut == text.total - 100


def test_ansi_escapes_and_carriage_returns_are_cleaned(shared):
    result = shared.run("printf '\\033[31mred\\033[0m\\n10%%\\r50%%\\r100%%\\n'", "shell")
    assert result.output == "red\n100%"


def test_control_characters_are_removed_but_tabs_and_line_breaks(shared):
    printf = "printf 'nul:\\0:bell:\\a:esc:\\033\\nback\\bspace\\t|\\033[1;32mgreen\\033[0m\\033(B\\n'"
    shell = shared.run(printf, "shell")
    assert shell.output == "nul::bell::esc:\nbackspace\t|green"
    python = shared.run("print('a\\x00b\\x1b\\x7fc\\x9bd\\x0c')")
    assert python.output == "abcd"


# ~~~ Figures and files ~~~
def test_an_image_png_display_is_saved_as_a_png_file(shared):
    png = tiny_png()
    code = f"from IPython.display import Image, display\ndisplay(Image(data={png!r}))\nprint('shown')"
    result = shared.run(code)
    assert not result.failed and len(result.figures) == 1
    path = result.figures[0]
    assert os.path.isabs(path) and path.startswith(os.path.join(shared.workspace, "figures") + os.sep)
    assert path.endswith(".png")
    with open(path, "rb") as f:
        assert f.read() == png
    assert result.output.startswith("shown") and f"[figure saved: {path}]" in result.output
    assert result.files == []  # figures are reported as figures, not as files


def test_matplotlib_figures_are_saved_and_closed(shared):
    pytest.importorskip("matplotlib")
    result = shared.run(
        "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.figure()\nplt.bar([1], [2])\nplt.show()"
    )
    assert not result.failed, result.output
    assert len(result.figures) == 2 and len(set(result.figures)) == 2
    for path in result.figures:
        with open(path, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
        assert path in result.output
    assert "non-interactive" not in result.output  # plt.show() with Agg says nothing
    again = shared.run("print(len(plt.get_fignums()))")
    assert again.output == "0" and again.figures == []


def test_a_timeout_while_a_figure_is_saved_says_so(make_interpreter):
    pytest.importorskip("matplotlib")
    interpreter = make_interpreter(timeout=HANG_GUARD)
    # imported first, with time to spare: on a busy machine the import alone can take longer than the run's timeout
    assert not interpreter.run("import matplotlib.pyplot as plt\nfrom matplotlib.artist import Artist").failed
    code = textwrap.dedent("""
        import time
        import matplotlib.pyplot as plt
        from matplotlib.artist import Artist

        class Slow(Artist):
            def draw(self, renderer):
                time.sleep(60)

        plt.figure().add_artist(Slow())
        plt.figure()
        print('drawn')
    """)
    result = interpreter.run(code, timeout=3)
    assert result.timed_out and not result.restarted and result.figures == []
    assert (
        "[figure 1 could not be saved: KeyboardInterrupt (the run was interrupted while the figure was saved; "
        "1 more figure(s) not saved)]" in result.output
    ), result.output
    assert interpreter.run("print(len(plt.get_fignums()))").output == "0"


def test_files_created_or_modified_are_reported(shared):
    os.makedirs(os.path.join(shared.workspace, "old"), exist_ok=True)
    with open(os.path.join(shared.workspace, "old", "kept.txt"), "w") as f:
        f.write("untouched")
    code = textwrap.dedent("""
        import os
        open('out.csv', 'w').write('a,b')
        os.makedirs('sub/dir', exist_ok=True)
        open('sub/dir/x.txt', 'w').write('x')
        open('.hidden', 'w').write('h')
        os.makedirs('.cache', exist_ok=True)
        open('.cache/y', 'w').write('y')
    """)
    result = shared.run(code)
    assert result.files == ["out.csv", "sub/dir/x.txt"]
    assert "[files created or modified: out.csv, sub/dir/x.txt]" in result.output
    touched = shared.run("echo more >> out.csv", "shell")
    assert touched.files == ["out.csv"]
    assert shared.run("print(1)").files == []


def test_heavy_and_deep_folders_are_not_scanned_for_changed_files(make_interpreter):
    interpreter = make_interpreter()
    code = textwrap.dedent("""
        import os
        for folder in ('venv/lib', 'node_modules/pkg', 'pkgs/lib/site-packages/x', 'a/b/c', 'a/b/c/d', 'env'):
            os.makedirs(folder, exist_ok=True)
        for path in ('venv/lib/m.py', 'node_modules/pkg/i.js', 'pkgs/lib/site-packages/x/y.py', 'a/b/c/seen.txt',
                     'a/b/c/d/too_deep.txt', 'top.txt'):
            open(path, 'w').write('x')
        open('env/pyvenv.cfg', 'w').write('home = /usr/bin')  # a virtual environment, whatever its name
    """)
    result = interpreter.run(code, "python")
    assert result.files == ["a/b/c/seen.txt", "top.txt"], result.output
    assert "checked only to a bounded depth and size" in result.output  # a/b/c/d was not looked into
    assert interpreter.run("echo x > top.txt", "shell").files == ["top.txt"]


def test_the_scan_for_changed_files_is_bounded(make_interpreter, monkeypatch):
    interpreter = make_interpreter()
    os.makedirs(os.path.join(interpreter.workspace, "data", "deep"))
    for i in range(30):
        open(os.path.join(interpreter.workspace, "data", "deep", f"old{i}.txt"), "w").close()
    monkeypatch.setattr(workspace_module, "_MAX_SCAN_ENTRIES", 20)
    found, complete = workspace_module._snapshot(interpreter.workspace)
    assert not complete and len(found) < 20
    # breadth first: a file at the top is seen whatever lies below
    result = interpreter.run("echo new > new.txt; echo more >> data/deep/old29.txt", "shell")
    assert "new.txt" in result.files


def test_many_files_are_bounded(shared):
    result = shared.run("mkdir -p many && for i in $(seq 1 120); do : > many/f$i.txt; done", "shell")
    assert len(result.files) == 50 and "(and 110 more)" in result.output


# ~~~ Shell ~~~
def test_shell_runs_in_the_workspace(shared):
    result = shared.run("echo hi && pwd", "shell")
    assert result.output == f"hi\n{shared.workspace}" and not result.failed and result.language == "shell"


def test_shell_non_zero_exit_fails_and_says_the_code(shared):
    result = shared.run("echo partial; exit 3", "bash")
    assert result.failed and not result.timed_out
    assert result.output == "partial\n[exit code 3]"
    alone = shared.run("exit 3", "shell")
    assert alone.failed and alone.output == "[exit code 3]"


def test_shell_timeout_kills_the_process_group(shared):
    marker = f"sleep {4000 + os.getpid() % 1000}"
    result = shared.run(f"{marker} & {marker}; echo never", "sh", timeout=1)
    assert result.failed and result.timed_out and "killed after 1 s" in result.output
    assert "never" not in result.output
    wait_until(
        lambda: marker not in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout,
        f"the killed group's `{marker}` processes to be gone",
        poll=0.1,
    )


# ~~~ Environment ~~~
def test_llm_api_keys_do_not_reach_the_kernel_or_the_shell(make_interpreter, monkeypatch):
    secrets = [
        "OPENAI_API_KEY",
        "AZURE_OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "HF_TOKEN",
        "MY_SERVICE_API_KEY",
        "GITHUB_TOKEN",
        "ANTHROPIC_AUTH_TOKEN",
        "OPENAI_KEY",
        "OPENAI_API_BASE",
        "AZURE_API_VERSION",
    ]
    for name in secrets:
        monkeypatch.setenv(name, "sk-secret-value")
    monkeypatch.setenv("JARVIS_HARMLESS", "visible")
    monkeypatch.setenv("MY_SETTING", "1")
    interpreter = make_interpreter()
    code = (
        f"import os\nprint(sorted(k for k in {secrets!r} if k in os.environ), os.environ['JARVIS_HARMLESS'], "
        "os.environ['MY_SETTING'], os.environ['MPLBACKEND'])"
    )
    assert interpreter.run(code).output == "[] visible 1 Agg"
    shell = interpreter.run("env", "shell").output
    assert "sk-secret-value" not in shell and "JARVIS_HARMLESS=visible" in shell and "MY_SETTING=1" in shell


def test_the_scrub_drops_secrets_by_name_and_keeps_ordinary_variables():
    secrets = [
        "OPENAI_API_KEY",
        "OPENAI_KEY",
        "GITHUB_TOKEN",
        "ANTHROPIC_AUTH_TOKEN",
        "HF_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "PGPASSWORD",
        "MYSQL_PWD",
        "DB_PASSWORD",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "SSH_PRIVATE_KEY",
        "KEY",
        "token",
        "my_api_key",
        "OPENAI_API_BASE",
        "OPENAI_BASE_URL",
        "OPENAI_ORGANIZATION",
        "AZURE_API_BASE",
        "AZURE_API_VERSION",
        "AZURE_OPENAI_API_VERSION",
        "AZURE_OPENAI_ENDPOINT",
        "ANTHROPIC_BASE_URL",
        "HUGGINGFACE_API_BASE",
    ]
    ordinary = [
        "PATH",
        "HOME",
        "USER",
        "LANG",
        "LC_ALL",
        "LC_CTYPE",
        "TERM",
        "TMPDIR",
        "PYTHONPATH",
        "PYTHONHASHSEED",
        "VIRTUAL_ENV",
        "PWD",
        "MY_SETTING",
        "KEYBOARD_LAYOUT",
        "TOKENIZERS_PARALLELISM",
        "MONKEY",
        "HF_HOME",
        "HF_ENDPOINT",
        "SHELL",
        "DISPLAY",
        "JARVIS_TRACE",
        "AZURE_STORAGE_ENDPOINT",
        "AZURE_REGION",
    ]
    kept = scrubbed_environment(base={name: "x" for name in secrets + ordinary})
    assert sorted(kept) == sorted(ordinary)


def test_shell_python_and_pip_are_the_kernels(shared, monkeypatch):
    # another Python first on the parent's PATH (the system's, if there is one) must not be the shell's
    monkeypatch.setenv("PATH", os.pathsep.join(["/usr/local/bin", "/usr/bin", "/bin", os.environ.get("PATH", "")]))
    kernel_python = shared.run("import sys; print(sys.executable)").output
    shell_python = shared.run('python -c "import sys; print(sys.executable)"', "shell")
    assert not shell_python.failed, shell_python.output
    assert os.path.realpath(shell_python.output) == os.path.realpath(kernel_python)
    bin_dir = os.path.dirname(kernel_python)
    if os.path.exists(os.path.join(bin_dir, "pip")):
        pip = shared.run("command -v pip", "shell").output
        assert os.path.dirname(pip) == bin_dir, pip
    venv = shared.run('echo "venv:$VIRTUAL_ENV"', "shell").output
    assert venv == "venv:" + (sys.prefix if sys.prefix != sys.base_prefix else "")


def test_the_workspace_is_not_on_the_shells_pythonpath(make_interpreter, monkeypatch):
    """A workspace module named like a standard one must not shadow it for Python programs run from bash."""
    monkeypatch.setenv("PYTHONPATH", "/nonexistent/user/path")
    interpreter = make_interpreter()
    os.makedirs(interpreter.workspace)
    with open(os.path.join(interpreter.workspace, "json.py"), "w") as f:
        f.write("raise ImportError('the workspace json.py shadowed the standard library')\n")
    result = interpreter.run('echo "$PYTHONPATH"; cd / && python -c "import json; print(json.dumps([1]))"', "shell")
    assert result.output == "/nonexistent/user/path\n[1]" and not result.failed
    monkeypatch.delenv("PYTHONPATH")
    assert interpreter.run('echo "${PYTHONPATH-unset}"', "shell").output == "unset"


# ~~~ The code library ~~~
def test_the_library_is_reloaded_and_imported_names_rebound(make_interpreter):
    interpreter = make_interpreter()
    library = os.path.join(interpreter.workspace, "library.py")
    os.makedirs(interpreter.workspace, exist_ok=True)

    def write(body: str) -> None:
        with open(library, "w") as f:
            f.write("print('library loaded')\n" + body)

    write("def f():\n    return 1\n")
    first = interpreter.run("from library import f\nimport library\nf()")
    assert first.output == "library loaded\n1"
    write("def f():\n    return 2\n\ndef g():\n    return 'new'\n")
    second = interpreter.run("f(), library.f(), library.g()")
    reloaded = "[library.py changed since the last run: reloaded, its new functions can be imported]"
    assert second.output == f"{reloaded}\n(2, 2, 'new')", "the reload is said (the library's own print is not shown)"
    assert interpreter.run("f()").output == "2", "an unchanged library is not reloaded, nor is anything said"
    # a broken library does not fail the run; the user's own import shows the error
    write("def f(:\n")
    failed = interpreter.run("f()")
    assert failed.output.startswith("[library.py changed since the last run and could not be reloaded: SyntaxError")
    assert failed.output.endswith("\n2") and not failed.failed
    broken = interpreter.run("import library")
    assert broken.failed and "SyntaxError" in broken.output
    write("def f():\n    return 4\n")
    assert interpreter.run("f(), library.f()").output == f"{reloaded}\n(4, 4)"
    os.remove(library)
    assert interpreter.run("f()").output == "4"


def test_a_library_package_module_saved_into_is_reloaded_and_a_new_module_imports(make_interpreter):
    """The library as a package: save_code changes one module; the kernel reloads that module only (names imported
    from it are rebound), and a function saved into a new module imports without any reload."""
    from aiflows_jarvis.ExtendLibraryFlowModule import SaveCodeAtomicFlow

    interpreter = make_interpreter()
    os.makedirs(interpreter.workspace, exist_ok=True)
    files = {"code_library": os.path.join(interpreter.workspace, "library.py")}
    save = SaveCodeAtomicFlow.instantiate_from_default_config()
    save.run({"code": "def slugify(t):\n    return t + '-1'\n", "memory_files": files, "module": "text"})
    save.run({"code": "def total(v):\n    return sum(v)\n", "memory_files": files, "module": "data"})
    assert (
        interpreter.run("from library import slugify\nimport library\nslugify('a'), library.total([1])").output
        == "('a-1', 1)"
    )
    save.run({"code": "def slugify(t):\n    return t + '-2'\n", "memory_files": files, "replace_existing": True})
    save.run({"code": "def svg_line(v):\n    return 'svg'\n", "memory_files": files, "module": "charts"})
    second = interpreter.run("slugify('a'), library.slugify('b'), library.svg_line([])")
    assert second.output == (
        "[library/text.py changed since the last run: reloaded, its new functions can be "
        "imported]\n('a-2', 'b-2', 'svg')"
    ), "only text.py is reloaded; charts imports"
    assert interpreter.run("from library import svg_line\nsvg_line([])").output == "'svg'"


# ~~~ Threads, closing, exit ~~~
def test_two_threads_do_not_run_code_on_one_kernel_at_once(shared):
    outputs = []
    code = "import time\nprint('start {0}')\ntime.sleep(0.2)\nprint('end {0}')"
    threads = [threading.Thread(target=lambda i=i: outputs.append(shared.run(code.format(i)).output)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outputs) == [f"start {i}\nend {i}" for i in range(3)]


def test_close_leaves_no_kernel_process_and_is_idempotent(make_interpreter):
    interpreter = make_interpreter()
    ids = interpreter.run(
        "import os, subprocess\nchild = subprocess.Popen(['sleep', '300'])\nprint(os.getpid(), child.pid)"
    )
    kernel_pid, child_pid = map(int, ids.output.split())
    scratch = interpreter.context.scratch
    assert scratch and os.path.isdir(scratch)
    interpreter.close()
    interpreter.close()
    assert pid_gone(kernel_pid), "the kernel process is still there"
    assert pid_gone(child_pid), "a process started by the kernel is still there"
    assert not os.path.exists(scratch)
    # a closed interpreter starts a new kernel on its next run
    assert interpreter.run("print('again')").output == "again"


def test_processes_the_kernel_started_in_sessions_of_their_own_are_gone_after_close(make_interpreter):
    interpreter = make_interpreter()
    code = (
        "import os, subprocess\n"
        "grouped = subprocess.Popen(['sleep', '1000'])\n"
        "alone = subprocess.Popen(['sleep', '1001'], start_new_session=True)\n"
        "print(grouped.pid, alone.pid)"
    )
    pids = [int(pid) for pid in interpreter.run(code).output.split()]
    assert os.getpgid(pids[1]) != os.getpgid(pids[0])
    interpreter.close()
    for pid in pids:
        assert pid_gone(pid), f"sleep {pid} started by the kernel is still there"


def test_kernels_are_shut_down_at_process_exit(tmp_path):
    script = textwrap.dedent(f"""
        from aiflows_jarvis.InterpreterFlowModule.interpreter import CodeInterpreter
        interpreter = CodeInterpreter({str(tmp_path)!r})
        code = "import os, subprocess\\nchild = subprocess.Popen(['sleep', '1000'])\\nprint(os.getpid(), child.pid)"
        print(interpreter.run(code).output, interpreter.context.scratch, flush=True)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, done.stderr
    kernel_pid, child_pid, scratch = done.stdout.split()[-3:]
    assert pid_gone(int(kernel_pid)) and pid_gone(int(child_pid))
    assert not os.path.exists(scratch)


# ~~~ Transport ~~~
def test_the_kernel_talks_over_ipc_sockets_in_its_private_folder(shared):
    pid = int(shared.run("import os; print(os.getpid())").output)
    km = shared.kernel._km
    info = km.get_connection_info()
    assert km.transport == "ipc" and info["transport"] == "ipc"
    assert info["ip"].startswith(shared.context.scratch + os.sep)
    assert glob.glob(info["ip"] + "-*"), "no IPC socket files"
    # the kernel was started with that connection file, which is gone now that the kernel has read it
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        args = f.read().decode().split("\0")
    assert args[args.index("-f") + 1] == km.connection_file
    assert os.path.dirname(km.connection_file) == shared.context.scratch and not os.path.exists(km.connection_file)
    assert oct(os.stat(shared.context.scratch).st_mode & 0o777) == oct(0o700)


# ~~~ The flow ~~~
def test_flow_from_default_config_runs_in_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    flow = InterpreterAtomicFlow.instantiate_from_default_config()
    try:
        assert flow.flow_config["workspace"] is None and flow.flow_config["timeout"] == 60
        out = flow.run({"code": "import os\nvalue = 5\nprint(os.getcwd())", "language": "python"})
        assert out == {
            "interpreter_output": str(tmp_path),
            "failed": False,
            "timed_out": False,
            "restarted": False,
            "figures": [],
            "files": [],
        }
        flow.reset(full_reset=True, recursive=True)  # the kernel is not part of flow_state
        assert flow.call({"code": "value * 2"})["interpreter_output"] == "10"  # language defaults to python
        shell = flow.run({"code": "echo made > made.txt; exit 1", "language": "shell"})
        assert shell["failed"] and shell["files"] == ["made.txt"] and "exit code 1" in shell["interpreter_output"]
        unsupported = flow.run({"code": "1", "language": "cobol"})
        assert unsupported["failed"] and "python" in unsupported["interpreter_output"]
    finally:
        flow.close()
        flow.close()


def test_flow_relative_workspace_and_config_overrides(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    flow = InterpreterAtomicFlow.instantiate_from_default_config(workspace="work", timeout=1.5, max_output_chars=500)
    try:
        out = flow.run({"code": "import os, time\nprint(os.getcwd())\nprint('y' * 5000)\ntime.sleep(30)"})
        assert out["timed_out"] and out["failed"] and not out["restarted"]
        assert out["interpreter_output"].startswith(str(tmp_path / "work"))
        assert "characters cut" in out["interpreter_output"]
    finally:
        flow.close()


def test_an_exit_during_a_shell_command_kills_the_command(make_interpreter):
    """SIGTERM reaches a run as an exit (SystemExit), not a KeyboardInterrupt: the command must not outlive it."""
    interpreter = make_interpreter()
    marker = f"jarvis-test-{os.getpid()}-{time.monotonic_ns()}"

    def running():
        return marker in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout

    # the exit comes once the command runs
    sender = threading.Thread(
        target=lambda: (
            eventually(running, poll=0.05) and signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)
        ),
        daemon=True,
    )
    previous = signal.signal(signal.SIGUSR1, lambda *_: (_ for _ in ()).throw(SystemExit(143)))
    try:
        sender.start()
        with pytest.raises(SystemExit):
            interpreter.run(f"exec -a {marker} sleep {HANG_GUARD * 2:.0f}", "bash")
    finally:
        sender.join()
        signal.signal(signal.SIGUSR1, previous)
    wait_until(lambda: not running(), "the shell command to end after the run was ended", poll=0.1)


# ~~~ Output bounded in the kernel (issue 11: 200 MB printed in one write showed "(no output)") ~~~
def test_fifty_megabytes_in_one_write_show_head_and_tail_and_only_the_bound_is_sent(make_interpreter, monkeypatch):
    chunks = []

    class Recording(BoundedText):
        def add(self, text):
            chunks.append(len(text))
            super().add(text)

    monkeypatch.setattr(kernel_module, "BoundedText", Recording)
    interpreter = make_interpreter(max_output_chars=2000)
    result = interpreter.run("import sys\nsys.stdout.write('a' * 1000 + 'x' * 50_000_000 + 'the end\\n')\nNone")
    assert result.truncated and not result.failed
    assert result.output.startswith("a" * 1000 + "x") and result.output.endswith("xxxthe end")
    assert f"[... {1000 + 50_000_000 + 8 - 2000:,} characters cut ...]" in result.output, "the cut counted exactly"
    assert max(chunks) <= 2 * 2000 + 100, "the kernel sent only what the bound keeps, not the 50 MB"
    chunks.clear()
    many = interpreter.run("for i in range(300_000):\n    print(i)\n'last'")
    assert many.output.endswith("299999\n'last'"), "a result after a flood of output still comes last"
    assert sum(chunks) < 10 * 2000, "many small writes are held back in the kernel too"
    chunks.clear()
    shown = interpreter.run("'y' * 10_000_000")
    assert shown.output.startswith("'yyy") and shown.output.endswith("yyy'") and "characters cut" in shown.output
    assert max(chunks) <= 2 * 2000 + 100, "a long result is cut in the kernel"
    assert interpreter.run("print('small')").output == "small"


def test_bounded_text_counts_skipped_characters_as_cut():
    text = BoundedText(100)
    text.add("h" * 100 + output_module.SKIP_MARK + "1000\0" + "t" * 100)
    whole = BoundedText(100)
    whole.add("h" * 100 + "m" * 1000 + "t" * 100)
    assert text.render() == whole.render() and text.cut == whole.cut == 1100
    assert text.total == whole.total == 1200


# ~~~ Changed files without a scan per run (issue 15) ~~~
def test_a_run_that_changes_nothing_does_not_scan_the_workspace(make_interpreter, monkeypatch):
    interpreter = make_interpreter()
    os.makedirs(os.path.join(interpreter.workspace, "a", "b", "c"))
    for i in range(200):
        open(os.path.join(interpreter.workspace, "a", f"f{i}.txt"), "w").close()
    with open(os.path.join(interpreter.workspace, "a", "b", "c", "old.txt"), "w") as f:
        f.write("old")
    interpreter.run("x = 1")  # the first run looks at the workspace once
    if not interpreter._tracker.watching:
        pytest.skip("inotify is not available here: the workspace is scanned at every run")
    calls = []
    real_scandir = os.scandir
    monkeypatch.setattr(workspace_module.os, "scandir", lambda *a: calls.append(a) or real_scandir(*a))
    assert interpreter.run("x = 2").files == [] and interpreter.run("true", "shell").files == []
    assert calls == [], "nothing changed: no folder listed"
    deep = interpreter.run("open('a/b/c/new.txt', 'w').write('n'); open('a/b/c/old.txt', 'a').write('+')")
    assert deep.files == ["a/b/c/new.txt", "a/b/c/old.txt"], "a new and a changed file three levels down"
    made = interpreter.run("mkdir -p d/e && echo 1 > d/e/f.txt && echo 2 > a/f7.txt", "shell")
    assert made.files == ["a/f7.txt", "d/e/f.txt"], "a new folder's files are new"
    moved = interpreter.run("mv d/e d/g && rm a/f8.txt", "shell")
    assert moved.files == ["d/g/f.txt"], "a moved folder's files are where they are now; a removed file is not listed"
    with open(os.path.join(interpreter.workspace, "between.txt"), "w") as f:
        f.write("written between two runs, by someone else")
    assert interpreter.run("x = 3").files == [], "a change made between runs is not the run's"
    assert interpreter.run("open('between.txt', 'a').write('!')").files == ["between.txt"]


def test_without_inotify_the_workspace_is_scanned_and_changes_are_still_reported(tmp_path):
    tracker = workspace_module.ChangeTracker(str(tmp_path), use_inotify=False)
    (tmp_path / "kept.txt").write_text("k")
    tracker.begin()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "new.txt").write_text("n")
    (tmp_path / "kept.txt").write_text("changed")
    assert tracker.end(time.time_ns()) == (["kept.txt", "sub/new.txt"], 2, True)
    assert not tracker.watching


# ~~~ Quick shutdown, lazy import, start in the background (issue 15) ~~~
def test_close_lets_the_kernel_end_by_itself_after_its_exit_handlers_ran(make_interpreter):
    interpreter = make_interpreter()
    interpreter.run(
        "import atexit\nlog = open('unclosed.txt', 'w')\nlog.write('buffered, never flushed')\n"
        "atexit.register(lambda: open('atexit.txt', 'w').write('ran'))"
    )
    status = interpreter.kernel._status_path(interpreter.kernel._starts)
    interpreter.close()
    with open(os.path.join(interpreter.workspace, "unclosed.txt")) as f:
        assert f.read() == "buffered, never flushed", "open files are flushed"
    with open(os.path.join(interpreter.workspace, "atexit.txt")) as f:
        assert f.read() == "ran", "the code's exit handlers ran"
    assert not os.path.exists(status), "the private folder is gone"


def test_the_kernel_exits_by_itself_on_a_shutdown_request(make_interpreter):
    """Not killed after a grace period: the launcher says how it ended."""
    interpreter = make_interpreter()
    interpreter.run("x = 1")
    km = interpreter.kernel._km
    km.request_shutdown()
    wait_until(lambda: not km.is_alive(), "the kernel to exit after the shutdown request", poll=0.01)
    with open(interpreter.kernel._status_path(interpreter.kernel._starts)) as f:
        assert f.read() == "exit 0"


def test_importing_the_flow_does_not_import_jupyter_client():
    code = (
        "import sys\nimport aiflows_jarvis.InterpreterFlowModule\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jupyter_client', 'zmq', 'ipykernel')))"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_prestart_starts_the_kernel_in_the_background_and_the_first_run_uses_it(tmp_path):
    flow = InterpreterAtomicFlow.instantiate_from_default_config()
    try:
        flow.prestart(workspace=str(tmp_path))
        flow.engine._prestart.join(120)
        assert flow.engine.kernel_running, "started before any run"
        out = flow.run({"code": "import os; print(os.getcwd())"})
        assert out["interpreter_output"] == str(tmp_path) and not out["restarted"]
        assert flow.engine.kernel._starts == 1, "the first run used the kernel started in the background"
    finally:
        flow.close()


def test_close_during_a_prestart_leaves_no_kernel(make_interpreter):
    interpreter = make_interpreter()
    interpreter.prestart()
    interpreter.close()
    assert not interpreter.kernel_running and interpreter.kernel._km is None


# ~~~ Quick runs without lost output (issue 15: ipykernel's flush round trips and its sleep are gone) ~~~
def test_output_written_to_the_file_descriptors_comes_whole_and_before_the_result_at_every_run(shared):
    """What subprocesses and C code write to fd 1 and 2 is read by the kernel's own reader, which the end of a run
    waits for: the flushes that no longer wait for the IOPub thread never leave it behind."""
    for i in range(25):
        result = shared.run(f"import os; os.write(1, b'out {i}\\n'); os.write(2, b'err {i}\\n'); {i}")
        lines = result.output.splitlines()  # stdout and stderr are two streams: their order is not kept
        assert sorted(lines[:2]) == [f"err {i}", f"out {i}"] and lines[2:] == [str(i)], result.output
    assert shared.run("import os; os.system('echo from a shell')").output == "from a shell\n0"
    assert shared.run("import subprocess; subprocess.run(['echo', 'child']).returncode").output == "child\n0"


def test_a_character_split_between_two_writes_to_a_descriptor_is_kept(shared):
    code = (
        "import os, time\nb = 'é€'.encode()\nos.write(1, b[:1]); time.sleep(0.05); os.write(1, b[1:4]); "
        "time.sleep(0.05); os.write(1, b[4:] + b'\\n'); None"
    )
    assert shared.run(code).output == "é€"
    # a character left unfinished at the end of a run is said there, not carried into the next run
    assert shared.run("import os; os.write(1, b'abc\\xe2\\x82'); None").output == "abc\ufffd"
    assert shared.run("import os; os.write(1, b'next\\n'); None").output == "next"


def test_output_of_forked_children_comes_with_their_run(shared):
    code = textwrap.dedent("""
        import multiprocessing, sys
        def child(i):
            sys.stdout.write('child %d\\n' % i)
        process = multiprocessing.get_context('fork').Process(target=child, args=(RUN,))
        process.start(); process.join()
    """)
    for i in range(120):  # without the care it takes, the child's output came after the run's end once in 20 runs
        assert shared.run(code.replace("RUN", str(i))).output == f"child {i}"


def test_a_flush_with_nothing_written_does_not_wait_for_the_iopub_thread(shared):
    """A flush hands work to ipykernel's IOPub thread only when there is something to send."""
    code = textwrap.dedent("""
        import sys
        handed = []
        thread = sys.stdout.pub_thread
        real = thread.schedule
        thread.schedule = lambda f: handed.append(f) or real(f)
        try:
            sys.stdout.flush(); sys.stderr.flush()
            idle = len(handed)
            sys.stdout.write("x"); sys.stdout.flush()
            busy = len(handed)
        finally:
            del thread.schedule
        print("", idle, busy > idle, get_ipython().kernel._execute_sleep, type(sys.stdout).__name__)
    """)
    assert shared.run(code).output.split() == ["x", "0", "True", "0.0", "QuickFlushStream"]


def test_a_process_writing_without_pause_does_not_hold_the_runs(make_interpreter):
    interpreter = make_interpreter(timeout=HANG_GUARD)
    # each round of the writer also adds a byte to `beats`: a run that sees two more bytes than at its start saw the
    # writer print at least one whole `tick` during it, however rarely a busy machine lets the writer run
    started = interpreter.run(
        "import os, subprocess\nopen('beats', 'w').close()\n"
        "writer = subprocess.Popen(['sh', '-c', 'while :; do echo tick; printf . >> beats; done'])"
    )
    assert not started.failed, started.output
    during = (
        "import time\nstart = os.path.getsize('beats')\nwhile os.path.getsize('beats') < start + 2:\n"
        "    time.sleep(0.001)"
    )
    try:
        for _ in range(3):
            result = interpreter.run(during)
            assert not result.timed_out and not result.failed and not result.restarted, result.output[-300:]
            assert "tick" in result.output, "what it wrote during the run is the run's output"
    finally:
        interpreter.run("writer.kill(); writer.wait()")


# ~~~ The engines behind one interface ~~~
def test_each_language_is_run_by_exactly_one_engine_behind_the_executor_interface(tmp_path):
    from aiflows_jarvis.InterpreterFlowModule.executor import SUPPORTED_LANGUAGES, Executor

    interpreter = CodeInterpreter(str(tmp_path))
    try:
        assert interpreter.executors and all(isinstance(e, Executor) for e in interpreter.executors)
        languages = [language for executor in interpreter.executors for language in executor.languages]
        assert sorted(languages) == sorted(SUPPORTED_LANGUAGES), "no language without an engine, none with two"
        assert interpreter.executor_for("ruby") is None
    finally:
        interpreter.close()


def test_the_interpreter_engine_imports_nothing_from_aiflows():
    """The engine runs, is tested and benchmarked without the framework: only InterpreterAtomicFlow imports it."""
    import ast

    folder = os.path.join(ROOT, "flow_modules", "aiflows_jarvis", "InterpreterFlowModule")
    offending = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".py") or name in ("InterpreterAtomicFlow.py", "__init__.py"):
            continue
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            modules = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            offending += [f"{name}: {m}" for m in modules if m.split(".")[0] == "aiflows"]
    assert offending == []
