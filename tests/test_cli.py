"""The ``permsc`` command line against a real loopback OpenAI-compatible server."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from permsc_integrations._options.options import RankingOptions
from permsc_integrations.cli import main
from permsc_integrations.cli._common import load_queries
from permsc_integrations.cli._rank import planned_samples
from permsc_integrations.errors import MissingDependencyError
from permsc_integrations.testing import grade, oracle_responder

pytest.importorskip("openai")


def query_line(qid: str, grades: list[int]) -> dict:
    return {
        "qid": qid,
        "query": f"goldfish question {qid}",
        "candidates": [
            {"docid": f"{qid}-d{k}", "text": f"passage about goldfish, grade {g}"}
            for k, g in enumerate(grades)
        ],
    }


GRADES = {"q1": [3, 9, 1, 7, 5], "q2": [2, 8, 6, 4], "q3": [10, 0, 5]}


@pytest.fixture
def queries(tmp_path: Path) -> Path:
    path = tmp_path / "queries.jsonl"
    path.write_text("".join(json.dumps(query_line(q, g)) + "\n" for q, g in GRADES.items()))
    return path


@pytest.fixture
def oracle(scripted_server):
    return scripted_server(oracle_responder(grade))


@pytest.fixture(autouse=True)
def no_openai_env(monkeypatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)


def remote(server, *extra: str) -> list[str]:
    return ["--backend", "openai:scripted", "--base-url", server.base_url, *extra]


def true_order(qid: str) -> list[str]:
    grades = GRADES[qid]
    return [f"{qid}-d{k}" for k in sorted(range(len(grades)), key=lambda k: -grades[k])]


def test_rank_writes_jsonl_in_input_order_with_the_true_ranking(queries, oracle, tmp_path, capsys):
    out = tmp_path / "ranked.jsonl"
    code = main(["rank", "--input", str(queries), "--output", str(out), "-m", "4", *remote(oracle)])
    assert code == 0, capsys.readouterr().err
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["qid"] for r in records] == list(GRADES)
    for record in records:
        assert [e["docid"] for e in record["ranking"]] == true_order(record["qid"])
        assert [e["rank"] for e in record["ranking"]] == list(range(1, len(record["ranking"]) + 1))
        scores = [e["score"] for e in record["ranking"]]
        assert scores == sorted(scores, reverse=True) and len(set(scores)) == len(scores)
        assert record["samples"] == 4 and record["failed_samples"] == 0
        assert record["usage"]["calls"] == 4 and record["confidence"] == 1.0
    assert oracle.request_count == 3 * 4
    assert capsys.readouterr().err == ""  # no progress bar when stderr is not a terminal


def test_trec_format(queries, oracle, tmp_path):
    out = tmp_path / "run.txt"
    code = main(
        [
            "rank",
            "-i",
            str(queries),
            "-o",
            str(out),
            "-m",
            "2",
            "--format",
            "trec",
            "--tag",
            "mytag",
            *remote(oracle),
        ]
    )
    assert code == 0
    rows = [line.split(" ") for line in out.read_text().splitlines()]
    assert len(rows) == sum(len(g) for g in GRADES.values())
    assert all(len(r) == 6 and r[1] == "Q0" and r[5] == "mytag" for r in rows)
    for qid in GRADES:
        mine = [r for r in rows if r[0] == qid]
        assert [r[2] for r in mine] == true_order(qid)
        assert [int(r[3]) for r in mine] == list(range(1, len(mine) + 1))
        assert [float(r[4]) for r in mine] == sorted((float(r[4]) for r in mine), reverse=True)


def test_plain_query_items_lines_and_stdout(tmp_path, oracle, capsys):
    path = tmp_path / "plain.jsonl"
    items = ["grade 1 text", "grade 4 text", "grade 2 text"]
    path.write_text(json.dumps({"query": "q", "items": items}) + "\n")
    assert main(["rank", "--input", str(path), "-m", "3", *remote(oracle)]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["qid"] == "1"  # the line number when the line has no id
    assert record["items"] == ["grade 4 text", "grade 2 text", "grade 1 text"]
    assert record["order"] == [1, 2, 0]


def test_bad_lines_are_reported_skipped_and_fail_the_run_at_the_end(tmp_path, oracle, capsys):
    path = tmp_path / "mixed.jsonl"
    lines = [
        json.dumps(query_line("q1", GRADES["q1"])),
        "{not json",
        json.dumps({"query": "x"}),
        "",
        json.dumps(query_line("q3", GRADES["q3"])),
    ]
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "ranked.jsonl"
    code = main(["rank", "-i", str(path), "-o", str(out), "-m", "2", *remote(oracle)])
    err = capsys.readouterr().err
    assert code == 2
    assert "line 2: invalid JSON" in err and "line 3: expected 'candidates'" in err
    assert "Traceback" not in err
    assert [json.loads(x)["qid"] for x in out.read_text().splitlines()] == ["q1", "q3"]


def test_a_failing_query_loses_nothing_else(tmp_path, scripted_server, capsys):
    def responder(request):  # answers garbage for q2 only
        return "no idea" if "question q2" in request.text else oracle_responder(grade)(request)

    server = scripted_server(responder)
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps(query_line(q, g)) + "\n" for q, g in GRADES.items()))
    out = tmp_path / "ranked.jsonl"
    code = main(["rank", "-i", str(path), "-o", str(out), "-m", "2", *remote(server)])
    err = capsys.readouterr().err
    assert code == 2
    assert "query q2 failed" in err and len(err.strip().splitlines()) == 2
    assert [json.loads(x)["qid"] for x in out.read_text().splitlines()] == ["q1", "q3"]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--input", "/no/such/queries.jsonl"], "input file not found: /no/such/queries.jsonl"),
        (["--backend", "nosuch:model"], "unknown backend 'nosuch'; available: embedded, llamacpp"),
        (["--aggregator", "nosuch"], "unknown aggregator 'nosuch'; available: borda"),
    ],
)
def test_clear_one_line_errors(queries, argv, expected, tmp_path, capsys):
    base = [
        "rank",
        "--input",
        str(queries),
        "-o",
        str(tmp_path / "o.jsonl"),
        "--backend",
        "openai:m",
        "--base-url",
        "http://127.0.0.1:9/v1",
    ]
    assert main(base + argv) == 2
    err = capsys.readouterr().err
    assert expected in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_missing_extra_names_the_install_line(queries, capsys):
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("llama-cpp-python is installed")
    assert main(["rank", "--input", str(queries), "--backend", "llamacpp:/m.gguf"]) == 2
    assert "pip install 'permsc-integrations[llamacpp]'" in capsys.readouterr().err


def test_without_the_embedded_model_the_whole_install_command_is_printed(
    queries, capsys, monkeypatch
):
    """With no OpenAI settings the CLI falls back to the embedded model; from the wheels its
    packages are absent, and the one error line ends with the command that installs them
    (it used to point at scripts/embedded-models.txt, cut mid-path at 400 characters)."""
    import dataclasses

    from permsc_integrations.backends.local._model_store import EMBEDDED_MODELS, default_model

    for variable in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(variable, raising=False)
    name = default_model()
    missing = dataclasses.replace(EMBEDDED_MODELS[name], parts=(("no-such-part-xyz", "x"),))
    monkeypatch.setitem(EMBEDDED_MODELS, name, missing)
    assert main(["rank", "--input", str(queries), "-m", "2"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.endswith("install it with: pip install 'permsc-integrations[embedded]'"), line
    # what is missing first: torch (a core-only install: refused as the backend is built) or,
    # with torch there, the model's own packages
    assert "no-such-part-xyz" in line or "torch is not installed" in line, line
    assert "scripts/" not in line


def test_cache_makes_a_second_run_free(queries, oracle, tmp_path):
    cache = tmp_path / "cache.sqlite"
    args = [
        "rank",
        "-i",
        str(queries),
        "-o",
        str(tmp_path / "a.jsonl"),
        "-m",
        "3",
        "--cache",
        str(cache),
        *remote(oracle),
    ]
    assert main(args) == 0
    first = oracle.request_count
    assert main(args) == 0
    assert oracle.request_count == first
    records = [json.loads(x) for x in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert all(r["usage"]["cached_calls"] == 3 for r in records)


def test_installed_console_script(queries, oracle, tmp_path):
    script = Path(sys.executable).with_name("permsc")
    if not script.exists():
        pytest.skip("the permsc console script is not installed in this environment")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    done = subprocess.run(
        [str(script), "rank", "-i", str(queries), "--format", "trec", "-m", "2", *remote(oracle)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].split()[:4] == ["q1", "Q0", true_order("q1")[0], "1"]
    missing = subprocess.run(
        [str(script), "estimate", "-i", str(tmp_path / "none.jsonl")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert (
        missing.stderr.strip() == f"permsc: error: input file not found: {tmp_path / 'none.jsonl'}"
    )


def big_input(tmp_path: Path) -> tuple[Path, list[dict]]:
    """Lists of 100 and 250 passages: the strategies' calls differ on both."""
    path = tmp_path / "big.jsonl"
    rows = [query_line("a", [k % 11 for k in range(100)]), query_line("b", list(range(250)))]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, rows


def test_estimate_asks_the_strategy_without_any_call(tmp_path, capsys):
    path, rows = big_input(tmp_path)
    assert main(["estimate", "-i", str(path), "-m", "5", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    # blocks, window 20: 100 items: 5 blocks x m, then a window x m (2 rounds, 30 calls);
    # 250 items: screening 5 shuffles x 13 blocks, 5 blocks x m, a window x m (3, 95)
    assert got["strategy"] == "blocks" and got["rounds"] == 5
    assert got["calls"] == got["min_calls"] == 30 + 95 and got["calls_exact"] is True
    assert got["queries"] == 2 and got["items"] == 350 and got["bad_lines"] == 0
    chars = sum(len(c["text"]) for r in rows for c in r["candidates"])
    assert got["prompt_tokens"] > 5 * chars / 4  # every passage is shown m times at least once
    assert main(["estimate", "-i", str(path), "-m", "5", "--strategy", "sliding", "--json"]) == 0
    sliding = json.loads(capsys.readouterr().out)
    # 9 and 24 windows of 20 moving by 10, m calls each
    assert (sliding["rounds"], sliding["calls"]) == (9 + 24, 5 * (9 + 24))


def test_estimate_gives_a_range_under_adaptive_m(tmp_path, capsys):
    path, _ = big_input(tmp_path)
    assert main(["estimate", "-i", str(path), "-m", "8", "--adaptive", "4,2"]) == 0
    out = capsys.readouterr().out
    # m = 8 at the most: 8 * 5 + 8 and 5 * 13 + 8 * 5 + 8; the first wave (4 shuffles) at least
    # (the screening round: 4 of its 5 shuffles)
    assert f"calls:             {4 * 5 + 4 + 4 * 13 + 4 * 5 + 4}..{48 + 113} (m=8;" in out
    assert "exact" not in out


def test_a_token_budget_is_each_querys_calls_in_estimate_and_rank(oracle, tmp_path, capsys):
    """--max-total-tokens: estimate plans each query within it (the frontier, at the calls
    whose tokens fit, characters / 4), and rank spends it at the rate the server reports
    (a word a token here, fewer than the estimate: more calls), within the budget."""
    path, _ = big_input(tmp_path)
    budget = ["-m", "5", "--max-total-tokens", "6000"]
    assert main(["estimate", "-i", str(path), *budget, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["strategy"] == "frontier" and 2 <= got["calls"] < 30 + 95
    assert got["prompt_tokens"] + got["completion_tokens"] <= 2 * 6000
    out = tmp_path / "ranked.jsonl"
    args = ["rank", "-i", str(path), "-o", str(out), *budget, "--no-progress"]
    assert main([*args, *remote(oracle)]) == 0, capsys.readouterr().err
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sum(r["usage"]["calls"] for r in records) == oracle.request_count > got["calls"]
    used = [r["usage"]["prompt_tokens"] + r["usage"]["completion_tokens"] for r in records]
    assert max(used) <= 6000
    assert [len({d["docid"] for d in r["ranking"]}) for r in records] == [100, 250]


def test_step_equal_to_the_window_works_with_blocks(oracle, tmp_path, capsys):
    """Blocks read no step: --step 20 with the default window is accepted by rank and estimate
    (both crashed: the sliding planner refused it), and rank's progress total is the calls
    its queries make."""
    path, _ = big_input(tmp_path)
    assert main(["estimate", "-i", str(path), "-m", "2", "--step", "20", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["calls"] == 12 + 38
    out = tmp_path / "ranked.jsonl"
    args = ["rank", "-i", str(path), "-o", str(out), "-m", "2", "--step", "20", "--no-progress"]
    assert main([*args, *remote(oracle)]) == 0, capsys.readouterr().err
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["usage"]["calls"] for r in records] == [12, 38] and oracle.request_count == 50
    assert records[1]["ranking"][0]["docid"] == "b-d249"  # the highest grade
    options = RankingOptions(num_permutations=2, step=20)
    assert planned_samples(load_queries(str(path))[0], options) == 50
    assert main(["estimate", "-i", str(path), "--step", "20", "--strategy", "sliding"]) == 2
    assert "step must be in 1..window_size-1" in capsys.readouterr().err


def test_demo_against_the_scripted_server(oracle, capsys):
    assert main(["demo", "-m", "4", *remote(oracle)]) == 0
    out = capsys.readouterr().out
    assert "Original order:" in out and "Aggregated ranking:" in out
    assert "Samples parsed: 4 of 4 (4 full, 0 partial); 0 failed" in out
    assert len(re.findall(r"^\s+\d+\. \[ok", out, re.M)) == 4


def test_the_demo_counts_the_prompts_a_batching_model_answered(oracle, capsys):
    """A local model answers the m = 6 prompts in one batch: the demo said "Calls: 1"; a call
    is a prompt the model answered, batched or not, as for a served model."""
    from permsc_integrations.backends import register
    from permsc_integrations.testing import ScriptedBackend

    class Batching(ScriptedBackend):  # a BatchBackend: the engine sends it a window at once
        batches = 0

        async def acomplete_batch(self, batch, settings):
            Batching.batches += 1
            return [await self.acomplete(messages, settings) for messages in batch]

    register("test-batching", lambda model=None, **options: Batching(oracle_responder(grade)))
    assert main(["demo", "--backend", "test-batching:m"]) == 0
    out, err = capsys.readouterr()
    assert "m=6 permutations" in out and Batching.batches == 1 and "in one batch" in err
    assert "Model calls: 6 in 1 batch, prompt tokens" in out, out
    assert main(["demo", *remote(oracle)]) == 0
    out, err = capsys.readouterr()
    assert "Model calls: 6, prompt tokens" in out and "batch" not in err


def test_demo_scores_first_tokens_at_its_own_default_m(scripted_server, capsys):
    """The demo's ranking flags come from the declaration (``--scoring`` among them); its
    one own default, m = 6, is used and shown in its help."""
    from permsc_integrations.cli._demo import demo_query
    from permsc_integrations.testing import first_token_responder

    query = demo_query()
    wanted = ["d2", "d4", "d5"]  # the goldfish passages, most relevant first

    def relevance(text: str) -> float:
        docid = query.docids[query.texts.index(text)]
        return 3.0 - wanted.index(docid) if docid in wanted else 0.0

    server = scripted_server(first_token_responder(relevance, sharpness=2.0))
    assert main(["demo", "--scoring", "first_token", *remote(server)]) == 0
    out = capsys.readouterr().out
    assert "m=6 permutations" in out and server.request_count == 6
    assert all(request.body.get("max_tokens") == 1 for request in server.requests)
    ranked = re.findall(r"^\s+\d+\. (d\d+)  ", out.split("Aggregated ranking:")[1], re.M)
    assert ranked[:3] == wanted
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    assert "(default: 6)" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_demo_on_the_small_embedded_model(capsys):
    pytest.importorskip("transformers")
    assert main(["demo", "-m", "2", "--backend", "embedded:smollm2-135m"]) == 0
    out = capsys.readouterr().out
    assert "Backend: embedded:smollm2-135m" in out
    assert re.search(r"Samples parsed: \d of 2", out)
    assert "ranks poorly" in out


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_default_demo_ranks_with_the_model_that_can(capsys, monkeypatch):
    """The README's main job: no key, no URL -> the embedded 1.5B model, and it ranks."""
    pytest.importorskip("transformers")
    from permsc_integrations.backends.local._model_store import EMBEDDED_MODELS, part_files

    try:
        part_files(EMBEDDED_MODELS["qwen2.5-coder-1.5b"])
    except MissingDependencyError:
        pytest.skip("the qwen2.5-coder-1.5b parts are not installed")
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    assert main(["demo", "-m", "3"]) == 0
    out = capsys.readouterr().out
    assert "Backend: embedded:qwen2.5-coder-1.5b" in out
    assert "Samples parsed: 3 of 3" in out
    best = re.search(r"Aggregated ranking:\n\s+1\. (d\d)", out).group(1)
    assert best in {"d2", "d4", "d7"}, out  # a passage that says how long goldfish live


def test_no_command_prints_help_and_fails(capsys):
    assert main([]) == 2
    err = capsys.readouterr().err
    assert "rank" in err and "demo" in err and "estimate" in err


def test_max_calls_bounds_estimate_and_rank(oracle, tmp_path, capsys):
    path, _ = big_input(tmp_path)
    assert main(["estimate", "-i", str(path), "--max-calls", "12", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    # each query: the frontier's four rounds within 12 calls (100 items: 5, 3, 2, 2; 250: the
    # first 160 items in 8 blocks, then 2, 1, 1)
    assert (got["calls"], got["min_calls"], got["rounds"]) == (24, 24, 8)
    assert main(["estimate", "-i", str(path), "--max-calls", "12"]) == 0
    assert "calls:             24 (m=20, max_calls=12: at most;" in capsys.readouterr().out
    out = tmp_path / "ranked.jsonl"
    args = ["rank", "-i", str(path), "-o", str(out), "--max-calls", "12", "--no-progress"]
    assert main([*args, *remote(oracle)]) == 0, capsys.readouterr().err
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["usage"]["calls"] for r in records] == [12, 12] and oracle.request_count == 24
    assert [(r["head"], r["stopped"]) for r in records] == [(100, "budget"), (160, "budget")]
    chances = [entry["top_probability"] for entry in records[1]["ranking"]]
    looked_at = [p for p in chances if p is not None]  # the 90 items never shown: None
    assert sum(looked_at) == pytest.approx(10, abs=0.05) and chances[160:] == [None] * 90
    assert [entry["docid"] for entry in records[1]["ranking"][160:]] == [
        f"b-d{k}"
        for k in range(160, 250)  # the tail in input order
    ]
    assert main(["estimate", "-i", str(path), "--max-calls", "0"]) == 2
    assert "max_calls must be an int >= 1" in capsys.readouterr().err


def test_estimate_names_the_strategy_the_chooser_picks(tmp_path, capsys):
    """Under a --max-calls below the blocks plan, rank runs the frontier (strategies.choose):
    estimate says so, per query where the lists differ (a one-window list stays blocks)."""
    path, _ = big_input(tmp_path)
    assert main(["estimate", "-i", str(path), "--max-calls", "12", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["strategy"] == "frontier"
    assert main(["estimate", "-i", str(path), "--max-calls", "12"]) == 0
    assert "strategy:          frontier\n" in capsys.readouterr().out
    assert main(["estimate", "-i", str(path), "--json"]) == 0  # within budget: blocks
    assert json.loads(capsys.readouterr().out)["strategy"] == "blocks"
    mixed = tmp_path / "mixed.jsonl"
    rows = [query_line("a", list(range(250))), query_line("b", list(range(10)))]
    mixed.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["estimate", "-i", str(mixed), "--max-calls", "12", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["strategy"] == "frontier (1 query), blocks (1 query)"


@pytest.mark.parametrize("answer", ["500", "prose"])
def test_an_outage_under_max_calls_exits_2_not_a_ranking(scripted_server, tmp_path, capsys, answer):
    from permsc_integrations.testing import Fault

    server = scripted_server(
        (lambda request: Fault.status(500)) if answer == "500" else (lambda request: "no idea")
    )
    path, _ = big_input(tmp_path)
    out = tmp_path / "ranked.jsonl"
    args = ["rank", "-i", str(path), "-o", str(out), "-m", "2", "--max-calls", "2"]
    code = main([*args, "--no-progress", *remote(server)])
    err = capsys.readouterr().err
    assert code == 2, err  # every query failed: no ranking in input order passed off as one
    assert "ranked 0 of 2 queries" in err and not out.read_text().strip()
