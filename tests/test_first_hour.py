"""What a new user meets in the first hour (issue 26), through the real openai client and a
real loopback server: typos in backend options, repeated failures, masked secrets."""

from __future__ import annotations

import logging
import re
import socket
import sys
import time

import pytest

from permsc_integrations import PSCRanker, RetryPolicy
from permsc_integrations.backends import resolve_backend
from permsc_integrations.cli import main
from permsc_integrations.errors import (
    ConfigurationError,
    InsufficientSamplesError,
    MissingDependencyError,
)
from permsc_integrations.testing import Reply, ScriptedOpenAIServer, oracle_responder

pytest.importorskip("openai")
pytestmark = pytest.mark.timeout(60)

ITEMS = ["gold gold", "tin", "gold", "iron"]
ORACLE = oracle_responder(lambda text: text.count("gold"))


def test_a_typo_in_backend_options_is_refused_when_the_ranker_is_built(scripted_server) -> None:
    server = scripted_server()
    with pytest.raises(ConfigurationError) as caught:
        PSCRanker("openai:m", backend_options={"base_ulr": server.base_url})
    assert "'base_ulr' for the openai backend (did you mean 'base_url'?)" in str(caught.value)
    with pytest.raises(ConfigurationError, match="did you mean 'device'"):
        resolve_backend("embedded", devcie="cpu")
    assert server.request_count == 0


@pytest.mark.parametrize(
    "options",
    [
        {"api_key": "***"},
        {"base_url": "http://***@127.0.0.1:{port}/v1"},
        {"base_url": "http://127.0.0.1:{port}/v1?api-key=***"},
    ],
)
def test_masked_secrets_are_refused_as_credentials(scripted_server, options) -> None:
    server = scripted_server()
    given = {"base_url": server.base_url, **options}
    given = {k: v.format(port=server.port) for k, v in given.items()}
    with pytest.raises(ConfigurationError, match="masked placeholder"):
        PSCRanker("openai:m", backend_options=given)
    assert server.request_count == 0


def test_a_masked_key_from_the_environment_is_refused(scripted_server, monkeypatch) -> None:
    server = scripted_server()
    monkeypatch.setenv("OPENAI_API_KEY", "***")
    with pytest.raises(ConfigurationError, match="api_key holds the masked placeholder"):
        PSCRanker("openai:m", backend_options={"base_url": server.base_url})


def test_identical_failures_are_grouped_with_a_count(tmp_path, capsys, closed_port) -> None:
    url = f"http://127.0.0.1:{closed_port}/v1"
    quick = RetryPolicy(max_attempts=2, initial_backoff=0.01, jitter=0.0)
    with PSCRanker("openai:m", backend_options={"base_url": url}, retry=quick) as r:
        with pytest.raises(InsufficientSamplesError) as caught:
            r.rank("q", ITEMS)
        with pytest.raises(InsufficientSamplesError) as many:
            r.rank_many([("q", ITEMS)] * 4)
    lines = str(caught.value).splitlines()
    assert len(lines) == 2 and lines[1].startswith("  - 20 x BackendConnectionError: ")
    assert len(caught.value.failures) == 20  # every real exception is still there
    notes = [n for n in many.value.__notes__ if "other requests" in n]
    assert len(notes) == 1 and "3 x InsufficientSamplesError" in notes[0]
    path = tmp_path / "q.jsonl"
    path.write_text('{"qid": "1", "query": "q", "items": ["a", "b", "c", "d"]}\n')  # 24 orders
    assert main(["rank", "-i", str(path), "--backend", "openai:m", "--base-url", url]) == 2
    failed = [line for line in capsys.readouterr().err.splitlines() if "query 1 failed" in line]
    assert len(failed) == 1 and "20 x BackendConnectionError" in failed[0]


def test_rank_help_offers_only_what_the_command_line_can_take(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["rank", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for python_only in ("callable", "Prompt object", "SpendingCap", "an Adaptive", "Prices:"):
        assert python_only not in text
    assert "(default: None)" not in text and "None:" not in text
    assert "aggregator: kemeny, borda" in text and "prompt: rankgpt" in text


def test_rank_prints_one_line_progress_when_stderr_is_not_a_terminal(
    scripted_server, tmp_path, capsys
) -> None:
    server = scripted_server(ORACLE)
    path = tmp_path / "q.jsonl"
    path.write_text("".join(f'{{"qid": "{k}", "query": "q", "items": {ITEMS!r}}}\n'.replace(
        "'", '"') for k in range(3)))  # fmt: skip
    remote = ["--backend", "openai:m", "--base-url", server.base_url, "-m", "4"]
    args = ["rank", "-i", str(path), "-o", str(tmp_path / "out.jsonl"), *remote]
    assert main([*args, "--progress-every", "0"]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines and all(re.fullmatch(r"permsc: progress: \d/3 queries, \d+/~12 samples, \d+ s", x)
                         for x in lines)  # fmt: skip
    assert lines[-1].startswith("permsc: progress: 3/3 queries, 12/~12 samples")
    assert main(args) == 0  # a quick run under the default 10 s: no line at all
    assert capsys.readouterr().err == ""


def test_the_scripted_server_names_the_testing_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "starlette.applications", None)
    with pytest.raises(MissingDependencyError, match=r"permsc-integrations\[testing\]'"):
        ScriptedOpenAIServer()._app()


def test_a_client_hanging_up_mid_request_logs_no_traceback(scripted_server, caplog) -> None:
    server = scripted_server(lambda request: Reply("[1] > [2]", delay=0.2))
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
        b"Content-Length: 500\r\n\r\n"
    )
    with caplog.at_level(logging.WARNING):
        for partial in (b"", b'{"model": "m", "mess'):
            with socket.create_connection(("127.0.0.1", server.port)) as client:
                client.sendall(head + partial)
                time.sleep(0.05)
        with PSCRanker("openai:m", backend_options={"base_url": server.base_url}, timeout=0.05,
                       retry=RetryPolicy(max_attempts=1), num_permutations=2) as r:  # fmt: skip
            with pytest.raises(InsufficientSamplesError):  # the client gives up mid-answer
                r.rank("q", ITEMS)
        time.sleep(0.4)  # the server finishes its answers to nobody
    assert [r.getMessage() for r in caplog.records if r.name.startswith("uvicorn")] == []
    assert server.request_count >= 1  # the ranker's calls reached it, then hung up
