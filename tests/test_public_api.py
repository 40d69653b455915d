"""The public surface is pinned: adding or removing a name is a deliberate act."""

from __future__ import annotations

import subprocess
import sys

import permsc_integrations
from permsc_integrations import errors

CORE_ALL = {
    "__version__",
    "aggregate",
    "aggregators",
    "PSCRanker",
    "RankRequest",
    "RankingOptions",
    "RankingResult",
    "WindowResult",
    "Sample",
    "ParsedAnswer",
    "ParseStatus",
    "Usage",
    "Backend",
    "Completion",
    "GenerationSettings",
    "resolve_backend",
    "RetryPolicy",
    "MemoryCache",
    "SQLiteCache",
    "Event",
    "PermscError",
    "ConfigurationError",
    "UnknownNameError",
    "MissingDependencyError",
    "InvalidRankingError",
    "ParseError",
    "BackendError",
    "RateLimitError",
    "BackendTimeoutError",
    "BackendConnectionError",
    "ContextLengthError",
    "InsufficientSamplesError",
    "AuthenticationError",
    "ModelNotFoundError",
    "QuotaExceededError",
    "LogprobsUnavailableError",
    "ModelIntegrityError",
    "SpendingCap",
    "Prices",
    "SpendingCapError",
}


def test_all_is_pinned() -> None:
    assert set(permsc_integrations.__all__) == CORE_ALL
    assert len(permsc_integrations.__all__) == len(CORE_ALL)


def test_every_public_name_resolves() -> None:
    for name in permsc_integrations.__all__:
        assert getattr(permsc_integrations, name) is not None, name


def test_unknown_attribute_raises_attribute_error() -> None:
    try:
        permsc_integrations.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def test_every_error_derives_from_the_base() -> None:
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.PermscError), name


def test_missing_dependency_names_the_install_line() -> None:
    err = errors.MissingDependencyError("highspy", "highs", purpose="exact Kemeny")
    assert "pip install 'permsc-integrations[highs]'" in str(err)
    assert isinstance(err, ImportError)


def test_import_loads_no_heavy_dependency() -> None:
    """``import permsc_integrations`` must stay light: solvers, SDKs and torch load lazily."""
    heavy = [
        "torch",
        "transformers",
        "openai",
        "highspy",
        "pulp",
        "scipy",
        "pydantic",
        "matplotlib",
        "langchain_core",
        "llama_index",
        "uvicorn",
        "starlette",
        "tenacity",
        "prometheus_client",
        "permsc_integrations.serve",
        "opentelemetry",
        "mcp",
        "permsc_integrations.mcp_server",
    ]
    code = (
        "import sys, permsc_integrations\n"
        f"print(','.join(m for m in {heavy!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"loaded at import time: {out.stdout.strip()}"


def test_importing_and_building_blocks_reads_no_entry_points() -> None:
    # known names (the default Blocks' "rrf", here also "kemeny") are found without scanning
    # every installed distribution's entry points; only an unknown name, or available(), scans
    code = (
        "from permsc_integrations import PSCRanker, aggregators, strategies\n"
        "strategies.Blocks(head_by='kemeny')\n"
        "print(aggregators._registry._scanned)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
