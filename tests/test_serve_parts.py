"""permsc serve's pure parts: configuration, keys, scores, error mapping, missing extras."""

from __future__ import annotations

import subprocess
import sys

import pytest

from permsc_integrations import (
    AuthenticationError,
    ConfigurationError,
    InsufficientSamplesError,
    QuotaExceededError,
    RankingResult,
    RateLimitError,
    Sample,
    WindowResult,
)
from permsc_integrations.results import ParseStatus
from permsc_integrations.serve import Limits, ModelConfig, ServeConfig, load_models
from permsc_integrations.serve._auth import KeyRing, Unauthorized, load_keys
from permsc_integrations.serve._errors import http_error
from permsc_integrations.serve._scoring import cut_words, relevance_scores


def test_serve_all_is_pinned() -> None:
    import permsc_integrations.serve as serve

    assert set(serve.__all__) == {
        "Limits",
        "ModelConfig",
        "ServeConfig",
        "load_models",
        "create_app",
        "serve",
        "relevance_scores",
    }


def test_a_missing_extra_names_the_install_line() -> None:
    code = (
        "import sys; sys.modules['prometheus_client'] = None\n"
        "from permsc_integrations import serve\n"
        "try:\n    serve.create_app\nexcept ImportError as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'permsc-integrations[serve]'" in out.stdout


def test_public_host_needs_keys_or_the_explicit_flag() -> None:
    model = ModelConfig("psc", "openai:m")
    with pytest.raises(ConfigurationError, match="PERMSC_API_KEYS"):
        ServeConfig(models=(model,), host="0.0.0.0")
    assert ServeConfig(models=(model,), host="0.0.0.0", allow_public_without_keys=True)
    assert ServeConfig(models=(model,), host="0.0.0.0", keys=("k" * 8,))
    assert ServeConfig(models=(model,), host="::1")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("[models", "not valid TOML"),
        ("x = 1", r"\[models.NAME\]"),
        ("[models.a]\nm = 2", "backend"),
        ('[models.a]\nbackend = "openai:m"\nno_such_option = 1', "no_such_option"),
        ('[models.a]\nbackend = "openai:m"\nnum_permutations = 0', "num_permutations"),
    ],
)
def test_bad_model_files_are_refused_at_start(tmp_path, text: str, match: str) -> None:
    path = tmp_path / "models.toml"
    path.write_text(text)
    with pytest.raises(ConfigurationError, match=match):
        load_models(path)


def test_an_unset_key_variable_is_named_not_guessed(monkeypatch) -> None:
    monkeypatch.delenv("PERMSC_TEST_UPSTREAM_KEY", raising=False)
    model = ModelConfig("a", "openai:m", api_key_env="PERMSC_TEST_UPSTREAM_KEY")
    with pytest.raises(ConfigurationError, match="PERMSC_TEST_UPSTREAM_KEY"):
        model.build()


def test_limits_and_names_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="max_documents"):
        Limits(max_documents=0)
    with pytest.raises(ConfigurationError, match="unique"):
        ServeConfig(models=(ModelConfig("a", "openai:m"), ModelConfig("a", "openai:n")))


def test_keys_from_env_and_file_never_echoed(tmp_path) -> None:
    path = tmp_path / "keys.txt"
    path.write_text("# ops team\nfile-key-0001\n\nfile-key-0002  # ci\n")
    assert load_keys("env-key-0001, env-key-0002,", path) == (
        "env-key-0001",
        "env-key-0002",
        "file-key-0001",
        "file-key-0002",
    )
    with pytest.raises(ConfigurationError) as info:
        load_keys("short,env-key-0001")
    assert "short" not in str(info.value) and "number 1" in str(info.value)
    ring = KeyRing(["env-key-0001"])
    for header in (None, "", "Bearer", "Basic env-key-0001", "Bearer env-key-0002"):
        with pytest.raises(Unauthorized) as denied:
            ring.identify(header)
        assert "env-key" not in str(denied.value)
    assert ring.identify("Bearer env-key-0001") != "env-key-0001"
    assert KeyRing([]).identify(None) == "anonymous"


def _result(order, rankings) -> RankingResult:
    samples = tuple(
        Sample(tuple(range(len(order))), r, "", ParseStatus.OK if r else ParseStatus.INVALID)
        for r in rankings
    )
    window = WindowResult(0, tuple(range(len(order))), tuple(order), samples, 1.0)
    return RankingResult(tuple(order), (0.0,) * len(order), (window,))


def test_relevance_scores_are_win_shares_that_never_contradict_the_order() -> None:
    unanimous = relevance_scores(_result([2, 0, 1], [(2, 0, 1)] * 3))
    assert unanimous == (0.5, 0.0, 1.0)
    # partial answers and failed samples count only what they ranked
    partial = relevance_scores(_result([0, 1, 2], [(0, 1), (0, 1, 2), ()]))
    assert partial == (1.0, 0.25, 0.0)
    # the consensus puts 1 above 0 though 0 won more pairs: 1's score is capped to 0's
    outvoted = relevance_scores(_result([1, 0, 2], [(0, 1, 2), (0, 1, 2), (1, 2, 0)]))
    assert outvoted[1] == outvoted[0] and outvoted[0] > outvoted[2]
    assert relevance_scores(RankingResult((0,), (1.0,))) == (1.0,)


def test_cut_words_keeps_short_texts_whole() -> None:
    assert cut_words("a  b", 5) == "a  b" and cut_words("a b c", None) == "a b c"
    assert cut_words("  a b\nc d ", 3) == "a b c"
    assert cut_words("a b", 2**63) == "a b"  # past sys.maxsize: no OverflowError


def test_upstream_failures_blame_the_upstream_not_the_caller() -> None:
    auth = http_error(AuthenticationError("no", status_code=401), "openai:m@host")
    assert auth.status == 502 and "openai:m@host" in auth.message and "401" in auth.message
    quota = http_error(QuotaExceededError("no credit", status_code=429), "u")
    assert quota.status == 502
    limited = http_error(
        InsufficientSamplesError(0, 2, [RateLimitError("slow", retry_after=2.5)] * 2), "u"
    )
    assert limited.status == 429 and dict(limited.headers)["retry-after"] == "3"
    assert http_error(ConfigurationError("bad"), "u").status == 400
    assert http_error(RuntimeError("boom"), "u").status == 500


def test_the_log_quiets_every_http_stack_and_redacts_every_line() -> None:
    """openai 3.x logs each upstream call through httpx2 (at INFO, with the URL): quiet, as
    httpx is; and whatever a library writes at WARNING is redacted, traceback included."""
    import io
    import logging

    from permsc_integrations.serve._logs import LIBRARIES, configure_logging

    stream = io.StringIO()
    handler = configure_logging("info", ["sk-known-key-1"], stream, fmt="%(name)s %(message)s")
    url = "http://bob:hunter2pw@up.example/v1?api-key=qsecret1"
    try:
        for name in ("httpx", "httpx2", "httpcore", "httpcore2.http11", "openai", "urllib3"):
            assert name.split(".")[0] in LIBRARIES
            logging.getLogger(name).info("HTTP Request: POST %s", url)
        logging.getLogger("httpx2").warning("retrying %s with sk-known-key-1", url)
        try:
            raise RuntimeError(f"failed at {url}")
        except RuntimeError:
            logging.getLogger("uvicorn.error").exception("Exception in ASGI application")
        for _ in range(50):  # a storm of one library line
            logging.getLogger("asyncio").error("socket.accept() out of system resource")
    finally:
        logging.getLogger().removeHandler(handler)
    text = stream.getvalue()
    assert "HTTP Request" not in text
    assert "retrying http://***@up.example/v1?api-key=*** with ***" in text
    assert "failed at http://***@up.example" in text
    for secret in ("hunter2pw", "qsecret1", "sk-known-key-1"):
        assert secret not in text
    assert text.count("out of system resource") == 5


def test_model_file_typos_get_a_did_you_mean_for_every_key(tmp_path) -> None:
    path = tmp_path / "models.toml"
    path.write_text('[models.a]\nbackend = "openai:m"\nbase_ulr = "http://x/v1"\napi_key = "K"\n')
    with pytest.raises(ConfigurationError) as info:
        load_models(path)
    message = str(info.value)
    assert "unknown key 'base_ulr' (did you mean 'base_url'?)" in message
    assert "unknown key 'api_key' (did you mean 'api_key_env'?)" in message
    assert "any ranking option (docs/options.md)" in message


def test_the_serve_extra_brings_the_backend_of_its_own_example() -> None:
    """docs/serve.md installs the serve extra, then runs ``permsc serve --backend openai:...``:
    the extra must bring openai (it did not: the example exited)."""
    from pathlib import Path

    import tomllib

    root = Path(__file__).resolve().parents[1]
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert "permsc-integrations[openai]" in extras["serve"]
    assert "pip install 'permsc-integrations[serve]'" in (root / "docs" / "serve.md").read_text()


def test_a_missing_openai_names_its_install_line() -> None:
    code = (
        "import sys; sys.modules['openai'] = None\n"
        "from permsc_integrations.cli import main\n"
        "sys.exit(main(['serve', '--backend', 'openai:m', '--port', '0']))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 2
    assert "pip install 'permsc-integrations[openai]'" in out.stderr


def test_the_connection_cap_fits_under_the_open_file_limit() -> None:
    model = ModelConfig("a", "openai:m", {"max_concurrency": 8})
    config = ServeConfig(models=(model,))
    assert config.connection_cap(1024) == 1024 - 64 - 8
    assert config.connection_cap(None) == config.connection_cap(1 << 20) == 4096
    explicit = ServeConfig(models=(model,), limits=Limits(max_connections=100))
    assert explicit.connection_cap(1024) == 100
    with pytest.raises(ConfigurationError, match="ulimit -n"):
        explicit.connection_cap(150)
    with pytest.raises(ConfigurationError, match="max_connections"):
        Limits(max_connections=0)
