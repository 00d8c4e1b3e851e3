"""The inside of `check --deep`: run verl's own code on a config, in the sandbox only (wizard.check.deep starts it
there with `python -m wizard.check.deep_child`; nothing else imports this module).

Three phases, in the order verl meets them:
- config: wizard.verify.harness.verify_with_verl on the bundle folder the host wrote (Hydra composition,
  validate_config, the config dataclasses, verl's registries, the tool classes);
- reward: verl's reward loading (trainer/ppo/reward.py: get_custom_reward_fn, resolve_reward_manager_cls,
  load_reward_manager with a tokenizer) and the score function called on a synthetic sample built from the first
  training row (its data_source and ground truth), as the reward loop calls it;
- data: verl's dataset class (utils/dataset/rl_dataset.py:get_dataset_class, a custom class included) built on the
  first rows of each reachable data file, and its first items read, as the trainer's dataloader reads them;
- sft (an sft_trainer launch, alone): verl's SFT dataset (trainer/sft_trainer.py:create_sft_dataset, a custom class
  included) built on the first rows of each reachable data file with the model's tokenizer, its items read;
- tools (multi-turn runs): verl's tool-call parsers on the assistant turn the model's own chat template writes for
  one tool call (wizard.verlspec.toolcall): the parser multi_turn.format names must read it.
What raises is reported with the phase and verl's message; one JSON line goes back to the host on the original
stdout (the module's own prints go to /dev/null).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import warnings
from typing import Any

ROWS = 4  # rows read from each data file
MARK = "VI-DEEP "
RULES = {"reward": "VI875", "data": "VI876", "tools": "VI863"}
FORMAT = "actor_rollout_ref.rollout.multi_turn.format"
NO_PROCESSOR = "no processor here"  # a multimodal model whose processor does not build on this machine


def _msg(exc: BaseException) -> str:
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= 400 else text[:397] + "..."


class Phases:
    def __init__(self) -> None:
        self.findings: list[dict[str, Any]] = []
        self.notes: list[str] = []

    def fail(self, rule: str, phase: str, keys: list[str], message: str, hint: str, severity: str = "error") -> None:
        self.findings.append({"rule": rule, "phase": phase, "keys": keys, "message": message, "hint": hint,
                              "severity": severity})


def _local(path: Any) -> str | None:
    if not isinstance(path, str) or not path or "://" in path:
        return None
    path = os.path.expanduser(path)
    return path if os.path.exists(path) else None


def _files(cfg: Any) -> list[str]:
    out = []
    for key in ("train_files", "val_files"):
        value = cfg.data.get(key)
        values = [value] if isinstance(value, str) else list(value or [])
        out += [p for p in (_local(v) for v in values) if p is not None and os.path.isfile(p)]
    return list(dict.fromkeys(out))


def _head(path: str, n: int, where: str) -> str:
    """The first `n` rows of a data file, written to `where` (the sandbox's /tmp) in the same format."""
    if path.endswith(".parquet"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        batch = next(pq.ParquetFile(path).iter_batches(batch_size=n), None)
        table = pa.Table.from_batches([batch]) if batch is not None else pq.read_schema(path).empty_table()
        out = os.path.join(where, "head.parquet")
        pq.write_table(table, out)
        return out
    out = os.path.join(where, "head" + (".jsonl" if path.endswith(".jsonl") else ".json"))
    with open(path, "rb") as src, open(out, "wb") as dst:
        if path.endswith(".jsonl"):
            for _ in range(n):
                line = src.readline(1 << 20)
                if not line:
                    break
                dst.write(line)
        else:
            dst.write(src.read(8 << 20))
    return out


def _first_row(files: list[str]) -> dict[str, Any]:
    for path in files:
        try:
            if path.endswith(".parquet"):
                import pyarrow.parquet as pq

                batch = next(pq.ParquetFile(path).iter_batches(batch_size=1), None)
                rows = batch.to_pylist() if batch is not None else []
            elif path.endswith(".jsonl"):
                with open(path, "rb") as fh:
                    rows = [json.loads(fh.readline(1 << 20))]
            else:
                continue
        except Exception:  # noqa: BLE001 - the data phase reports unreadable files
            continue
        if rows and isinstance(rows[0], dict):
            return rows[0]
    return {}


def _tokenizer(cfg: Any, model_dir: str | None, p: Phases) -> tuple[Any, Any]:
    """(tokenizer, processor) from the model's folder, as verl's HFModelConfig loads them (workers/config/model.py:
    160-171): the processor is verl's hf_processor, None for a text model, with the tokenizer's chat template when it
    has none of its own."""
    path = _local(cfg.actor_rollout_ref.model.get("tokenizer_path")) or _local(cfg.actor_rollout_ref.model.path)
    path = path or model_dir
    if not path:
        p.notes.append("the model is not a local folder and no --model-dir was given: the reward manager and the "
                       "dataset, which need its tokenizer, were not built")
        return None, None
    from transformers import AutoTokenizer

    remote = bool(cfg.data.get("trust_remote_code", False))
    try:
        tok = AutoTokenizer.from_pretrained(path, trust_remote_code=remote)
    except Exception as exc:  # noqa: BLE001
        p.notes.append(f"the tokenizer in {path} does not load ({_msg(exc)}): the reward manager and dataset were "
                       "not built")
        return None, None
    from verl.utils import hf_processor

    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        proc = hf_processor(path, trust_remote_code=remote)  # None, with a warning, when it cannot build one
    if proc is not None and not getattr(proc, "chat_template", None) and getattr(tok, "chat_template", None):
        proc.chat_template = tok.chat_template
    if proc is None and os.path.isfile(os.path.join(path, "preprocessor_config.json")):
        why = next((str(w.message) for w in said if "processor" in str(w.message)), "no reason given")
        p.notes.append(f"verl's hf_processor does not build {path}'s processor here ({why[:200]}): rows with images "
                       "were not built (verl would stop on them on a machine like this one)")
        proc = NO_PROCESSOR
    return tok, proc


def reward_phase(cfg: Any, tok: Any, row: dict[str, Any], p: Phases) -> None:
    from verl.trainer.ppo.reward import get_custom_reward_fn, resolve_reward_manager_cls
    from verl.utils.reward_score import default_compute_score

    fn_keys = ["reward.custom_reward_function.path", "reward.custom_reward_function.name"]
    try:
        fn = get_custom_reward_fn(cfg)
    except Exception as exc:  # noqa: BLE001
        p.fail("VI875", "reward", fn_keys, f"verl cannot load the reward function: {_msg(exc)}",
               "fix the file or the function name (verl imports it when the reward loop starts)")
        return
    rm_keys = ["reward.reward_manager.name", "reward.reward_manager.source"]
    try:
        resolve_reward_manager_cls(cfg)
    except Exception as exc:  # noqa: BLE001
        p.fail("VI875", "reward", rm_keys, f"verl cannot find the reward manager: {_msg(exc)}",
               "name a registered reward manager (naive, dapo, prime, ...) or fix reward_manager.module.path")
        return
    if tok is not None:
        from verl.trainer.ppo.reward import load_reward_manager

        try:
            load_reward_manager(cfg, tok)
        except Exception as exc:  # noqa: BLE001
            p.fail("VI875", "reward", rm_keys, f"verl's reward manager does not build on this config: {_msg(exc)}",
                   "fix the reward manager's settings (reward.reward_kwargs, reward.reward_manager.*)")
            return
    rm = row.get("reward_model") if isinstance(row.get("reward_model"), dict) else {}
    truth = rm.get("ground_truth", "42")
    source = row.get("data_source", "openai/gsm8k")
    extra = row.get("extra_info") if isinstance(row.get("extra_info"), dict) else {}
    answer = f"The answer is \\boxed{{{truth}}}.\n#### {truth}"
    keys = fn_keys if fn is not None else ["data.train_files"]
    try:
        score = (fn or default_compute_score)(data_source=source, solution_str=answer, ground_truth=truth,
                                              extra_info=extra)
        if hasattr(score, "__await__"):
            import asyncio

            score = asyncio.run(score)
    except Exception as exc:  # noqa: BLE001
        what = "your reward function" if fn is not None else "verl's default_compute_score"
        p.fail("VI875", "reward", keys, f"{what} raised on a sample (data_source={source!r}): {_msg(exc)}",
               "set reward.custom_reward_function for this data_source, or fix the function" if fn is None
               else "fix the function: verl calls fn(data_source, solution_str, ground_truth, extra_info)")
        return
    value = score.get("score") if isinstance(score, dict) else score
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        p.fail("VI875", "reward", keys, f"the score function returned {type(score).__name__} "
               f"{str(score)[:80]!r}: verl's reward managers need a number or a dict with 'score'",
               "return a float, or {'score': float, ...}")
        return
    if fn is not None and not _is_async(fn):
        _thread_score(fn, dict(data_source=source, solution_str=answer, ground_truth=truth, extra_info=extra),
                      value, keys, p)


def _is_async(fn: Any) -> bool:
    import inspect

    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "func", None))


def _thread_score(fn: Any, kwargs: dict[str, Any], main: float, keys: list[str], p: Phases) -> None:
    """The function called as verl's reward-loop managers call a synchronous one: `loop.run_in_executor(None, ...)`,
    in a worker thread (experimental/reward_loop/reward_manager/naive.py:74-84). A score that differs from the
    main thread's (signal.alarm timeouts: signal.signal raises ValueError off the main thread, and math_verify
    returns 0 for it) is what every sample of the run gets (verl PR#5635)."""
    import asyncio

    async def in_executor() -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, lambda: fn(**kwargs))

    try:
        score = asyncio.run(in_executor())
    except Exception as exc:  # noqa: BLE001
        p.fail("VI875", "reward", keys, f"your reward function returns {main!r} in the main thread but raises in a "
               f"worker thread, where verl's reward managers call it (reward_manager/naive.py:74-84): {_msg(exc)}",
               "drop signal-based timeouts (signal.alarm; math_verify's parsing_timeout/timeout_seconds=None), or "
               "make the function async def")
        return
    value = score.get("score") if isinstance(score, dict) else score
    if value != main:
        try:  # a function that scores at random (or keeps state) is not this finding's business
            again = fn(**kwargs)
        except Exception:  # noqa: BLE001
            return
        if (again.get("score") if isinstance(again, dict) else again) != main:
            return
        p.fail("VI875", "reward", keys, f"your reward function scores a correct sample {main!r} in the main thread "
               f"but {value!r} in a worker thread, where verl's reward managers call it (loop.run_in_executor, "
               "reward_manager/naive.py:74-84): signal-based timeouts (signal.alarm, math_verify's defaults) fail "
               "there, so every reward of the run is the worker thread's (verl PR#5635)",
               "drop signal-based timeouts (math_verify.parse(..., parsing_timeout=None), verify(..., "
               "timeout_seconds=None), no signal.alarm), or make the function async def")


def data_phase(cfg: Any, tok: Any, files: list[str], p: Phases, where: str, proc: Any = None) -> None:
    from verl.utils.dataset.rl_dataset import get_dataset_class

    keys = ["data.custom_cls.path", "data.custom_cls.name"] if cfg.data.get("custom_cls", {}).get("path") else \
        ["data.train_files"]
    try:
        cls = get_dataset_class(cfg.data)
    except Exception as exc:  # noqa: BLE001
        p.fail("VI876", "data", keys, f"verl cannot load the dataset class: {_msg(exc)}",
               "fix data.custom_cls.path / name (a torch Dataset subclass)")
        return
    if tok is None or not files:
        if not files:
            p.notes.append("no data file is reachable here: the dataset was not built")
        return
    for path in files:
        key = "data.train_files"
        try:
            head = _head(path, ROWS, where)
            if proc is NO_PROCESSOR and _has_media(head, cfg.data):
                continue
            ds = cls(data_files=[head], tokenizer=tok, config=cfg.data, processor=None if proc is NO_PROCESSOR else proc)
            for i in range(min(len(ds), ROWS)):
                ds[i]
        except Exception as exc:  # noqa: BLE001
            p.fail("VI876", "data", [key, *([k for k in keys if k != key])],
                   f"verl's {getattr(cls, '__name__', 'dataset')} raised on the first rows of {path}: {_msg(exc)}",
                   "fix the rows (data.prompt_key, the chat format) or the data.* keys; `verl-init validate-dataset "
                   "FILE` names the row")
            continue
        _dropped(cfg, ds, _rows_in(head), path, p)


def _has_media(head: str, data: Any) -> bool:
    """A row of the head file carries images or videos under the keys verl's dataset reads (rl_dataset.py:315-316)."""
    import datasets

    keys = [data.get("image_key", "images"), data.get("video_key", "videos")]
    rows = datasets.load_dataset("parquet" if head.endswith(".parquet") else "json", data_files=head, split="train")
    return any(row.get(k) for row in rows for k in keys)


def _rows_in(head: str) -> int:
    try:
        if head.endswith(".parquet"):
            import pyarrow.parquet as pq

            return int(pq.ParquetFile(head).metadata.num_rows)
        if head.endswith(".jsonl"):
            with open(head, "rb") as fh:
                return sum(1 for line in fh if line.strip())
        return 0  # a JSON document: the count is not worth a second parse
    except Exception:  # noqa: BLE001 - the dataset read it: a count it cannot give is no finding
        return 0


def _dropped(cfg: Any, ds: Any, given: int, path: str, p: Phases) -> None:
    """Rows verl's dataset drops without raising: filter_overlong_prompts keeps a row only when its prompt, as the
    model's chat template and processor (images included) make it, fits max_prompt_length, and a row whose prompt
    fails to process counts as too long (utils/dataset/rl_dataset.py:197-277, "skipping...")."""
    try:
        kept = len(ds)
    except Exception:  # noqa: BLE001 - a custom class without a length
        return
    if not given or kept >= given:
        return
    limit = cfg.data.get("max_prompt_length")
    what = (f"verl's dataset keeps {kept} of the first {given} rows of {path}: with data.filter_overlong_prompts it "
            f"drops a row whose prompt (chat template, images and all) is longer than data.max_prompt_length={limit} "
            "tokens, or fails to process, and says only 'skipping'")
    tok, proc = getattr(ds, "tokenizer", None), getattr(ds, "processor", None)
    untemplated = tok is not None and not getattr(tok, "chat_template", None) and not (
        proc is not None and getattr(proc, "chat_template", None)) and not cfg.data.get("apply_chat_template_kwargs",
                                                                                         {}).get("chat_template")
    if kept == 0 and untemplated:  # every row failed to process: the template verl applies is missing (VI908)
        p.fail("VI876", "data", ["actor_rollout_ref.model.custom_chat_template", "data.train_files"],
               what + "; here every row fails: the model's tokenizer has no chat template",
               "set actor_rollout_ref.model.custom_chat_template (a base model's own format), or use the model's "
               "instruct variant")
    elif kept == 0:
        p.fail("VI876", "data", ["data.max_prompt_length", "data.train_files"], what,
               "raise data.max_prompt_length (image tokens count), or fix the rows: `verl-init validate-dataset "
               "FILE` names the row")
    else:
        p.notes.append(what)


def multi_turn(cfg: Any) -> bool:
    """Whether the run calls tools: multi-turn on, a tool config, or the tool agent loop as the default."""
    rollout = cfg.actor_rollout_ref.rollout
    turns, agent = rollout.get("multi_turn") or {}, rollout.get("agent") or {}
    return bool(turns.get("enable") or turns.get("tool_config_path") or agent.get("default_agent_loop") == "tool_agent")


def tools_phase(cfg: Any, tok: Any, p: Phases) -> None:
    """The parser multi_turn.format names, on the tool call the model's own chat template writes."""
    if tok is None:
        return
    from wizard.verlspec.toolcall import probe, shown

    fmt = str((cfg.actor_rollout_ref.rollout.get("multi_turn") or {}).get("format") or "hermes")
    found = probe(tok)
    if found.rendered is None:
        p.notes.append(f"the model's chat template writes no tool call ({found.reason[:160]}): {FORMAT} was not "
                       "compared with it")
        return
    if fmt in found.readers:
        return
    turn = shown(found.rendered)
    what = (f"verl's {fmt!r} tool-call parser does not read the tool call this model's chat template writes "
            f"({turn!r}): each turn would end with no tool called, silently")
    if found.readers:
        p.fail("VI863", "tools", [FORMAT], f"{what}; verl's {', '.join(found.readers)} parser reads it",
               f"set {FORMAT}={found.readers[0]}")
    else:
        # no parser reads the template's rendering: it may differ from what the model generates (gpt-oss's template
        # renders a call's header in another order than the model writes it), so this is no proof; the default
        # check's VI910 says it with the severity the format's origin allows
        p.notes.append(f"{what.split(':')[0]}; no parser verl registers reads it either, so the rendering may not be "
                       f"what the model generates: {FORMAT} was not judged (see VI910)")


def sft_phase(bundle: str, model_dir: str | None, p: Phases, where: str) -> None:
    """verl's SFT dataset on the first rows of each data file, as sft_trainer builds it (create_sft_dataset:
    data.custom_cls, else MultiTurnSFTDataset) and reads its items (multiturn_sft_dataset.py asserts, among others,
    that the messages tokenized turn by turn equal the whole conversation under the chat template)."""
    from omegaconf import OmegaConf

    from wizard.check.source import read_yaml

    cfg = OmegaConf.create(read_yaml(os.path.join(bundle, "verl_config.yaml")) or {})
    data = cfg.get("data") or OmegaConf.create({})
    model = cfg.get("model") or OmegaConf.create({})
    files = [f for f in (_local(v) for k in ("train_files", "val_files")
                         for v in ([data.get(k)] if isinstance(data.get(k), str) else list(data.get(k) or [])))
             if f is not None and os.path.isfile(f)]
    path = _local(model.get("tokenizer_path")) or _local(model.get("path")) or model_dir
    if not files or not path:
        p.notes.append("no data file or no local model folder here: verl's SFT dataset was not built")
        return
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path, trust_remote_code=bool(model.get("trust_remote_code", False)))
    if data.get("custom_cls", {}).get("path"):
        from verl.utils.import_utils import load_extern_object

        cls = load_extern_object(data.custom_cls.path, data.custom_cls.name)
    else:
        from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset as cls
    name = getattr(cls, "__name__", "SFT dataset")
    for f in dict.fromkeys(files):
        try:
            head = _head(f, ROWS, where)
            ds = cls(parquet_files=[head], tokenizer=tok, config=data, processor=None)
            for i in range(min(len(ds), ROWS)):
                ds[i]
        except Exception as exc:  # noqa: BLE001 - what verl raises is the answer
            p.fail("VI876", "data", ["data.train_files", "data.messages_key"],
                   f"verl's {name} raised on the first rows of {f}: {_msg(exc)}",
                   "fix what verl's message names (the data keys, the rows, or the setting it asks for)")
            continue
        p.notes.append(f"verl's {name} built and read the first rows of {f}")
        if data.get("ignore_input_ids_mismatch") and not data.get("custom_cls", {}).get("path"):
            _hidden_mismatch(cls, head, tok, data, f, p)


def _hidden_mismatch(cls: Any, head: str, tok: Any, data: Any, f: str, p: Phases) -> None:
    """VI683: data.ignore_input_ids_mismatch=true turns verl's turn-by-turn vs whole-conversation assert into a
    warning_once (utils/dataset/multiturn_sft_dataset.py:425-470): read the same rows with it off, where verl's own
    sanity_check says whether the tokens the run trains on are the chat template's."""
    from omegaconf import OmegaConf

    strict = OmegaConf.merge(data, {"ignore_input_ids_mismatch": False})
    ds = cls(parquet_files=[head], tokenizer=tok, config=strict, processor=None)
    rows = min(len(ds), ROWS)
    bad = 0
    for i in range(rows):
        try:
            ds[i]
        except AssertionError:
            bad += 1
    if bad:
        p.fail("VI683", "data", ["data.ignore_input_ids_mismatch", "data.train_files"],
               f"data.ignore_input_ids_mismatch=true hides that verl's MultiTurnSFTDataset, which tokenizes each "
               f"turn apart (multiturn_sft_dataset.py:214-222), gets other tokens than the chat template over the "
               f"whole conversation on {bad} of the first {rows} rows of {f} (its sanity_check, :425-470, only "
               "warns once): the run trains on sequences the template never renders at inference (verl#7807)",
               "make the turns concatenate to the whole conversation (a chat template that renders every assistant "
               "turn alike, or data that keeps reasoning on the last turn only), then drop "
               "data.ignore_input_ids_mismatch", severity="warning")


def main(argv: list[str]) -> int:
    bundle, model_dir, phases = argv[0], argv[1] or None, set(argv[2].split(","))
    out = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    result: dict[str, Any] = {"verl": None, "findings": [], "notes": []}
    p = Phases()
    tok: Any = None
    proc: Any = None
    from wizard.verify.harness import compose_bundle, verify_with_verl

    if phases == {"sft"}:
        try:
            with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
                warnings.simplefilter("ignore")
                sft_phase(bundle, model_dir, p, os.environ.get("TMPDIR", "/tmp"))
        except BaseException as exc:  # noqa: BLE001 - whatever verl or the user's code raises is the answer
            p.fail("VI876", "data", [], f"verl's SFT data code stopped: {_msg(exc)}", "fix the key verl's message names")
        phases = set()
    if "config" in phases:
        try:
            rep = verify_with_verl(bundle, model_dir=model_dir)
            result["verl"] = {"bundle": rep.bundle, "verl_version": rep.verl_version, "blocked": rep.blocked,
                              "substitutions": rep.substitutions, "checks": [c.__dict__ for c in rep.checks]}
        except BaseException as exc:  # noqa: BLE001 - whatever verl raises is the answer
            p.fail("VI874", "config", [], f"verl's config code stopped: {_msg(exc)}", "fix the key verl's message names")
    loaded = False
    for phase in ("reward", "data", "tools"):
        if phase not in phases:
            continue
        try:
            with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
                warnings.simplefilter("ignore")
                cfg = compose_bundle(bundle)
                files = _files(cfg)
                if phase == "tools" and not multi_turn(cfg):
                    continue
                (tok, proc), loaded = ((tok, proc), loaded) if loaded else (_tokenizer(cfg, model_dir, p), True)
                if phase == "reward":
                    reward_phase(cfg, tok, _first_row(files), p)
                elif phase == "data":
                    data_phase(cfg, tok, files, p, os.environ.get("TMPDIR", "/tmp"), proc)
                else:
                    tools_phase(cfg, tok, p)
        except BaseException as exc:  # noqa: BLE001 - whatever verl or the user's code raises is the answer
            p.fail(RULES[phase], phase, [], f"verl's {phase} code stopped: {_msg(exc)}",
                   "fix the key verl's message names")
    result["findings"], result["notes"] = p.findings, p.notes
    os.write(out, (MARK + json.dumps(result, default=str) + "\n").encode())
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
