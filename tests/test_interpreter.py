"""The interpreter (DESIGN section 6), each test against a real Jupyter kernel or a real bash.

One interpreter is shared by the tests whose kernel state does not matter; the tests that time out, crash, restart,
or need their own environment or workspace use their own. Every interpreter is closed by the test that made it.
"""
from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import textwrap
import threading
import time
import zlib

import pytest

from flow_modules.aiflows.InterpreterFlowModule import InterpreterAtomicFlow
from flow_modules.aiflows.InterpreterFlowModule.kernel import BoundedText, CodeInterpreter, RunResult

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tiny_png(width: int = 2, height: int = 1) -> bytes:
    """A valid RGB PNG made by hand (no imaging library needed)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def pid_gone(pid: int, wait: float = 5.0) -> bool:
    """The process has ended (a zombie waiting for an init that reaps slowly counts as ended)."""
    end = time.monotonic() + wait
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            with open(f"/proc/{pid}/status") as f:
                if any(line.startswith("State:") and "Z" in line.split()[1] for line in f):
                    return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    interpreter = CodeInterpreter(str(tmp_path_factory.mktemp("shared_workspace")), timeout=30)
    yield interpreter
    interpreter.close()


@pytest.fixture
def make_interpreter(tmp_path):
    made = []

    def make(**kwargs):
        kwargs.setdefault("workspace", str(tmp_path / f"ws{len(made)}"))
        interpreter = CodeInterpreter(**kwargs)
        made.append(interpreter)
        return interpreter

    yield make
    for interpreter in made:
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
    start = time.monotonic()
    result = interpreter.run("import time\nprint('started')\ntime.sleep(60)")
    assert time.monotonic() - start < 6
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
    start = time.monotonic()
    result = interpreter.run("import os\nos._exit(1)")
    assert time.monotonic() - start < 15  # not the 60 s timeout
    assert result.failed and result.restarted and not result.timed_out
    assert "died" in result.output and "lost" in result.output
    assert interpreter.run("print('back')").output == "back"
    gone = interpreter.run("a")
    assert gone.failed and "NameError" in gone.output
    # exit() ends the session too: a new kernel, the loss said, not a failure
    interpreter.run("b = 2")
    ended = interpreter.run("exit()")
    assert ended.restarted and not ended.failed and "lost" in ended.output
    assert "NameError" in interpreter.run("b").output


def test_keyboard_interrupt_interrupts_the_kernel_and_is_raised(make_interpreter):
    interpreter = make_interpreter(timeout=60)
    interpreter.run("survivor = 'yes'")
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            interpreter.run("import time\ntime.sleep(60)")
    finally:
        timer.cancel()
    assert time.monotonic() - start < 10
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
    result = shared.run("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.figure()\nplt.bar([1], [2])\nplt.show()")
    assert not result.failed, result.output
    assert len(result.figures) == 2 and len(set(result.figures)) == 2
    for path in result.figures:
        with open(path, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
        assert path in result.output
    assert "non-interactive" not in result.output  # plt.show() with Agg says nothing
    again = shared.run("print(len(plt.get_fignums()))")
    assert again.output == "0" and again.figures == []


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
    start = time.monotonic()
    result = shared.run(f"{marker} & {marker}; echo never", "sh", timeout=1)
    assert time.monotonic() - start < 5
    assert result.failed and result.timed_out and "killed after 1 s" in result.output
    assert "never" not in result.output
    time.sleep(0.2)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert marker not in ps


# ~~~ Environment ~~~
def test_llm_api_keys_do_not_reach_the_kernel_or_the_shell(make_interpreter, monkeypatch):
    secrets = ["OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HF_TOKEN", "MY_SERVICE_API_KEY"]
    for name in secrets:
        monkeypatch.setenv(name, "sk-secret-value")
    monkeypatch.setenv("JARVIS_HARMLESS", "visible")
    interpreter = make_interpreter()
    code = f"import os\nprint(sorted(k for k in {secrets!r} if k in os.environ), os.environ['JARVIS_HARMLESS'], os.environ['MPLBACKEND'])"
    assert interpreter.run(code).output == "[] visible Agg"
    shell = interpreter.run("env", "shell").output
    assert "sk-secret-value" not in shell and "JARVIS_HARMLESS=visible" in shell


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
    assert second.output == "(2, 2, 'new')"  # reloaded silently: no "library loaded"
    # a broken library does not fail the run; the user's own import shows the error
    write("def f(:\n")
    assert interpreter.run("f()").output == "2"
    broken = interpreter.run("import library")
    assert broken.failed and "SyntaxError" in broken.output
    write("def f():\n    return 4\n")
    assert interpreter.run("f(), library.f()").output == "(4, 4)"
    os.remove(library)
    assert interpreter.run("f()").output == "4"


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
    ids = interpreter.run("import os, subprocess\nchild = subprocess.Popen(['sleep', '300'])\nprint(os.getpid(), child.pid)")
    kernel_pid, child_pid = map(int, ids.output.split())
    scratch = interpreter._scratch
    assert scratch and os.path.isdir(scratch)
    interpreter.close()
    interpreter.close()
    assert pid_gone(kernel_pid), "the kernel process is still there"
    assert pid_gone(child_pid), "a process started by the kernel is still there"
    assert not os.path.exists(scratch)
    # a closed interpreter starts a new kernel on its next run
    assert interpreter.run("print('again')").output == "again"


def test_kernels_are_shut_down_at_process_exit(tmp_path):
    script = textwrap.dedent(f"""
        from flow_modules.aiflows.InterpreterFlowModule.kernel import CodeInterpreter
        interpreter = CodeInterpreter({str(tmp_path)!r})
        print(interpreter.run("import os; print(os.getpid())").output, flush=True)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert pid_gone(int(done.stdout.split()[-1]))


# ~~~ The flow ~~~
def test_flow_from_default_config_runs_in_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    flow = InterpreterAtomicFlow.instantiate_from_default_config()
    try:
        assert flow.flow_config["workspace"] is None and flow.flow_config["timeout"] == 60
        out = flow.run({"code": "import os\nvalue = 5\nprint(os.getcwd())", "language": "python"})
        assert out == {"interpreter_output": str(tmp_path), "failed": False, "timed_out": False,
                       "restarted": False, "figures": [], "files": []}
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
