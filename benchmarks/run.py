"""Jarvis against its peers, side by side on this machine: one command, a table (or one JSON object with --json).

    python benchmarks/run.py [--quick] [--json] [--no-peers] [--peers-dir DIR]

The systems:
  Jarvis      this project: run_jarvis.py, its controller loop (benchmarks/loop_rounds.py: Controller -> Executor ->
              MemoryWriting -> MemoryReading, a scripted controller), its interpreter, its offline demo;
  aiflows     aiflows 0.1.7's CircularFlow as it comes: a controller chat (every message kept and sent, as the hub's
              ChatAtomicFlow does) and a BranchingFlow executor, built from aiflows' own classes
              (benchmarks/peers/aiflows_loop);
  smolagents  smolagents' CodeAgent (1.26 if pip has it), installed by this script into a virtual environment of
              its own (DIR/smolagents-venv, default ~/.cache/jarvis-bench): not a dependency of the package. If it
              cannot be installed, it is shown as "unavailable (why)" and the rest runs;
  floor       the least any program doing the same could take: python + urllib sending one request; a raw
              jupyter_client kernel executing `x = 1`; a bare python process's memory.

The metrics (lower is better; each measurement in a process of its own, so start-up and peak memory are honest;
medians over a few repetitions, one with --quick; this project's modules byte-compiled first, as an installed
package's are):
  time to first LLM request   process start -> the first HTTP request received by a loopback OpenAI-compatible
                              server this script runs: `run_jarvis.py --api-base URL --yes GOAL`; the aiflows loop
                              with aiflows' LiteLLMBackend (litellm finds its tokenizer file offline through
                              TIKTOKEN_CACHE_DIR, set to the copy this package carries); a CodeAgent with
                              smolagents' OpenAIServerModel;
  ms per round                at rounds 1-20 and 181-200 of a 200-round loop with a scripted model (a round: the
                              time between two model calls), and their ratio;
  prompt ratio                the controller chat's prompt tokens (cl100k) at call 200 / call 20;
  reusable prefix             the share of the controllers' prompt tokens equal to the start of the same chat's
                              previous prompt (what a server's prefix cache need not read again; each chat's first
                              call left out), on the unseen top-words goal and on the 200-round loop
                              (benchmarks/prefix_reuse.py), beside the figures of the layout before;
  peak memory                 the peak RSS (VmHWM) of the process that ran the 200-round loop;
  kernel start                the interpreter's first run (kernel start + `x = 1`);
  warm round trip             `x = 1` in a started interpreter whose working folder holds 0 or 5,000 files;
  demo                        the wall time of `run_jarvis.py --demo` (a recorded run, offline).
The last column is Jarvis's figure divided by the best peer's (below 1: Jarvis is ahead).

aiflows as it comes grows quadratically per round (its 200-round loop takes minutes and gigabytes, most of this
script's time): it runs once, and with --quick only 60 rounds (its late window is then rounds 41-60, marked with *
and not compared). --rounds N shortens every loop (for smoke tests; the windows are then rounds 1-20 and the last
20). Progress goes to stderr; the exit code is 1 if a measurement of Jarvis failed (peers that fail are shown).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PEERS = os.path.join(HERE, "peers")
for _path in (ROOT, os.path.join(ROOT, "tests"), HERE, PEERS):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from rounds import peak_rss_mb, plain_messages, prompt_calls, report  # noqa: E402

RUN_JARVIS = os.path.join(ROOT, "run_jarvis.py")
TIKTOKEN_CACHE = os.path.join(ROOT, "flow_modules", "aiflows_jarvis", "CoreFlowModule", "startup", "tiktoken_cache")
GOAL = "Compute the first 20 prime numbers and save them to primes.txt, one per line."
ROUNDS = 200
QUICK_AIFLOWS_ROUNDS = 60
AIFLOWS_TIMEOUT = 900  # aiflows' 200 rounds take minutes (quadratic); past this it is shown as failed
FILES = 5000
SYSTEMS = ("jarvis", "aiflows", "smolagents", "floor")
LABELS = {"jarvis": "Jarvis", "aiflows": "aiflows", "smolagents": "smolagents", "floor": "floor"}
PEER_NAMES = ("aiflows", "smolagents")
# in every --json object (null when not measured: a peer unavailable, a measurement failed)
REQUIRED_KEYS = (
    "first_request_s",
    "first_request_s_smolagents",
    "round_ms_1_20",
    "round_ratio",
    "prompt_ratio",
    "peak_rss_mb",
    "warm_rt_ms_0",
    "warm_rt_ms_5000",
    "demo_s",
    "prefix_share_top_words",
    "prefix_share_loop",
)


def floor_kernel_argv():
    """A kernel as the interpreter starts one (its own interpreter, no history database), for the jupyter_client
    floor."""
    from aiflows_jarvis.InterpreterFlowModule.kernel import KERNEL_ARGV

    return list(KERNEL_ARGV)


class BenchmarkError(Exception):
    """A measurement that could not be made; the message says which and why."""


# ~~~ Children: each measurement runs in a process of its own (`run.py --child NAME`), and prints one JSON line ~~~
def child_loop(rounds: int) -> Dict[str, Any]:
    """Jarvis's controller loop (benchmarks/loop_rounds.py), with the controller's prompts at two calls kept, and the
    share of its prompts a prefix cache can reuse (benchmarks/prefix_reuse.py; measured after the peak memory)."""
    import loop_rounds
    from fakes import ScriptedLLM
    from prefix_reuse import prefix_share

    kept, calls, every = {}, [0], []
    wanted = set(prompt_calls(rounds))
    original = ScriptedLLM.__call__

    def recording(script, flow_path, messages):
        calls[0] += 1
        every.append((flow_path, plain_messages(messages)))
        if calls[0] in wanted:
            kept[str(calls[0])] = every[-1][1]
        return original(script, flow_path, messages)

    ScriptedLLM.__call__ = recording  # loop_rounds times its calls around this one
    try:
        result = loop_rounds.run(rounds, stock=False)
    finally:
        ScriptedLLM.__call__ = original
    peak = peak_rss_mb()
    return {
        "calls": calls[0],
        "round_ms": [d * 1000 for d in result["durations"]],
        "prompts": kept,
        "peak_rss_mb": peak,
        "status": result["status"],
        "prefix_share": prefix_share(every)["share"],
    }


def child_prefix() -> Dict[str, Any]:
    """Jarvis on the unseen top-words goal with a scripted model: the share of its controllers' prompts a prefix
    cache can reuse (benchmarks/prefix_reuse.py)."""
    from prefix_reuse import top_words_figures

    figures = top_words_figures()
    return {"prefix_share_top_words": figures["share"], "prefix_calls_top_words": figures["calls"]}


def child_interpreter(files: int, runs: int) -> Dict[str, Any]:
    """The interpreter (InterpreterFlowModule's CodeInterpreter): kernel start + first `x = 1` in an empty working
    folder; then warm runs there and in a folder of ``files`` files, taking turns (as
    benchmarks/interpreter_roundtrip.py does: the load of a shared machine falls on both alike)."""
    from interpreter_roundtrip import fill, timed_run

    from aiflows_jarvis.InterpreterFlowModule.interpreter import CodeInterpreter

    with (
        tempfile.TemporaryDirectory(prefix="jarvis-bench-") as empty,
        tempfile.TemporaryDirectory(prefix="jarvis-bench-") as full,
    ):
        fill(full, files)
        started = time.perf_counter()
        interpreter = CodeInterpreter(empty)
        crowded = None
        try:
            timed_run(interpreter, "x = 1")
            kernel_start = time.perf_counter() - started
            crowded = CodeInterpreter(full)
            timed_run(crowded, "x = 1")
            warm_empty, warm_full = [], []
            for _ in range(runs):
                warm_empty.append(timed_run(interpreter, "x = 1"))
                warm_full.append(timed_run(crowded, "x = 1"))
        finally:
            if crowded is not None:
                crowded.close()
            closing = time.perf_counter()
            interpreter.close()
            close_s = time.perf_counter() - closing
    return {
        "kernel_start_ms": kernel_start * 1000,
        "warm_rt_ms_0": statistics.median(warm_empty) * 1000,
        f"warm_rt_ms_{files}": statistics.median(warm_full) * 1000,
        "close_ms": close_s * 1000,
    }


def child_jupyter_floor(runs: int) -> Dict[str, Any]:
    """The floor of the interpreter: jupyter_client alone starting a kernel and executing `x = 1`."""
    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager

    class OneKernel(KernelSpecManager):
        def get_kernel_spec(self, kernel_name):
            return KernelSpec(
                argv=floor_kernel_argv(), display_name="floor", language="python", resource_dir="", metadata={}
            )

    with tempfile.TemporaryDirectory(prefix="jarvis-bench-floor-") as scratch:
        started = time.perf_counter()
        manager = KernelManager(
            kernel_name="floor",
            kernel_spec_manager=OneKernel(),
            transport="ipc",
            ip=os.path.join(scratch, "k"),
            connection_file=os.path.join(scratch, "k.json"),
        )
        manager.start_kernel(cwd=scratch)
        client = manager.client()
        try:
            client.start_channels()
            client.wait_for_ready(timeout=60)

            def execute() -> None:
                # the channels read directly, as the interpreter does (the blocking client's get_iopub_msg and
                # get_shell_msg run an asyncio loop around these same calls)
                msg_id = client.execute("x = 1")
                while True:  # the kernel is idle again: the run is over
                    msg = client.iopub_channel.get_msg(timeout=30)
                    if (
                        msg["parent_header"].get("msg_id") == msg_id
                        and msg["msg_type"] == "status"
                        and msg["content"].get("execution_state") == "idle"
                    ):
                        break
                while client.shell_channel.get_msg(timeout=30)["parent_header"].get("msg_id") != msg_id:
                    pass

            execute()
            kernel_start = time.perf_counter() - started
            warm = []
            for _ in range(runs):
                started = time.perf_counter()
                execute()
                warm.append(time.perf_counter() - started)
        finally:
            client.stop_channels()
            manager.shutdown_kernel(now=True)
    return {"kernel_start_ms": kernel_start * 1000, "warm_rt_ms": statistics.median(warm) * 1000}


CHILDREN: Dict[str, Callable[[argparse.Namespace], Dict[str, Any]]] = {
    "loop": lambda args: child_loop(args.rounds or ROUNDS),
    "interpreter": lambda args: child_interpreter(args.files, args.runs),
    "jupyter-floor": lambda args: child_jupyter_floor(args.runs),
    "prefix": lambda args: child_prefix(),
}


# ~~~ The parent: starts the children, reads what they print ~~~
def child_environment() -> Dict[str, str]:
    """The environment of every child: no API key (nothing may reach a real LLM), no colours, the tokenizer offline."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not any(k.startswith(prefix) for prefix in ("OPENAI_", "AZURE_", "ANTHROPIC_", "JARVIS_TRACE"))
    }
    env.update(
        NO_COLOR="1",
        PYTHONDONTWRITEBYTECODE="1",
        TIKTOKEN_CACHE_DIR=TIKTOKEN_CACHE,
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
    )
    return env


def run_child(argv: List[str], what: str, timeout: float = 900) -> Dict[str, Any]:
    """Run ``argv`` in a scratch folder and return the JSON object its last output line holds."""
    with tempfile.TemporaryDirectory(prefix="jarvis-bench-") as scratch:
        try:
            done = subprocess.run(
                argv,
                cwd=scratch,
                env=child_environment(),
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise BenchmarkError(f"{what}: no result after {timeout:.0f} s") from None
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not lines:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise BenchmarkError(f"{what} exited with code {done.returncode}: {tail[:500]}")
    try:
        return json.loads(lines[-1])
    except ValueError:
        raise BenchmarkError(f"{what} printed no result: {lines[-1][:300]}") from None


def compile_project() -> None:
    """Byte-compile this project's modules, as pip does for an installed package (and Python at a module's first
    import): the children run with PYTHONDONTWRITEBYTECODE (no stray files in the scratch folders), and without the
    cached bytecode every start of Jarvis would compile its 80 modules from source, which no installed copy does.
    The peers are installed by pip, compiled."""
    import compileall

    for folder in ("flow_modules", "benchmarks", "tests"):
        compileall.compile_dir(os.path.join(ROOT, folder), quiet=2, workers=1)


def own_child(name: str, **options: Any) -> List[str]:
    argv = [sys.executable, os.path.abspath(__file__), "--child", name]
    for key, value in options.items():
        argv += [f"--{key}", str(value)]
    return argv


def first_request_s(argv: List[str], reply: str, what: str, ends_itself: bool, timeout: float = 120) -> float:
    """Seconds from starting ``argv`` to the first request its model sends to a loopback server answering
    ``reply``. A program that does not end on its own after that (Jarvis goes on to the next step) is terminated."""
    from loopback_llm import LoopbackLLMServer

    arrived: List[float] = []
    event = threading.Event()

    def answer(body):
        if not arrived:
            arrived.append(time.perf_counter())
            event.set()
        return reply

    with tempfile.TemporaryDirectory(prefix="jarvis-bench-") as scratch, LoopbackLLMServer() as server:
        server.add(*([answer] * 20))
        argv = [part.replace("{url}", server.url).replace("{scratch}", scratch) for part in argv]
        log = open(os.path.join(scratch, "output.log"), "w+")
        started = time.perf_counter()
        process = subprocess.Popen(
            argv, cwd=scratch, env=child_environment(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        try:
            deadline = time.monotonic() + timeout
            while not event.wait(0.05):
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    tail = " | ".join(log.read().strip().splitlines()[-3:])
                    why = (
                        f"exited with code {process.returncode}"
                        if process.returncode is not None
                        else f"sent nothing in {timeout:.0f} s"
                    )
                    raise BenchmarkError(f"{what}: {why} before any request: {tail[:500]}")
            if ends_itself:
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            log.close()
        return arrived[0] - started


FLOOR_REQUEST = (
    "import json, urllib.request\n"
    "body = json.dumps({'model': 'local-model', 'messages': [{'role': 'user', 'content': 'hi'}]})\n"
    "request = urllib.request.Request('{url}/chat/completions', data=body.encode(),\n"
    "                                 headers={'Content-Type': 'application/json'})\n"
    "urllib.request.urlopen(request, timeout=60).read()\n"
)


def first_request_commands(smolagents_python: Optional[str]) -> Dict[str, tuple]:
    """Per system: (argv, the reply its first request gets, whether the program then ends by itself)."""
    commands = {
        "jarvis": (
            [
                sys.executable,
                RUN_JARVIS,
                "--api-base",
                "{url}",
                "--model",
                "local-model",
                "--yes",
                "--memory-dir",
                os.path.join("{scratch}", "memory"),
                GOAL,
            ],
            "1. Write a function first_primes(n).\n2. Save the primes.",
            False,
        ),
        "aiflows": (
            [sys.executable, os.path.join(PEERS, "aiflows_peer.py"), "first-request", "{url}"],
            json.dumps({"command": "finish", "command_args": {"summary": "done"}}),
            True,
        ),
        "floor": ([sys.executable, "-c", FLOOR_REQUEST], "hello", True),
    }
    if smolagents_python:
        commands["smolagents"] = (
            [smolagents_python, os.path.join(PEERS, "smolagents_peer.py"), "first-request", "{url}"],
            "Thought: done.\n<code>\nfinal_answer('done')\n</code>",
            True,
        )
    return commands


def median(values: List[float]) -> Optional[float]:
    return statistics.median(values) if values else None


def repeat(times: int, measure: Callable[[], Any]) -> List[Any]:
    return [measure() for _ in range(times)]


def prompt_tokens(messages: List[dict]) -> int:
    from aiflows_jarvis.CoreFlowModule import count_message_tokens

    return count_message_tokens(messages)


def loop_figures(results: List[Dict[str, Any]], rounds: int, what: str) -> Dict[str, Any]:
    """Medians over the repetitions of a loop: ms per round early and late, their ratio, the prompt ratio, peak RSS."""
    early, late, rss = [], [], []
    for result in results:
        durations = result["round_ms"]
        if len(durations) < rounds or not str(result.get("status", "")).startswith("finished"):
            raise BenchmarkError(
                f"{what}: the loop did not run {rounds} rounds ({len(durations)} timed; status "
                f"{result.get('status')!r})"
            )
        early.append(statistics.median(durations[:20]))
        late.append(statistics.median(durations[rounds - 20 : rounds]))
        rss.append(result["peak_rss_mb"])
    first, last = prompt_calls(rounds)
    prompts = results[0]["prompts"]
    tokens_first, tokens_last = prompt_tokens(prompts[str(first)]), prompt_tokens(prompts[str(last)])
    shares = [r["prefix_share"] for r in results if r.get("prefix_share") is not None]
    return {
        "round_ms_1_20": median(early),
        "round_ms_181_200": median(late),
        "round_ratio": median(late) / median(early),
        "prompt_tokens_20": tokens_first,
        "prompt_tokens_200": tokens_last,
        "prompt_ratio": tokens_last / tokens_first,
        **({"prefix_share_loop": median(shares)} if shares else {}),
        "peak_rss_mb": median(rss),
        "rounds": rounds,
    }


def machine() -> Dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as f:
            memory_gb = round(int(f.readline().split()[1]) / 1024 / 1024)
    except (OSError, ValueError, IndexError):
        memory_gb = None
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gb": memory_gb,
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.release()}",
    }


class Bench:
    """Runs every measurement, keeps the figures (``figures``: the JSON object) and the peers' status."""

    def __init__(self, args: argparse.Namespace, say: Callable[[str], None]):
        self.args = args
        self.say = say
        self.quick = args.quick
        self.reps = 1 if args.quick else 3
        self.loop_reps = 1 if args.quick else 5  # a loop takes seconds; its 20-round windows catch others' load
        self.first_request_reps = 1 if args.quick else 3
        self.rounds = args.rounds or ROUNDS
        self.aiflows_rounds = min(self.rounds, QUICK_AIFLOWS_ROUNDS) if args.quick else self.rounds
        self.warm_runs = 20 if args.quick else 50
        self.figures: Dict[str, Any] = {}
        self.peers: Dict[str, str] = {}
        self.errors: Dict[str, str] = {}
        self.smolagents_python: Optional[str] = None

    def put(self, system: str, key: str, value: Any) -> None:
        self.figures[key if system == "jarvis" else f"{key}_{system}"] = value

    def attempt(self, system: str, what: str, measure: Callable[[], None]) -> None:
        """Run one measurement; a failure is kept (and shown) instead of stopping the others."""
        self.say(f"{LABELS[system]}: {what}")
        try:
            measure()
        except BenchmarkError as error:
            self.errors[f"{system}: {what}"] = str(error)
            self.say(f"  failed: {error}")

    def setup_peers(self) -> None:
        if self.args.no_peers:
            for name in PEER_NAMES:
                self.peers[name] = "unavailable (--no-peers)"
            return
        from importlib.metadata import version

        from install import PeerUnavailable, smolagents_python

        self.peers["aiflows"] = version("aiflows")
        try:
            self.smolagents_python, self.peers["smolagents"] = smolagents_python(self.args.peers_dir, say=self.say)
        except PeerUnavailable as error:
            self.peers["smolagents"] = f"unavailable ({error})"

    def available(self, system: str) -> bool:
        return system in ("jarvis", "floor") or not self.peers.get(system, "").startswith("unavailable")

    def run(self) -> Dict[str, Any]:
        self.setup_peers()
        compile_project()
        commands = first_request_commands(self.smolagents_python)
        for system in SYSTEMS:
            if self.available(system):
                argv, reply, ends_itself = commands[system]
                self.attempt(
                    system,
                    "time to first LLM request",
                    lambda: self.put(
                        system,
                        "first_request_s",
                        median(
                            repeat(
                                self.first_request_reps,
                                lambda: first_request_s(argv, reply, f"{LABELS[system]} first request", ends_itself),
                            )
                        ),
                    ),
                )
        self.loops()
        self.interpreter()
        self.attempt("jarvis", "offline demo", self.demo)
        self.attempt(
            "jarvis",
            "reusable prefix, top-words goal",
            lambda: self.figures.update(run_child(own_child("prefix"), "the top-words goal")),
        )
        for key in REQUIRED_KEYS:
            self.figures.setdefault(key, None)
        self.figures.update(quick=self.quick, peers=self.peers, machine=machine(), errors=self.errors)
        return self.figures

    def loops(self) -> None:
        # per system: its command, repetitions, rounds, and how long one loop may take
        loops = {"jarvis": (lambda: own_child("loop", rounds=self.rounds), self.loop_reps, self.rounds, 600)}
        if self.available("aiflows"):
            loops["aiflows"] = (
                lambda: [
                    sys.executable,
                    os.path.join(PEERS, "aiflows_peer.py"),
                    "rounds",
                    "--rounds",
                    str(self.aiflows_rounds),
                ],
                1,
                self.aiflows_rounds,
                AIFLOWS_TIMEOUT,
            )
        if self.available("smolagents"):
            loops["smolagents"] = (
                lambda: [
                    self.smolagents_python,
                    os.path.join(PEERS, "smolagents_peer.py"),
                    "rounds",
                    "--rounds",
                    str(self.rounds),
                ],
                self.loop_reps,
                self.rounds,
                600,
            )
        for system, (argv, reps, rounds, timeout) in loops.items():
            what = f"{rounds}-round loop"

            def measure(system=system, argv=argv, reps=reps, rounds=rounds, what=what, timeout=timeout):
                results = repeat(reps, lambda: run_child(argv(), f"{LABELS[system]} {what}", timeout=timeout))
                for key, value in loop_figures(results, rounds, f"{LABELS[system]} {what}").items():
                    self.put(system, key, value)

            self.attempt(system, what, measure)
        self.attempt(
            "floor",
            "memory of a bare python",
            lambda: self.put(
                "floor",
                "peak_rss_mb",
                run_child(
                    [
                        sys.executable,
                        "-c",
                        "import sys; sys.path.insert(0, sys.argv[1]); import rounds; "
                        "rounds.report({'peak_rss_mb': rounds.peak_rss_mb()})",
                        PEERS,
                    ],
                    "bare python",
                )["peak_rss_mb"],
            ),
        )

    def interpreter(self) -> None:
        def measure() -> None:
            runs = repeat(
                self.reps,
                lambda: run_child(own_child("interpreter", files=FILES, runs=self.warm_runs), "the interpreter"),
            )
            for key in ("kernel_start_ms", "warm_rt_ms_0", f"warm_rt_ms_{FILES}"):
                self.figures[key] = median([r[key] for r in runs])
            self.figures["interpreter_close_ms"] = median([r["close_ms"] for r in runs])

        def floor() -> None:
            runs = repeat(
                self.reps, lambda: run_child(own_child("jupyter-floor", runs=self.warm_runs), "jupyter_client floor")
            )
            self.figures.update(
                kernel_start_ms_floor=median([r["kernel_start_ms"] for r in runs]),
                warm_rt_ms_floor=median([r["warm_rt_ms"] for r in runs]),
            )

        self.attempt("jarvis", "interpreter (kernel start, warm round trips)", measure)
        self.attempt("floor", "jupyter_client alone", floor)

    def demo(self) -> None:
        def once() -> float:
            with tempfile.TemporaryDirectory(prefix="jarvis-bench-demo-") as scratch:
                started = time.perf_counter()
                done = subprocess.run(
                    [sys.executable, RUN_JARVIS, "--demo", "--memory-dir", os.path.join(scratch, "memory")],
                    cwd=scratch,
                    env=child_environment(),
                    capture_output=True,
                    text=True,
                    timeout=600,
                    stdin=subprocess.DEVNULL,
                )
                elapsed = time.perf_counter() - started
            if done.returncode != 0:
                tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
                raise BenchmarkError(f"run_jarvis.py --demo exited with code {done.returncode}: {tail[:500]}")
            return elapsed

        self.figures["demo_s"] = median(repeat(self.reps, once))


# ~~~ The table ~~~
ROWS = [  # (JSON key, label, format, has a floor)
    ("first_request_s", "process start -> first LLM request (s)", "{:.2f}", True),
    ("round_ms_1_20", "ms per round, rounds 1-20", "{:.2f}", False),
    ("round_ms_181_200", "ms per round, rounds {late}", "{:.2f}", False),
    ("round_ratio", "round ratio ({late} / 1-20)", "{:.2f}", False),
    ("prompt_ratio", "prompt tokens, call {last} / call 20", "{:.2f}", False),
    ("peak_rss_mb", "peak memory, {rounds}-round loop (MB)", "{:.0f}", True),
    ("kernel_start_ms", "kernel start + first `x = 1` (ms)", "{:.0f}", True),
    ("warm_rt_ms_0", "warm `x = 1`, 0 files (ms)", "{:.2f}", "warm_rt_ms_floor"),
    ("warm_rt_ms_5000", "warm `x = 1`, 5,000 files (ms)", "{:.2f}", "warm_rt_ms_floor"),
    ("demo_s", "offline demo, wall time (s)", "{:.2f}", False),
    ("prefix_share_top_words", "reusable prefix, top-words goal (before: {before_top_words})", "{:.1%}", False),
    ("prefix_share_loop", "reusable prefix, {rounds}-round loop (before: {before_loop})", "{:.1%}", False),
]
LATE_WINDOW_KEYS = ("round_ms_181_200", "round_ratio", "prompt_ratio", "peak_rss_mb")


def table(figures: Dict[str, Any]) -> str:
    rounds = figures.get("rounds", ROUNDS)
    from prefix_reuse import BEFORE

    names = {
        "late": f"{rounds - 19}-{rounds}",
        "last": rounds,
        "rounds": rounds,
        "before_top_words": f"{BEFORE['top_words']:.0%}",
        "before_loop": f"{BEFORE['loop']:.0%}",
    }
    columns = ["jarvis", *PEER_NAMES, "floor"]
    header = ["metric", *(LABELS[c] for c in columns), "Jarvis / best peer"]
    rows, footnotes = [], []
    for key, label, fmt, floor in ROWS:
        cells = [label.format(**names)]
        peers = []
        for system in columns:
            if system == "floor":
                floor_key = floor if isinstance(floor, str) else f"{key}_floor"
                value = figures.get(floor_key) if floor else None
            else:
                value = figures.get(key if system == "jarvis" else f"{key}_{system}")
            text = "-" if value is None else fmt.format(value)
            comparable = True
            if system == "aiflows" and value is not None and key in LATE_WINDOW_KEYS:
                peer_rounds = figures.get("rounds_aiflows", rounds)
                if peer_rounds != rounds:  # another window: shown, not compared
                    text += "*"
                    comparable = False
                    note = (
                        f"* aiflows ran {peer_rounds} rounds (--quick): its late window is rounds "
                        f"{peer_rounds - 19}-{peer_rounds}, its prompt ratio call {peer_rounds} / call 20"
                    )
                    if note not in footnotes:
                        footnotes.append(note)
            if system in PEER_NAMES and value is not None and comparable:
                peers.append(value)
            cells.append(text)
        mine = figures.get(key)
        cells.append(f"{mine / min(peers):.2f}x" if mine is not None and peers and min(peers) > 0 else "-")
        rows.append(cells)
    widths = [max(len(row[i]) for row in [header] + rows) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row))
        for row in [header] + rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    m = figures.get("machine", {})
    out = (
        [
            f"Jarvis and its peers ({'--quick, one run each' if figures.get('quick') else 'medians'}; "
            f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores, {m.get('memory_gb', '?')} GB, Python "
            f"{m.get('python', '?')})",
            "",
        ]
        + lines
        + footnotes
    )
    out.append("peers: " + ", ".join(f"{name} {figures.get('peers', {}).get(name, '?')}" for name in PEER_NAMES))
    for what, error in figures.get("errors", {}).items():
        out.append(f"failed: {what}: {error}")
    return "\n".join(out)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print one JSON object (the table's figures) only")
    parser.add_argument("--quick", action="store_true", help="one repetition each, aiflows at 60 rounds")
    parser.add_argument("--no-peers", action="store_true", help="measure Jarvis and the floors only")
    parser.add_argument(
        "--peers-dir",
        default=None,
        metavar="DIR",
        help="where the peers' virtual environments live (default: ~/.cache/jarvis-bench)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        metavar="N",
        help="rounds of every loop (default 200; at least 40), for smoke tests",
    )
    parser.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    parser.add_argument("--files", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, default=30, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rounds is not None and args.rounds < 40:
        parser.error(f"--rounds {args.rounds}: a loop needs at least 40 rounds (rounds 1-20 and the last 20)")
    if args.child:
        report(CHILDREN[args.child](args))
        return 0
    if args.peers_dir is None:
        from install import DEFAULT_PEERS_DIR

        args.peers_dir = DEFAULT_PEERS_DIR

    def say(text: str) -> None:
        print(f"[bench] {text}", file=sys.stderr, flush=True)

    started = time.perf_counter()
    bench = Bench(args, say)
    figures = bench.run()
    figures["benchmark_s"] = time.perf_counter() - started
    if args.json:
        print(json.dumps(figures, indent=1, sort_keys=True))
    else:
        print(table(figures))
        print(f"\n(the benchmark took {figures['benchmark_s']:.0f} s)")
    return 1 if any(key.startswith("jarvis:") for key in bench.errors) else 0


if __name__ == "__main__":
    sys.exit(main())
