"""The chat completions the backend sends itself (``openai_http``): which requests go without litellm, kept-alive
connections, server-sent events, errors sorted as litellm's are, and a run that never imports litellm."""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading

import pytest
from loopback_llm import Cut, HTTPError, LoopbackLLMServer, Malformed, Slow, chunk_json, completion_json

from aiflows_jarvis.ChatFlowModule import openai_http
from aiflows_jarvis.ChatFlowModule.llm_errors import classify
from aiflows_jarvis.ChatFlowModule.openai_http import plan_request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture(autouse=True)
def _fresh_connections():
    openai_http.close_connections()
    yield
    openai_http.close_connections()


def params(**extra):
    return {
        "model": "openai/local-model",
        "messages": MESSAGES,
        "api_base": "http://127.0.0.1:9/v1",
        "api_key": "sk-test",
        "api_version": None,
        **extra,
    }


# ~~~ Which requests go directly ~~~
@pytest.mark.parametrize(
    "model, sent",
    [
        ("openai/local-model", "local-model"),
        ("openai/meta-llama/Llama-3-8B", "meta-llama/Llama-3-8B"),
        ("gpt-4", "gpt-4"),
        ("gpt-4o-mini", "gpt-4o-mini"),
        ("o3-mini", "o3-mini"),
    ],
)
def test_openai_models_are_sent_directly_under_the_name_the_server_knows(model, sent):
    request = plan_request(params(model=model, temperature=0.3, max_tokens=None, request_timeout=7))
    assert request.url == "http://127.0.0.1:9/v1/chat/completions"
    assert request.body == {"model": sent, "messages": MESSAGES, "temperature": 0.3}, "None values are left out"
    assert request.timeout == 7 and request.api_key == "sk-test"


@pytest.mark.parametrize(
    "change",
    [
        {"model": "azure/gpt-4"},
        {"api_version": "2023-07-01-preview"},
        {"model": "anthropic/claude-3"},
        {"model": "claude-2"},
        {"model": "ollama/llama3"},
        {"caching": True},
        {"transport": "litellm"},
        {"api_base": "not a url"},
    ],
)
def test_everything_else_goes_through_litellm(change):
    assert plan_request(params(**change)) is None


def test_an_unknown_transport_is_a_configuration_error():
    from aiflows_jarvis.CoreFlowModule import ConfigurationError

    with pytest.raises(ConfigurationError, match="transport must be one of auto, litellm, not 'litelm'"):
        plan_request(params(transport="litelm"))


def test_a_proxy_in_the_environment_is_left_to_litellm(monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert plan_request(params(api_base="http://models.example/v1")) is None
    monkeypatch.setenv("NO_PROXY", "models.example")
    assert plan_request(params(api_base="http://models.example/v1")) is not None


def test_openai_is_the_default_server_and_the_environment_names_key_and_base(monkeypatch):
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    request = plan_request(params(api_base=None, api_key=None, model="gpt-4o"))
    assert request.url == "https://api.openai.com/v1/chat/completions" and request.api_key == "sk-env"
    assert request.timeout == openai_http.DEFAULT_TIMEOUT
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:8000/v1/")
    assert plan_request(params(api_base=None)).url == "http://127.0.0.1:8000/v1/chat/completions"


# ~~~ Against the loopback server ~~~
def test_a_completion_and_what_the_server_was_sent():
    with LoopbackLLMServer([completion_json("hello", prompt_tokens=5)]) as server:
        reply = openai_http.complete(plan_request(params(api_base=server.url, temperature=0.1)))
        sent = server.requests[0]
    assert reply["choices"][0]["message"]["content"] == "hello" and reply["usage"]["prompt_tokens"] == 5
    assert sent["model"] == "local-model" and sent["messages"] == MESSAGES and sent["json"]["temperature"] == 0.1
    assert (
        sent["headers"]["authorization"] == "Bearer sk-test" and sent["headers"]["content-type"] == "application/json"
    )


def test_errors_carry_status_headers_and_the_servers_words():
    with LoopbackLLMServer(
        [HTTPError(429, "slow down", headers={"Retry-After": "3"}), HTTPError(401, "bad key"), HTTPError(500, "boom")]
    ) as server:
        request = plan_request(params(api_base=server.url))
        errors = []
        for _ in range(3):
            with pytest.raises(openai_http.APIStatusError) as caught:
                openai_http.complete(request)
            errors.append(caught.value)
    rate, auth, server_error = errors
    assert isinstance(rate, openai_http.RateLimitError) and isinstance(auth, openai_http.AuthenticationError)
    info = classify(rate)
    assert (info.kind, info.status, info.retryable, info.retry_after, info.detail) == (
        "rate_limit",
        429,
        True,
        3.0,
        "slow down",
    )
    assert (classify(auth).kind, classify(auth).retryable) == ("auth", False)
    assert (classify(server_error).kind, classify(server_error).status) == ("server", 500)


def test_malformed_bodies_are_malformed_replies():
    replies = [
        Malformed(b"{not json"),
        Malformed(b"\xff\xfe{}"),
        Malformed(b"[1, 2]"),
        Malformed(b'{"choices": [{"text": "a text completion"}]}'),
    ]
    with LoopbackLLMServer(replies) as server:
        request = plan_request(params(api_base=server.url))
        kinds = []
        for _ in range(4):
            with pytest.raises(Exception) as caught:
                openai_http.complete(request)
            kinds.append((classify(caught.value).kind, classify(caught.value).retryable))
    assert kinds == [("malformed", True)] * 4


def test_a_slow_server_times_out_and_a_closed_port_is_a_connection_error():
    with LoopbackLLMServer([Slow(None, "late")]) as server:
        with pytest.raises(openai_http.APITimeoutError) as caught:
            openai_http.complete(plan_request(params(api_base=server.url, request_timeout=0.3)))
        server.close(timeout=1)
    assert classify(caught.value).kind == "timeout"
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(openai_http.APIConnectionError) as caught:
        openai_http.complete(plan_request(params(api_base=f"http://127.0.0.1:{port}/v1")))
    assert (classify(caught.value).kind, classify(caught.value).retryable) == ("connection", False), (
        "nothing listens there: asking again will not help"
    )


def test_a_prompt_that_is_not_valid_text_is_refused_before_sending():
    request = plan_request(params(messages=[{"role": "user", "content": "bad \udcff byte"}]))
    with pytest.raises(UnicodeEncodeError) as caught:
        openai_http.complete(request)
    assert classify(caught.value).kind == "bad_request"


# ~~~ Against an HTTP/1.1 server: kept-alive connections, chunked event streams ~~~
class _KeepAliveHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.bodies.append(body)
        mode = self.server.stream_mode
        if body.get("stream") and mode == "json":  # a server that ignores stream: true
            data = json.dumps(completion_json("not streamed", prompt_tokens=3)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif body.get("stream") and mode in ("only_done", "open_after_done"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            events = (
                ["data: [DONE]\n\n"]
                if mode == "only_done"
                else [
                    f"data: {json.dumps(chunk_json({'content': 'kept'}, finish_reason='stop'))}\n\n",
                    "data: [DONE]\n\n",
                ]
            )
            for event in events:
                data = event.encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
            if mode == "open_after_done":  # the body is not ended until the test is done (a proxy holding it)
                self.server.released.wait()
            self.wfile.write(b"0\r\n\r\n")
        elif body.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            events = [
                ": keep-alive comment\n\n",
                f"data: {json.dumps(chunk_json({'role': 'assistant'}))}\n\n",
                f"data: {json.dumps(chunk_json({'content': 'Par'}))}\n\n",
                f"data: {json.dumps(chunk_json({'content': None}))}\n\n",
                f"data: {json.dumps(chunk_json({'content': 'is'}, finish_reason='stop'))}\n\n",
                "data: [DONE]\n\n",
            ]
            for event in events:
                data = event.encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.write(b"0\r\n\r\n")
        else:
            data = json.dumps(completion_json(f"reply {len(self.server.bodies)}")).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        self.wfile.flush()
        if self.server.drop_after_each:  # closes without saying so: the client finds out at its next request
            self.close_connection = True


class _KeepAliveServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, drop_after_each=False, stream_mode="normal"):
        super().__init__(("127.0.0.1", 0), _KeepAliveHandler)
        self.bodies, self.connections, self.drop_after_each = [], 0, drop_after_each
        self.stream_mode, self.released = stream_mode, threading.Event()

    def get_request(self):
        self.connections += 1
        return super().get_request()


@pytest.fixture
def keep_alive_server():
    servers = []

    def start(**options):
        server = _KeepAliveServer(**options)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return server, f"http://127.0.0.1:{server.server_address[1]}/v1"

    yield start
    openai_http.close_connections()
    for server in servers:
        server.released.set()
        server.shutdown()
        server.server_close()


def test_requests_share_one_kept_alive_connection_streams_included(keep_alive_server):
    server, url = keep_alive_server()
    request = plan_request(params(api_base=url))
    assert openai_http.complete(request)["choices"][0]["message"]["content"] == "reply 1"
    chunks = list(openai_http.stream(plan_request(params(api_base=url, stream=True))))
    assert openai_http.merged_stream_messages(iter(chunks)) == [{"content": "Paris"}], "comments and nulls skipped"
    assert openai_http.complete(request)["choices"][0]["message"]["content"] == "reply 3"
    assert server.connections == 1


def test_a_connection_the_server_closed_meanwhile_is_opened_again(keep_alive_server):
    server, url = keep_alive_server(drop_after_each=True)
    request = plan_request(params(api_base=url))
    replies = [openai_http.complete(request)["choices"][0]["message"]["content"] for _ in range(3)]
    assert replies == ["reply 1", "reply 2", "reply 3"], "each request answered once, none lost or sent twice"
    assert len(server.bodies) == 3 and server.connections == 3


def test_a_stream_left_unread_is_not_reused(keep_alive_server):
    server, url = keep_alive_server()
    chunks = openai_http.stream(plan_request(params(api_base=url, stream=True)))
    next(chunks)
    chunks.close()  # the consumer stops: the rest of the body would be read as the next reply
    assert openai_http.complete(plan_request(params(api_base=url)))["choices"][0]["message"]["content"] == "reply 2"
    assert server.connections == 2


def test_ctrl_c_while_a_reply_is_read_leaves_no_half_read_connection(keep_alive_server, monkeypatch):
    server, url = keep_alive_server()
    request = plan_request(params(api_base=url))
    real_read = http.client.HTTPResponse.read

    def interrupted(self, *args):
        monkeypatch.setattr(http.client.HTTPResponse, "read", real_read)
        raise KeyboardInterrupt

    monkeypatch.setattr(http.client.HTTPResponse, "read", interrupted)
    with pytest.raises(KeyboardInterrupt):
        openai_http.complete(request)
    assert openai_http.complete(request)["choices"][0]["message"]["content"] == "reply 2", "not the first's body"
    assert server.connections == 2


def test_a_stream_with_no_chunk_is_no_reply_and_a_server_that_does_not_stream_is_understood(keep_alive_server):
    from aiflows_jarvis.ChatFlowModule import MalformedReply

    _, url = keep_alive_server(stream_mode="only_done")
    with pytest.raises(MalformedReply):
        list(openai_http.stream(plan_request(params(api_base=url, stream=True))))
    assert openai_http.merged_stream_messages(iter([]), 2) == [{}, {}], "no text is no reply (retried), not ''"
    _, url = keep_alive_server(stream_mode="json")
    chunks = list(openai_http.stream(plan_request(params(api_base=url, stream=True))))
    assert openai_http.merged_stream_messages(iter(chunks)) == [{"content": "not streamed"}]
    assert chunks[0]["usage"]["prompt_tokens"] == 3 and chunks[0]["choices"][0]["finish_reason"] == "stop"


def test_a_body_held_open_after_done_keeps_the_reply(keep_alive_server):
    server, url = keep_alive_server(stream_mode="open_after_done")
    chunks = list(openai_http.stream(plan_request(params(api_base=url, stream=True, request_timeout=30))))
    assert openai_http.merged_stream_messages(iter(chunks)) == [{"content": "kept"}], "not a timeout after [DONE]"
    server.released.set()


@pytest.mark.parametrize("chunked", [False, True], ids=["plain", "chunked"])
def test_a_stream_the_server_drops_mid_reply_is_an_error_not_a_reply(chunked):
    with LoopbackLLMServer([Cut("Mar 120, Apr 150, May 180", after=3, chunked=chunked)]) as server:
        with pytest.raises(openai_http.APIConnectionError) as caught:
            list(openai_http.stream(plan_request(params(api_base=server.url, stream=True))))
    info = classify(caught.value)
    assert info.retryable and info.kind == "connection"
    assert info.reason.startswith("the streamed reply was cut off") and "3 pieces" in info.reason, info.reason


@pytest.mark.parametrize("chunked", [False, True], ids=["plain", "chunked"])
def test_through_litellm_too_a_stream_cut_off_is_an_error_not_a_reply(chunked):
    from aiflows.backends.api_info import ApiInfo

    from aiflows_jarvis.ChatFlowModule.backends import instantiate_backend

    with LoopbackLLMServer([Cut("Mar 120, Apr 150, May 180", after=3, chunked=chunked)]) as server:
        backend = instantiate_backend(
            {
                "_target_": "aiflows.backends.llm_lite.LiteLLMBackend",
                "model_name": "gpt-4",
                "wait_time_per_key": 0,
                "transport": "litellm",
                "stream": True,
                "api_infos": [ApiInfo(backend_used="openai", api_key="sk-test", api_base=server.url)],
            },
            "Asker",
        )
        with pytest.raises(openai_http.StreamCutOff) as caught:
            backend(messages=MESSAGES)
    assert classify(caught.value).retryable


def test_a_stream_that_ends_with_done_is_whole_without_a_finish_reason():
    from aiflows_jarvis.ChatFlowModule.generation import send

    body = "".join(f"data: {json.dumps(chunk_json({'content': piece}))}\n\n" for piece in ("Par", "is"))
    with LoopbackLLMServer([Malformed(body + "data: [DONE]\n\n", content_type="text/event-stream")]) as server:
        messages, info = send(plan_request(params(api_base=server.url, stream=True)))
    assert messages == [{"content": "Paris"}] and info.finish_reason is None


@pytest.mark.parametrize("hold", [False, True], ids=["then_closed", "then_held_open"])
def test_a_stream_whose_last_chunk_has_its_finish_reason_is_whole_without_done(hold):
    with LoopbackLLMServer([Cut("Mar 120, Apr 150, May 180", finish=True, hold=hold)]) as server:
        chunks = list(openai_http.stream(plan_request(params(api_base=server.url, stream=True, request_timeout=5))))
    assert openai_http.merged_stream_messages(iter(chunks)) == [{"content": "Mar 120, Apr 150, May 180"}]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_litellms_defaults_are_not_sent_and_instruct_models_go_through_litellm():
    request = plan_request(params(functions=[], function_call="", logit_bias={}, user="", stop=None, n=1))
    assert request.body == {"model": "local-model", "messages": MESSAGES, "n": 1}
    assert plan_request(params(model="gpt-3.5-turbo-instruct")) is None
    assert plan_request(params(timeout=5)).timeout == openai_http.DEFAULT_TIMEOUT, "litellm 1.0.0 ignores timeout"


# ~~~ A run that never imports litellm ~~~
NO_LITELLM = """
import sys
import aiflows_jarvis
from aiflows.backends.api_info import ApiInfo
from aiflows_jarvis.ChatFlowModule import ChatAtomicFlow
flow = ChatAtomicFlow.instantiate_from_default_config(backend={
    "api_infos": [ApiInfo(backend_used="openai", api_base=sys.argv[1], api_key="sk-test")],
    "model_name": {"openai": "openai/local-model"}})
reply = flow.call({"query": "hi"})
print(reply["api_output"], "litellm" in sys.modules, "openai" in sys.modules)
"""


def test_a_chat_with_an_openai_compatible_server_never_imports_litellm(tmp_path):
    with LoopbackLLMServer(["hello"]) as server:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(NO_LITELLM), server.url],
            cwd=tmp_path,
            env={**env, "PYTHONPATH": ROOT},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-3:] == ["hello", "False", "False"], done.stdout


# ~~~ Redirects and refused connections ~~~
def test_a_redirect_is_not_followed_and_names_the_status_the_location_and_the_api_base_to_use():
    provider = {"model": "local-model", "backend_used": "openai"}
    replies = [
        HTTPError(301, "moved", headers={"Location": "https://llm.example/v1/chat/completions"}),
        HTTPError(308, "moved", headers={"Location": "/api/v1/chat/completions"}),
        HTTPError(302, "moved"),
    ]
    with LoopbackLLMServer(replies) as server:
        request = plan_request(params(api_base=server.url))
        infos = []
        for _ in range(3):
            with pytest.raises(openai_http.APIStatusError) as caught:
                openai_http.complete(request)
            infos.append(classify(caught.value, {**provider, "api_base": server.url}))
        asked = len(server.requests)
    assert asked == 3, "no redirect was followed (the request carries the key)"
    assert all(not info.retryable and "APIStatusError" not in info.reason for info in infos)
    moved, permanent, nowhere = (info.reason for info in infos)
    assert "HTTP 301 Moved Permanently" in moved and "https://llm.example/v1/chat/completions" in moved
    assert "Use --api-base https://llm.example/v1" in moved and "not followed" in moved
    base = server.url.rsplit("/v1", 1)[0]
    assert "HTTP 308 Permanent Redirect" in permanent and f"Use --api-base {base}/api/v1 " in permanent
    assert "HTTP 302 Found" in nowhere and "names no new address" in nowhere


def test_http_redirected_to_https_on_the_same_host_says_use_https():
    moved = HTTPError(301, "moved", headers={"Location": "https://127.0.0.1/v1/chat/completions"})
    with LoopbackLLMServer([moved]) as server:
        with pytest.raises(openai_http.APIStatusError) as caught:
            openai_http.complete(plan_request(params(api_base=server.url)))
    reason = classify(caught.value, {"api_base": server.url}).reason
    assert "The server wants https: use --api-base https://127.0.0.1/v1" in reason, reason


def test_a_refused_connection_is_not_retried_and_names_the_url(loopback_llm, run_context):
    from aiflows.backends.api_info import ApiInfo

    from aiflows_jarvis.ChatFlowModule import ChatAtomicFlow, with_api_infos
    from aiflows_jarvis.CoreFlowModule import LLMCallError

    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    dead = f"http://127.0.0.1:{port}/v1"
    run_context.backend_factory = with_api_infos([ApiInfo(backend_used="openai", api_key="sk-test", api_base=dead)])
    chat = ChatAtomicFlow.instantiate_from_default_config(name="Asker", retry={"max_attempts": 6, "initial_delay": 5})
    with pytest.raises(LLMCallError) as error:
        chat.call({"query": "hi"})
    message = str(error.value)
    assert message.startswith(
        f"Asker: the LLM call failed: cannot connect to the LLM server: nothing is listening "
        f"at {dead} (connection refused)"
    ), message
    assert error.value.info.retryable is False and "failed 6 times" not in message


# ~~~ A user and password in the API base ~~~
def test_a_user_and_password_in_the_api_base_are_sent_as_basic_authentication_in_place_of_the_key():
    import base64

    with LoopbackLLMServer(["hello"]) as server:
        host = server.url.split("://", 1)[1]
        request = plan_request(params(api_base=f"http://alice:p%40ss-w0rd@{host}"))
        assert "alice" not in request.url and "w0rd" not in request.url, "the URL asked holds no credentials"
        assert openai_http.complete(request)["choices"][0]["message"]["content"] == "hello"
        sent = server.requests[0]["headers"]["authorization"]
    assert sent == "Basic " + base64.b64encode(b"alice:p@ss-w0rd").decode(), "decoded, and the key not sent"


@pytest.mark.parametrize("transport", ["auto", "litellm"])
def test_a_401_to_credentials_in_the_api_base_blames_them_not_the_api_key(transport, quiet_console, run_context):
    from aiflows.backends.api_info import ApiInfo

    from aiflows_jarvis.ChatFlowModule import ChatAtomicFlow, with_api_infos
    from aiflows_jarvis.CoreFlowModule import LLMCallError

    with LoopbackLLMServer([HTTPError(401, "Unauthorized")]) as server:
        api_base = server.url.replace("http://", "http://alice:pw-Hj4kL9mN2bV8@")
        api = ApiInfo(backend_used="openai", api_key="sk-test", api_base=api_base)
        run_context.backend_factory = with_api_infos([api])
        chat = ChatAtomicFlow.instantiate_from_default_config(
            name="Asker", backend={"transport": transport, "model_name": {"openai": "openai/local-model"}}
        )
        with pytest.raises(LLMCallError) as caught:
            chat.call({"query": "hi"})
        assert server.requests[0]["headers"]["authorization"].startswith("Basic "), transport
    message = str(caught.value)
    assert "the user name and password in the API base URL" in message and "API key" not in message, message
    assert "pw-Hj4kL9mN2bV8" not in message
