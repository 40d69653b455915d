"""The public surface is pinned: adding or removing a name is a deliberate act."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

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


# Every public module besides the top level, and its one ``__all__`` (docs/architecture.md,
# "What is public"). Everything in a ``_private`` module may change without notice.
PUBLIC = {
    "aggregators": "Aggregator register get available aggregate HasQuick ReadsProbabilities "
    "ScoresItems quick_of reads_probabilities scores_of",
    "aggregators.kemeny": "kemeny_solve kemeny_with KemenySolution",
    "backends": "register available resolve_backend",
    "backends.base": "Message GenerationSettings Completion Backend BatchBackend "
    "LabelProbabilities FirstTokenBackend FirstTokenBatchBackend ResponseCache",
    "backends.local": "",  # reached by spec string; its one public module is below
    "backends.local.transformers": "TransformersBackend auto_device",
    "backends.openai": "OpenAIBackend",
    "cli": "main",
    "errors": " ".join(sorted(errors.__all__)),  # the error tree, pinned below by its base
    "integration": "checked_options refuse_unknown refuse_unknown_attribute check_backend "
    "public_backend_options usage_dict psc_metadata repr_args OneRanker Done Trace TracedBackend "
    "TracedFirstTokenBackend traced AdapterModel PSCOptionsModel option_types option_annotation "
    "option_fields typed_errors RankingKeywords at_least positive_int run_sync HomeLoop "
    "mapped_errors check_labels label_probabilities refused_logprobs top_list public_settings "
    "is_secret_name TemplatePrompt",
    "eval": "EvalReport evaluate_sorting aevaluate_sorting aevaluate_trec load_sorting "
    "generate_mathsort kendall_tau_b read_qrels read_run read_topics write_run bias_map",
    "mcp_server": "Budget BUDGETS RerankTool RerankResult ToolError",
    "metrics": "kendall_tau ndcg_at_k mean_ndcg_at_k",
    "parsing": "parse_identifiers parse_items strip_reasoning disarm",
    "permutations": "sample_permutations to_original invert distinct_permutations",
    "prompts": "Prompt get_prompt available_prompts register_prompt RankGPTPrompt "
    "RankVicunaPrompt MathSortPrompt WordSortPrompt GSM8KSortPrompt TemplatePrompt",
    "ray": "rank_dataset rank_rows",
    "results": "StopReason Usage ParseStatus ParsedAnswer Sample WindowResult RankingResult "
    "scores_from_order Defect answer_defect",
    "serve": "ModelConfig ServeConfig Limits load_models create_app serve relevance_scores",
    "strategies": "RankContext Strategy StrategyOptions Sliding Blocks Frontier Draw Lead Outcome "
    "WaveEnd Window Plan Round CallRange PlanOptions WindowShape Choice choose register available "
    "get",
    "testing": "ScriptedOpenAIServer ScriptedBackend ChatRequest Reply Fault sequence "
    "oracle_responder noisy_responder first_token_responder grade best_first SimulatedJudge "
    "JudgeParams REGIMES hidden_keys recording_spans BackendOpenAIServer AnswerStore StoredBackend "
    "AnswerMissingError fingerprint",
    "tracing": "reported_top_n",
}


def _declared(path: Path) -> list[str] | None:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                assert node.value is not None
                return list(ast.literal_eval(node.value))
    return None


def test_every_public_module_is_pinned() -> None:
    root = Path(permsc_integrations.__file__).parent
    found = set()
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__main__" or any(p.startswith("_") and p != "__init__" for p in parts):
            continue
        name = ".".join(p for p in parts if p != "__init__")
        if name:
            found.add(name)
            assert _declared(path) is not None, f"{name} declares no __all__"
    assert found - set(PUBLIC) == set()
    assert set(PUBLIC) <= found


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_each_public_package_pins_its_all(module: str) -> None:
    imported = importlib.import_module(f"permsc_integrations.{module}")
    assert sorted(imported.__all__) == sorted(PUBLIC[module].split())
    assert len(set(imported.__all__)) == len(imported.__all__)
    for name in imported.__all__:
        try:
            assert getattr(imported, name) is not None, f"{module}.{name}"
        except errors.MissingDependencyError as missing:  # a name behind an extra not installed
            assert "pip install" in str(missing), f"{module}.{name}"


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
    err = errors.MissingDependencyError("uvicorn", "serve", purpose="the service")
    assert "pip install 'permsc-integrations[serve]'" in str(err)
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
        "haystack",
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


def test_a_ranker_keeps_its_parts_private() -> None:
    from permsc_integrations.testing import ScriptedBackend

    ranker = permsc_integrations.PSCRanker(ScriptedBackend())
    public = {name for name in vars(ranker) if not name.startswith("_")}
    assert public == {"options", "backend", "on_event"}
    with pytest.raises(errors.ConfigurationError, match="has no attribute 'engine'"):
        ranker.engine = None  # type: ignore[attr-defined]
