"""``permsc rank --resume`` keeps only what ``--output`` holds for this input (issue 40, item
8): records of another input, records without a fingerprint and lines that are not records
stop the run before any call (exit 2, named, no traceback); what a crash cut short at the end
is ranked again. Against a real loopback server, through the command's own ``main``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from permsc_integrations.cli import main
from permsc_integrations.testing import oracle_responder

pytest.importorskip("openai")


def goldfish(text: str) -> float:
    return text.count("goldfish")


def line(k: int, *, text: str = "passage", docid: str = "d", query: str = "question") -> dict:
    candidates = [
        {"docid": f"{docid}{j}", "text": f"q{k} {text} {j} " + "goldfish " * ((j + k) % 4)}
        for j in range(4)
    ]
    return {"qid": f"q{k}", "query": f"{query} {k}", "candidates": candidates}


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture
def server(scripted_server):
    return scripted_server(oracle_responder(goldfish))


def rank(server, source: Path, out: Path, *extra: str) -> int:
    common = ["-m", "2", "--backend", "openai:m", "--base-url", server.base_url, "--no-progress"]
    return main(["rank", "-i", str(source), "-o", str(out), *common, *extra])


def ranked(server, tmp_path: Path, *extra: str) -> tuple[Path, Path, str]:
    """Six queries ranked into out: the input, the output, what the output holds."""
    source = write(tmp_path / "in.jsonl", [line(k) for k in range(6)])
    out = tmp_path / "out.txt"
    assert rank(server, source, out, *extra) == 0
    server.reset()
    return source, out, out.read_text()


CHANGED = {  # another input under the same qids: q1 and q4 changed
    "a candidate's text": {"text": "other passage"},
    "the docids": {"docid": "x"},
    "the query": {"query": "another question"},
}


@pytest.mark.parametrize("change", CHANGED)
def test_an_output_of_another_input_is_refused_before_any_call(
    server, tmp_path, capsys, change
) -> None:
    source, out, before = ranked(server, tmp_path)
    other = [line(k, **CHANGED[change]) if k in (1, 4) else line(k) for k in range(6)]
    write(source, other)
    assert rank(server, source, out, "--resume") == 2  # before: exit 0, no call, 2 rows wrong
    err = capsys.readouterr().err
    assert f"{out} was written from another input: 2 of its records" in err
    assert "'q1', 'q4'" in err and "rank into a new --output, or remove" in err
    assert server.request_count == 0 and out.read_text() == before


def test_a_trec_run_of_other_docids_is_refused(server, tmp_path, capsys) -> None:
    source, out, before = ranked(server, tmp_path, "--format", "trec")
    write(source, [line(k, docid="x") if k == 2 else line(k) for k in range(6)])
    assert rank(server, source, out, "--resume", "--format", "trec") == 2
    err = capsys.readouterr().err
    assert "written from another input: 1 of its records" in err and "'q2'" in err
    assert server.request_count == 0 and out.read_text() == before


def test_records_without_a_fingerprint_are_refused_with_the_way_out(
    server, tmp_path, capsys
) -> None:
    source, out, _ = ranked(server, tmp_path)
    records = [json.loads(text) for text in out.read_text().splitlines()]
    old = "".join(
        json.dumps({k: v for k, v in r.items() if k != "fingerprint"}) + "\n" for r in records
    )
    out.write_text(old)  # as an earlier permsc wrote them
    assert rank(server, source, out, "--resume") == 2
    err = capsys.readouterr().err
    assert "6 of its records" in err and "without a fingerprint, from an earlier permsc" in err
    assert server.request_count == 0 and out.read_text() == old


def _tamper(lines: list[str], at: int, **fields: object) -> str:
    record = json.loads(lines[at])
    record.update(fields)
    return json.dumps(record) + "\n"


CORRUPT = {  # what is done to the output's lines, and what the error says
    "not JSON": (lambda ls: {1: "{not json\n"}, "line 2: not a record of permsc rank"),
    "no qid": (lambda ls: {1: '{"order": [0, 1, 2, 3]}\n'}, "line 2: not a record of permsc rank"),
    "an order not a permutation": (
        lambda ls: {2: _tamper(ls, 2, order=[0, 0, 1, 2])},
        "line 3: the record of qid 'q2' does not rank its 4 candidates, each once",
    ),
    "a ranking that is not its order": (
        lambda ls: {2: _tamper(ls, 2, ranking=json.loads(ls[2])["ranking"][::-1])},
        "line 3: the record of qid 'q2' does not rank its 4 candidates, each once",
    ),
    "a qid twice": (lambda ls: {4: ls[0]}, "line 5: qid 'q0' again (first on line 1)"),
}


@pytest.mark.parametrize("corruption", CORRUPT)
def test_a_corrupt_output_line_is_named_by_its_number(server, tmp_path, capsys, corruption) -> None:
    """Before: a traceback (bad JSON, no qid), or the tampered record kept as done (exit 0)."""
    source, out, _ = ranked(server, tmp_path)
    lines = out.read_text().splitlines(keepends=True)
    edit, message = CORRUPT[corruption]
    for at, text in edit(lines).items():
        lines[at] = text
    out.write_text("".join(lines))
    assert rank(server, source, out, "--resume") == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
    assert server.request_count == 0 and out.read_text() == "".join(lines)


def test_a_trec_run_cut_short_in_a_query_is_ranked_again_from_there(server, tmp_path) -> None:
    """A crash after two of q3's four lines (each whole): its lines are cut off and q3..q5
    ranked again. Before, q3 counted as done: a run with half its ranking, q4 and q5 ranked."""
    source, out, full = ranked(server, tmp_path, "--format", "trec")
    lines = full.splitlines(keepends=True)
    assert [text.split()[0] for text in lines[12:14]] == ["q3", "q3"]
    out.write_text("".join(lines[:14]))
    assert rank(server, source, out, "--resume", "--format", "trec") == 0
    assert server.request_count == 3 * 2 and out.read_text() == full


def test_every_record_carries_its_querys_fingerprint(server, tmp_path) -> None:
    source, out, full = ranked(server, tmp_path)
    prints = [json.loads(text)["fingerprint"] for text in full.splitlines()]
    write(source, [line(k, text="other") for k in range(6)])
    assert rank(server, source, tmp_path / "other.jsonl") == 0
    others = [
        json.loads(text)["fingerprint"]
        for text in (tmp_path / "other.jsonl").read_text().splitlines()
    ]
    assert len(set(prints)) == 6 and not set(prints) & set(others)
