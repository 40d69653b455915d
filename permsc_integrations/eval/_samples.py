"""Raw model answers saved as they arrive, so a run can resume and be re-scored offline.

A samples file is JSON Lines: one ``run`` record (the configuration), then for each list as
soon as its answers are in, one ``list`` record (its items and true sort keys) followed by one
``sample`` record per answer: the permutation shown, the raw text, the parse status and the
ranking it parsed to (original item indices). Every list is written and flushed whole, so a
crash loses at most the lists in flight; a torn last line is ignored on reading.

Example:
    >>> import tempfile, pathlib
    >>> from permsc_integrations.eval._datasets import SortingExample
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "samples.jsonl"
    >>> ex = SortingExample("w1", ("b", "a"), ("b", "a"), "wordsort")
    >>> log = SampleLog.create(path, {"task": "wordsort", "m": 1})
    >>> log.write(ListSamples(ex, ((1, 0),), ((1, 0),), ("ok",), ("a, b",)), index=0)
    >>> header, lists = read_samples(path)
    >>> header["m"], lists["w1"].rankings, lists["w1"].raw_texts
    (1, ((1, 0),), ('a, b',))
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypedDict

from permsc_integrations.errors import ConfigurationError
from permsc_integrations.eval._datasets import SortingExample
from permsc_integrations.results import Sample, Usage

__all__ = [
    "ListSamples",
    "SampleLog",
    "read_samples",
    "read_priors",
    "collected",
    "RESUME_KEYS",
]

RESUME_KEYS = (
    "task",
    "dataset",
    "backend",
    "m",
    "seed",
    "temperature",
    "prompt",
    "scoring",
    "window",
    "depth",
    "max_words",
)
"""Configuration that must match for ``--resume`` to continue a samples file."""

_ABSENT = {"scoring": "generate"}
"""What a key missing from an older file's header meant."""


class RunRecord(TypedDict, total=False):
    """A samples file's ``run`` record: how its answers were asked (:data:`RESUME_KEYS`)."""

    type: str
    task: str
    dataset: str
    backend: str
    m: int
    seed: int
    temperature: float
    prompt: str
    scoring: str
    window: int
    depth: int
    max_words: int | None


class _SampleRecord(TypedDict, total=False):
    """A ``sample`` record: one answer of a list."""

    type: str
    list_id: str
    k: int
    permutation: list[int]
    raw_text: str
    status: str
    ranking: list[int]
    probabilities: list[float]
    mass: float | None
    usage: dict[str, float]


@dataclass(frozen=True, slots=True)
class ListSamples:
    """The ``m`` answers for one list: shown permutations and rankings (original indices).

    A failed answer has an empty ranking and status ``"invalid"`` or ``"error"``.
    """

    example: SortingExample
    permutations: tuple[tuple[int, ...], ...]
    rankings: tuple[tuple[int, ...], ...]
    statuses: tuple[str, ...]
    raw_texts: tuple[str, ...] = ()
    query: str = ""  # passage ranking: the query (sorting lists have none)
    probabilities: tuple[tuple[float, ...], ...] = ()  # first-token: per sample, as shown
    masses: tuple[float | None, ...] = ()  # first-token: the labels' share of the first token
    usages: tuple[dict[str, float], ...] = ()  # per sample: tokens, calls, latency (cost rows)


def collected(example: SortingExample, samples: Sequence[Sample], query: str = "") -> ListSamples:
    """The saved form of a ranking's samples (first-token ones keep their probabilities)."""
    scored = any(s.probabilities for s in samples)
    return ListSamples(
        example,
        tuple(s.permutation for s in samples),
        tuple(s.ranking if s.ok else () for s in samples),
        tuple(s.status.value for s in samples),
        tuple(s.raw_text for s in samples),
        query,
        tuple(s.probabilities for s in samples) if scored else (),
        tuple(s.label_mass for s in samples) if scored else (),
        tuple(_usage(s.usage) for s in samples),
    )


def _usage(u: Usage) -> dict[str, float]:
    return {
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "calls": u.calls,
        "latency_s": round(u.latency_s, 4),
    }


class SampleLog:
    """Appends lists of answers to a samples file (see the module docstring)."""

    def __init__(self, handle: IO[str]) -> None:
        self._handle = handle
        self.priors: dict[int, tuple[float, ...]] = {}  # first-token: position priors by size

    @classmethod
    def create(cls, path: str | os.PathLike[str], config: Mapping[str, object]) -> SampleLog:
        """A new file (an existing one is refused: resume it or choose another name)."""
        target = Path(path)
        if target.exists() and target.stat().st_size > 0:
            raise ConfigurationError(
                f"{target} already holds samples: pass --resume to continue it, or another path"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        log = cls(target.open("w", encoding="utf-8"))
        log.put([{"type": "run", **config}])
        return log

    @classmethod
    def resume(
        cls, path: str | os.PathLike[str], config: RunRecord, *, extend: bool = False
    ) -> tuple[SampleLog, dict[str, ListSamples]]:
        """The file opened for appending and the lists it already holds (config checked).

        ``extend``: ``m`` may grow: the file gets a new ``run`` record with the larger ``m``
        and the lists come back with the answers they have (fewer than ``m`` for those to be
        topped up; the seeded orders are a prefix of the larger m's)."""
        header, done = read_samples(path, partial=extend)
        keys = [k for k in RESUME_KEYS if not (extend and k == "m")]
        given, found = dict(config), dict(header)
        differ = [k for k in keys if k in given and found.get(k, _ABSENT.get(k)) != given[k]]
        if extend and int(config.get("m", 0)) < int(header.get("m", 0)):
            differ.append("m")
        if differ:
            shown = ", ".join(
                f"{k}: {found.get(k, _ABSENT.get(k))!r} in the file, {given[k]!r} now"
                for k in differ
            )
            raise ConfigurationError(f"cannot resume {path}: {shown}")
        _drop_torn_tail(Path(path))
        log = cls(Path(path).open("a", encoding="utf-8"))
        log.priors = read_priors(path)
        if extend and config.get("m") != header.get("m"):
            log.put([{**header, "m": config["m"]}])
        return log, done

    def write(self, lists: ListSamples, index: int = 0, start: int = 0) -> None:
        """Append one list (``index``: its place in the dataset) and all its answers, then
        flush them to disk. ``start`` > 0 appends more answers to a list already written,
        numbered from ``start``."""
        ex = lists.example
        records: list[Mapping[str, object]] = (
            []
            if start
            else [
                {
                    "type": "list",
                    "list_id": ex.id,
                    "index": index,
                    "task": ex.task,
                    "query": lists.query,
                    "items": ex.items,
                    "keys": ex.keys,
                }
            ]
        )
        texts = lists.raw_texts or ("",) * len(lists.rankings)
        for k, (perm, ranking, status, text) in enumerate(
            zip(lists.permutations, lists.rankings, lists.statuses, texts, strict=True)
        ):
            record = {
                "type": "sample",
                "list_id": ex.id,
                "k": start + k,
                "permutation": perm,
                "raw_text": text,
                "status": status,
                "ranking": ranking,
            }
            if lists.probabilities:
                record["probabilities"] = lists.probabilities[k]
                record["mass"] = lists.masses[k] if lists.masses else None
            if lists.usages:
                record["usage"] = lists.usages[k]
            records.append(record)
        self.put(records)

    def write_prior(self, size: int, probabilities: Sequence[float], **detail: object) -> None:
        """Record the position prior of windows of ``size`` (:mod:`._run.calibration`)."""
        self.priors[size] = tuple(probabilities)
        self.put([{"type": "prior", "size": size, "probabilities": list(probabilities), **detail}])

    def put(self, records: Sequence[Mapping[str, object]]) -> None:
        """Append ``records``, one JSON line each, on disk before it returns."""
        self._handle.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        self._handle.close()


def _drop_torn_tail(path: Path) -> None:
    """Cut a last line left unfinished by a crash, so appends start on a fresh line."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with path.open("r+b") as handle:
            handle.truncate(data.rfind(b"\n") + 1)


def read_priors(path: str | os.PathLike[str]) -> dict[int, tuple[float, ...]]:
    """The position priors a samples file records, by window size (the last of each)."""
    priors: dict[int, tuple[float, ...]] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if '"prior"' in line:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if record.get("type") == "prior":
                priors[int(record["size"])] = tuple(record["probabilities"])
    return priors


def read_samples(
    path: str | os.PathLike[str], *, partial: bool = False
) -> tuple[RunRecord, dict[str, ListSamples]]:
    """``(run configuration, {list_id: ListSamples})`` of the complete lists in a file (at
    least ``m`` answers, ``m`` of the last ``run`` record), in dataset order; ``partial``:
    every list with an answer."""
    source = Path(path)
    if not source.is_file():
        raise ConfigurationError(f"samples file not found: {source}")
    header: RunRecord | None = None
    examples: dict[str, SortingExample] = {}
    places: dict[str, int] = {}
    queries: dict[str, str] = {}
    answers: dict[str, list[_SampleRecord]] = {}
    for line in source.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line
        kind = record.get("type")
        if kind == "run":
            header = record
        elif kind == "list":
            ex = SortingExample(
                record["list_id"],
                tuple(record["items"]),
                tuple(record["keys"]),
                record.get("task", ""),
            )
            examples[ex.id] = ex
            queries[ex.id] = str(record.get("query") or "")
            places[ex.id] = int(record.get("index", len(places)))
            answers[ex.id] = []
        elif kind == "sample":
            answers.setdefault(record["list_id"], []).append(record)
    if header is None:
        raise ConfigurationError(f"{source} is not a samples file (no 'run' record)")
    m = int(header.get("m", 0))
    need = 1 if partial else m
    complete = sorted(
        (lid for lid, found in answers.items() if lid in examples and len(found) >= need),
        key=lambda lid: places[lid],
    )
    lists = {lid: _list(examples[lid], answers[lid], queries[lid]) for lid in complete}
    return header, lists


def _list(example: SortingExample, found: list[_SampleRecord], query: str) -> ListSamples:
    found = sorted(found, key=lambda r: r["k"])
    return ListSamples(
        example,
        tuple(tuple(r["permutation"]) for r in found),
        tuple(tuple(r["ranking"]) for r in found),
        tuple(r["status"] for r in found),
        tuple(r.get("raw_text", "") for r in found),
        query,
        tuple(tuple(r.get("probabilities") or ()) for r in found)
        if any("probabilities" in r for r in found)
        else (),
        tuple(r.get("mass") for r in found) if any("mass" in r for r in found) else (),
        tuple(r.get("usage") or {} for r in found) if any("usage" in r for r in found) else (),
    )
