"""Data content rule (VI878): the first rows of every training/validation file `check` can reach here, read as
verl reads them (data.prompt_key), with validate-dataset's content checks (wizard.planner.datacontent: a message
holding a JSON chat, an empty prompt, a system message not first) and the scorer's needs (a ground truth for the
scorer, as a string where verl's default scorer compares strings: STRING_GT_SCORERS; a data_source verl's default
scoring knows; neither when a custom reward function or a reward model scores) and, in a row with images, videos or
audio, one placeholder per item (RLHFDataset._build_messages). VI640 (its own ID, from the same rows): a media cell
that is not a list (one {bytes, path} image dict or one path string per row, verl#837): verl 0.9.1 indexes
data.<kind>_key as a list (utils/dataset/rl_dataset.py:315-335: KeyError 0 on a dict), and with
data.filter_overlong_prompts on, the length filter's `except Exception` (rl_dataset.py:206-244) drops the row as
overlong, so such a file leaves no data; with it off, __getitem__ (rl_dataset.py:389) fails at the first batch.
One finding per kind of problem
in a file, at its first row; `verl-init validate-dataset FILE` lists every row. The same rows feed VI766 (a prompt
asking for an answer format its scorer does not accept) and VI922 (one set mixing data_sources whose scorers give
different reward_extra_info keys): wizard/check/rules/scorer_formats.py says why.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wizard._parquet import DecodeCapExceeded, saved_dataset
from wizard.check.rules import scorer_formats
from wizard.check.rules.context import Ctx, Facts, local_path
from wizard.check.shellargs import PLACEHOLDER

# verl 0.9.1's built-in scorers (utils/reward_score/__init__.py:44-104) that take the ground truth as a string, and
# what a number (or any non-string) does there. prime_math converts it (prime_math/__init__.py:391: str(ground_truth));
# geo3k (mathruler), prime_code (JSON test cases) and search_r1 (a {"target": [...]} mapping) expect other shapes.
STRING_GT_SCORERS = {
    "gsm8k": "it compares the extracted answer string with == (utils/reward_score/gsm8k.py:69), which no "
             "non-string equals: every reward is 0, with no error",
    "math_reward": "is_equiv's string normalising fails on it and falls back to == (utils/reward_score/"
                   "math_reward.py:32-47): every reward is 0, with no error",
    "math_dapo": "normalize_final_answer calls ground_truth.split (utils/reward_score/math_dapo.py:133): "
                 "AttributeError at the first reward",
}

GT_TYPE = "[ground truth type]"  # the tag of that finding (validate-dataset does not list it)
SINGLE_MEDIA = "[VI640]"  # the tag of VI640's kind: a media cell that is not a list

SAMPLE_ROWS = 1000  # rows read per file (bounded: parquet decoding is capped, JSONL lines are capped)


def file_rows(path: Path) -> Iterator[dict[str, Any]]:
    if path.suffix == ".parquet" or path.is_dir():  # a parquet file, or a save_to_disk folder (VI972 says more)
        from wizard._parquet import any_batches

        for batch in any_batches(str(path), 256):
            yield from batch.to_pylist()
    elif path.suffix == ".jsonl":
        from wizard._io import LineTooLong, bounded_lines

        with open(path, "rb") as fh:
            for line in bounded_lines(fh):
                if isinstance(line, LineTooLong) or not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if isinstance(row, dict):
                    yield row


def _row_problems(row: dict[str, Any], prompt_key: str, custom_reward: bool,
                  media_keys: dict[str, str] | None = None, model_scored: bool = False) -> Iterator[tuple[str, str]]:
    """(what is wrong, why it matters [its rule]) for each independent problem of one row: the prompt's (the first),
    the media placeholders', the ground truth's, the data_source's. `media_keys`: kind → data.<kind>_key.
    `model_scored`: a discriminative reward model scores every sample (reward.reward_model.enable without a custom
    reward function: reward_loop.py:145-155 calls compute_score_disrm, never the default scorer), so the row's ground
    truth and data_source are not read for the reward."""
    from wizard.planner import datacontent
    from wizard.planner.dataprep import scorer_for

    prompt = row.get(prompt_key)
    if prompt is None:
        return  # not verl's row format at all: the file's columns are other rules' business
    if isinstance(prompt, str):
        if datacontent.json_chat(prompt) is not None:
            yield (f"{prompt_key!r} is the JSON text of a chat, not the chat itself",
                   "write it as a list of {role, content} messages (verl-init's data/prepare_data.py with "
                   "messages_field=<column> does) [VI543]")
        else:
            yield (f"{prompt_key!r} is text, not a list of chat messages",
                   "verl applies the chat template to a list of {role, content} messages [VI522]")
    elif isinstance(prompt, list) and prompt and all(isinstance(m, dict) for m in prompt):
        problems = datacontent.chat_problems(prompt)
        if problems:
            rule, detail = problems[0]
            yield f"{datacontent.MESSAGES[rule]} ({detail})", f"{datacontent.HINTS[rule]} [{rule}]"
        keys = media_keys or {}
        single = next(((kind, key) for kind, key in keys.items() if not_a_list(row.get(key))), None)
        if single:
            yield _single_media(row, *single)
        wrong = datacontent.media_mismatches(prompt, {kind: row.get(key) for kind, key in keys.items()})
        if wrong:
            kind, marks, items = wrong[0]
            yield (f"{marks} {datacontent.PLACEHOLDERS[kind]} placeholder(s) in {prompt_key!r} for {items} "
                   f"{kind}(s) in {keys[kind]!r}: verl pairs them one to one and asserts the counts "
                   "(utils/dataset/rl_dataset.py:381-383). With data.filter_overlong_prompts on, its length count "
                   "catches that assert and drops the row as if overlong (rl_dataset.py:241-244), and a file of "
                   "such rows leaves no data; with it off, the run stops at the first batch holding the row",
                   f"put one {datacontent.PLACEHOLDERS[kind]} in the prompt per {kind}, in order [VI576]")
    else:
        yield f"{prompt_key!r} is not a non-empty list of chat messages", "write [{\"role\": \"user\", ...}] [VI522]"
    if model_scored:  # the reward model alone scores: no ground truth or scorer is read
        return
    rm = row.get("reward_model")
    gt = rm.get("ground_truth") if isinstance(rm, dict) else None
    if gt is None or (isinstance(gt, str) and not gt.strip()):
        yield ("reward_model.ground_truth is missing or empty",
               "verl's scorers compare the response with it: every reward would be 0 [VI523]")
    ds = row.get("data_source")
    scorer = scorer_for(ds) if isinstance(ds, str) and not custom_reward else None
    if scorer in STRING_GT_SCORERS and gt is not None and not isinstance(gt, str):
        yield (f"reward_model.ground_truth is {type(gt).__name__} {gt!r}, not a string, and data_source {ds!r} is "
               f"scored by verl's {scorer} scorer: {STRING_GT_SCORERS[scorer]}",
               f"write the ground truth as a string (str(answer)) when preparing the data {GT_TYPE}")
    if not custom_reward and isinstance(ds, str) and scorer is None:
        yield (f"data_source {ds!r} has no scorer in verl's default scoring",
               "rewards fail with NotImplementedError at the first step: use a data_source verl knows or set "
               "reward.custom_reward_function [VI526]")


def rule_data_content(c: Ctx, f: Facts) -> None:
    prompt_key = c.v("data.prompt_key")
    prompt_key = prompt_key if isinstance(prompt_key, str) else "prompt"
    custom = bool(c.v("reward.custom_reward_function.path"))
    model_scored = not custom and bool(c.v("reward.reward_model.enable"))
    media_keys = {kind: key for kind in ("image", "video", "audio")
                  if isinstance(key := c.v(f"data.{kind}_key", f"{kind}s"), str)}
    builtin = not custom and not model_scored  # the row's data_source picks verl's built-in scorer
    for key in ("data.train_files", "data.val_files"):
        value = c.v(key)
        if c.unknown(key) or value is None:
            continue
        sources: dict[str, str] = {}  # data_source -> the first file naming it, over this set's files
        for path in ([value] if isinstance(value, str) else value if isinstance(value, list) else []):
            if not isinstance(path, str) or PLACEHOLDER in path:
                continue
            local = local_path(c, path)
            if local is None or not (local.is_file() and local.suffix in (".parquet", ".jsonl")
                                     or saved_dataset(str(local))):
                continue
            first: dict[str, tuple[int, str, str]] = {}  # each kind of problem at its first row
            rows, keyed, columns = 0, 0, set()
            try:
                for n, row in enumerate(file_rows(local)):
                    if n >= SAMPLE_ROWS:
                        break
                    rows, keyed = rows + 1, keyed + (prompt_key in row)
                    columns |= set(row) if len(columns) < 64 else set()
                    for message, hint in _row_problems(row, prompt_key, custom, media_keys, model_scored):
                        first.setdefault(hint[hint.rfind("["):], (n, message, hint))
                    if builtin:
                        _scorer_row(row, prompt_key, n, first, sources, path)
            except DecodeCapExceeded as exc:  # a decompression bomb: one line
                c.add("VI878", "error", (key,), f"{path} cannot be read within verl-init's bounds: {exc}",
                      f"check the file with `verl-init validate-dataset {path}`")
            except Exception:  # noqa: BLE001 - a file pyarrow cannot read: not this rule's business (verl's loader)
                continue
            if rows and not keyed:
                _missing_prompt_column(c, key, path, prompt_key, sorted(columns))
            single = first.pop(SINGLE_MEDIA, None)
            if single:
                c.add("VI640", "error", (key, f"data.{single[1].split(':', 1)[0]}_key"), f"{path} row {single[0]}: "
                      f"{single[1].split(':', 1)[1]}", single[2].removesuffix(f" {SINGLE_MEDIA}"))
            wrong_format = first.pop("[VI766]", None)
            if wrong_format:
                c.add("VI766", "warning", (key, "data.prompt_key"), f"{path} row {wrong_format[0]}: {wrong_format[1]}",
                      wrong_format[2])
            for n, message, hint in first.values():
                c.add("VI878", "error", (key, "data.prompt_key"), f"{path} row {n}: {message}",
                      hint if hint.endswith(GT_TYPE) else
                      f"{hint}; list every such row with `verl-init validate-dataset {path}`")
        if builtin:
            _mixed_scorers(c, key, sources)


def not_a_list(value: Any) -> bool:
    """A media cell verl cannot index as a list of items: one image dict ({bytes, path}), one path string, raw bytes.
    None (no media in the row) and a list/tuple (what verl's examples write) are fine; pyarrow gives list columns as
    lists."""
    return value is not None and not isinstance(value, (list, tuple))


def _single_media(row: dict[str, Any], kind: str, key: str) -> tuple[str, str]:
    """VI640 (tagged SINGLE_MEDIA in `first`; the message carries "<kind>:" for the key the finding names)."""
    from wizard.planner import datacontent

    value = row.get(key)
    shape = (f"one {{{', '.join(sorted(map(str, value)))}}} dict" if isinstance(value, dict) else
             f"one {type(value).__name__} value")
    return (f"{kind}:the {key!r} column (data.{kind}_key) holds {shape} per row, not a list of {kind}s. verl indexes "
            f"it as a list (utils/dataset/rl_dataset.py:315-335: images[0] on a dict is KeyError 0, on a string its "
            "first character); with data.filter_overlong_prompts on, the length filter catches that error and drops "
            "the row as overlong (rl_dataset.py:206-244, 268-272), so a file of such rows leaves no data; with it "
            "off, the first batch holding the row fails (rl_dataset.py:389)",
            f"write the column as a list, one item per {datacontent.PLACEHOLDERS[kind]} placeholder: {key}=[item] "
            f"(verl's examples/data_preprocess/geo3k.py keeps geometry3k's list of images) {SINGLE_MEDIA}")


def _scorer_row(row: dict[str, Any], prompt_key: str, n: int, first: dict[str, tuple[int, str, str]],
                sources: dict[str, str], path: str) -> None:
    """VI766's check of one row (kept under the tag "[VI766]" in `first`), and its data_source noted for VI922."""
    ds = row.get("data_source")
    if isinstance(ds, str):
        sources.setdefault(ds, path)
    if "[VI766]" in first:
        return
    wrong = scorer_formats.format_mismatch(row.get(prompt_key), ds)
    if wrong:
        named, accepted = wrong
        first["[VI766]"] = (n, f"the prompt asks for {' / '.join(map(repr, named))} but data_source {ds!r} is scored by verl's "
                            f"built-in scorer, which gives full marks only to {' or '.join(map(repr, accepted))} (run on the same "
                            "correct answer in each format: wizard/check/data/verl_scorer_formats.json; gsm8k's "
                            "extracts '#### N' only, utils/reward_score/gsm8k.py:20-31): a model that follows the "
                            "prompt scores 0 on every sample, with no error (verl#2150)",
                            f"ask for {' or '.join(map(repr, accepted))} in the prompt, or set reward.custom_reward_function to a "
                            "scorer that reads the format the prompt asks for [VI766]")


def _mixed_scorers(c: Ctx, key: str, sources: dict[str, str]) -> None:
    groups = scorer_formats.mixed_extra_info(list(sources))
    if not groups:
        return
    shown = "; ".join(f"{', '.join(repr(ds) for ds in names[:3])} -> {{{', '.join(keys)}}}"
                      for keys, names in groups.items())
    c.add("VI922", "warning", (key,),
          f"{key} mixes data_sources whose built-in scorers give reward_extra_info different keys ({shown}; a float "
          "score becomes {acc}, a dict keeps its keys: experimental/reward_loop/reward_manager/naive.py:86-95). verl "
          "takes the keys from the first sample of each chunk (experimental/agent_loop/agent_loop.py:1107-1111, "
          "reward_loop.py:365-369): a chunk whose first sample has a key another lacks stops with KeyError (e.g. "
          "'score'), the other order drops the keys (verl#1031)",
          "score every data_source with one reward.custom_reward_function that returns the same keys for all (e.g. "
          "{'score': s, 'acc': a} for each), or train on one scorer's data_sources per run")


def _missing_prompt_column(c: Ctx, key: str, path: str, prompt_key: str, columns: list[str]) -> None:
    """No row read has the data.prompt_key column: verl's RLHFDataset reads example[prompt_key]
    (utils/dataset/rl_dataset.py:313), a KeyError at the first batch; with data.filter_overlong_prompts on, the length
    filter swallows that KeyError and scores every row as overlong (rl_dataset.py:259-266), so the file leaves no
    rows and the run stops on an empty dataloader that never names the key."""
    shown = ", ".join(repr(col) for col in columns[:12]) + (", ..." if len(columns) > 12 else "")
    chat = next((col for col in ("prompt", "messages") if col in columns), None)
    c.add("VI878", "error", (key, "data.prompt_key"),
          f"{path}: no row has the column data.prompt_key={prompt_key!r} (its columns: {shown}); verl reads "
          "example[prompt_key] (rl_dataset.py:313): a KeyError at the first batch, or, with "
          "data.filter_overlong_prompts on, every row dropped as overlong (rl_dataset.py:259-266) and an empty "
          "dataloader",
          f"set data.prompt_key={chat}" if chat else
          "set data.prompt_key to the column that holds the chat messages, or write the prompts under 'prompt' "
          "(verl-init's data/prepare_data.py does)")
