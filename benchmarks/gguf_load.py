"""What an embedded model costs to load, and to keep on disk: the float copy (before) against
the GGUF read directly (now), side by side (section "gguf-load").

*float copy* is what the transformers backend did before issue 32: the first load parsed the
GGUF with transformers (`from_pretrained(gguf_file=...)`) and saved the dequantised model with
`save_pretrained` into the cache; later loads read that copy. *GGUF direct* is
`permsc_integrations.backends.local._gguf_cache` now: the first load keeps only the tokenizer
and config; every load reads the weights from the GGUF (`gguf_weights`). Each load runs in a
fresh process (imports included, as a user's first `permsc demo` would), with its own empty
cache (the GGUF itself assembled beforehand); the dtype is this machine's
(`auto_device("cpu")`) unless `--dtype` says otherwise.
*ranks the same*: both models give the same logits on one prompt (checked in one process).

    python benchmarks/gguf_load.py                               # the default model
    python benchmarks/gguf_load.py --model smollm2-135m --dtype float32
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _report import write_section

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, resource, sys, time
began = time.perf_counter()
import torch, transformers
from pathlib import Path
from permsc_integrations.backends.local._gguf_cache import load_gguf
path, dtype, how, copy = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
if how == "direct":
    tokenizer, model = load_gguf(path, dtype, torch, transformers)
elif not os.path.isdir(copy):  # the float copy's first load: parse, dequantise, save
    options = {"gguf_file": path.name, "local_files_only": True}
    model = transformers.AutoModelForCausalLM.from_pretrained(
        path.parent, dtype=getattr(torch, dtype), **options)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(copy)
    transformers.AutoTokenizer.from_pretrained(path.parent, **options).save_pretrained(copy)
else:
    model = transformers.AutoModelForCausalLM.from_pretrained(copy, dtype=getattr(torch, dtype))
ids = torch.tensor([[9707, 11, 1879, 0, 28, 45, 3]])
with torch.inference_mode():
    logits = model(ids).logits[0, -1, :8].float().tolist()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
print(json.dumps({"s": time.perf_counter() - began, "rss": rss, "logits": logits}))
"""


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def load(model: Path, dtype: str, how: str, cache: Path) -> dict[str, float]:
    env = {
        "PERMSC_CACHE_DIR": str(cache),
        "HF_HUB_OFFLINE": "1",
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),  # this checkout's code, whatever is installed
    }
    copy = cache / "converted"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(model), dtype, how, str(copy)],
        capture_output=True, text=True, check=True, env=env,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def measure(model: Path, dtype: str, how: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="permsc-gguf-") as folder:
        cache = Path(folder)
        first = load(model, dtype, how, cache)
        kept = du(cache)
        again = load(model, dtype, how, cache)
    print(f"{how}: first {first['s']:.1f} s, again {again['s']:.1f} s", file=sys.stderr)  # noqa: T201
    return {"how": how, "first": first, "again": again, "kept": kept}


def render(model: str, dtype: str, rows: list[dict], same: bool, size: int) -> str:
    names = {"copy": "float copy (before)", "direct": "GGUF direct (now)"}
    lines = [
        f"## GGUF load: {model}, {dtype}\n",
        f"The GGUF file is {size / 1e9:.2f} GB. *kept*: what the first load left in the cache "
        "(besides the GGUF); *first* and *later load*: a fresh process's imports and load; "
        "*peak memory*: the process's maximum resident set. Both give the same logits: "
        f"**{'yes' if same else 'NO'}**.\n",
        "| load path | kept in the cache | first load s | later load s | peak memory GB |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {names[r['how']]} | {r['kept'] / 1e9:.3f} GB | {r['first']['s']:.1f} | "
            f"{r['again']['s']:.1f} | {max(r['first']['rss'], r['again']['rss']):.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--dtype", default=None, help="default: this machine's (auto_device)")
    parser.add_argument("--section", default="gguf-load")
    args = parser.parse_args()
    from permsc_integrations.backends.local._model_store import gguf_path
    from permsc_integrations.backends.local.transformers import auto_device

    dtype = args.dtype or auto_device("cpu")[1]
    began = time.perf_counter()
    path = gguf_path(args.model)  # assembled in the usual cache, outside the measured ones
    rows = [measure(path, dtype, how) for how in ("copy", "direct")]
    same = rows[0]["again"]["logits"] == rows[1]["again"]["logits"]  # type: ignore[index]
    text = render(args.model, dtype, rows, same, path.stat().st_size)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    took = time.perf_counter() - began
    write_section(args.section, f"{text}\n\nThe comparison took {took:.0f} s; load average {load}.")
    print(text)  # noqa: T201


if __name__ == "__main__":
    main()
