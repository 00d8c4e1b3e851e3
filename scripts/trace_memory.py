"""Regenerate wizard/planner/data/memory_coeffs.json: per-architecture memory coefficients traced from each model's
config under torch's FakeTensorMode (wizard.planner.memtrace). Needs torch, transformers and verl installed.

    python scripts/trace_memory.py Qwen/Qwen2.5-0.5B-Instruct ...   # these catalogue models (merged into the file)
    python scripts/trace_memory.py --local /path/to/model           # a local model folder's config.json
    python scripts/trace_memory.py --out FILE ...                   # write elsewhere (the test's regeneration)
    python scripts/trace_memory.py --fused-only                     # add the fused-kernel passes to every entry

Tracing one architecture takes minutes on a CPU (verl's logprobs_from_logits_v2 is traced row by row); models whose architecture another entry already covers are skipped."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from wizard.planner import memtrace  # noqa: E402
from wizard.planner.shapes import from_catalogue, from_local  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", help="catalogue model ids")
    ap.add_argument("--local", action="append", default=[], help="a local model folder (its config.json)")
    ap.add_argument("--out", default=str(memtrace.DATA))
    ap.add_argument("--tokens", type=int, default=memtrace.TRACE_TOKENS, help="the larger token count traced")
    ap.add_argument("--fused-only", action="store_true",
                    help="trace only the fused-kernel passes (memtrace.FUSED_VARIANTS) of the stored entries, or of "
                         "the models given, keeping their other coefficients")
    ns = ap.parse_args(argv)
    shapes = []
    for m in ns.models:
        s = from_catalogue(m)
        if s is None:
            print(f"model={m}: not in verl-init's catalogue; pass --local with its folder", file=sys.stderr)
            return 2
        shapes.append(s)
    shapes += [from_local(p) for p in ns.local]
    out = Path(ns.out)
    doc = json.loads(out.read_text(encoding="utf-8")) if out.exists() else {}
    if ns.fused_only:
        return _fused_only(doc, out, shapes)
    doc["schema"] = memtrace.SCHEMA
    doc["generated_by"] = "scripts/trace_memory.py (wizard.planner.memtrace.trace)"
    archs = doc.setdefault("architectures", {})
    for s in shapes:
        sig = memtrace.signature(s)
        if not memtrace.traceable(s):
            print(f"{s.name}: not traceable (MoE, vision or latent attention); stays analytic")
            continue
        t0 = time.time()
        entry = memtrace.trace(s, tokens=ns.tokens)
        entry["traced_from"] = s.name
        archs[sig] = entry
        print(f"{s.name}: traced in {time.time() - t0:.0f}s")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return 0


def _fused_only(doc: dict, out: Path, shapes: list) -> int:
    """Add memtrace.trace_fused's passes to stored entries (all of them when no model is given): an entry traced
    from a catalogue id or a local folder (its `traced_from`) is rebuilt into its shape to be traced."""
    archs = doc.get("architectures", {})
    if not shapes:
        root = Path(__file__).resolve().parent.parent
        for entry in archs.values():
            src = entry["traced_from"]
            shapes.append(from_catalogue(src) if from_catalogue(src) is not None else from_local(str(root / src)))
    for s in shapes:
        sig = memtrace.signature(s)
        if sig not in archs:
            print(f"{s.name}: no stored entry; trace it whole first")
            return 2
        t0 = time.time()
        archs[sig].update(memtrace.trace_fused(s))
        archs[sig]["fused_tokens_traced"] = list(memtrace.FUSED_TOKENS)
        print(f"{s.name}: fused passes traced in {time.time() - t0:.0f}s")
    doc["schema"] = memtrace.SCHEMA
    out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
