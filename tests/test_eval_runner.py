"""The eval runner and `permsc eval`, with an in-process backend and the scripted server."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from permsc_integrations.backends.base import Completion, GenerationSettings, Message
from permsc_integrations.eval import generate_mathsort
from permsc_integrations.eval._datasets import SortingExample
from permsc_integrations.eval._runner import evaluate_sorting, score_sorting

pytestmark = pytest.mark.timeout(120)


def _shown(content: str) -> list[str]:
    """The expressions of a MathSort prompt, in prompt order."""
    listed = content.split("smallest to largest: ", 1)[1].split(".\nThe output", 1)[0]
    return listed.split(", ")


def _primacy_answer(content: str) -> str:
    """Sorts by value, except the first expression shown always comes first."""
    shown = _shown(content)
    rest = sorted(shown[1:], key=lambda e: eval(e))  # noqa: S307 (digits from our generator)
    return ", ".join([shown[0], *rest])


class PrimacySorter:
    """A real in-process Backend with a known position bias; counts its calls."""

    name = "primacy-sorter"

    def __init__(self) -> None:
        self.calls = 0

    async def acomplete(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> Completion:
        self.calls += 1
        return Completion(text=_primacy_answer(messages[-1]["content"]))

    async def aclose(self) -> None:
        pass


def test_psc_beats_single_runs_on_a_position_biased_model() -> None:
    backend = PrimacySorter()
    progress: list[tuple[int, int]] = []
    report = evaluate_sorting(
        generate_mathsort(6, seed=2),
        backend,
        m=10,
        m_sweep=(1, 5, 10),
        progress=lambda done, total: progress.append((done, total)),
    )
    assert backend.calls == 60 and progress[-1] == (6, 6) and len(progress) == 6
    assert len(report.singles) == 10 and report.n_lists == 6
    assert report.single_max < 1.0  # every single run is hurt by the bias
    for method in ("kemeny", "borda", "rrf", "copeland"):
        assert report.mean(method) > report.single_max
    assert report.mean("kemeny") == 1.0  # the bias cancels out over shuffles
    assert report.sweep[1]["kemeny"] == pytest.approx(report.single_means[0])
    assert report.sweep[10]["kemeny"] == report.mean("kemeny")
    assert report.p_value("kemeny") < 0.05
    assert report.stats["answers"] == {"ok": 60}
    table = report.to_markdown()
    assert "| kemeny | 1.000 |" in table and "single (median of runs)" in table
    data = json.loads(json.dumps(report.to_dict()))
    assert data["methods"]["kemeny"]["per_list"] == [1.0] * 6


def test_failed_and_partial_answers_are_scored_not_dropped() -> None:
    example = SortingExample("t", ("a", "b", "c"), (1, 2, 3), "wordsort")
    from permsc_integrations.eval._runner import ListSamples

    lists = [ListSamples(example, ((0, 1, 2), (2, 1, 0)), ((0, 1, 2), ()), ("ok", "invalid"))]
    report = score_sorting(lists, aggregators=("borda",))
    assert report.single_means == (1.0, 0.0)  # the failed run scores like chance
    assert report.mean("borda") == 1.0 and report.stats["answers"] == {"invalid": 1, "ok": 1}


def test_cli_eval_against_the_scripted_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("openai")
    from permsc_integrations.cli import main
    from permsc_integrations.testing import ScriptedOpenAIServer

    monkeypatch.setenv("OPENAI_API_KEY", "test")
    with ScriptedOpenAIServer(
        lambda request: _primacy_answer(request.messages[-1]["content"])
    ) as server:
        status = main(
            [
                "eval",
                "mathsort",
                "--generate",
                "4",
                "-m",
                "6",
                "--backend",
                "openai:scripted",
                "--base-url",
                server.base_url,
                "--aggregators",
                "kemeny,borda",
                "--m-sweep",
                "1,6",
                "--json",
                str(tmp_path / "r.json"),
                "--markdown",
                str(tmp_path / "r.md"),
                "--bias-map",
                str(tmp_path / "bias.png"),
                "--no-progress",
            ]
        )
        assert status == 0 and server.request_count == 24
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["methods"]["kemeny"]["mean"] > result["single"]["median"]
    assert result["single"]["max"] < 1.0
    assert "| kemeny |" in (tmp_path / "r.md").read_text()
    rows = (tmp_path / "bias.csv").read_text().splitlines()
    assert rows[1].startswith("1,2,0,")  # prompt position 1 is never overtaken: the primacy bias
    assert (tmp_path / "bias.png").stat().st_size > 1000


def test_cli_offline_runs(tmp_path: Path) -> None:
    from permsc_integrations.cli import main

    (tmp_path / "q.txt").write_text("q 0 a 3\nq 0 b 0\nq 0 c 1\n")
    for name, order in (("r1", "abc"), ("r2", "bac"), ("r3", "acb")):
        (tmp_path / f"{name}.txt").write_text(
            "".join(f"q Q0 {d} {k} {3 - k} t\n" for k, d in enumerate(order, 1))
        )
    runs = [str(tmp_path / f"r{k}.txt") for k in (1, 2, 3)]
    status = main(
        [
            "eval",
            "--runs",
            *runs,
            "--qrels",
            str(tmp_path / "q.txt"),
            "--aggregators",
            "borda",
            "--json",
            str(tmp_path / "o.json"),
            "--write-runs",
            str(tmp_path / "out"),
            "--no-progress",
        ]
    )
    assert status == 0
    assert json.loads((tmp_path / "o.json").read_text())["methods"]["borda"]["per_list"][0] > 0.9
    assert (tmp_path / "out" / "borda.txt").read_text().splitlines()[0] == "q Q0 a 1 3 borda"
    assert main(["eval", "--runs", runs[0], runs[1]]) == 2  # no --qrels: a clean error


TREC = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "trec-dl"


@pytest.mark.skipif(not (TREC / "normalized").is_dir(), reason="trec-dl data absent")
def test_cli_trec_psc_against_the_scripted_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The paper's DL19 set-up end to end (3 queries, top-30, m=5) with an oracle model."""
    pytest.importorskip("openai")
    from permsc_integrations.cli import main
    from permsc_integrations.eval._runner import score_runs
    from permsc_integrations.eval._trec import read_candidates, read_qrels, read_run
    from permsc_integrations.testing import ScriptedOpenAIServer, oracle_responder

    candidates = TREC / "normalized" / "dl19.bm25.top100.jsonl"
    qrels = read_qrels(TREC / "qrels" / "qrels.dl19-passage.txt")
    queries = read_candidates(candidates, depth=30)[:3]
    grade = {
        " ".join(c.text.split()[:300]): qrels[q.qid].get(c.docid, 0)
        for q in queries
        for c in q.candidates
    }
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    with ScriptedOpenAIServer(
        oracle_responder(lambda text: grade.get(" ".join(text.split()), 0))
    ) as server:
        status = main(
            [
                "eval",
                "trec",
                "--candidates",
                str(candidates),
                "--qrels",
                str(TREC / "qrels" / "qrels.dl19-passage.txt"),
                "--limit",
                "3",
                "--depth",
                "30",
                "-m",
                "5",
                "--aggregators",
                "kemeny",
                "--backend",
                "openai:scripted",
                "--base-url",
                server.base_url,
                "--json",
                str(tmp_path / "t.json"),
                "--write-runs",
                str(tmp_path / "runs"),
                "--no-progress",
            ]
        )
        assert status == 0 and server.request_count == 3 * 2 * (
            1 + 5
        )  # 2 windows, 1 + m calls each
    result = json.loads((tmp_path / "t.json").read_text())
    ideal = {
        q.qid: sorted((c.docid for c in q.candidates), key=lambda d: -qrels[q.qid].get(d, 0))
        for q in queries
    }
    best = score_runs({"ideal": ideal}, {q.qid: qrels[q.qid] for q in queries})["ideal"]
    assert result["methods"]["psc-kemeny"]["per_list"] == pytest.approx(list(best))
    assert result["single"]["runs"][0] == pytest.approx(sum(best) / 3)
    assert result["methods"]["first-stage"]["mean"] < result["methods"]["psc-kemeny"]["mean"]
    assert set(read_run(tmp_path / "runs" / "psc-kemeny.txt")) == {q.qid for q in queries}


def test_cli_rejects_an_unknown_aggregator_before_any_call() -> None:
    from permsc_integrations.cli import main

    assert main(["eval", "mathsort", "--aggregators", "kemeny,nope", "--backend", "embedded"]) == 2


def _eval(server_url: str, tmp_path: Path, *extra: str) -> int:
    from permsc_integrations.cli import main

    return main(
        [
            "eval",
            "mathsort",
            "--generate",
            "4",
            "-m",
            "3",
            "--backend",
            "openai:scripted",
            "--base-url",
            server_url,
            "--aggregators",
            "kemeny,borda",
            "--no-progress",
            *extra,
        ]
    )


def test_samples_are_saved_resumed_and_rescored_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("openai")
    from permsc_integrations.eval._samples import read_samples
    from permsc_integrations.testing import ScriptedOpenAIServer

    monkeypatch.setenv("OPENAI_API_KEY", "test")
    samples, live, offline = tmp_path / "s.jsonl", tmp_path / "live.json", tmp_path / "off.json"
    with ScriptedOpenAIServer(
        lambda request: _primacy_answer(request.messages[-1]["content"])
    ) as server:
        # --resume on a file that does not exist yet starts it: one command for every session
        args = ("--samples", str(samples), "--resume", "--json", str(live))
        assert _eval(server.base_url, tmp_path, *args) == 0
        assert server.request_count == 12
        header, lists = read_samples(samples)
        assert header["m"] == 3 and len(lists) == 4
        assert all(len(s.raw_texts) == 3 and all(s.raw_texts) for s in lists.values())
        # a crash: the last list half written, then --resume asks again only for that list
        lines = samples.read_text().splitlines(keepends=True)
        samples.write_text("".join(lines[:-2]) + lines[-2][:25])
        server.reset()
        args = ("--samples", str(samples), "--resume", "--json", str(tmp_path / "again.json"))
        assert _eval(server.base_url, tmp_path, *args) == 0
        assert server.request_count == 3
        assert len(read_samples(samples)[1]) == 4
        # another configuration refuses to resume the file
        assert (
            _eval(server.base_url, tmp_path, "--samples", str(samples), "--resume", "--seed", "9")
            == 2
        )
        assert _eval(server.base_url, tmp_path, "--samples", str(samples)) == 2  # no overwrite
    from permsc_integrations.cli import main

    assert (
        main(
            [
                "eval",
                "--from-samples",
                str(samples),
                "--aggregators",
                "kemeny,borda",
                "--json",
                str(offline),
            ]
        )
        == 0
    )
    scores = [json.loads(p.read_text()) for p in (live, tmp_path / "again.json", offline)]
    assert scores[0]["methods"] == scores[1]["methods"] == scores[2]["methods"]
    assert scores[0]["single"] == scores[2]["single"]


def test_passage_samples_one_window_per_query_resume_and_rescore(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DL19-style: every answer saved, the first in first-stage order; resumable; re-scored
    offline against the qrels exactly as live."""
    pytest.importorskip("openai")
    from permsc_integrations.cli import main
    from permsc_integrations.eval._samples import read_samples
    from permsc_integrations.testing import ScriptedOpenAIServer, oracle_responder

    monkeypatch.setenv("OPENAI_API_KEY", "test")
    lines, qrels = [], []
    for q in range(3):
        cands = [{"docid": f"q{q}d{j}", "text": f"passage {j} " + "fish " * j} for j in range(6)]
        lines.append(json.dumps({"qid": f"q{q}", "query": "fish?", "candidates": cands}))
        qrels += [f"q{q} 0 q{q}d5 3", f"q{q} 0 q{q}d4 2", f"q{q} 0 q{q}d0 0"]
    (tmp_path / "c.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "qrels.txt").write_text("\n".join(qrels) + "\n")
    samples = tmp_path / "s.jsonl"
    args = [
        "eval",
        "trec",
        "--candidates",
        str(tmp_path / "c.jsonl"),
        "--qrels",
        str(tmp_path / "qrels.txt"),
        "--depth",
        "6",
        "-m",
        "4",
        "--backend",
        "openai:scripted",
        "--aggregators",
        "kemeny,borda",
        "--no-progress",
        "--samples",
        str(samples),
    ]
    with ScriptedOpenAIServer(oracle_responder(lambda t: t.count("fish"))) as server:
        live = tmp_path / "live.json"
        assert (
            main([*args, "--base-url", server.base_url, "--limit", "2", "--json", str(live)]) == 0
        )
        assert server.request_count == 8
        header, lists = read_samples(samples)
        first = lists["q0"]
        assert first.query == "fish?" and first.permutations[0] == tuple(range(6))
        server.reset()
        again = [
            *args,
            "--base-url",
            server.base_url,
            "--resume",
            "--json",
            str(tmp_path / "a.json"),
        ]
        assert main(again) == 0 and server.request_count == 4  # only q2 was asked
    offline = tmp_path / "off.json"
    assert (
        main(
            [
                "eval",
                "--from-samples",
                str(samples),
                "--qrels",
                str(tmp_path / "qrels.txt"),
                "--aggregators",
                "kemeny,borda",
                "--json",
                str(offline),
            ]
        )
        == 0
    )
    again_scores, off_scores = (json.loads(p.read_text()) for p in (tmp_path / "a.json", offline))
    assert again_scores["methods"] == off_scores["methods"]
    assert off_scores["methods"]["kemeny"]["mean"] == pytest.approx(1.0)  # the oracle ranks
    assert off_scores["methods"]["first-stage"]["mean"] < 1.0
