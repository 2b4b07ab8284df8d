"""Tests of the test harness: the loopback LLM server, the fake editor and the guards.

The loopback server is exercised through the real litellm 1.0.0 path (httpx POST to ``{api_base}/chat/completions``).
"""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
import threading
import time
import types

import pytest

# The bundled tokenizer must be set up before litellm is imported (litellm downloads it at import otherwise).
import aiflows_jarvis  # noqa: F401
from aiflows_jarvis.CoreFlowModule import import_litellm

litellm = import_litellm()
litellm.telemetry = False
import fake_editor  # noqa: E402
import guards  # noqa: E402
import httpx  # noqa: E402
import litellm.exceptions  # noqa: E402
from fake_editor import editor_command  # noqa: E402
from litellm import completion  # noqa: E402
from loopback_llm import (  # noqa: E402
    NO_REPLY_LEFT,
    HTTPError,
    LoopbackLLMServer,
    Malformed,
    Slow,
    completion_json,
    stream_pieces,
)
from waiting import HANG_GUARD  # noqa: E402

# litellm 1.0.0 + pydantic 2 warn on every response; pytest resets the filters import_litellm() installed.
pytestmark = pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
MESSAGES = [
    {"role": "system", "content": "You are Jarvis."},
    {"role": "user", "content": "Say hello."},
]


@pytest.fixture
def server():
    with LoopbackLLMServer() as s:
        yield s


def call(server, **kwargs):
    params = {"model": "gpt-4", "messages": MESSAGES, "api_base": server.url, "api_key": "sk-test"}
    params.update(kwargs)
    return completion(**params)


def exception_chain(exc):
    seen = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


# ----------------------------------------------------------------------------------------------------------------
# harness layout


def test_tests_dir_is_on_sys_path_and_modules_come_from_it():
    import loopback_llm

    for module in (loopback_llm, fake_editor, guards):
        assert os.path.dirname(os.path.abspath(module.__file__)) == TESTS_DIR


# ----------------------------------------------------------------------------------------------------------------
# loopback server through litellm 1.0.0


def test_url_and_port():
    with LoopbackLLMServer() as s:
        assert s.url == f"http://127.0.0.1:{s.port}/v1"
        assert not s.url.endswith("/")
        assert s.port > 0


def test_string_reply_and_request_recorded(server):
    server.add("Hello from the loopback server.")
    response = call(server)
    assert response.choices[0].message.content == "Hello from the loopback server."
    assert response.choices[0].message.role == "assistant"
    assert response.choices[0].finish_reason == "stop"
    assert response.model == "gpt-4"
    assert response.usage["completion_tokens"] > 0 and response.usage["prompt_tokens"] > 0

    assert len(server.requests) == 1
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["model"] == "gpt-4"
    assert request["messages"] == MESSAGES
    assert request["json"]["messages"] == MESSAGES
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    assert request["headers"]["authorization"] == "Bearer sk-test"
    assert server.last_messages() == MESSAGES
    assert server.errors == [] and server.unexpected_calls == 0
    assert server.pending == 0


def test_replies_are_served_in_order_and_callables_see_the_request():
    def echo(request_json):
        return "echo: " + request_json["messages"][-1]["content"]

    with LoopbackLLMServer(replies=["first"]) as s:
        s.add("second", echo)
        assert call(s).choices[0].message.content == "first"
        assert call(s).choices[0].message.content == "second"
        assert call(s).choices[0].message.content == "echo: Say hello."
        assert len(s.requests) == 3


def test_api_base_without_v1_uses_chat_completions_path(server):
    server.add("ok")
    base = f"http://127.0.0.1:{server.port}"
    assert call(server, api_base=base).choices[0].message.content == "ok"
    assert server.requests[0]["path"] == "/chat/completions"


def test_model_is_echoed(server):
    server.add("ok")
    response = call(server, model="openai/some-local-model")
    assert server.requests[0]["model"] == "some-local-model"
    assert response.model == "some-local-model"


def test_429_is_rate_limit_error(server):
    server.add(HTTPError(429, "Rate limit reached"))
    with pytest.raises(litellm.exceptions.RateLimitError) as info:
        call(server)
    assert info.value.status_code == 429
    assert "Rate limit reached" in str(info.value)


def test_500_is_type_error_with_status_in_context(server):
    server.add(HTTPError(500, "the server broke"))
    with pytest.raises(TypeError) as info:
        call(server)
    statuses = [getattr(e, "status_code", None) for e in exception_chain(info.value)]
    assert 500 in statuses
    assert server.errors == []  # a scripted error is not a harness error


@pytest.mark.parametrize("message", ["", "your key expired"])
def test_401_is_authentication_error(server, message):
    server.add(HTTPError(401, message))
    with pytest.raises(litellm.exceptions.AuthenticationError) as info:
        call(server)
    assert info.value.status_code == 401


def test_error_body_is_openai_shaped():
    import json

    body = json.loads(HTTPError(429, "slow down").body())
    assert body["error"]["message"] == "slow down"
    assert set(body["error"]) >= {"message", "type", "code"}


def test_malformed_body_is_json_decode_error(server):
    import json

    server.add(Malformed(b"{not json"))
    with pytest.raises(json.JSONDecodeError):
        call(server)


def test_slow_reply_times_out_and_close_does_not_hang():
    s = LoopbackLLMServer(replies=[Slow(None, "x")])  # a reply that never comes: only close() ends the wait
    try:
        with pytest.raises(litellm.exceptions.Timeout):
            call(s, request_timeout=0.5)
    finally:
        s.close(timeout=HANG_GUARD)  # the handler is still waiting in Slow: close() must interrupt it
    assert s._in_flight == 0, "close() interrupted the Slow reply (it would never have ended by itself)"
    s.close()  # idempotent
    assert s.closed


def test_slow_reply_is_served_after_the_delay(server):
    server.add(Slow(0.2, "late but fine"))
    started = time.monotonic()
    assert call(server).choices[0].message.content == "late but fine"
    assert time.monotonic() - started >= 0.2


def test_empty_queue_records_an_error(server):
    with pytest.raises(Exception):
        call(server)
    assert server.unexpected_calls == 1
    assert len(server.errors) == 1 and NO_REPLY_LEFT in server.errors[0]
    with pytest.raises(AssertionError, match=NO_REPLY_LEFT):
        server.assert_ok()


def test_assert_ok_leftover(server):
    server.add("never asked for")
    server.assert_ok()
    with pytest.raises(AssertionError, match="never requested"):
        server.assert_ok(allow_leftover=False)


def test_streaming_string_reply(server):
    text = "Hello  world, this is\na stream. "
    server.add(text)
    chunks = list(call(server, stream=True))
    pieces = [getattr(c.choices[0].delta, "content", None) or "" for c in chunks]
    assert "".join(pieces) == text
    assert len([p for p in pieces if p]) == len(stream_pieces(text)) > 1
    assert server.requests[0]["json"]["stream"] is True


def test_streaming_error_reply_raises(server):
    # litellm 1.0.0 reads response.text of an unread streaming response: httpx.ResponseNotRead, status lost.
    server.add(HTTPError(500, "boom"))
    with pytest.raises(httpx.ResponseNotRead):
        list(call(server, stream=True))
    assert len(server.requests) == 1


def test_dict_reply_is_sent_verbatim(server):
    server.add(completion_json("from a dict", model="gpt-4"))
    assert call(server).choices[0].message.content == "from a dict"


def test_callable_that_raises_is_recorded(server):
    def broken(request_json):
        raise KeyError("nope")

    server.add(broken)
    with pytest.raises(Exception):
        call(server)
    assert any("KeyError" in e for e in server.errors)


def test_unexpected_path_is_recorded(server):
    response = httpx.post(f"http://127.0.0.1:{server.port}/v1/moderations", json={"input": "x"})
    assert response.status_code == 404
    assert server.unexpected_calls == 1 and "/v1/moderations" in server.errors[0]


def test_closed_server_refuses_connections():
    s = LoopbackLLMServer(replies=["x"])
    port = s.port
    s.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_concurrent_requests():
    # each reply is served only once all three requests are being handled: served one at a time, they never would be
    together = threading.Barrier(3, timeout=HANG_GUARD)

    def when_all_three_are_in(content):
        return lambda request: (together.wait(), content)[1]

    with LoopbackLLMServer(replies=[when_all_three_are_in(c) for c in "abc"]) as s:
        results = []

        def worker():
            results.append(
                httpx.post(
                    s.url + "/chat/completions", json={"model": "gpt-4", "messages": MESSAGES}, timeout=HANG_GUARD * 2
                ).json()
            )

        threads = [threading.Thread(target=worker) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not together.broken and not s.errors, s.errors  # served in parallel
        assert sorted(r["choices"][0]["message"]["content"] for r in results) == ["a", "b", "c"]


def test_aiflows_litellm_backend_end_to_end(server):
    from aiflows.backends.api_info import ApiInfo
    from aiflows.backends.llm_lite import LiteLLMBackend

    server.add("backend says hi")
    backend = LiteLLMBackend(
        api_infos=[ApiInfo(backend_used="openai", api_key="sk-test", api_base=server.url)],
        model_name="gpt-4",
        wait_time_per_key=0,
    )
    messages = backend(messages=MESSAGES, n=1)
    assert messages[0]["content"] == "backend says hi"
    assert server.last_messages() == MESSAGES


# ----------------------------------------------------------------------------------------------------------------
# fake editor


def run_editor(path, **env_vars):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_EDITOR_")}
    env.update(env_vars)
    return subprocess.run(shlex.split(editor_command()) + [str(path)], env=env, capture_output=True, text=True)


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "plan.txt"
    path.write_text("step 1\nstep 2\n", encoding="utf-8")
    return path


def test_editor_command_uses_this_interpreter():
    argv = shlex.split(editor_command())
    assert argv == [sys.executable, os.path.join(TESTS_DIR, "fake_editor.py")]


def test_editor_without_instructions_leaves_file_unchanged(text_file):
    completed = run_editor(text_file)
    assert completed.returncode == 0, completed.stderr
    assert text_file.read_text(encoding="utf-8") == "step 1\nstep 2\n"


def test_editor_append(text_file):
    completed = run_editor(text_file, FAKE_EDITOR_APPEND="step 3\n")
    assert completed.returncode == 0, completed.stderr
    assert text_file.read_text(encoding="utf-8") == "step 1\nstep 2\nstep 3\n"


def test_editor_replace_first_occurrence(text_file):
    completed = run_editor(text_file, FAKE_EDITOR_REPLACE="step=>STEP")
    assert completed.returncode == 0, completed.stderr
    assert text_file.read_text(encoding="utf-8") == "STEP 1\nstep 2\n"


def test_editor_replace_missing_fails(text_file):
    completed = run_editor(text_file, FAKE_EDITOR_REPLACE="nothing like this=>x")
    assert completed.returncode == 2
    assert "not found" in completed.stderr
    assert text_file.read_text(encoding="utf-8") == "step 1\nstep 2\n"


def test_editor_write(text_file):
    completed = run_editor(text_file, FAKE_EDITOR_WRITE="brand new plan\n")
    assert completed.returncode == 0, completed.stderr
    assert text_file.read_text(encoding="utf-8") == "brand new plan\n"


def test_editor_exit_code_after_editing(text_file):
    completed = run_editor(text_file, FAKE_EDITOR_APPEND="x", FAKE_EDITOR_EXIT="3")
    assert completed.returncode == 3
    assert text_file.read_text(encoding="utf-8") == "step 1\nstep 2\nx"


def test_editor_log_counts_invocations(tmp_path, text_file):
    log = tmp_path / "editor.log"
    other = tmp_path / "other.py"
    other.write_text("pass\n", encoding="utf-8")
    assert run_editor(text_file, FAKE_EDITOR_LOG=str(log)).returncode == 0
    assert run_editor(other, FAKE_EDITOR_LOG=str(log)).returncode == 0
    assert log.read_text(encoding="utf-8").splitlines() == [str(text_file), str(other)]


def test_editor_keeps_unicode_and_crlf(tmp_path):
    path = tmp_path / "crlf.txt"
    path.write_bytes("héllo\r\n".encode("utf-8"))
    assert run_editor(path, FAKE_EDITOR_APPEND="wörld\r\n").returncode == 0
    assert path.read_bytes() == "héllo\r\nwörld\r\n".encode("utf-8")


def test_editor_in_process_edit(text_file):
    assert fake_editor.edit(str(text_file), {"FAKE_EDITOR_REPLACE": "2=>two"}) == 0
    assert text_file.read_text(encoding="utf-8") == "step 1\nstep two\n"


def test_editor_with_project_edit_file(text_file):
    from aiflows_jarvis.HumanStandardInputFlowModule.editor import edit_file

    with pytest.MonkeyPatch.context() as mp:
        for name in fake_editor.ENV_VARS:
            mp.delenv(name, raising=False)
        mp.setenv("FAKE_EDITOR_APPEND", "step 3\n")
        assert edit_file(str(text_file), configured=editor_command()) is True
    assert text_file.read_text(encoding="utf-8").endswith("step 3\n")


# ----------------------------------------------------------------------------------------------------------------
# guards


def test_network_guard_blocks_remote_connections(monkeypatch):
    blocked = guards.block_network(monkeypatch)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with pytest.raises(OSError, match="network access is blocked in tests: 203.0.113.1:80"):
            sock.connect(("203.0.113.1", 80))
        with pytest.raises(OSError, match="network access is blocked in tests"):
            sock.connect_ex(("203.0.113.1", 80))
    finally:
        sock.close()
    with pytest.raises(OSError, match="network access is blocked in tests"):
        socket.create_connection(("203.0.113.1", 80), timeout=5)
    with pytest.raises(OSError, match="network access is blocked in tests: example.com"):
        socket.getaddrinfo("example.com", 443)
    assert "203.0.113.1:80" in blocked


def test_network_guard_blocks_httpx_fast(monkeypatch):
    blocked = guards.block_network(monkeypatch)
    with pytest.raises(httpx.ConnectError, match="network access is blocked in tests: example.com"):
        httpx.get("https://example.com")
    with pytest.raises(httpx.ConnectError, match="network access is blocked in tests: api.openai.com"):
        httpx.post("https://api.openai.com/v1/chat/completions", json={})
    assert blocked == ["example.com:443", "api.openai.com:443"], "one attempt each, refused at once: none retried"


def test_network_guard_blocks_requests(monkeypatch):
    import requests

    guards.block_network(monkeypatch)
    with pytest.raises(requests.exceptions.ConnectionError, match="network access is blocked in tests"):
        requests.get("https://huggingface.co/api/models", timeout=5)


def test_network_guard_blocks_litellm_to_remote_api_base(monkeypatch):
    raw_completion = guards.unguarded(litellm.completion)  # the conftest's real-LLM guard would answer first
    blocked = guards.block_network(monkeypatch)
    with pytest.raises(Exception, match="network access is blocked in tests: api.openai.com") as info:
        raw_completion(model="gpt-4", messages=MESSAGES, api_base="https://api.openai.com/v1", api_key="sk-test")
    assert blocked == ["api.openai.com:443"], "one attempt, refused at once: litellm did not retry it"
    assert any(isinstance(e, guards.NetworkBlockedError) for e in exception_chain(info.value))


def test_network_guard_keeps_loopback_and_unix_sockets(monkeypatch, server, tmp_path):
    guards.block_network(monkeypatch)

    server.add("still reachable")
    assert call(server).choices[0].message.content == "still reachable"
    server.add("via localhost")
    assert call(server, api_base=f"http://localhost:{server.port}/v1").choices[0].message.content == "via localhost"

    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        a.sendall(b"ping")
        assert b.recv(4) == b"ping"

    path = str(tmp_path / "s.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with listener:
        listener.bind(path)
        listener.listen(1)
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with client:
            client.connect(path)
            conn, _ = listener.accept()
            with conn:
                client.sendall(b"pong")
                assert conn.recv(4) == b"pong"

    assert socket.getaddrinfo("localhost", 80)
    assert socket.getaddrinfo(None, 0, socket.AF_INET, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)


def test_network_guard_is_undone():
    original = socket.socket.connect, socket.getaddrinfo, socket.create_connection
    with pytest.MonkeyPatch.context() as mp:
        guards.block_network(mp)
        assert socket.socket.connect is not original[0]
    assert (socket.socket.connect, socket.getaddrinfo, socket.create_connection) == original


def test_stdin_guard(monkeypatch):
    guards.block_stdin(monkeypatch)
    message = "a test tried to read stdin; script the user with ScriptedInput"
    with pytest.raises(guards.StdinBlockedError, match=message):
        input("> ")
    with pytest.raises(guards.StdinBlockedError, match=message):
        sys.stdin.read()
    with pytest.raises(guards.StdinBlockedError, match=message):
        sys.stdin.readline()
    assert not isinstance(guards.StdinBlockedError(message), EOFError)


def test_flow_verse_sync_guard(monkeypatch):
    import aiflows.flow_verse
    import aiflows.flow_verse.loading

    original = aiflows.flow_verse.loading.sync_dependencies
    # a module that did `from aiflows.flow_verse import sync_dependencies` before the guard ran
    user = types.ModuleType("_harness_flow_verse_user")
    user.sync_dependencies = original
    monkeypatch.setitem(sys.modules, user.__name__, user)

    guards.block_flow_verse_sync(monkeypatch)
    for fn in (
        aiflows.flow_verse.sync_dependencies,
        aiflows.flow_verse.loading.sync_dependencies,
        user.sync_dependencies,
    ):
        with pytest.raises(guards.FlowVerseSyncBlockedError, match="flow_verse.sync_dependencies called in a test"):
            fn([])


def test_real_llm_guard(monkeypatch, server):
    import aiflows.backends.llm_lite as llm_lite

    original, original_llm_lite = litellm.completion, llm_lite.completion
    with pytest.MonkeyPatch.context() as mp:
        assert guards.block_real_llm(mp) is True
        for fn in (litellm.completion, llm_lite.completion, litellm.main.completion):
            with pytest.raises(
                guards.RealLLMBlockedError,
                match=r"a test tried to call a real LLM \(api_base=https://api.openai.com/v1\)",
            ):
                fn(model="gpt-4", messages=MESSAGES, api_base="https://api.openai.com/v1", api_key="sk-test")
        with pytest.raises(guards.RealLLMBlockedError, match=r"api_base=None"):
            llm_lite.completion(model="gpt-4", messages=MESSAGES, api_key="sk-test")
        assert server.requests == []
        # loopback still works through the guarded names
        server.add("guarded but fine")
        response = llm_lite.completion(model="gpt-4", messages=MESSAGES, api_base=server.url, api_key="sk-test")
        assert response.choices[0].message.content == "guarded but fine"
    assert litellm.completion is original and llm_lite.completion is original_llm_lite


def test_is_loopback_helpers():
    assert guards.is_loopback_url("http://127.0.0.1:1234/v1")
    assert guards.is_loopback_url("http://localhost:1/v1")
    assert guards.is_loopback_url("http://[::1]:1/v1")
    assert not guards.is_loopback_url("https://api.openai.com/v1")
    assert not guards.is_loopback_url("http://127.0.0.1.example.com/v1")
    assert not guards.is_loopback_url(None)
    assert guards.is_loopback_host("127.0.0.2") and not guards.is_loopback_host("10.0.0.1")


def test_apply_all(monkeypatch, server):
    guards.apply_all(monkeypatch)
    server.add("all guards on")
    assert call(server).choices[0].message.content == "all guards on"
    with pytest.raises(guards.RealLLMBlockedError):
        call(server, api_base="https://api.openai.com/v1")
    with pytest.raises(guards.StdinBlockedError):
        input()


def test_the_autouse_guards_are_on_in_every_test(_guards, quiet_console):
    """No guard is applied here by hand: conftest's autouse fixture must already have done it."""
    import aiflows.flow_verse

    from aiflows_jarvis.CoreFlowModule.console.interaction import TerminalInput

    with pytest.raises(guards.NetworkBlockedError):
        socket.create_connection(("203.0.113.1", 80), timeout=5)
    assert _guards == ["203.0.113.1:80"], "the autouse fixture records what it refused"
    _guards.clear()  # refused on purpose; any other attempt would fail this test at teardown
    with pytest.raises(guards.StdinBlockedError):
        input()
    with pytest.raises(guards.StdinBlockedError):
        TerminalInput().ask("Anything to add?")  # the terminal input source reads through the guarded input()
    with pytest.raises(guards.FlowVerseSyncBlockedError):
        aiflows.flow_verse.sync_dependencies([])
    with pytest.raises(guards.RealLLMBlockedError):
        litellm.completion(model="gpt-4", messages=MESSAGES, api_base="https://api.openai.com/v1", api_key="sk-test")
