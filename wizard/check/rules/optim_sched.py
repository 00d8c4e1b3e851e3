"""The optimizer a trained role really builds and the LR schedule it really follows across restarts (verl 0.9.1,
paths under site-packages/verl), for the PPO actor/critic and the SFT trainer's model (its optim and engine groups,
trainer/config/sft_trainer_engine.yaml:9-14; same engines, same checkpoint managers). Defaults and the Muon
algorithm names come from wizard/check/data/verl_optim.json (scripts/verl_optim.py, derived by running verl's code).

- VI661 (warning; info while no checkpoint is there yet): a Megatron actor/critic that resumes (resume_mode=
  resume_path, or auto with default_local_dir's latest_checkpointed_iteration.txt present; info: auto with
  save_freq > 0, so a relaunch will) with a step-dependent LR schedule (a warmup: lr_warmup_steps > 0, or lr_warmup_steps <= 0
  and lr_warmup_steps_ratio > 0, utils/megatron/optimizer.py:245-248; or lr_decay_style other than constant) and
  optim.use_checkpoint_opt_param_scheduler=False (trainer/config/optim/megatron.yaml, the default). The checkpoint
  manager saves the scheduler state unconditionally (utils/checkpoint/megatron_checkpoint_manager.py:411-412) but
  loads it only behind that flag (:753-759, :956-962); the engine steps the fresh scheduler by one per update
  (workers/engine/megatron/transformer_impl.py:710-719), so every resume replays the warmup from lr_warmup_init and
  restarts the decay from step 0 (verl#7953). With the flag on, Megatron-Core checks the configured schedule against
  the checkpoint's (override_opt_param_scheduler = not the flag, utils/megatron/optimizer.py:263-264).
- VI662 (error): an FSDP actor/critic optimizer verl cannot build. build_optimizer (workers/config/optimizer.py:298-351)
  imports optim.optimizer_impl, takes getattr(module, optim.optimizer) and calls it with lr, weight_decay, betas (when
  the name contains "adam"/"ademamix") and every optim.override_optimizer_config key; a missing class raises
  AttributeError, a keyword the class does not take TypeError -- in each worker's engine init
  (workers/engine/fsdp/transformer_impl.py:496-499), after the GPUs are booked (verl PR#3656). Only the optimizer
  modules verl documents (build_optimizer's docstring, optimizer.py:311-322) are imported here, and only when the
  launch sets one of the three keys; a documented module missing from this environment is a warning.
- VI663 (warning): a Megatron role on Muon (optim.optimizer in Megatron's Muon algorithms) with the default
  muon_extra_scale_factor (1.0) and muon_match_adamw_update_rms=False. verl's McoreOptimizerConfig documents that
  1.0 "is *not* AdamW-comparable, so reusing an AdamW learning rate unchanged gives a much larger effective step"
  (workers/config/optimizer.py:173-182); the AdamW-matching factor is sqrt((1 - beta1) / (1 + beta1))
  (utils/megatron/optimizer.py:91-100, applied only when muon_match_adamw_update_rms=True, :136-148), 0.2294 at
  beta1 = 0.9: the same lr moves the weights about 4.4x as far (verl PR#7120).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import math
from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.checkpoints import resumed_folder
from wizard.check.rules.context import A, Ctx, Facts
from wizard.check.rules.optim import optim_table

# build_optimizer's documented optimizer modules (workers/config/optimizer.py:311-322); tests/test_check_optim_sched.py
# reads them back out of verl's docstring
DOCUMENTED_IMPLS = ("torch.optim", "torchao.optim", "bitsandbytes.optim")
FSDP_STRATEGIES = ("fsdp", "fsdp2")
FSDP_DEFAULTS = {"optimizer": "AdamW", "optimizer_impl": "torch.optim"}  # FSDPOptimizerConfig, optimizer.py:106-107


Role = tuple[str, str, str]  # (optim section, the key naming its engine, what the message calls it)
SFT_ROLE: Role = ("optim", "engine.strategy", "SFT model")  # sft_trainer_engine.yaml: optim@optim, engine@engine


def _roles(c: Ctx, f: Facts) -> list[Role]:
    roles = [(f"{A}.optim", f"{A}.strategy", "actor")]
    return roles + ([("critic.optim", "critic.strategy", "critic")] if f.use_critic else [])


def _strategy(c: Ctx, key: str) -> str:
    """The role's engine; verl's engine/megatron.yaml carries no strategy key, only its _target_ McoreEngineConfig."""
    value = c.v(key)
    if value is None and key == SFT_ROLE[1] and str(c.v("engine._target_") or "").endswith("McoreEngineConfig"):
        return "megatron"
    return str(value or "")


def _resumes(c: Ctx) -> tuple[str, str] | None:
    """(severity, how) when this launch resumes a checkpoint now (warning) or its relaunch will (info), else None.
    Which folder verl resumes: checkpoints.resumed_folder (trainer/ppo/v1/trainer_base.py:854-881)."""
    mode = str(c.v("trainer.resume_mode") or "auto")
    if mode == "disable" or c.unknown("trainer.resume_mode", "trainer.resume_from_path", "trainer.default_local_dir"):
        return None
    folder = resumed_folder(c)
    if folder is not None:
        return "warning", f"trainer.resume_mode={mode} resumes {folder}"
    if mode == "resume_path":
        return "warning", "trainer.resume_mode=resume_path"
    save = c.int("trainer.save_freq") or 0
    if mode == "auto" and save > 0:
        return "info", f"trainer.resume_mode=auto with trainer.save_freq={save}: a relaunch resumes the last save"
    return None


def _schedule_steps(c: Ctx, opt: str, defaults: dict[str, Any]) -> list[str]:
    """What in the role's Megatron LR schedule depends on the step count (utils/megatron/optimizer.py:239-266)."""
    out = []
    steps, ratio = c.int(f"{opt}.lr_warmup_steps"), c.num(f"{opt}.lr_warmup_steps_ratio")
    if steps is not None and steps > 0:
        out.append(f"a {steps}-step warmup replays from lr_warmup_init={c.v(f'{opt}.lr_warmup_init', 0.0)}")
    elif ratio:
        out.append(f"the warmup (lr_warmup_steps_ratio={ratio}) replays from lr_warmup_init="
                   f"{c.v(f'{opt}.lr_warmup_init', 0.0)}")
    style = c.v(f"{opt}.lr_decay_style", defaults.get("lr_decay_style"))
    if style is not None and str(style) != "constant":
        out.append(f"the {style} decay restarts from step 0")
    return out


def rule_megatron_resume_schedule(c: Ctx, f: Facts) -> None:
    """VI661: a resumed Megatron role whose LR schedule is rebuilt from step 0 (verl#7953)."""
    _megatron_resume_schedule(c, _roles(c, f))


def _megatron_resume_schedule(c: Ctx, roles: list[Role]) -> None:
    defaults = optim_table()["megatron"]["defaults"]
    resumes = _resumes(c)
    if resumes is None:
        return
    severity, how = resumes
    for opt, strategy, label in roles:
        key = f"{opt}.use_checkpoint_opt_param_scheduler"
        if _strategy(c, strategy) != "megatron" or c.unknown(key, f"{opt}.lr_warmup_steps", f"{opt}.lr_decay_style"):
            continue
        if c.v(key, defaults.get("use_checkpoint_opt_param_scheduler")) is True:
            continue
        varying = _schedule_steps(c, opt, defaults)
        if not varying:
            continue
        c.add("VI661", severity, (key, "trainer.resume_mode"),
              f"{key}=False on a Megatron {label} that resumes ({how}): verl saves the LR scheduler "
              "state but loads it only with this flag (utils/checkpoint/megatron_checkpoint_manager.py:411-412 vs "
              ":753-759, :956-962), so after each resume " + " and ".join(varying) + " (verl#7953)",
              f"set {key}=True; Megatron-Core then checks lr, warmup and decay against the checkpoint's "
              "(utils/megatron/optimizer.py:263-264), so keep them unchanged across restarts",
              fix=Fix(set={key: True}))


def _kwargs_verl_passes(c: Ctx, opt: str, name: str) -> dict[str, str]:
    """The keywords build_optimizer hands the class (workers/config/optimizer.py:326-336), each with where it comes from."""
    out = {"lr": f"{opt}.lr", "weight_decay": f"{opt}.weight_decay"}
    if "adam" in name.lower() or "ademamix" in name.lower():
        out["betas"] = f"{opt}.betas"
    out.update({k: f"{opt}.override_optimizer_config.{k}" for k in _override_keys(c, opt)})
    return out


def _override_keys(c: Ctx, opt: str) -> list[str]:
    """The top-level keys of optim.override_optimizer_config (the resolved config holds them flattened)."""
    prefix = f"{opt}.override_optimizer_config."
    return sorted({k[len(prefix):].split(".")[0] for k in c.res.flat if k.startswith(prefix)})


def _optimizer_class(impl: str, name: str) -> tuple[str, Any]:
    """('missing-module', None) | ('missing-class', module) | ('ok', class), importing only a documented module."""
    if importlib.util.find_spec(impl.split(".")[0]) is None:
        return "missing-module", None
    try:
        module = importlib.import_module(impl)
    except ImportError:
        return "missing-module", None
    cls = getattr(module, name, None)
    return ("ok", cls) if cls is not None else ("missing-class", module)


def _check_fsdp_optimizer(c: Ctx, opt: str) -> None:
    keys = (f"{opt}.optimizer", f"{opt}.optimizer_impl", f"{opt}.override_optimizer_config")
    if not (any(c.set_by_user(k) for k in keys) or _override_keys(c, opt)) or c.unknown(*keys[:2]):
        return
    impl = str(c.v(keys[1]) or FSDP_DEFAULTS["optimizer_impl"])
    name = str(c.v(keys[0]) or FSDP_DEFAULTS["optimizer"])
    if impl not in DOCUMENTED_IMPLS:
        return  # a module of the user's own: nothing the launch names is imported here
    state, got = _optimizer_class(impl, name)
    if state == "missing-module":
        c.add("VI662", "warning", (keys[1],),
              f"{keys[1]}={impl} is not installed in this environment: verl imports it in each worker "
              "(workers/config/optimizer.py:338-344) and raises ImportError there, after the GPUs are booked",
              f"install {impl.split('.')[0]} in the training image, or use {keys[1]}=torch.optim")
        return
    if state == "missing-class":
        names = [n for n in dir(got) if inspect.isclass(getattr(got, n, None)) and not n.startswith("__")]
        close = difflib.get_close_matches(name, names, n=3)
        c.add("VI662", "error", (keys[0], keys[1]),
              f"{keys[0]}={name} is not in {impl}: verl's build_optimizer raises AttributeError (`Optimizer "
              f"'{name}' not found in module '{impl}'`, workers/config/optimizer.py:345-349) in each worker's "
              "engine init (fsdp/transformer_impl.py:496-499), after the GPUs are booked",
              (f"did you mean {', '.join(close)}? " if close else "")
              + f"or point {keys[1]} at the module that defines {name} (verl documents torch.optim, "
              "torchao.optim, bitsandbytes.optim: optimizer.py:311-322)")
        return
    try:
        params = inspect.signature(got).parameters
    except (TypeError, ValueError):
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    for kw, source in _kwargs_verl_passes(c, opt, name).items():
        if kw not in params:
            c.add("VI662", "error", (source,),
                  f"{impl}.{name} takes no keyword {kw!r}, but verl's build_optimizer passes it from {source} "
                  f"(workers/config/optimizer.py:326-336, 351): TypeError in each worker's engine init, after the "
                  "GPUs are booked",
                  f"remove {source}" if source.startswith(f"{opt}.override_optimizer_config") else
                  f"choose an optimizer class that takes {kw}")


def rule_fsdp_optimizer_build(c: Ctx, f: Facts) -> None:
    """VI662: an FSDP role's optimizer class that verl's build_optimizer cannot import or construct (verl PR#3656)."""
    for opt, strategy, _ in _roles(c, f):
        if _strategy(c, strategy) in FSDP_STRATEGIES:
            _check_fsdp_optimizer(c, opt)


def adamw_match_scale(beta1: float) -> float:
    """Muon's update-RMS factor that matches AdamW (utils/megatron/optimizer.py:91-100)."""
    return math.sqrt((1.0 - beta1) / (1.0 + beta1))


def rule_muon_adamw_scale(c: Ctx, f: Facts) -> None:
    """VI663: Muon with the default muon_extra_scale_factor at an AdamW learning rate (verl PR#7120)."""
    _muon_adamw_scale(c, _roles(c, f))


def _muon_adamw_scale(c: Ctx, roles: list[Role]) -> None:
    table = optim_table()["megatron"]
    defaults, muon = table["defaults"], [str(m).lower() for m in table["muon_algorithms"]]
    for opt, strategy, _ in roles:
        if _strategy(c, strategy) != "megatron" or str(c.v(f"{opt}.optimizer") or "").lower() not in muon:
            continue
        scale_key, match_key = f"{opt}.muon_extra_scale_factor", f"{opt}.muon_match_adamw_update_rms"
        if c.unknown(scale_key, match_key, f"{opt}.betas") or c.v(match_key) is True:
            continue
        scale = c.num(scale_key)
        scale = float(defaults.get("muon_extra_scale_factor", 1.0)) if scale is None else scale
        if scale != 1.0:  # verl raises on match_key=True beside any other value (utils/megatron/optimizer.py:136-143)
            continue
        betas = c.v(f"{opt}.betas", defaults.get("betas")) or [0.9, 0.999]
        try:
            beta1 = float(betas[0])
        except (TypeError, ValueError, IndexError):
            continue
        if not 0.0 <= beta1 < 1.0:
            continue
        match = adamw_match_scale(beta1)
        c.add("VI663", "warning", (f"{opt}.optimizer", scale_key),
              f"{opt}.optimizer={c.v(f'{opt}.optimizer')} with {scale_key}={scale:g} and {match_key}=False at "
              f"{opt}.lr={c.v(f'{opt}.lr')}: verl documents 1.0 as not AdamW-comparable "
              "(workers/config/optimizer.py:173-182); the AdamW-matching factor at beta1="
              f"{beta1:g} is {match:.4f} (utils/megatron/optimizer.py:91-100), so this lr moves the weights about "
              f"{1.0 / match:.1f}x as far as AdamW's would (verl PR#7120)",
              f"set {match_key}=True (verl derives the factor from betas[0]), or scale {opt}.lr by {match:.4f}",
              fix=Fix(set={match_key: True}))


def rule_sft_optimizer(c: Ctx, f: Facts) -> None:
    """VI661-VI663 for the SFT trainer's one model (optim + engine of sft_trainer_engine.yaml; same engines, same
    checkpoint manager, trainer/sft_trainer.py)."""
    _megatron_resume_schedule(c, [SFT_ROLE])
    if _strategy(c, SFT_ROLE[1]) in FSDP_STRATEGIES:
        _check_fsdp_optimizer(c, SFT_ROLE[0])
    _muon_adamw_scale(c, [SFT_ROLE])
