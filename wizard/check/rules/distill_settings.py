"""On-policy distillation settings verl refuses inside the Ray job, or accepts and does not apply.

With `distillation.enabled`, verl builds DistillationConfig from the resolved `distillation` section only inside the
Ray job (omega_conf_to_dataclass, trainer/ppo/v1/trainer_base.py:360; ray_trainer.py:934), so what its
__post_init__ raises comes after the cluster is up. The teachers it keeps are the default `teacher_model` entry alone,
or every other entry when more are given (workers/config/distillation.py:289-310, distill.teacher_names).

- VI617: DistillationLossConfig.__post_init__ (workers/config/distillation.py:100-124) looks the loss mode up in
  verl's registry (trainer/distillation/losses.py:100-106, KeyError-like ValueError for an unknown mode), refuses a
  policy_loss_mode other than "vanilla" (NotImplementedError, :106-110) and k1 without policy gradient ("Directly
  backpropagating k1 loss is incorrect", :120-124). Which mode × update verl accepts is
  wizard/check/data/verl_distill_losses.json, written by scripts/verl_distill_losses.py from verl's own constructor.
- VI620: a loss that uses top-k (the registry's use_topk: forward_kl_topk) makes each teacher return top-k
  log-probs; DistillationTeacherModelConfig._validate_topk_logprobs (distillation.py:188-218) raises when topk is null
  (:191-192), when the teacher's vLLM `engine_kwargs.vllm.max_logprobs` is below topk (:203-207), and for an engine
  other than vllm/sglang (:215-218). Left unset, verl sets max_logprobs to topk itself (:199-202).
- VI621: a teacher's `inference.temperature` is never applied: the teacher only scores the student's tokens
  (prompt_logprobs), and experimental/teacher_loop/teacher_manager.py:45-56 logs a warning inside the worker and
  sends temperature 1.0 (real case verl#7769, a user who wanted the teacher at the student's temperature). Only a
  value the user set on the teacher is reported; the default inherits the student's rollout temperature
  (trainer/config/distillation/distillation.yaml) and means nothing either way.
- VI622: verl sends the student's token ids to the teacher as they are (teacher_manager.py:116-144,
  `prompt_ids=sequence_ids`; the teacher server starts with skip_tokenizer_init: true, distillation.yaml) and
  distils against the log-probs the teacher gives those ids: a teacher whose tokenizer maps tokens to other ids
  (verl-project/verl-omni#382: verl's OPD assumes one shared tokenizer) trains the student on another text's
  log-probs without an error. Read from the local tokenizer files of both models; a bigger embedding alone
  (Qwen2.5-7B's 152064 rows against 0.5B's 151936, one tokenizer) is no mismatch.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import M, Ctx, Facts, model_folder
from wizard.check.rules.distill import DEFAULT_TEACHER, TEACHERS, teacher_names

D = "distillation"
LOSS = f"{D}.distillation_loss"
MAX_TOKENIZER_BYTES = 64 << 20  # a tokenizer.json (Llama 3's is 9 MB; multilingual ones reach ~35 MB)


@lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    text = resources.files("wizard.check").joinpath("data/verl_distill_losses.json").read_text(encoding="utf-8")
    return json.loads(text)


def active_teachers(flat: dict[str, Any]) -> list[str]:
    """The entries verl keeps: `teacher_model` alone, else every other entry (distillation.py:289-310)."""
    names = teacher_names(flat)
    if len(names) <= 1:
        return names
    return [n for n in names if n != DEFAULT_TEACHER]


def _enabled(c: Ctx) -> bool:
    return c.v(f"{D}.enabled") is True


def rule_distill_loss(c: Ctx, f: Facts) -> None:
    """VI617: a loss mode / update / policy loss verl's DistillationLossConfig refuses."""
    if not _enabled(c):
        return
    mode_key, pg_key, pl_key = f"{LOSS}.loss_mode", f"{LOSS}.use_policy_gradient", f"{LOSS}.policy_loss_mode"
    if c.unknown(mode_key, pg_key, pl_key):
        return
    mode, pg, policy = c.v(mode_key), c.v(pg_key), c.v(pl_key)
    modes, policies = table()["loss_modes"], table()["policy_loss_modes"]
    if isinstance(mode, str) and mode not in modes:
        c.add("VI617", "error", [mode_key],
              f"{mode_key}={mode} is not a distillation loss verl registers ({', '.join(sorted(modes))}): "
              "DistillationLossConfig raises \"Unsupported loss mode\" (trainer/distillation/losses.py:100-106) "
              "inside the Ray job (trainer/ppo/v1/trainer_base.py:360)", f"set {mode_key} to one of them")
        return
    if isinstance(policy, str) and policy not in policies:
        c.add("VI617", "error", [pl_key],
              f"{pl_key}={policy}: verl's DistillationLossConfig accepts only {', '.join(policies)} and raises "
              "NotImplementedError (workers/config/distillation.py:106-110) inside the Ray job",
              f"set {pl_key}={policies[0]}", fix=Fix(set={pl_key: policies[0]}) if c.set_by_user(pl_key) else None)
    if not isinstance(mode, str) or not isinstance(pg, bool):
        return
    verdict = modes[mode]["policy_gradient" if pg else "supervised"]
    if verdict == "ok":
        return
    other = modes[mode]["supervised" if pg else "policy_gradient"]
    fix = Fix(set={pg_key: not pg}) if other == "ok" else None
    c.add("VI617", "error", [mode_key, pg_key],
          f"{mode_key}={mode} with {pg_key}={pg}: verl's DistillationLossConfig raises {verdict[len('raises: '):]} "
          "(workers/config/distillation.py:100-124), inside the Ray job after the cluster is up",
          f"set {pg_key}={not pg} (the loss as a reward), or a loss mode verl backpropagates (k3, forward_kl_topk)"
          if fix else "choose another loss mode", fix=fix)


def rule_teacher_topk(c: Ctx, f: Facts) -> None:
    """VI620: top-k teacher log-probs verl's teacher config refuses (null topk, vLLM max_logprobs below it, engine)."""
    if not _enabled(c):
        return
    mode_key, topk_key = f"{LOSS}.loss_mode", f"{LOSS}.topk"
    if c.unknown(mode_key, topk_key):
        return
    entry = table()["loss_modes"].get(c.v(mode_key))
    if not entry or not entry["use_topk"]:
        return
    topk = c.v(topk_key)
    if topk is None:
        c.add("VI620", "error", [mode_key, topk_key],
              f"{mode_key}={c.v(mode_key)} needs the teachers' top-k log-probs but {topk_key} is null: verl raises "
              "\"topk must be specified when use_topk is True\" (workers/config/distillation.py:191-192) inside the "
              "Ray job", f"set {topk_key} (verl's default 32)")
        return
    if isinstance(topk, bool) or not isinstance(topk, int):
        return
    for name in active_teachers(c.res.flat):
        base = f"{TEACHERS}.{name}.inference"
        engine_key, cap_key = f"{base}.name", f"{base}.engine_kwargs.vllm.max_logprobs"
        if c.unknown(engine_key, cap_key):
            continue
        engine, cap = c.v(engine_key), c.v(cap_key)
        if engine == "vllm" and isinstance(cap, int) and not isinstance(cap, bool) and cap < topk:
            c.add("VI620", "error", [cap_key, topk_key],
                  f"teacher {name}: {cap_key}={cap} is below {topk_key}={topk}: verl raises \"VLLM max_logprobs "
                  f"({cap}) must be >= distillation_loss topk ({topk})\" (workers/config/distillation.py:203-207) "
                  "inside the Ray job, after the cluster is up",
                  f"set {cap_key}={topk}, or leave it unset (verl then uses topk), or lower {topk_key}",
                  fix=Fix(set={cap_key: topk}))
        elif isinstance(engine, str) and engine not in ("vllm", "sglang"):
            c.add("VI620", "error", [engine_key, mode_key],
                  f"teacher {name}: {engine_key}={engine} cannot serve the top-k log-probs {mode_key}="
                  f"{c.v(mode_key)} needs: verl's DistillationTeacherModelConfig raises NotImplementedError for any "
                  "engine but vllm and sglang (workers/config/distillation.py:215-218)",
                  f"set {engine_key}=vllm (or sglang), or use a loss mode without top-k (k1, k3)")


def rule_teacher_temperature(c: Ctx, f: Facts) -> None:
    """VI621: a teacher temperature the user set, which verl replaces by 1.0."""
    if not _enabled(c):
        return
    for name in active_teachers(c.res.flat):
        key = f"{TEACHERS}.{name}.inference.temperature"
        if not c.set_by_user(key) or c.unknown(key):
            continue
        value = c.num(key)
        if value is None or value == 1.0:
            continue
        c.add("VI621", "warning", [key],
              f"teacher {name}: {key}={value} is never applied: the teacher only scores the student's tokens "
              "(prompt log-probs) and verl sends temperature 1.0, logging a warning inside the worker "
              "(experimental/teacher_loop/teacher_manager.py:45-56; verl#7769)",
              "remove it: verl 0.9.1 distils against the teacher at temperature 1.0 whatever is set",
              fix=Fix(delete=[key]))


def _vocab_map(folder: Path) -> dict[str, int] | None:
    """token -> id of a local tokenizer: tokenizer.json's model vocab and added tokens, else vocab.json (+
    added_tokens.json); None when neither is readable (a SentencePiece-only model: not compared)."""
    def load(name: str) -> Any:
        p = folder / name
        if not p.is_file() or p.stat().st_size > MAX_TOKENIZER_BYTES:
            return None
        try:
            return json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    tok = load("tokenizer.json")
    vocab: dict[str, int] = {}
    if isinstance(tok, dict) and isinstance((tok.get("model") or {}).get("vocab"), dict):
        vocab.update(tok["model"]["vocab"])
        for added in tok.get("added_tokens") or []:
            if isinstance(added, dict) and isinstance(added.get("content"), str) and isinstance(added.get("id"), int):
                vocab[added["content"]] = added["id"]
        return vocab
    plain = load("vocab.json")
    if not isinstance(plain, dict):
        return None
    vocab.update(plain)
    extra = load("added_tokens.json")
    if isinstance(extra, dict):
        vocab.update({k: v for k, v in extra.items() if isinstance(v, int)})
    return vocab


def _differences(student: dict[str, int], teacher: dict[str, int]) -> tuple[int, list[str]]:
    """How many of the student's tokens the teacher lacks or numbers differently, and a few of them."""
    bad = [t for t, i in student.items() if teacher.get(t) != i]
    return len(bad), sorted(bad, key=lambda t: student[t])[:3]


def rule_teacher_tokenizer(c: Ctx, f: Facts) -> None:
    """VI622: a teacher whose tokenizer numbers the student's tokens differently."""
    if not _enabled(c):
        return
    student_key = f"{M}.tokenizer_path" if isinstance(c.v(f"{M}.tokenizer_path"), str) else f"{M}.path"
    student_path = c.v(student_key)
    if c.unknown(student_key) or not isinstance(student_path, str):
        return
    folder = model_folder(c, student_path)
    student = _vocab_map(folder) if folder is not None else None
    if not student:
        return
    for name in active_teachers(c.res.flat):
        key = f"{TEACHERS}.{name}.model_path"
        path = c.v(key)
        if c.unknown(key) or not isinstance(path, str) or path == student_path:
            continue
        tfolder = model_folder(c, path)
        teacher = _vocab_map(tfolder) if tfolder is not None else None
        if not teacher:
            continue
        count, some = _differences(student, teacher)
        if not count:
            continue
        c.add("VI622", "warning", [key, student_key],
              f"teacher {name}: {key}={path} numbers {count} of the student's {len(student)} tokens differently "
              f"(e.g. {', '.join(repr(t) for t in some)}): verl sends the student's token ids to the teacher unchanged "
              "(experimental/teacher_loop/teacher_manager.py:116-144, skip_tokenizer_init) and distils against the "
              "log-probs of ids that mean other text there, without an error (verl-omni#382)",
              "use a teacher with the student's tokenizer (the same model family), or a student of the teacher's")
