"""`validate-dataset`'s tokenizer loading and its human report (wizard.env.datasets)."""

from __future__ import annotations

from typing import Any

from wizard.intent.errors import UserError
from wizard.planner.dataprep import scorer_for

def load_tokenizer(name: str) -> Any:
    import importlib.util
    import os

    if importlib.util.find_spec("transformers") is None:
        raise UserError("--model-dir needs the transformers library, which is not installed",
                        "pip install 'verl-init[tokenizer]' (or drop --model-dir to check without token counts)",
                        rule="VI538", keys=("--model-dir",))

    if not os.path.isdir(os.path.expanduser(name)):
        from wizard.verify.harness import hub_reachable

        if not hub_reachable():
            try:  # a copy in the local hub cache still loads offline
                from transformers import AutoTokenizer

                return AutoTokenizer.from_pretrained(name, local_files_only=True)
            except Exception:  # noqa: BLE001
                raise UserError(f"cannot load tokenizer {name!r}: not a local folder, not in the hub cache, and the "
                                "Hugging Face hub cannot be reached from here",
                                "pass a local model folder with tokenizer files", rule="VI538",
                                keys=("--model-dir",)) from None
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(name)
    except Exception as exc:  # noqa: BLE001 - OSError, ValueError, hub errors ...
        raise UserError(f"cannot load tokenizer {name!r}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}",
                        "pass a local model folder with tokenizer files (or a hub id reachable from here)",
                        rule="VI538", keys=("--model-dir",)) from None


def format_report(report: Report) -> str:
    """The human summary: one table of files, per-data_source counts, then findings with rows."""
    lines = []
    unit = report.files[0].length_unit if report.files else "chars"
    head = ["file", "rows", "columns", f"prompt {unit} p50/p90/p99/max", "overlong"]
    table = []
    for s in report.files:
        lens = "/".join(str(s.lengths.get(k, "-")) for k in ("p50", "p90", "p99", "max")) if s.lengths else "-"
        overlong = str(s.overlong) if report.options.get("tokenizer") else "-"
        table.append([s.path, str(s.rows), str(len(s.columns)), lens, overlong])
    widths = [max(len(h), *(len(r[i]) for r in table)) if table else len(h) for i, h in enumerate(head)]
    lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
    for r in table:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
    for s in report.files:
        if s.columns:
            lines.append(f"{s.path}: columns " + ", ".join(f"{k} ({v})" for k, v in s.columns.items()))
        if s.data_sources:
            parts = []
            for ds, n in s.data_sources.most_common():
                scorer = scorer_for(ds)
                how = f"verl {scorer}" if scorer else ("your reward function" if report.options.get("reward_function")
                                                        else "NO SCORER")
                parts.append(f"{ds} {n} ({how})")
            lines.append(f"{s.path}: data_source " + ", ".join(parts))
        if s.kept_by_verl is not None:
            lines.append(f"{s.path}: {s.kept_by_verl} of {s.rows} rows kept by verl's overlong filter")
    lines.append("")
    for f in report.findings:
        where = f" {f.file}" if f.file else ""
        per_row = bool(f.examples) and f.examples[0][0] is not None
        count = f" ({f.count} row{'s' if f.count != 1 else ''})" if per_row else ""
        lines.append(f"{f.severity} {f.rule}{where}: {f.message}{count}" + (f" — {f.hint}" if f.hint else ""))
        for row, detail in f.examples:
            lines.append(f"    row {row}: {detail}" if row is not None else f"    {detail}")
        if per_row and f.count > len(f.examples):
            lines.append(f"    ... {f.count - len(f.examples)} more")
    errors = sum(1 for f in report.findings if f.severity == "error")
    warnings = sum(1 for f in report.findings if f.severity == "warning")
    verdict = "OK" if report.ok else "FAILED"
    lines.append(f"validate-dataset: {verdict} — {errors} error(s), {warnings} warning(s) in {len(report.files)} file(s)")
    return "\n".join(lines)


def show_rows(path: str, n: int, prompt_key: str, tokenizer: Any, tokenizer_name: Any) -> str:
    """The first `n` rows of a file in verl's format as the model will see them: the prompt after the chat template
    (the tokenizer's; else the messages as they are) and reward_model.ground_truth, the scorer's reference."""
    import json

    from wizard.env.datareader import _iter_batches

    out: list[str] = []
    shown = 0
    for rows, _bad in _iter_batches(path, max(1, n)):
        for i, row in enumerate(rows):
            if shown >= n:
                break
            shown += 1
            if row is None:
                out.append(f"row {i}: unreadable")
                continue
            prompt = row.get(prompt_key)
            how = "as stored"
            if isinstance(prompt, list) and tokenizer is not None:
                try:
                    text = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
                    how = f"after {tokenizer_name}'s chat template"
                except Exception as exc:  # noqa: BLE001 - the template refuses it: VI527 says so too
                    text, how = json.dumps(prompt, ensure_ascii=False), f"the chat template fails: {type(exc).__name__}"
            elif isinstance(prompt, list):
                text = "\n".join(f"<{m.get('role')}> {m.get('content')}" if isinstance(m, dict) else repr(m)
                                  for m in prompt)
                how = "messages as they are (pass --tokenizer for the chat template)"
            else:
                text = repr(prompt)
            rm = row.get("reward_model")
            gt = rm.get("ground_truth") if isinstance(rm, dict) else None
            out.append(f"--- row {shown - 1}: prompt ({how}):\n{text}\n--- ground truth the scorer gets: {gt!r}"
                       f" (data_source {row.get('data_source')!r})")
        if shown >= n:
            break
    return "\n".join(out)
