"""The cpu smoke's data phase: the bundle's rows read as verl's RLHFDataset reads them, the schema checked
(wizard.env.datasets), the prompts drawn.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from typing import Any, Iterator

from wizard.smoketest.context import SmokeContext, SmokeFailure


FIRST_ROWS = 256  # rows of the prepared data the smoke reads (and verl's loader sees)


def _cause(exc: BaseException) -> BaseException:
    """The user's exception behind Ray's wrapper."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc


def _rows_file(ctx: SmokeContext) -> tuple[str, str]:
    """(path of the training rows, where they came from): the bundle's prepared data if it exists,
    else the bundle's own data/prepare_data.py run into a temporary folder."""
    cfg = ctx.cfg
    files = cfg.data.train_files
    first = str(files[0] if not isinstance(files, str) else files)
    path = first if os.path.isabs(first) else os.path.join(ctx.bundle, first)
    if os.path.isfile(path):
        return path, f"{first} (data.train_files)"
    script = os.path.join(ctx.bundle, "data", "prepare_data.py")
    if not os.path.isfile(script):
        raise SmokeFailure(f"data.train_files {first!r} does not exist and the bundle has no data/prepare_data.py",
                           "write the training file first, or re-render the bundle with verl-init")
    out = os.path.join(ctx.workdir, "prepared")
    cmd = [sys.executable, script, "--out", out]
    with open(script, encoding="utf-8") as fh:
        text = fh.read()
    hub = "SOURCE = 'file'" not in text  # gsm8k / math read the hub (or --local-dir); a file reads itself
    local = ctx.options.data_dir if hub else None
    if local:
        cmd += ["--local-dir", os.path.abspath(local)]
    elif "SOURCE = 'gsm8k'" in text and "--offline-dir" in text and "OFFLINE_DIR = None" in text:
        from wizard.resources import offline_data  # a GPU plan's bundle: the smoke may use the built-in rows

        cmd += ["--offline-dir", str(offline_data())]
    env = dict(os.environ)  # the user's own HF_HUB_OFFLINE (the probe set it to 1 for the model's sake)
    own = ctx.env_restore["HF_HUB_OFFLINE"] if "HF_HUB_OFFLINE" in ctx.env_restore else env.get("HF_HUB_OFFLINE")
    env.pop("HF_HUB_OFFLINE", None)
    env.update({"HF_HUB_OFFLINE": own} if own is not None else {})
    proc = subprocess.run(cmd, cwd=ctx.bundle, capture_output=True, text=True, timeout=600, env=env)
    ctx.log(proc.stdout + proc.stderr)
    if proc.returncode != 0 or not os.path.isfile(os.path.join(out, "train.parquet")):
        last = (proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}").splitlines()[-1]
        hint = "run it yourself first (python data/prepare_data.py), or pass --data-dir with a local copy of the dataset"
        raise SmokeFailure(f"the bundle's data/prepare_data.py failed: {last}", hint)
    how = "data/prepare_data.py" + (f" --local-dir {local}" if local else "")
    offline = [ln[len("prepare_data: "):] for ln in proc.stdout.splitlines()  # the fallback, said as the script says it
               if ln.startswith("prepare_data: hub unreachable: using ")]
    return (os.path.join(out, "train.parquet"),
            f"the bundle's {how} (run into a temporary folder: {first} is not written yet)"
            + (f"; {offline[0]}" if offline else ""))


def _first_rows(path: str, out_dir: str, limit: int) -> tuple[str, int]:
    """The first `limit` rows of a parquet/jsonl/json file, copied unchanged into `out_dir` (same format)."""
    lower = path.lower()
    os.makedirs(out_dir, exist_ok=True)
    if lower.endswith(".parquet"):
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        dest = os.path.join(out_dir, "rows.parquet")
        pq.write_table(table.slice(0, limit), dest)
        return dest, table.num_rows
    if lower.endswith(".jsonl"):
        with open(path, encoding="utf-8") as fh:
            lines = [line for line in fh if line.strip()]
        dest = os.path.join(out_dir, "rows.jsonl")
        with open(dest, "w", encoding="utf-8") as fh:
            fh.writelines(lines[:limit])
        return dest, len(lines)
    if lower.endswith(".json"):
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        rows = doc if isinstance(doc, list) else next((v for v in doc.values() if isinstance(v, list)), [])
        dest = os.path.join(out_dir, "rows.jsonl")
        with open(dest, "w", encoding="utf-8") as fh:
            for row in rows[:limit]:
                fh.write(json.dumps(row) + "\n")
        return dest, len(rows)
    raise SmokeFailure(f"verl reads parquet, json and jsonl, not {os.path.basename(path)}",
                       "convert it with the bundle's data/prepare_data.py")


def _file_rows(path: str) -> list[dict[str, Any]]:
    """The rows of the prepared data file the smoke reads (parquet, else JSON lines); raises when unreadable."""
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _texts_for_tokenizer(path: str) -> list[str]:
    """Every prompt text and ground truth of the rows (for the data-trained tokenizer)."""
    texts: list[str] = []
    try:
        rows = _file_rows(path)
    except Exception:  # noqa: BLE001 - the data phase reports unreadable files
        return texts
    for row in rows:
        prompt = row.get("prompt")
        if isinstance(prompt, list):
            texts += [str(m.get("content", "")) for m in prompt if isinstance(m, dict)]
        elif prompt is not None:
            texts.append(str(prompt))
        rm = row.get("reward_model")
        if isinstance(rm, dict) and rm.get("ground_truth") is not None:
            texts.append(str(rm["ground_truth"]))
    return texts


def _last_user(messages: Any) -> str:
    msgs = list(messages or [])
    for m in reversed(msgs):
        if isinstance(m, dict) and m.get("role") == "user":
            return str(m.get("content", ""))
    return str(msgs[-1].get("content", "")) if msgs and isinstance(msgs[-1], dict) else ""


def _example(item: dict[str, Any]) -> dict[str, Any]:
    def short(v: Any) -> Any:
        text = json.dumps(v, default=str, ensure_ascii=False)
        return v if len(text) <= 200 else text[:197] + "..."

    return {k: short(item.get(k)) for k in ("data_source", "prompt", "ability", "reward_model", "extra_info")}


def _load_with_verl(ctx: SmokeContext, rows_path: str, tok: Any) -> tuple[list[dict[str, Any]], int]:
    """verl's RLHFDataset on the rows: its schema handling and overlong filter, with verl's data config."""
    from verl.utils.dataset.rl_dataset import RLHFDataset

    try:
        import datasets

        datasets.disable_progress_bars()
    except Exception:  # noqa: BLE001
        pass
    try:
        ds = RLHFDataset(data_files=[rows_path], tokenizer=tok, config=ctx.cfg.data, processor=None)
    except Exception as exc:  # noqa: BLE001 - verl's own message is the report
        cause = _cause(exc)
        findings = _validate_rows(ctx, rows_path, tok)
        errors = [f for f in findings if f["severity"] == "error"]
        hint = (f"{errors[0]['message']} [{errors[0]['id']}]: " + "; ".join(
            f"row {e['row']}: {e['problem']}" for e in errors[0]["examples"][:2])) if errors else \
            "`verl-init validate-dataset FILE --tokenizer MODEL` lists the problem rows"
        raise SmokeFailure(f"verl's RLHFDataset cannot load the rows: {type(cause).__name__}: "
                           f"{str(cause).strip().splitlines()[-1][:300] if str(cause).strip() else ''}", hint) from None
    items = [ds[i] for i in range(len(ds))]
    for it in items:
        if not isinstance(it.get("raw_prompt"), (list, tuple)) or not it.get("raw_prompt"):
            it["raw_prompt"] = it.get(ctx.cfg.data.get("prompt_key", "prompt"))
    return items, len(ds)


def warmup_examples(items: list[dict[str, Any]], prompt_ids: list[list[int]], fallback: str) -> list[tuple[list[int], str, str]]:
    """(prompt ids, a right response, a wrong response) per distinct prompt, in the format the prompt asks for:
    what the tiny policy is fitted on so that sampled rewards vary (wizard.smoketest.model.build_tiny_policy)."""
    from wizard.smoketest import model as smoke_model

    if len(items) != len(prompt_ids):
        raise ValueError(f"{len(items)} items but {len(prompt_ids)} tokenised prompts")
    return [(prompt_ids[i], smoke_model.response_text(style, truth),
             smoke_model.response_text(style, smoke_model.wrong_answer(truth, style)))
            for i, _, truth, style in _distinct_prompts(items, fallback)]


def _distinct_prompts(items: list[dict[str, Any]], fallback: str) -> Iterator[tuple[int, dict[str, Any], str, str]]:
    """Each distinct prompt once, in order: (its position, the item, its ground truth, the answer style its prompt
    asks for — `fallback` when it names none)."""
    from wizard.smoketest import model as smoke_model

    seen: set[str] = set()
    for i, item in enumerate(items):
        key = json.dumps(item["raw_prompt"], sort_keys=True, default=str)
        if key in seen:
            continue
        seen.add(key)
        truth = str((item.get("reward_model") or {}).get("ground_truth", ""))
        yield i, item, truth, smoke_model.answer_style(_last_user(item["raw_prompt"]), fallback)


def _overlong_rows(path: str, tok: Any, prompt_key: str, max_prompt: int) -> int:
    """Rows whose chat-templated prompt is longer than max_prompt_length: the ones verl's overlong filter drops
    (rl_dataset.py:248-270, the same apply_chat_template call), counted here from the file itself."""
    from wizard.smoketest import model as smoke_model

    try:
        rows = _file_rows(path)
    except Exception:  # noqa: BLE001 - the loader reports unreadable files
        return 0
    count = 0
    for row in rows:
        try:
            count += len(smoke_model.prompt_ids(tok, list(row.get(prompt_key) or []))) > max_prompt
        except Exception:  # noqa: BLE001 - verl counts a row it cannot template as overlong
            count += 1
    return count


def _vision_rows(ctx: SmokeContext, rows_path: str, arch: str, read: int, src_how: str) -> None:
    """A vision-language model: the rows' images are checked (validate-dataset's VI574-VI576: the image column,
    each image decodes, one image per <image> placeholder), then the smoke stops with what it does not cover: the
    CPU miniature builds no vision tower and no processor (verl's RLHFDataset asserts a processor for image rows;
    the processor needs torchvision and qwen_vl_utils), so no vision-language rollout or update runs here."""
    from wizard.env.datasets import Options, validate
    from wizard.planner.shapes import VISION_TYPES

    if arch not in VISION_TYPES:
        return
    image_key = str(ctx.cfg.data.get("image_key", "images"))
    findings = validate([rows_path], Options(kind="rl", prompt_key=str(ctx.cfg.data.get("prompt_key", "prompt")),
                                             image_key=image_key)).findings
    bad = [f for f in findings if f.rule in ("VI574", "VI575", "VI576") and f.severity == "error"]
    if bad:
        raise SmokeFailure(f"the rows' images are not what verl reads: {bad[0].message} [{bad[0].rule}]",
                           bad[0].hint or f"check them with `verl-init validate-dataset FILE --image-key {image_key}`")
    raise SmokeFailure(
        f"{arch} is a vision-language model: the {read} row(s) from {src_how} and their images are in verl's schema "
        f"({image_key!r}: each image decodes, one per <image> placeholder), but the CPU smoke builds no vision tower or "
        "processor, so it runs no vision-language rollout, reward or update",
        "check the config with `verl-init --verify` and the data with `verl-init validate-dataset data/train.parquet "
        f"--image-key {image_key}`; the first real step runs on the GPUs")


def _code_rows(ctx: SmokeContext, rows_path: str, read: int, src_how: str) -> None:
    """reward=sandbox (reward.sandbox_fusion.url): the rows' test cases are checked (validate-dataset's VI586: what
    verl's code scorer can run), then the smoke stops with what it does not cover: the miniature's tiny policy writes
    no programs, so every reward would be 0 and no code rollout or update is meaningful here. The reward path itself
    (verl's scorer, the configured service) was checked in the probe phase (wizard.smoketest.sandbox_stub)."""
    from wizard.env.datasets import Options, validate

    sf = ctx.cfg.reward.get("sandbox_fusion")
    if sf is None or not sf.get("url"):
        return
    findings = validate([rows_path], Options(kind="rl", prompt_key=str(ctx.cfg.data.get("prompt_key", "prompt")))).findings
    bad = [f for f in findings if f.rule == "VI586"]
    if bad:
        ex = "; ".join(f"row {r}: {why}" for r, why in bad[0].examples[:2])
        raise SmokeFailure(f"the rows' test cases are not what verl's code scorer runs: {bad[0].message} [VI586] ({ex})",
                           bad[0].hint)
    raise SmokeFailure(
        f"the {read} code row(s) from {src_how} hold test cases verl's sandbox scorer runs, and the reward path was "
        "checked in the probe phase; but the CPU miniature's tiny policy writes no programs, so it runs no code "
        "rollout, reward or update",
        "check the config with `verl-init --verify` and the data with `verl-init validate-dataset "
        "data/train.parquet`; the first real step runs on the GPUs")


def _agent_options(ctx: SmokeContext) -> dict[str, Any]:
    """Multi-turn bundles: validate-dataset's --agent tool (and --tool-name for verl-init's GSM8K tool)."""
    if not ctx.cfg.actor_rollout_ref.rollout.multi_turn.enable:
        return {}
    a = ctx.answers
    gsm8k = a is not None and a.agent == "tool" and (a.tool or "gsm8k") == "gsm8k"
    from wizard.planner.dataprep import GSM8K_TOOL_NAME

    return {"agent": "tool", "tool_name": GSM8K_TOOL_NAME if gsm8k else None}


def _validate_rows(ctx: SmokeContext, rows_path: str, tok: Any) -> list[dict[str, Any]]:
    """verl-init's validate-dataset on the same rows (precise row-level diagnosis)."""
    from wizard.env.datasets import Options, validate

    fn = ctx.cfg.reward.custom_reward_function
    opts = Options(kind="rl", prompt_key=str(ctx.cfg.data.get("prompt_key", "prompt")),
                   max_prompt_length=int(ctx.cfg.data.max_prompt_length), tokenizer=tok, tokenizer_name="smoke",
                   reward_function=str(fn.path) if fn.get("path") else None,
                   filter_overlong_prompts=bool(ctx.cfg.data.get("filter_overlong_prompts", False)),
                   **_agent_options(ctx))
    try:
        return [f.as_dict() for f in validate([rows_path], opts).findings]
    except Exception as exc:  # noqa: BLE001 - diagnosis only
        ctx.log(f"validate-dataset failed: {exc!r}")
        return []


class DataPhase:
    """CpuRun's data phase."""

    def data(self, ph: Any) -> None:
        from wizard.smoketest import model as smoke_model

        ctx, cfg, sg = self.ctx, self.cfg, self.sg
        src_path, src_how = _rows_file(ctx)
        rows_path, total = _first_rows(src_path, os.path.join(ctx.workdir, "rows"), FIRST_ROWS)
        read = min(total, FIRST_ROWS)
        tok, tok_source = smoke_model.find_local_tokenizer(ctx.model_path)
        if tok is None:
            why = tok_source
            tok = smoke_model.build_bpe_tokenizer(_texts_for_tokenizer(rows_path), self.model_dir)
            tok_source = f"a byte-level BPE tokenizer trained on the bundle's rows ({why})"
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        if not getattr(tok, "chat_template", None):
            raise SmokeFailure(f"the tokenizer ({tok_source}) has no chat template: verl builds every prompt with "
                               "apply_chat_template", "use an instruct/chat model, or give its tokenizer a chat_template")
        _vision_rows(ctx, rows_path, self.arch[0], read, src_how)  # a vision-language bundle stops here, saying why
        _code_rows(ctx, rows_path, read, src_how)  # a reward=sandbox bundle stops here, saying why
        items, kept = _load_with_verl(ctx, rows_path, tok)
        findings = _validate_rows(ctx, rows_path, tok)
        errors = [f for f in findings if f["severity"] == "error" and f["id"] != "VI526"]
        no_scorer = [f for f in findings if f["id"] == "VI526"]
        if errors:
            first = errors[0]
            ex = "; ".join(f"row {e['row']}: {e['problem']}" for e in first["examples"][:2])
            raise SmokeFailure(f"rows not in verl's schema: {first['message']} [{first['id']}]" + (f" ({ex})" if ex else "")
                               + f"; verl's RLHFDataset kept {kept} of {read} rows",
                               first["hint"] or "fix data/prepare_data.py's settings and run it again")
        if not items:
            raise SmokeFailure(f"verl's RLHFDataset kept none of the {read} rows",
                               "check prompt lengths against data.max_prompt_length and the prompt column")
        max_prompt = int(cfg.data.max_prompt_length)
        truncated = 0
        for i in range(sg.prompts * ctx.max_gen_batches):
            item = items[i % len(items)]
            ids = smoke_model.prompt_ids(tok, list(item["raw_prompt"]))
            if len(ids) > max_prompt:  # verl's agent loop left-truncates an over-long prompt (with a warning)
                ids, truncated = ids[-max_prompt:], truncated + 1
            self.items.append(item)
            self.prompt_ids.append(ids)
        self.tokenizer = tok
        self.width = max(len(p) for p in self.prompt_ids)
        drawn = self.items[: sg.prompts]
        distinct = len({json.dumps(it["raw_prompt"], sort_keys=True, default=str) for it in drawn})
        self.report.data = {
            "source": src_how, "rows_in_file": total, "rows_read": read, "kept_by_verl_rlhfdataset": kept,
            "prompts": sg.prompts, "distinct_prompts": distinct, "reused_rows": len(items) < sg.prompts,
            "prompt_key": str(cfg.data.get("prompt_key", "prompt")), "max_prompt_length": max_prompt,
            "filter_overlong_prompts": bool(cfg.data.get("filter_overlong_prompts", False)),
            "left_truncated": truncated, "tokenizer": tok_source, "prompt_tokens_max": self.width,
            "data_sources": dict(Counter(str(it["data_source"]) for it in drawn)),
            "schema_findings": [f"{f['severity']} {f['id']}: {f['message']}" for f in findings if f["severity"] != "info"],
            "example_row": _example(drawn[0]),
        }
        # measured: verl's loader keeps every row read unless its own overlong filter is on (then the rows it
        # dropped must be the ones whose prompt is longer than max_prompt_length)
        filtering = bool(cfg.data.get("filter_overlong_prompts", True))
        overlong = _overlong_rows(rows_path, tok, str(cfg.data.get("prompt_key", "prompt")), max_prompt) if filtering else 0
        lost = read - overlong - kept
        all_kept = lost == 0
        ctx.check(4, "dataset_schema", all_kept,
                  f"{read} row(s) from {src_how}; verl's RLHFDataset kept {kept} (max_prompt_length={max_prompt}"
                  + (f", {overlong} overlong prompt(s) filtered as data.filter_overlong_prompts asks" if filtering else "")
                  + ")"
                  + ("" if all_kept else f" — {lost} row(s) lost between the file and verl's loader (not overlong)")
                  + "; prompts are chat lists and every row has data_source, reward_model.ground_truth (text) and "
                  "extra_info" + ("; multi-turn: agent_name and extra_info.tools_kwargs checked (validate-dataset "
                                  "--agent tool)" if _agent_options(ctx) else "")
                  + (f"; note: {no_scorer[0]['message']}" if no_scorer else ""),
                  {"rows_read": read, "kept_by_verl": kept, "filter_overlong_prompts": filtering, "overlong": overlong,
                   "findings": self.report.data["schema_findings"], "example_row": self.report.data["example_row"]},
                  hint="every row of the file must reach verl's loader: check data/prepare_data.py's output and the "
                       "prompt column")
        ph.detail = (f"{read} row(s) from {src_how}; verl's RLHFDataset kept {kept}; {sg.prompts} prompts drawn "
                     f"({distinct} distinct); tokenizer: {tok_source.split(' (')[0]}")
