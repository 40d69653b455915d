"""`permsc eval`'s flags: the ranking ones come from the one declaration, and every command of
docs/reproduction.md parses to the settings its long, resumable runs were started with."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest

from permsc_integrations._options.options import RankingOptions
from permsc_integrations.cli import build_parser
from permsc_integrations.cli._eval import RANKING_FLAGS, compared, load_dataset, sorting_config
from permsc_integrations.cli._eval_output import samples_log
from permsc_integrations.cli._eval_trec import passages_config
from permsc_integrations.errors import ConfigurationError

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
PERM_SC = ROOT / ".." / "shared" / "data" / "perm-sc"


def _substituted(line: str, names: dict[str, str]) -> str:
    return re.sub(r"\$(\w+)", lambda m: names[m[1]], line)


def _expanded(block: str) -> list[list[str]]:
    """The ``permsc eval`` command lines of one shell block, with its variables and its
    ``for`` loop expanded, each as argv after ``permsc``."""
    found: list[list[str]] = []
    variables: dict[str, str] = {}
    loop: tuple[str, list[str]] | None = None
    for raw in re.sub(r"\\\n\s*", " ", block).splitlines():
        line = raw.strip()
        if not line.startswith("permsc"):
            line = line.split("#")[0].strip()
        if assign := re.fullmatch(r"(\w+)=(\S+)", line):
            variables[assign[1]] = assign[2]
        elif start := re.fullmatch(r"for (\w+) in ([^;]+); do", line):
            loop = (start[1], start[2].split())
        elif line == "done":
            loop = None
        elif line.startswith("permsc eval"):
            for value in loop[1] if loop else [""]:
                names = {**variables, **({loop[0]: value} if loop else {})}
                found.append(shlex.split(_substituted(line, names))[1:])
    return found


def documented() -> list[list[str]]:
    """Every ``permsc eval`` command in docs/reproduction.md's code blocks, in order."""
    text = (ROOT / "docs" / "reproduction.md").read_text(encoding="utf-8")
    return [
        argv for block in re.findall(r"```\w*\n(.*?)```", text, re.S) for argv in _expanded(block)
    ]


def parse(argv: list[str]) -> argparse.Namespace:
    """The command's settings as its run reads them (``--aggregators`` left out: the
    evaluation's own, resolved when it runs)."""
    args = build_parser().parse_args(argv)
    if args.command == "eval":
        args.aggregators = compared(args)
    return args


# What each documented command means: every setting a run or its --resume depends on. The
# values left out of a command are the ones its saved samples were collected with (the
# headers of docs/results/*.samples.jsonl), so a default moving under them fails here.
DEFAULTS: dict[str, Any] = {
    "task": None,
    "num_permutations": 20,
    "temperature": [0.0],
    "seed": 0,
    "max_concurrency": 32,
    "max_words": 300,
    "window_size": 20,
    "step": 10,
    "scoring": "generate",
    "aggregators": "kemeny,rrf,borda,copeland",
    "m_sweep": None,
    "depth": 100,
    "limit": None,
    "generate": None,
    "samples": None,
    "resume": False,
    "from_samples": None,
    "backend": None,
    "timeout": None,
    "max_tokens": None,
}
QWEN = "embedded:qwen2.5-coder-1.5b"
ALL4 = "kemeny,borda,copeland,rrf"
FT4 = "kemeny,borda,mean_probability,mean_log_probability"
FT_TREC = {
    "task": "trec",
    "depth": 20,
    "max_words": 64,
    "backend": QWEN,
    "scoring": "first_token",
    "aggregators": "kemeny,borda",
    "resume": True,
    "samples": "docs/results/dl19-ft-w20.samples.jsonl",
}
EXPECTED: list[dict[str, Any]] = [
    {},  # --runs: offline
    {"task": "wordsort", "limit": 100, "backend": QWEN, "m_sweep": "1,2,5,10,20"}
    | {"aggregators": ALL4, "samples": "docs/results/wordsort-qwen.samples.jsonl", "resume": True},
    {"from_samples": "docs/results/wordsort-qwen.samples.jsonl", "m_sweep": "1,2,5,10,20"}
    | {"aggregators": ALL4},
    {"task": "wordsort", "generate": 20, "backend": QWEN, "m_sweep": "1,2,5,10,20"}
    | {"aggregators": ALL4, "resume": True}
    | {"samples": "docs/results/wordsort-generated-qwen.samples.jsonl"},
    {"task": "mathsort", "limit": 10, "backend": QWEN, "m_sweep": "1,2,5,10,20"}
    | {"aggregators": ALL4, "samples": "docs/results/mathsort-qwen.samples.jsonl", "resume": True},
    {"task": "trec", "depth": 20, "max_words": 64, "limit": 10, "num_permutations": 10}
    | {"m_sweep": "1,2,5,10", "backend": QWEN, "aggregators": ALL4, "resume": True}
    | {"samples": "docs/results/dl19-qwen.samples.jsonl"},
    FT_TREC | {"num_permutations": 6},
    FT_TREC
    | {"num_permutations": 6, "window_size": 10, "limit": 25}
    | {"samples": "docs/results/dl19-ft-w10.samples.jsonl"},
    {"task": "wordsort", "limit": 69, "backend": QWEN, "num_permutations": 10}
    | {"m_sweep": "1,2,5,10", "aggregators": ALL4, "scoring": "first_token", "resume": True}
    | {"samples": "docs/results/wordsort-ft.samples.jsonl"},
    {"from_samples": "docs/results/dl19-ft-w20.samples.jsonl", "m_sweep": "1,5"}
    | {"aggregators": FT4},
    {"from_samples": "docs/results/dl19-ft-w10.samples.jsonl", "m_sweep": "1,5"}
    | {"aggregators": FT4},
    {"from_samples": "docs/results/wordsort-ft.samples.jsonl", "m_sweep": "1,5,10"}
    | {"aggregators": FT4},
    {"task": "mathsort", "limit": 4, "backend": "embedded:smollm2-135m", "m_sweep": "1,5,10,20"},
    {"task": "wordsort", "limit": 4, "backend": "embedded:smollm2-135m", "m_sweep": "1,5,10,20"},
    {"task": "wordsort", "limit": 12, "backend": "embedded:smollm2-135m", "m_sweep": "1,5,10,20"},
    {"task": "wordsort", "limit": 4, "backend": "embedded:smollm2-135m", "m_sweep": "1,5,10,20"}
    | {"temperature": [0.7]},
    {"task": "trec", "backend": "openai:MODEL", "aggregators": "kemeny"},
]


def test_every_documented_command_parses_to_the_settings_it_was_run_with() -> None:
    commands = documented()
    assert len(commands) == len(EXPECTED), [" ".join(c[:3]) for c in commands]
    for argv, expected in zip(commands, EXPECTED, strict=True):
        args = vars(parse(argv))
        assert {k: args[k] for k in DEFAULTS} == DEFAULTS | expected, " ".join(argv)


def _resumed(argv: list[str], tmp_path: Path, backend: str) -> dict[str, Any]:
    """The run record the command's settings make, after resuming a copy of the documented
    command's samples file through the command's own --resume path (a mismatch raises)."""
    args = parse(argv)
    copy = tmp_path / Path(args.samples).name
    shutil.copyfile(RESULTS / Path(args.samples).name, copy)
    args.samples = str(copy)
    if args.task == "trec":
        config = passages_config(args, backend)
    else:
        config = sorting_config(args, load_dataset(args), backend, args.temperature[0])
    log, done = samples_log(args, config)
    log.close()
    assert done  # the lists already collected come back: nothing is asked again
    return config


def _samples_commands() -> list[list[str]]:
    """The documented commands whose samples file is in docs/results, plus GSM8KSort, run as
    "the same with gsm8ksort" as MathSort's."""
    commands = [c for c in documented() if "--samples" in c]
    commands = [c for c in commands if (RESULTS / Path(c[c.index("--samples") + 1]).name).is_file()]
    mathsort = next(c for c in commands if c[1] == "mathsort")
    return [*commands, [a.replace("mathsort", "gsm8ksort") for a in mathsort]]


@pytest.mark.skipif(not PERM_SC.is_dir(), reason="the paper's sorting data is absent")
def test_documented_runs_resume_their_saved_samples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)  # the commands run from the repository root
    commands = _samples_commands()
    # 3 sorting, DL19, DL19 first-token at windows 20 and 10, WordSort first-token, GSM8KSort
    assert len(commands) == 8
    for argv in commands:
        spec = argv[argv.index("--backend") + 1]  # the embedded backend's name is its spec
        config = _resumed(argv, tmp_path, spec)
        saved = (RESULTS / Path(argv[argv.index("--samples") + 1]).name).open().readline()
        header = {k: v for k, v in json.loads(saved).items() if k != "type"}
        assert config == header | {"m": config["m"]}, " ".join(argv)
        assert config["m"] == parse(argv).num_permutations
    with pytest.raises(ConfigurationError, match="seed: 0 in the file, 1 now"):
        _resumed([*commands[0], "--seed", "1"], tmp_path, QWEN)


def _actions(command: str) -> dict[str, argparse.Action]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: a for a in sub.choices[command]._actions}


def test_every_ranking_flag_of_eval_is_the_declarations() -> None:
    """eval offers each ranking option as `permsc rank` does (names, aliases, type, help);
    no flag of eval's own re-declares one under another name."""
    declared = {info.name: info for info in RankingOptions.describe()}
    eval_flags, rank_flags = _actions("eval"), _actions("rank")
    derived = {dest for dest in eval_flags if dest in declared}
    assert derived == {*RANKING_FLAGS, "timeout", "max_tokens"}
    for dest in derived:
        ours, theirs, info = eval_flags[dest], rank_flags[dest], declared[dest]
        assert ours.help == theirs.help and ours.type is theirs.type is info.cli_type
        assert ours.option_strings == theirs.option_strings
    for dest in RANKING_FLAGS:  # the declaration's help and default, not a copy of them
        info = declared[dest]
        shown = "" if info.default is None else f" (default: {info.default})"
        assert eval_flags[dest].help == f"{info.cli_help or info.help}{shown}"
        assert eval_flags[dest].default in (info.default, [info.default])
    for dest, action in eval_flags.items():
        names = {s.lstrip("-").replace("-", "_") for s in action.option_strings}
        assert dest in derived or not names & set(declared), action.option_strings


def test_eval_takes_several_temperatures_and_the_old_concurrency_flag() -> None:
    args = parse(["eval", "wordsort", "--temperature", "0", "0.5", "1.0", "--concurrency", "4"])
    assert args.temperature == [0.0, 0.5, 1.0] and args.max_concurrency == 4
    assert parse(["eval", "trec", "--max-concurrency", "8"]).max_concurrency == 8


def test_trec_without_samples_cuts_passages_to_max_words(tmp_path, scripted_server):
    """``--max-words`` reaches the rankers of ``permsc eval trec`` (it was read only with
    ``--samples``; without it every passage went out whole, at the ranker's 300 words)."""
    from permsc_integrations.cli import main
    from permsc_integrations.testing import oracle_responder

    def text(qid: str, k: int) -> str:
        return f"grade{k} kept{qid} cut{qid}{k} " + " ".join(f"tail{j}" for j in range(7))

    rows = [
        {
            "qid": qid,
            "query": "which grade?",
            "candidates": [
                {"docid": f"{qid}-{k}", "rank": k + 1, "score": 1.0, "text": text(qid, k)}
                for k in range(3)
            ],
        }
        for qid in ("1", "2")
    ]
    candidates, qrels = tmp_path / "c.jsonl", tmp_path / "qrels.txt"
    candidates.write_text("".join(json.dumps(r) + "\n" for r in rows))
    qrels.write_text("".join(f"{q} 0 {q}-{k} {k}\n" for q in ("1", "2") for k in range(3)))
    server = scripted_server(oracle_responder(lambda t: float(t.split()[0][-1])))
    argv = ["eval", "trec", "--candidates", str(candidates), "--qrels", str(qrels)]
    argv += ["--depth", "3", "--max-words", "2", "-m", "2", "--no-progress"]
    assert main([*argv, "--backend", "openai:scripted", "--base-url", server.base_url]) == 0
    sent = [request.text for request in server.requests]
    assert len(sent) == 2 * (1 + 2)  # per query: the single pass and m = 2 shuffles
    assert all("kept" in s and "cut" not in s and "tail" not in s for s in sent)
