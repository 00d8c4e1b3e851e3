"""What every rule reads: `Ctx` (the resolved values, recording each key a rule reads, and `add` for
findings), `Facts` (quantities several rules need) and small helpers for hints.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wizard._pysource import parse_module  # noqa: F401 (re-exported: the rules' one reader of a named Python file)
from wizard.check.catalog import RULES
from wizard.check.hardware import Hardware
from wizard.check.report import Finding, Fix
from wizard.check.resolve import Resolved
from wizard.check.shellargs import PLACEHOLDER
from wizard.check.source import Source
from wizard.intent.errors import Problem
from wizard.verlspec import arithmetic as rc
from wizard.verlspec import lora as verl_lora
from wizard.verlspec.keys import MISSING


class Ctx:
    """The resolved config as the rules see it: `v(key)` reads a value (and records the key for the report's
    `config`), `add(...)` records a finding under an ID of wizard.check.catalog.RULES."""

    def __init__(self, src: Source, res: Resolved, hw: Hardware, env: Mapping[str, str],
                 findings: list[Finding]) -> None:
        self.src, self.res, self.hw, self.env = src, res, hw, env
        self.findings = findings
        self.used: dict[str, Any] = {}
        self.memory: Any = None  # wizard.planner.memory.Estimate when the memory fit was checked
        self.bad: set[str] = set()  # counts that are not positive whole numbers (VI808)
        self.typed: set[str] = set()  # keys VI808 already reported during key validation
        self.vision_fallback_s = 0.0  # VI837: seconds a sequence's images add to each training pass (the step time)

    # values
    def v(self, key: str, default: Any = None) -> Any:
        value = self.res.flat.get(key, default)
        self.used[key] = value
        return value

    def unknown(self, *keys: str) -> bool:
        for k in keys:
            value = self.v(k)
            if value == MISSING or (isinstance(value, str) and PLACEHOLDER in value):
                return True
        return False

    def num(self, key: str) -> float | None:
        value = self.v(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return value

    def int(self, key: str) -> int | None:
        value = self.num(key)
        if key in self.bad or value is None or not float(value).is_integer():
            return None
        return int(value)

    def set_by_user(self, key: str) -> bool:
        return key in self.res.user

    def add(self, rule: str, severity: str, keys: Iterable[str], message: str, hint: str = "",
            fix: Fix | None = None) -> None:
        assert rule in RULES, rule
        self.findings.append(Finding(Problem(rule, severity, tuple(keys), message, hint), fix))  # type: ignore[arg-type]


A = "actor_rollout_ref.actor"
R = "actor_rollout_ref.rollout"
REF = "actor_rollout_ref.ref"
M = "actor_rollout_ref.model"


@dataclass
class Facts:
    """Quantities several rules need; None where a value is unresolved or not a number."""

    n_gpus: int | None
    gpn: int | None
    nnodes: int | None
    megatron: bool
    sp: int
    ref_sp: int
    critic_sp: int
    dp: int | None
    n: int | None
    tbs: int | None
    mini: int | None
    seq: int | None
    dynamic: bool
    use_ref: bool
    use_critic: bool
    critic_mini: int | None
    critic_dp: int | None
    lora: int  # the LoRA rank the actor's training engine applies (0: all weights; wizard.verlspec.lora.engine_rank)
    adv: Any
    token_sp: tuple[int, int, int] = (1, 1, 1)  # the factor verl multiplies token budgets by: actor, ref, critic
    lora_vllm: int = 0  # the rank vLLM serves adapters of (0 with lora.merge; wizard.verlspec.lora.vllm_rank)


def _token_sp(c: Ctx, prefix: str, ulysses: int) -> int:
    """wizard.verlspec.arithmetic.token_split for one role's engine (model_engine / strategy)."""
    engine = str(c.v("model_engine") or "")
    strategy = str(c.v(f"{prefix}.strategy") or "")
    kind = "megatron" if "megatron" in (engine, strategy) else "veomni" if "veomni" in (engine, strategy) else "fsdp"
    return rc.token_split(kind, ulysses=ulysses, context_parallel=c.int(f"{prefix}.megatron.context_parallel_size") or 1,
                          veomni_ulysses=c.int(f"{prefix}.veomni.ulysses_parallel_size") or 1)


POSITIVE = ("trainer.nnodes", "trainer.n_gpus_per_node", "data.train_batch_size", "data.max_prompt_length",
            "data.max_response_length", f"{A}.ppo_mini_batch_size", f"{A}.ppo_micro_batch_size_per_gpu",
            f"{A}.ppo_max_token_len_per_gpu", f"{R}.log_prob_micro_batch_size_per_gpu", f"{R}.log_prob_max_token_len_per_gpu",
            f"{REF}.log_prob_micro_batch_size_per_gpu", f"{REF}.log_prob_max_token_len_per_gpu",
            f"{R}.tensor_model_parallel_size", f"{R}.data_parallel_size", f"{R}.pipeline_model_parallel_size",
            f"{A}.ulysses_sequence_parallel_size", f"{A}.fsdp_config.ulysses_sequence_parallel_size",
            f"{A}.megatron.tensor_model_parallel_size", f"{A}.megatron.pipeline_model_parallel_size",
            f"{A}.megatron.context_parallel_size", "critic.ppo_mini_batch_size", "critic.ppo_micro_batch_size_per_gpu",
            "critic.ppo_max_token_len_per_gpu")


def _positive(c: Ctx, key: str) -> int | None:
    """A count verl divides by: a positive whole number, else an error and None (rules that need it skip)."""
    value = c.v(key)
    if value is None or c.unknown(key):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer() or value < 1:
        if key not in c.bad:
            c.bad.add(key)
            if key not in c.typed:
                c.add("VI808", "error", (key,), f"{key}={value!r} must be a whole number ≥ 1", "give a positive count")
        return None
    return int(value)


def facts(c: Ctx) -> Facts:
    """The shared quantities; a VI808 error for each count in POSITIVE that is not a positive whole number. The fully
    async entry point takes no train_batch_size (its rollouter asserts 0, experimental/fully_async_policy/
    fully_async_rollouter.py:351; the trainer's batch is require_batches × ppo_mini_batch_size): tbs is None."""
    fully_async = getattr(c.src, "entry", "ppo") == "fully_async"
    for key in POSITIVE:
        if not (fully_async and key == "data.train_batch_size"):
            _positive(c, key)
    gpn, nnodes = _positive(c, "trainer.n_gpus_per_node"), _positive(c, "trainer.nnodes")
    n_gpus = gpn * nnodes if gpn is not None and nnodes is not None else None
    megatron = c.v(f"{A}.strategy") == "megatron"
    sp = rc.effective_sp(c.int(f"{A}.ulysses_sequence_parallel_size"), c.int(f"{A}.fsdp_config.ulysses_sequence_parallel_size"))
    ref_sp = rc.effective_sp(c.int(f"{REF}.ulysses_sequence_parallel_size"), c.int(f"{REF}.fsdp_config.ulysses_sequence_parallel_size"))
    # the critic's engine is critic.fsdp: verl 0.9 does not copy the deprecated critic key there (critic/config.py)
    critic_sp = c.int("critic.fsdp.ulysses_sequence_parallel_size") or 1
    dp = None
    if n_gpus is not None:
        if megatron:
            tp, pp, cp = (c.int(f"{A}.megatron.tensor_model_parallel_size") or 1, c.int(f"{A}.megatron.pipeline_model_parallel_size") or 1,
                          c.int(f"{A}.megatron.context_parallel_size") or 1)
            dp = rc.data_parallel_size(n_gpus, megatron=True, tp=tp, pp=pp, cp=cp)
        else:
            dp = rc.data_parallel_size(n_gpus, sp=sp)
    p, r = c.int("data.max_prompt_length"), c.int("data.max_response_length")
    enable = c.v("critic.enable")
    adv = c.v("algorithm.adv_estimator")
    use_critic = bool(enable) if enable is not None else adv == "gae"
    use_ref = bool(c.v("algorithm.use_kl_in_reward")) or bool(c.v(f"{A}.use_kl_loss"))
    critic_dp = None
    if use_critic and n_gpus is not None:
        if c.v("critic.strategy") == "megatron":
            critic_dp = rc.data_parallel_size(
                n_gpus, megatron=True, tp=c.int("critic.megatron.tensor_model_parallel_size") or 1,
                pp=c.int("critic.megatron.pipeline_model_parallel_size") or 1,
                cp=c.int("critic.megatron.context_parallel_size") or 1)
        else:
            critic_dp = rc.data_parallel_size(n_gpus, sp=critic_sp)
    model = {"lora_rank": c.int(f"{M}.lora_rank"),
             "lora": {"rank": c.int(f"{M}.lora.rank"), "merge": bool(c.v(f"{M}.lora.merge"))}}
    lora = verl_lora.engine_rank(model, megatron=megatron)
    return Facts(n_gpus=n_gpus, gpn=gpn, nnodes=nnodes, megatron=megatron, sp=sp, ref_sp=ref_sp, critic_sp=critic_sp,
                 dp=dp, n=c.int(f"{R}.n"), tbs=None if fully_async else c.int("data.train_batch_size"),
                 mini=c.int(f"{A}.ppo_mini_batch_size"),
                 seq=p + r if p is not None and r is not None else None, dynamic=bool(c.v(f"{A}.use_dynamic_bsz")),
                 use_ref=use_ref, use_critic=use_critic, critic_mini=c.int("critic.ppo_mini_batch_size"),
                 critic_dp=critic_dp, lora=lora, adv=adv,
                 token_sp=(_token_sp(c, A, sp), _token_sp(c, REF, ref_sp), _token_sp(c, "critic", critic_sp)),
                 lora_vllm=verl_lora.vllm_rank(model))


def join_or(values: Iterable[Any]) -> str:
    """Hint text: "a or b"."""
    return " or ".join(str(v) for v in values)


def nearest(candidates: Iterable[int], target: int, k: int = 2) -> list[int]:
    """The k positive candidates nearest to target."""
    return rc.nearest([c for c in candidates if c > 0], target, k)


divisors = rc.divisors


def model_shape(c: Ctx, key: str) -> tuple[Any, str]:
    """(ModelShape or None, why not)."""
    from wizard.planner.shapes import resolve_shape

    path = c.v(key)
    if not isinstance(path, str) or c.unknown(key):
        return None, f"{key} is unresolved"
    folder = model_folder(c, path)
    name = str(folder) if folder is not None else path
    try:
        shape = resolve_shape(name)
    except Exception as exc:  # noqa: BLE001 - a broken local config.json
        return None, f"cannot read {name}/config.json ({type(exc).__name__})"
    if shape is None:
        return None, f"{path!r} is not in verl-init's model catalogue and has no size in its name"
    return shape, ""


_URL = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)


def local_path(c: Ctx, path: str) -> Path | None:
    """A path the run reads from local disk (relative ones from the working folder); None for URLs/hub ids."""
    if _URL.match(path):
        return None
    if path.startswith("~"):
        home = c.env.get("HOME")
        if home is None:
            return None
        path = home + path[1:]
    p = Path(path)
    return p if p.is_absolute() else c.src.workdir / p


def local_data_files(c: Ctx, suffixes: tuple[str, ...]) -> list[tuple[str, str, Path]]:
    """(key, the path as written, the file here) for each data.train_files / data.val_files entry that is a file on
    this machine with one of `suffixes`; a file named twice is listed once."""
    out: list[tuple[str, str, Path]] = []
    for key in ("data.train_files", "data.val_files"):
        value = c.v(key)
        if c.unknown(key) or value is None:
            continue
        for path in [value] if isinstance(value, str) else value if isinstance(value, list) else []:
            if not isinstance(path, str) or PLACEHOLDER in path:
                continue
            local = local_path(c, path)
            if local is not None and local.is_file() and local.suffix in suffixes and local not in {p for *_, p in out}:
                out.append((key, path, local))
    return out


HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")


def model_folder(c: Ctx, path: str) -> Path | None:
    """The folder a model path's files are in on this machine: the path itself when it is a local folder; for a hub id
    ("Qwen/Qwen2.5-7B-Instruct") that is not one, its snapshot in this machine's Hugging Face cache when config.json is
    there (huggingface_hub.try_to_load_from_cache: the cache's refs, no network, nothing downloaded; HF_HUB_CACHE /
    HF_HOME say where it is, as for verl's own loads). None otherwise."""
    local = local_path(c, path)
    if local is not None and local.is_dir():
        return local
    if local is None or not HUB_ID.fullmatch(path):
        return None
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(path, "config.json")
    except Exception:  # noqa: BLE001 - an unreadable cache, a malformed id: as if not cached
        return None
    return Path(found).parent if isinstance(found, str) else None


MAX_SCRIPT_BYTES = 1 << 20  # a launch script's text, read for what bash's run does not record (#SBATCH, `ray start`)


def script_text(c: Ctx) -> str | None:
    """The launch script's text, up to MAX_SCRIPT_BYTES: "" when the target is not a script, None when unreadable."""
    ex = c.src.extraction
    if c.src.kind != "script" or ex is None or not ex.script:
        return ""
    from wizard._io import read_user_file

    try:
        return read_user_file(ex.script, MAX_SCRIPT_BYTES).decode("utf-8", errors="replace")
    except (OSError, ValueError):
        return None


MAX_JSON_BYTES = 1 << 20  # a model's or an adapter's config.json


def folder_json(folder: Path | None, name: str) -> dict | None:
    """The JSON mapping `name` (config.json, adapter_config.json) in a folder on this machine, read up to
    MAX_JSON_BYTES; None when the folder or file is not here, unreadable, larger, or not a mapping."""
    if folder is None:
        return None
    from wizard._io import UnsafeInput, read_user_file, safe_json

    try:
        doc = safe_json(read_user_file(str(folder / name), MAX_JSON_BYTES))
    except (OSError, ValueError, UnsafeInput):
        return None
    return doc if isinstance(doc, dict) else None


def submit_words(c: Ctx) -> list[str] | None:
    """The launcher's words from `ray job submit` on (also behind a launcher: `uv run ray job submit ...`,
    `/opt/venv/bin/ray job submit ...`), as bash's run recorded them; None when the script does not submit."""
    ex = c.src.extraction
    words = ex.via if ex is not None else []
    at = next((i for i in range(len(words) - 2)
               if words[i].rsplit("/", 1)[-1] == "ray" and words[i + 1:i + 3] == ["job", "submit"]), None)
    return None if at is None else words[at:]
