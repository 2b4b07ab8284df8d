"""Big files: a 5 MB library.py, 50 MB logs, a 5 MB log without entry headers, a 5 MB plan. The figures (seconds,
peak memory) are printed; "handled" bounds them loosely (a cliff, not a speed)."""

from __future__ import annotations

import json
import resource
import time

from aiflows_jarvis.CoreFlowModule import append_log_entry, format_log_entry, last_log_number, read_log_tail

from ..harness import case
from ..support import (
    CODER_GOAL,
    GOAL,
    LoopbackLLMServer,
    coder_run,
    command,
    demo,
    handled_exit,
    jarvis,
    library_names,
    memory_whole,
    plan_kept,
    read,
    short_run,
    stopped_run,
)

_BODY = "    " + "total = total + value * 2  # a line of a long function\n    " * 20


def _function(i: int) -> str:
    return (
        f"def helper_{i}(value):\n    '''Helper number {i}: doubles value many times.'''\n"
        f"    total = 0\n{_BODY}return total"
    )


FUNCTIONS = 5_000_000 // (len(_function(1000)) + 2)  # a library of 5 MB


@case(
    "scale",
    "library_of_5_mb",
    slow=True,
    timeout=500,
    handled="the demo (29 LLM calls, 2 saves, 2 runs) on a 5 MB "
    "library.py ends (exit 0) in at most 3 times (+10 s) what it takes on an empty library, its processes' peak "
    "memory under 1 GB (the library was parsed at every read: 5 s -> 155 s, 1.3 GB)",
    lost="one of the library's functions (about 4,000), or a function saved, is missing",
)
def library_of_5_mb(ctx):
    small = ctx.path("small")
    small.mkdir()
    with LoopbackLLMServer(replies=demo().replies()) as server:
        baseline = jarvis(ctx, demo().header["goal"], server=server, cwd=str(small), timeout=300)
    handled_exit(ctx, baseline, [0])
    memory = ctx.path("memory")
    memory.mkdir()
    source = "\n\n".join(_function(i) for i in range(FUNCTIONS)) + "\n"
    (memory / "library.py").write_text(source)
    with LoopbackLLMServer(replies=demo().replies()) as server:
        done = jarvis(ctx, demo().header["goal"], server=server, timeout=450)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024  # MB, the largest process waited for
    ctx.figure("library MB", round(len(source) / 1e6, 1))
    ctx.figure("seconds (empty library)", round(baseline.seconds, 1))
    ctx.figure("seconds (5 MB library)", round(done.seconds, 1))
    ctx.figure("peak RSS MB", peak)
    handled_exit(ctx, done, [0])
    ctx.expect(
        done.seconds <= 3 * baseline.seconds + 10,
        f"the run took {done.seconds:.0f} s, {baseline.seconds:.0f} s on an empty library",
    )
    ctx.expect(peak < 1000, f"a process of the run took {peak} MB")
    names = set(library_names(memory) or [])
    ctx.keep({f"helper_{i}" for i in range(FUNCTIONS)} <= names, "a function of the library is missing")
    memory_whole(ctx, memory, goal=demo().header["goal"], run_file=True, saved=["growth_rates", "svg_bar_chart"])


@case(
    "scale",
    "run_code_output_of_10_mb",
    slow=True,
    timeout=300,
    handled="run_code printing 10 MB (100-character "
    "lines) ends (exit 0) in at most 3 times (+10 s) a run printing one line, its processes' peak memory under "
    "400 MB, no prompt over 60 KB (it took 86 s and 610 MB when the output was counted at every later call)",
    lost="the memory folder's plans or logs are missing",
)
def run_code_output_of_10_mb(ctx):
    small = ctx.path("small")
    small.mkdir()
    with LoopbackLLMServer(replies=coder_run("print('one line')")) as server:
        baseline = jarvis(ctx, CODER_GOAL, server=server, cwd=str(small))
    handled_exit(ctx, baseline, [0])
    code = "for i in range(100_000):\n    print(str(i).rjust(99, 'x'))"
    with LoopbackLLMServer(replies=coder_run(code)) as server:
        done = jarvis(ctx, CODER_GOAL, server=server, timeout=250)
        sizes = [len(json.dumps(r["messages"])) for r in server.requests]
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    ctx.figure("seconds (one line)", round(baseline.seconds, 1))
    ctx.figure("seconds (10 MB)", round(done.seconds, 1))
    ctx.figure("peak RSS MB", peak)
    handled_exit(ctx, done, [0])
    ctx.expect(
        done.seconds <= 3 * baseline.seconds + 10,
        f"the run took {done.seconds:.0f} s, {baseline.seconds:.0f} s printing one line",
    )
    ctx.expect(peak < 400, f"a process of the run took {peak} MB")
    ctx.expect(max(sizes, default=0) < 60_000, f"a prompt of {max(sizes, default=0)} characters")
    memory_whole(ctx, ctx.path("memory"), goal=CODER_GOAL, run_file=True)


@case(
    "scale",
    "logs_of_50_mb",
    slow=True,
    timeout=300,
    handled="--resume with a 50 MB Jarvis log ends (exit 0) with prompts under 60 KB (the log is read from its end)",
    lost="an entry of the 50 MB log is gone",
)
def logs_of_50_mb(ctx):
    memory = stopped_run(ctx)
    entry = format_log_entry(1, "Coder", {"goal": "compute"}, "r" * 1400) + "\n"
    count = 50_000_000 // len(entry)
    with open(memory / "logs_jarvis.txt", "w") as f:
        for i in range(1, count + 1):
            f.write(entry.replace("--- [1]", f"--- [{i}]", 1))
    with LoopbackLLMServer(replies=short_run()[1:]) as server:
        done = jarvis(ctx, "--resume", server=server)
        sizes = [len(json.dumps(r["messages"])) for r in server.requests]
    ctx.figure("seconds", round(done.seconds, 1))
    ctx.figure("largest prompt KB", round(max(sizes, default=0) / 1000))
    handled_exit(ctx, done, [0])
    ctx.expect(max(sizes, default=0) < 60_000, f"a prompt of {max(sizes, default=0)} characters")
    text = read(memory / "logs_jarvis.txt")
    ctx.keep(text.startswith("--- [1] ") and f"--- [{count}] " in text, "the log lost entries")
    memory_whole(ctx, memory, goal=GOAL, run_file=True)


@case(
    "scale",
    "log_without_headers_5_mb",
    handled="read_log_tail of a 5 MB log with no entry header returns its "
    "end (under 6,200 characters, saying why), and an entry can be appended after it",
    lost="the 5 MB of text before the new entry changed",
)
def log_without_headers(ctx):
    log = ctx.path("logs.txt")
    text = ("x" * 99 + "\n") * 50_000 + "THE END\n"
    log.write_text(text)
    started = time.perf_counter()
    tail = read_log_tail(str(log), 20, 6000)
    number = last_log_number(str(log))
    ctx.figure("seconds", round(time.perf_counter() - started, 3))
    ctx.expect(tail.endswith("THE END") and len(tail) < 6200 and "no entry headers" in tail, f"tail: {tail[-80:]!r}")
    ctx.expect(append_log_entry(str(log), "run_code", {}, "ok") == number + 1, "the appended entry's number")
    ctx.keep(read(log).startswith(text), "the text before the new entry changed")


@case(
    "scale",
    "plan_of_5_mb_on_resume",
    slow=True,
    timeout=240,
    handled="--resume with a 5 MB plan_jarvis.txt: the "
    "prompt is shortened to fit (no request over 100 KB) and the run ends (exit 0), or stops saying why (exit 1); "
    "the accepted answer marks the steps left done in one short update (it was quadratic in the steps: killed at "
    "150 s)",
    lost="a step of the plan is changed or missing (done marks aside)",
)
def plan_of_5_mb(ctx):
    plan = "".join(f"{i}. Step number {i} of a very long plan.\n" for i in range(1, 130_000))
    memory = stopped_run(ctx, plan=plan)
    with LoopbackLLMServer(replies=[command("final_answer", answer="42"), command("finish", summary="ok")]) as server:
        done = jarvis(ctx, "--resume", server=server)
        sizes = [len(json.dumps(r["messages"])) for r in server.requests]
    ctx.figure("seconds", round(done.seconds, 1))
    handled_exit(ctx, done, [0, 1])
    ctx.expect(max(sizes, default=0) < 100_000, f"a request of {max(sizes, default=0)} characters")
    ctx.keep(plan_kept(str(memory), plan), "the plan's steps changed")


@case(
    "scale",
    "reply_of_10_mb",
    slow=True,
    timeout=400,
    handled="a controller reply of 10 MB (run_code with a 10 MB "
    "data literal streamed in 1.7M chunks, with a budget that allows it) is read, run and answered: exit 0 within "
    "3 minutes, no later prompt over 200 KB (the repetition guard re-read the whole reply at each piece: it never "
    "ended)",
    lost="the memory folder's plans or logs are missing",
)
def reply_of_10_mb(ctx):
    small = ctx.path("small")
    small.mkdir()
    with LoopbackLLMServer(replies=coder_run("print('one line')")) as server:
        baseline = jarvis(ctx, CODER_GOAL, server=server, cwd=str(small))
    handled_exit(ctx, baseline, [0])
    code = "data = [" + ", ".join(str(i * 7919 % 100003) for i in range(1_700_000)) + "]\nprint(len(data))"
    with LoopbackLLMServer(replies=coder_run(code)) as server:
        done = jarvis(ctx, CODER_GOAL, "--max-tokens", "50000000", "--max-cost", "100000", server=server, timeout=350)
        sizes = [len(json.dumps(r["messages"])) for r in server.requests]
    ctx.figure("reply MB", round(len(code) / 1e6, 1))
    ctx.figure("seconds (one line)", round(baseline.seconds, 1))
    ctx.figure("seconds (10 MB reply)", round(done.seconds, 1))
    handled_exit(ctx, done, [0])
    ctx.expect(done.seconds <= 180, f"the run took {done.seconds:.0f} s")
    ctx.expect(max(sizes, default=0) < 200_000, f"a prompt of {max(sizes, default=0)} characters")
    ctx.expect("1700000" in done.text, "the script's output (1700000) is not shown")
    memory_whole(ctx, ctx.path("memory"), goal=CODER_GOAL, run_file=True)


def _with_constants(size: int) -> str:
    """About ``size`` characters of library.py, each function with a constant of its own beside it."""
    parts, total, number = [], 0, 0
    while total < size:
        parts.append(
            f"RATE_{number} = {number} * 0.01\n\n\ndef tool_{number}(values):\n"
            f"    '''Scales the values (tool {number}).'''\n"
            f"    return [v * RATE_{number} for v in values]\n\n\n"
        )
        total += len(parts[-1])
        number += 1
    return "".join(parts)


@case(
    "scale",
    "library_py_of_5_mb_with_constants",
    slow=True,
    timeout=400,
    handled="a 5 MB library.py of 36,000 "
    "functions, each with a constant, is moved into library/ and the run ends (exit 0) within 90 s; the console "
    "says it is moving it and where the file is kept, then what it made and in how long (the move took 99 s, "
    "silent: each constant indexed split its module's whole text again)",
    lost="a function of library.py is neither in the package nor in the archived copy",
)
def library_py_of_5_mb_with_constants(ctx):
    memory = ctx.path("memory")
    memory.mkdir()
    source = _with_constants(5_000_000)
    (memory / "library.py").write_text(source)
    count = source.count("\ndef ")
    with LoopbackLLMServer(replies=coder_run("from library import tool_3\nprint(tool_3([100]))")) as server:
        done = jarvis(ctx, CODER_GOAL, server=server, timeout=350)
    handled_exit(ctx, done, [0])
    moving = [line for line in done.out.splitlines() if line.startswith("Moving ")]
    moved = [line for line in done.out.splitlines() if line.startswith("Moved ")]
    ctx.expect(moving and "archive" in moving[0], f"the move is not said with where the file goes: {moving[:1]}")
    ctx.expect(moved and f"Moved {count} functions" in moved[0], f"what the move made is not said: {moved[:1]}")
    seconds = float(moved[0].rsplit(" in ", 1)[1].split(" s", 1)[0]) if moved else None
    ctx.figure("library MB", round(len(source) / 1e6, 1))
    ctx.figure("seconds (the move)", seconds)
    ctx.figure("seconds (the run)", round(done.seconds, 1))
    ctx.expect(done.seconds <= 90, f"the run took {done.seconds:.0f} s")
    names = set(library_names(memory) or [])
    ctx.keep({f"tool_{i}" for i in range(count)} <= names, "a function of library.py is missing from the package")
