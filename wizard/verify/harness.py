"""`verify_with_verl(bundle)`: run verl's own code on a rendered bundle.

In the order verl runs it (docs/verl-facts.md §1 and §4b): Hydra composition with verl's tree
(struct mode), `auto_set_device`, `validate_config` exactly as `main_ppo` calls it, the config
dataclasses the workers build (actor, rollout, reference as the workers rebuild it, critic,
model, checkpoint engine), the registries the TaskRunner and workers look names up in, and the
asserts the workers make only after Ray has started: verl's own function where it runs on CPU without a
worker (the micro-batch splitter and token-budget packing of workers/engine/utils.py), else verl-init's replica
of the assert, labelled as such (source "replica") and reported in its own section.

Needs verl importable (`pip install verl==0.9.1`); imports it lazily.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import os
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from wizard.intent.errors import UserError
from wizard.verlspec import arithmetic as rc
from wizard.verlspec import lora


VERL, REPLICA = "verl", "replica"
SOURCES = {VERL: "verl's own code, run here",
           REPLICA: "verl-init's replicas of worker-time asserts (verl runs them only in its Ray workers; copied "
                    "with verl's file:line, not verl's code)"}


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""
    skipped: bool = False
    source: str = VERL  # VERL: verl's own function ran on the bundle; REPLICA: verl-init's copy of a verl assert


@dataclass
class VerifyReport:
    bundle: str
    verl_version: str
    checks: list[Check] = field(default_factory=list)
    substitutions: dict[str, str] = field(default_factory=dict)
    blocked: str = ""  # why verl's checks could not run at all (neither accepted nor rejected)

    @property
    def ok(self) -> bool:
        return not self.blocked and all(c.ok or c.skipped for c in self.checks)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.ok and not c.skipped]

    def as_dict(self) -> dict[str, Any]:
        return {
            "bundle": self.bundle,
            "verl_version": self.verl_version,
            "accepted": self.ok,
            "blocked": self.blocked or None,
            "checks": [c.__dict__ for c in self.checks],
            "sections": {src: [c.name for c in self.checks if c.source == src] for src in SOURCES},
            "substitutions": self.substitutions,
        }

    def section(self, source: str) -> list[Check]:
        return [c for c in self.checks if c.source == source]

    def summary(self) -> str:
        if self.blocked:
            return f"not verified: {self.blocked}"
        if self.ok:
            return (f"verl {self.verl_version} accepts {self.bundle} ({len(self.section(VERL))} checks by verl's own code, "
                    f"{len(self.section(REPLICA))} by verl-init's replicas of worker-time asserts)")
        return "; ".join(f"{c.name}: {c.detail}" for c in self.failures)


def hub_reachable(timeout: float = 2.0) -> bool:
    """Whether the Hugging Face hub answers a TCP connection (HF_HUB_OFFLINE=1 means no)."""
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("TRANSFORMERS_OFFLINE") == "1":
        return False
    import socket
    import urllib.parse

    url = urllib.parse.urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    try:
        with socket.create_connection((url.hostname or "huggingface.co", url.port or 443), timeout=timeout):
            return True
    except OSError:
        return False


def _require_verl() -> str:
    try:
        import verl
    except ImportError:
        raise UserError(
            "verl is not importable", "install it: pip install torch==2.13.0 'verl==0.9.1' (or verl[vllm] on a GPU box)",
            rule="VI950",
        ) from None
    return str(getattr(verl, "__version__", "unknown"))


@contextlib.contextmanager
def _vllm_lora_fallback():
    """validate_config imports verl.workers.rollout.vllm_rollout.utils for LoRA ranks, which needs vllm.
    Without vllm, provide verl's own fallback rule (its `except` branch): ranks up to 512."""
    import importlib.util

    name = "verl.workers.rollout.vllm_rollout.utils"
    if importlib.util.find_spec("vllm") is not None or name in sys.modules:
        yield False
        return
    from wizard.verlspec.lora import vllm_slots

    def get_vllm_max_lora_rank(lora_rank: int) -> int:
        assert lora_rank > 0, f"lora_rank must be greater than 0, get {lora_rank}"
        return vllm_slots(lora_rank)

    module = types.ModuleType(name)
    module.get_vllm_max_lora_rank = get_vllm_max_lora_rank  # type: ignore[attr-defined]
    sys.modules[name] = module
    try:
        yield True
    finally:
        sys.modules.pop(name, None)


def compose_bundle(bundle: str | os.PathLike[str], config_name: str = "verl_config") -> Any:
    """The config main_ppo would build from `--config-path bundle --config-name verl_config` and the command-line
    overrides of the bundle's OVERRIDES_FILE, if it has one (a list of strings), applied by Hydra as a launch does."""
    import json

    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from wizard.check.items import OVERRIDES_FILE

    extra = Path(bundle) / OVERRIDES_FILE
    overrides = json.loads(extra.read_text(encoding="utf-8")) if extra.is_file() else []
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(Path(bundle).resolve()), version_base=None):
        return compose(config_name=config_name, overrides=[str(o) for o in overrides])


def verify_with_verl(
    bundle: str | os.PathLike[str], *, model_dir: Optional[str] = None, config_name: str = "verl_config"
) -> VerifyReport:
    """Run verl's composition, validation, dataclass and worker-time checks on a bundle folder.

    `model_dir`: a local model folder (config.json + tokenizer) that stands in for any model path
    that is not a local folder, for the steps where verl loads a model's config and tokenizer
    (the critic in validate_config, HFModelConfig in the workers). Substitutions are reported.
    """
    version = _require_verl()
    report = VerifyReport(str(bundle), version)
    checks = report.checks

    def run(name: str, fn: Callable[[], Any], detail_ok: str = "") -> Any:
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                result = fn()
        except Exception as exc:  # noqa: BLE001 - verl raises all kinds; we report them
            msg = " ".join(str(exc).split())
            msg = msg if len(msg) <= 400 else msg[:397] + "..."
            checks.append(Check(name, False, f"{type(exc).__name__}: {msg}"))
            return _FAILED
        checks.append(Check(name, True, detail_ok or (out.getvalue().strip().splitlines() or [""])[-1]))
        return result

    cfg = run("hydra compose (verl's tree, struct mode)", lambda: compose_bundle(bundle, config_name))
    if cfg is _FAILED:
        return report

    import warnings

    from omegaconf import OmegaConf, open_dict

    run("every key exists in verl's tree (verl-init check: Hydra lets YAML typos through)",
        lambda: _unknown_keys(bundle, config_name), "ok")

    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config
    from verl.utils.device import auto_set_device

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run("auto_set_device", lambda: auto_set_device(cfg))
        use_ref = need_reference_policy(cfg)
        use_critic = need_critic(cfg)

    # Stand-in model for steps that load a model's config/tokenizer.
    model_keys = ["actor_rollout_ref.model.path"]
    if use_critic:
        model_keys.append("critic.model.path")
    if cfg.reward.reward_model.enable:
        model_keys.append("reward.reward_model.model_path")
    loadable: dict[str, bool] = {}
    for key in model_keys:
        path = OmegaConf.select(cfg, key)
        local = path is not None and os.path.isdir(os.path.expanduser(str(path)))
        if not local and model_dir:
            report.substitutions[key] = str(path)
            with open_dict(cfg):
                OmegaConf.update(cfg, key, str(Path(model_dir).resolve()))
            local = True
        loadable[key] = local

    if use_critic and not loadable.get("critic.model.path", False) and not hub_reachable():
        # verl's validate_config loads the critic's config: without the hub it would retry for ~30 s and fail
        report.blocked = (f"verl loads the critic's model config ({OmegaConf.select(cfg, 'critic.model.path')}) "
                          "and the Hugging Face hub cannot be reached from here: pass --model-dir DIR "
                          "(a local copy of it, or a local model of the same family)")
        return report

    with _vllm_lora_fallback() as shimmed, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run("validate_config (main_ppo, before Ray)", lambda: validate_config(cfg, use_ref, use_critic),
            "passed" + (" (vllm absent: LoRA rank checked by verl's fallback list)"
                        if shimmed and a_lora(cfg) else ""))

    a = cfg.actor_rollout_ref
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run("actor config dataclass", lambda: omega_conf_to_dataclass(a.actor), "instantiated")
        run("rollout config dataclass (RolloutConfig)", lambda: omega_conf_to_dataclass(a.rollout), "instantiated")
        if use_ref:
            def _ref() -> Any:
                ref = copy.deepcopy(a.ref)
                with open_dict(ref):
                    # engine_workers.py:545-552: the worker turns the log-prob keys into ppo_* keys
                    ref.ppo_mini_batch_size = a.actor.ppo_mini_batch_size
                    ref.ppo_micro_batch_size = ref.pop("log_prob_micro_batch_size", None)
                    ref.ppo_micro_batch_size_per_gpu = ref.pop("log_prob_micro_batch_size_per_gpu", None)
                    ref.use_dynamic_bsz = ref.pop("log_prob_use_dynamic_bsz", False)
                    ref.ppo_max_token_len_per_gpu = ref.pop("log_prob_max_token_len_per_gpu", None)
                return omega_conf_to_dataclass(ref)

            run("reference config as the worker rebuilds it", _ref, "instantiated")
        if use_critic:
            run("critic config dataclass", lambda: omega_conf_to_dataclass(cfg.critic), "instantiated")
        run("checkpoint engine config", lambda: omega_conf_to_dataclass(a.rollout.checkpoint_engine), "instantiated")
        if loadable["actor_rollout_ref.model.path"]:
            model_cfg = run("model config (HFModelConfig: config + tokenizer)", lambda: omega_conf_to_dataclass(a.model),
                            "loaded")
        else:
            model_cfg = _FAILED
            checks.append(Check("model config (HFModelConfig: config + tokenizer)", True,
                                "skipped: model is not a local folder (pass model_dir to load a stand-in)", skipped=True))

    _registries(cfg, run)
    _agent_checks(cfg, Path(bundle), run)
    _reward_model_checks(cfg, Path(bundle), run, n_gpus=int(cfg.trainer.n_gpus_per_node) * int(cfg.trainer.nnodes))
    for name, ok, detail, source in worker_time_checks(cfg, use_critic, model_cfg if model_cfg is not _FAILED else None):
        checks.append(Check(name, ok, detail, source=source))
    return report


_FAILED = object()
# override_transformer_config: McoreEngineConfig's dict[str, Any] of megatron-core TransformerConfig fields
# (workers/config/engine.py:206, applied in workers/engine/megatron/transformer_impl.py _build_tf_config), e.g. the
# uneven pipeline split num_layers_in_first/last_pipeline_stage the planner writes
_FREE_FORM = ("override_config", "engine_kwargs", "reward_kwargs", "ray_kwargs", "kwargs", "override_transformer_config")


def _with_entry_bodies(tree: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    """verl's tree plus the sections of an entry point's own YAML (fully_async_ppo_trainer's async_training, ...) that
    the bundle carries: `check` copies that YAML's body into the bundle when the launch names the entry point
    (wizard.check.items.bundle_doc)."""
    from wizard.check.entrypoints import CONFIGS
    from wizard.check.source import read_yaml
    from wizard.check.verltree import verl_config_dir

    def merged(base: Any, extra: Any) -> Any:
        if not (isinstance(base, dict) and isinstance(extra, dict)):
            return extra if base is None or not isinstance(base, dict) else base
        return {**base, **{k: merged(base.get(k), v) for k, v in extra.items()}}

    out = tree
    for name, (_, folder) in CONFIGS.items():
        if not folder.startswith("experimental/"):
            continue
        own = read_yaml(verl_config_dir().parent.parent / folder / f"{name}.yaml")
        body = {k: v for k, v in own.items() if k not in ("hydra", "defaults")}
        unique = [k for k in body if k not in tree]  # async_training, ...: only that entry point's tree has them
        if unique and all(k in doc for k in unique):
            out = merged(out, body)
    return out


def _flatten(node: Any, prefix: str = "") -> list[str]:
    if isinstance(node, dict) and node:
        out: list[str] = []
        for k, v in node.items():
            out.extend(_flatten(v, f"{prefix}{k}."))
        return out
    return [prefix[:-1]]


@functools.lru_cache(maxsize=16)
def _verl_tree(group_overrides: tuple[str, ...]) -> dict[str, Any]:
    """verl's own `ppo_trainer` tree with the bundle's group choices (e.g. model_engine), unresolved. Installed
    verl does not change while this process runs, so one composition per choice list is enough (read-only)."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        base = compose(config_name="ppo_trainer", overrides=list(group_overrides))
    GlobalHydra.instance().clear()
    return OmegaConf.to_container(base, resolve=False)


def _unknown_keys(bundle: str | os.PathLike[str], config_name: str) -> None:
    """Keys set in the bundle YAML that verl's tree does not have: Hydra merges them silently and
    verl ignores them (or fails late in a dataclass). Raises with the keys and a did-you-mean."""
    import difflib

    import yaml

    doc = yaml.safe_load((Path(bundle) / f"{config_name}.yaml").read_text(encoding="utf-8")) or {}
    defaults = doc.pop("defaults", [])
    doc.pop("hydra", None)
    overrides = tuple(f"{k.split()[-1]}={v}" for d in defaults if isinstance(d, dict) for k, v in d.items())
    tree = _with_entry_bodies(_verl_tree(overrides), doc)
    unknown = []
    for key in _flatten(doc) if doc else []:  # (a bundle of command-line overrides alone has no body)
        parts = key.split(".")
        if any(p in _FREE_FORM for p in parts[:-1]):
            continue
        node: Any = tree
        for i, part in enumerate(parts):
            if i == len(parts) - 1 and isinstance(node, dict) and part in _dataclass_fields(node.get("_target_")):
                break  # a field of the dataclass verl builds from this node (omega_conf_to_dataclass) the YAML omits
            if i < len(parts) - 1 and isinstance(node, dict) and part in _dataclass_fields(node.get("_target_"), True):
                break  # inside a mapping field the YAML omits (FSDPEngineConfig.mixed_precision): its keys are free
            if not isinstance(node, dict) or part not in node:
                siblings = [str(s) for s in node] if isinstance(node, dict) else []
                close = difflib.get_close_matches(part, siblings, n=1)
                parent = ".".join(parts[:i])
                unknown.append(key + (f" (did you mean {parent + '.' if parent else ''}{close[0]}?)" if close else ""))
                break
            node = node[part]
    if unknown:
        raise KeyError("not in verl's config tree: " + ", ".join(unknown))


def _dataclass_fields(target: Any, mappings: bool = False) -> set[str]:
    """The fields of the dataclass a verl config node names in `_target_` (e.g. critic.ppo_infer_max_token_len_per_gpu
    is a field of FSDPCriticConfig that critic.yaml does not list: verl/workers/config/critic.py:89), else none.
    `mappings`: only the fields typed as a mapping (FSDPEngineConfig.mixed_precision: Optional[dict[str, Any]],
    workers/config/engine.py:291), whose keys verl does not list."""
    import dataclasses
    import importlib
    import typing

    if not isinstance(target, str) or "." not in target:
        return set()
    module, _, name = target.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return set()
    if not dataclasses.is_dataclass(cls):
        return set()
    if not mappings:
        return {f.name for f in dataclasses.fields(cls)}
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - an annotation that does not resolve here: no mapping field known
        return set()

    def is_mapping(tp: Any) -> bool:
        origin = typing.get_origin(tp)
        return tp is dict or origin is dict or (origin is typing.Union and any(is_mapping(t) for t in typing.get_args(tp)))

    return {f.name for f in dataclasses.fields(cls) if is_mapping(hints.get(f.name))}


def registered_names(module_dir: str, decorator: str) -> set[str]:
    """The names verl registers with `@<decorator>("name")` in a package folder, read from its source with `ast`
    (verl's agent-loop package imports cachetools, absent from a plain `pip install verl`: verl-facts §0.7)."""
    import ast

    import verl

    names: set[str] = set()
    folder = Path(verl.__file__).parent / module_dir
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and \
                    isinstance(node.args[0].value, str) and ast.unparse(node.func) == decorator:
                names.add(node.args[0].value)
    return names


def load_tools(bundle: Path, tool_config_path: str) -> list[Any]:
    """verl's own tool registry on the bundle's tool config, as an agent-loop worker loads it: the path resolved from
    the bundle folder (where run.sh starts verl), which is also on sys.path (Ray puts the driver's folder there)."""
    import sys

    from verl.tools.tool_registry import initialize_tools_from_config

    path = tool_config_path if os.path.isabs(tool_config_path) else str(bundle / tool_config_path)
    sys.path.insert(0, str(bundle))
    before = set(sys.modules)
    try:
        return initialize_tools_from_config(path)
    finally:
        sys.path.remove(str(bundle))
        for name in set(sys.modules) - before:  # the bundle's tool modules: the next bundle loads its own
            if not name.startswith(("verl", "transformers", "torch")):
                sys.modules.pop(name, None)


def _agent_checks(cfg: Any, bundle: Path, run: Callable[..., Any]) -> None:
    """Multi-turn tool calling: the agent loop and tool parser verl looks up, and the tools its registry loads."""
    r = cfg.actor_rollout_ref.rollout
    mt, loop = r.multi_turn, r.agent.default_agent_loop
    if not mt.enable and not mt.tool_config_path and loop == "single_turn_agent":
        return

    def agent_loop() -> None:
        names = registered_names("experimental/agent_loop", "register")
        assert loop in names, f"Agent loop {loop} not registered, registered agent loops: {sorted(names)}"

    def parser() -> None:
        names = registered_names("experimental/agent_loop", "ToolParser.register")
        assert mt.format in names, f"tool parser {mt.format} not registered: {sorted(names)}"

    def tools() -> list[Any]:
        loaded = load_tools(bundle, str(mt.tool_config_path))
        assert loaded, "the tool config lists no tools"
        return loaded

    run("agent loop registry (default_agent_loop; agent_loop.py:678)", agent_loop, str(loop))
    run("tool parser registry (multi_turn.format)", parser, str(mt.format))
    if mt.tool_config_path:
        run("tool registry loads tool_config_path (tool_registry.py:initialize_tools_from_config)", tools,
            str(mt.tool_config_path))


def _reward_model_checks(cfg: Any, bundle: Path, run: Callable[..., Any], n_gpus: int) -> None:
    """A reward model served by verl's reward loop (reward=model's classifier, reward=genrm's judge): the configs its
    RewardModelManager builds, and, for a judge, the custom reward function verl's reward manager calls."""
    rm = cfg.reward.reward_model
    if not rm.enable:
        return
    from verl.utils.config import omega_conf_to_dataclass

    run("reward model config dataclass (RewardModelConfig)", lambda: omega_conf_to_dataclass(rm), "instantiated")
    # reward_model.py:69-76: one replica per TP×DP×PP GPUs, built by RolloutReplica (replica.py:104 instantiates
    # the RolloutConfig); the colocated judge gets the trainer's GPUs per node (trainer_base.py:833-834)
    gpn = rm.n_gpus_per_node if rm.enable_resource_pool else cfg.trainer.n_gpus_per_node
    run("reward model replica (RolloutReplica, replica.py:113)", lambda: _verl_replica(rm.rollout, gpn),
        f"TP×DP×PP={rm.rollout.tensor_model_parallel_size * rm.rollout.data_parallel_size * rm.rollout.pipeline_model_parallel_size}"
        f" on nodes of {gpn}")
    if rm.model_path and os.path.isdir(os.path.expanduser(str(rm.model_path))):
        from verl.workers.config import HFModelConfig

        run("reward model config + tokenizer (HFModelConfig, reward_model.py:67)",
            lambda: HFModelConfig(path=str(rm.model_path)).get_processor(), "loaded")
    fn = cfg.reward.custom_reward_function
    if not fn.path:
        return

    def judge_fn() -> str:
        import inspect

        from verl.trainer.ppo.reward import get_custom_reward_fn

        here = os.getcwd()
        try:
            os.chdir(bundle)  # run.sh starts verl in the bundle folder: a relative path is read from there
            wrapped = get_custom_reward_fn(cfg)
        finally:
            os.chdir(here)
        raw = wrapped.args[0] if wrapped is not None and getattr(wrapped, "args", None) else wrapped
        params = inspect.signature(raw).parameters
        takes = {"reward_router_address", "reward_model_tokenizer"} <= set(params) or any(
            p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        # naive.py:56-63 (and dapo.py): with a reward model the manager passes both keywords to the function
        assert takes, (f"{fn.path}:{fn.name} does not take reward_router_address / reward_model_tokenizer, which verl's "
                       "reward manager passes when a reward model is enabled")
        return f"{fn.name} loaded; {'async' if inspect.iscoroutinefunction(raw) else 'sync'}, takes the router address"

    run("custom reward function with a reward model (trainer/ppo/reward.py:get_custom_reward_fn, naive.py:56)",
        judge_fn, f"{fn.path}:{fn.name} loaded; takes reward_router_address")


# verl 0.9.1's reward managers whose constructor is not run here: `remote` starts Ray actors
# (reward_manager/remote.py), `rate_limited` requires the tokenizer (reward_manager/limited.py)
UNBUILT_REWARD_MANAGERS = ("remote", "rate_limited")


def _registries(cfg: Any, run: Callable[..., Any]) -> None:
    """Names the TaskRunner and workers look up, checked against verl's own registries."""
    import torch

    from verl.trainer.ppo import core_algos
    from verl.utils.tracking import Tracking
    from verl.workers.rollout.base import _ROLLOUT_REGISTRY

    a = cfg.actor_rollout_ref
    r = a.rollout

    def rollout() -> None:
        assert (r.name, r.mode) in _ROLLOUT_REGISTRY, f"Rollout {r.name} with mode {r.mode} not found"

    def adv() -> None:
        core_algos.get_adv_estimator_fn(cfg.algorithm.adv_estimator)

    def loss() -> None:
        core_algos.get_policy_loss_fn(a.actor.policy_loss.loss_mode)

    def kl() -> None:
        lp = torch.zeros(1, 3)
        if a.actor.use_kl_loss:
            core_algos.kl_penalty(lp, lp, a.actor.kl_loss_type)
        if cfg.algorithm.use_kl_in_reward:
            core_algos.kl_penalty(lp, lp, cfg.algorithm.kl_penalty)

    def reward_manager() -> None:
        from verl.experimental.reward_loop.reward_manager.registry import get_reward_manager_cls

        if cfg.reward.reward_manager.source == "register":
            cls = get_reward_manager_cls(cfg.reward.reward_manager.name)
            if cfg.reward.reward_manager.name not in UNBUILT_REWARD_MANAGERS:
                # verl's own constructor with this config: the DAPO manager asserts its overlong buffer here
                # (reward_manager/dapo.py:39-49); no tokenizer is read at construction
                cls(cfg, None, None)

    def logger() -> None:
        backends = cfg.trainer.logger
        backends = [backends] if isinstance(backends, str) else list(backends)
        for b in backends:
            assert b == "tracking" or b in Tracking.supported_backend, f"{b} is not supported"

    def trainer_mode() -> None:
        mode = cfg.trainer.v1.trainer_mode if cfg.trainer.get("use_v1", True) else "sync"
        assert mode in ("sync", "colocate_async", "separate_async"), f"Unknown trainer '{mode}'"

    run("rollout registry (name, mode)", rollout, f"{r.name}/{r.mode}")
    run("advantage estimator registry", adv, str(cfg.algorithm.adv_estimator))
    run("policy loss registry", loss, str(a.actor.policy_loss.loss_mode))
    run("KL estimator", kl, "ok")
    run("reward manager registry", reward_manager, str(cfg.reward.reward_manager.name))
    run("tracking backends", logger, ",".join(map(str, cfg.trainer.logger)))
    run("trainer mode", trainer_mode, "ok")


def _verl_micro_split(per_rank: int, micro: Any) -> str:
    """verl's own micro-batch splitter (workers/engine/utils.py:prepare_micro_batches, the assert at line 123) on a
    batch of `per_rank` one-token rows with fixed micro-batches of `micro`."""
    import torch
    from tensordict import TensorDict

    from verl.utils import tensordict_utils as tu
    from verl.workers.engine.utils import prepare_micro_batches

    if not micro:
        raise ValueError(f"micro_batch_size_per_gpu is {micro!r}: verl's splitter needs a size")
    td = TensorDict({"input_ids": torch.zeros(per_rank, 1, dtype=torch.long)}, batch_size=[per_rank])
    tu.assign_non_tensor(td, use_dynamic_bsz=False, micro_batch_size_per_gpu=int(micro))
    return f"{len(prepare_micro_batches(td)[0])} micro-batch(es) of {micro} from {per_rank} samples per rank"


def _verl_token_budget(budget: int, seq_len: int, sp: int) -> str:
    """verl's own token-budget packing (prepare_micro_batches → seqlen_balancing.rearrange_micro_batches, the assert
    at line 384) on one full-length sequence of seq_len tokens with `budget` tokens per GPU × SP."""
    import torch
    from tensordict import TensorDict

    from verl.utils import tensordict_utils as tu
    from verl.workers.engine.utils import prepare_micro_batches

    td = TensorDict({"input_ids": torch.zeros(1, seq_len, dtype=torch.long),
                     "attention_mask": torch.ones(1, seq_len, dtype=torch.long)}, batch_size=[1])
    tu.assign_non_tensor(td, use_dynamic_bsz=True, max_token_len_per_gpu=int(budget), sp_size=int(sp))
    prepare_micro_batches(td)
    return f"a {seq_len}-token sequence fits {budget} tokens × SP {sp}"


def _verl_replica(rollout: Any, gpus_per_node: int) -> str:
    """verl's own RolloutReplica constructor (workers/rollout/replica.py:93-118, the assert at line 113) on the bundle's
    rollout config. RolloutReplica is abstract (launch_servers); the subclass only lets its constructor run — nothing
    is launched."""
    from verl.workers.rollout.replica import RolloutReplica

    class _ConstructorOnly(RolloutReplica):
        async def launch_servers(self) -> None:  # never called
            raise NotImplementedError

    replica = _ConstructorOnly(replica_rank=0, config=rollout, model_config=None, gpus_per_node=int(gpus_per_node))
    return f"a replica of {replica.world_size} GPU(s) on {replica.nnodes} node(s) of {gpus_per_node}"


class _Checks:
    """The findings of worker_time_checks, in order: (name, ok, detail, source)."""

    def __init__(self) -> None:
        self.out: list[tuple[str, bool, str, str]] = []

    def check(self, name: str, ok: bool, detail: str) -> None:
        self.out.append((name, bool(ok), detail if not ok else "ok", REPLICA))

    def by_verl(self, name: str, fn: Callable[[], str]) -> None:
        import warnings

        try:
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                detail = fn()
        except Exception as exc:  # noqa: BLE001 - verl's assert (or a missing size) is the finding
            self.out.append((name, False, f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}", VERL))
            return
        self.out.append((name, True, detail, VERL))


def worker_time_checks(cfg: Any, use_critic: bool, model_cfg: Any = None) -> list[tuple[str, bool, str, str]]:
    """The assertions verl makes only in the TaskRunner and Ray workers (verl-facts.md §1.4): (name, ok, detail,
    source). Where the assert lives in code that runs on CPU without a worker (the micro-batch splitter, token-budget
    packing, the rollout replica's constructor), verl's own code runs (source "verl"); the rest are verl-init's
    replicas ("replica")."""
    c = _Checks()
    actor = cfg.actor_rollout_ref.actor
    n_gpus = cfg.trainer.n_gpus_per_node * cfg.trainer.nnodes
    if actor.strategy == "megatron":
        m = actor.megatron
        dp = n_gpus // (m.tensor_model_parallel_size * m.pipeline_model_parallel_size * m.context_parallel_size)
        sp = 1
    else:
        sp = rc.effective_sp(actor.ulysses_sequence_parallel_size, actor.fsdp_config.get("ulysses_sequence_parallel_size", 1))
        dp = n_gpus // sp
    _engine_checks(c, cfg, n_gpus)
    _batch_checks(c, cfg, use_critic, n_gpus, dp, sp)
    _trainer_checks(c, cfg, use_critic, n_gpus, model_cfg)
    return c.out


def _engine_checks(c: _Checks, cfg: Any, n_gpus: int) -> None:
    """Megatron-Bridge and LoRA, the dynamic-batch flags and the rollout replicas (engine_workers.py, replica.py)."""
    a = cfg.actor_rollout_ref
    actor, r = a.actor, a.rollout
    dyn = actor.use_dynamic_bsz
    model = a.model
    if actor.strategy == "megatron":
        m = actor.megatron
        c.check("megatron/transformer_impl.py:191 Megatron-Bridge on", bool(m.get("use_mbridge", True)),
              "use_mbridge must be True")
        if lora.megatron_rank(model):
            c.check("megatron_peft.py:26 LoRA through Megatron-Bridge", not m.get("vanilla_mbridge", False),
                  "LoRA/PEFT only supported via Megatron-Bridge (vanilla_mbridge=True builds no provider)")
    if lora.ref_in_actor(model) and need_ref(cfg):
        # the reference is the actor with its adapters off (ray_trainer.py:360, 1273); an engine that applied no LoRA
        # (the rank in the other engine's block) has no adapters to disable
        megatron = actor.strategy == "megatron"
        c.check("ray_trainer.py:360 reference inside the actor has adapters to disable",
              lora.engine_rank(model, megatron=megatron) > 0,
              f"verl keeps the reference in the actor (LoRA keys are set) but the {actor.strategy} engine applies no "
              f"LoRA: it reads model.{'lora.rank' if megatron else 'lora_rank'}, which is 0; the first reference pass "
              f"fails in {'megatron/transformer_impl.py:1128' if megatron else 'fsdp/transformer_impl.py:1095'} "
              "disable_adapter")

    c.check("engine_workers.py:616 dynamic batch flags agree", actor.use_dynamic_bsz == r.log_prob_use_dynamic_bsz,
          f"actor.use_dynamic_bsz={actor.use_dynamic_bsz} but rollout.log_prob_use_dynamic_bsz={r.log_prob_use_dynamic_bsz}")
    if dyn:
        c.check("engine_workers.py:632 token budgets set",
              r.log_prob_max_token_len_per_gpu is not None and actor.ppo_max_token_len_per_gpu is not None,
              "log_prob_max_token_len_per_gpu / ppo_max_token_len_per_gpu missing")
    else:
        c.check("engine_workers.py:636 per-GPU micro-batches set",
              r.log_prob_micro_batch_size_per_gpu is not None and actor.ppo_micro_batch_size_per_gpu is not None,
              "rollout.log_prob_micro_batch_size_per_gpu / actor.ppo_micro_batch_size_per_gpu missing (deprecated global keys are not converted)")

    tp, rdp, pp = r.tensor_model_parallel_size, r.data_parallel_size, r.pipeline_model_parallel_size
    w = rc.rollout_world(tp, rdp, pp)
    c.check("engine_workers.py:659 rollout world size", n_gpus % w == 0,
          f"rollout world_size: {n_gpus} is not divisible by infer_world_size: {w}")
    gpn = r.n_gpus_per_node
    c.by_verl("replica.py:113 replica fills whole nodes", lambda: _verl_replica(r, gpn))
    if rdp > 1:
        c.check("vllm_async_server.py:385 TP divides GPUs per node", gpn % tp == 0,
              "gpus_per_node should be divisible by tensor_model_parallel_size")



def _batch_checks(c: _Checks, cfg: Any, use_critic: bool, n_gpus: int, dp: int, sp: int) -> None:
    """Mini-batches over the data-parallel ranks, micro-batches or token budgets per rank (engine_workers.py,
    engine/utils.py, seqlen_balancing.py)."""
    a = cfg.actor_rollout_ref
    actor, r, ref = a.actor, a.rollout, a.ref
    n = r.n
    tbs = cfg.data.train_batch_size
    seq = cfg.data.max_prompt_length + cfg.data.max_response_length
    dyn = actor.use_dynamic_bsz
    mini = actor.ppo_mini_batch_size
    split = rc.update_split(mini, n, dp, None if dyn else actor.ppo_micro_batch_size_per_gpu)
    c.check("engine_workers.py:264 mini-batch splits over data-parallel ranks", split.per_rank is not None,
          f"Got mini_batch_size={mini * n} and data parallel size={dp}")
    cmini = None
    if use_critic:
        cmini = cfg.critic.ppo_mini_batch_size
        # critic/config.py: the critic's engine is critic.fsdp; its deprecated top-level key is not copied there
        csp = cfg.critic.fsdp.get("ulysses_sequence_parallel_size", 1) if cfg.critic.strategy != "megatron" else 1
        cdp = n_gpus // csp if cfg.critic.strategy != "megatron" else dp
        c.check("engine_workers.py:264 critic mini-batch splits over data-parallel ranks",
              rc.update_split(cmini, n, cdp, None).per_rank is not None,
              f"Got mini_batch_size={cmini * n} and data parallel size={cdp}")
    step = rc.step_batch(tbs, n, dp, mini, cmini)  # trainer_base.py:1589-1606 pads the batch to a multiple
    # the per-rank sizes are verl's dispatch arithmetic (replicated: it happens in the trainer and workers); the
    # split itself is verl's own prepare_micro_batches
    if not dyn:
        micro = actor.ppo_micro_batch_size_per_gpu
        per = split.per_rank if split.per_rank is not None else mini * n // max(dp, 1)
        c.by_verl("engine/utils.py:123 update micro-batches divide the per-rank mini-batch",
                lambda: _verl_micro_split(per, micro))
        lp = r.log_prob_micro_batch_size_per_gpu
        c.by_verl("engine/utils.py:123 log-prob micro-batches divide the per-rank batch",
                lambda: _verl_micro_split(step.per_rank, lp))
        if need_ref(cfg):
            rlp = ref.log_prob_micro_batch_size_per_gpu
            c.by_verl("engine/utils.py:123 reference micro-batches divide the per-rank batch",
                    lambda: _verl_micro_split(step.per_rank, rlp))
        if use_critic and not cfg.critic.use_dynamic_bsz:
            cm = cfg.critic.ppo_micro_batch_size_per_gpu
            cper = cfg.critic.ppo_mini_batch_size * n // max(dp, 1)
            c.by_verl("engine/utils.py:123 critic micro-batches divide the per-rank mini-batch",
                    lambda: _verl_micro_split(cper, cm))
    else:
        for name, budget in (
            ("actor", actor.ppo_max_token_len_per_gpu),
            ("rollout log-prob", r.log_prob_max_token_len_per_gpu),
            ("reference", ref.log_prob_max_token_len_per_gpu if need_ref(cfg) else None),
            ("critic", cfg.critic.ppo_max_token_len_per_gpu if use_critic and cfg.critic.use_dynamic_bsz else None),
        ):
            if budget is None:
                continue
            c.by_verl(f"seqlen_balancing.py:384 {name} token budget holds the longest sequence",
                    functools.partial(_verl_token_budget, budget, seq, sp))



def _trainer_checks(c: _Checks, cfg: Any, use_critic: bool, n_gpus: int, model_cfg: Any) -> None:
    """The trainer's and the reward model's asserts (ray_trainer.py, trainer_base.py, reward_model.py) and the
    rollout's context length (vllm_async_server.py)."""
    r = cfg.actor_rollout_ref.rollout
    # a replica: verl's compute_advantage (ray_trainer.py:187) reads batch["values"], but importing ray_trainer needs
    # verl's full trainer dependencies (cachetools, ...), which a CPU install of verl lacks
    c.check("ray_trainer.py:222 GAE has a critic", cfg.algorithm.adv_estimator != "gae" or use_critic,
          "adv_estimator=gae with the critic disabled fails at step 1 with KeyError: 'values'")
    fg = cfg.algorithm.get("filter_groups", None)
    if fg is not None and fg.enable:
        c.check("trainer_base.py:195 group-filtering metric set", bool(fg.metric),
              "algorithm.filter_groups.metric must be set when group filtering is enabled")
        rm = cfg.reward.reward_model
        c.check("trainer_base.py:199 group filtering sees rewards at sampling time",
              not rm.enable or rm.enable_resource_pool,
              "algorithm.filter_groups requires the reward metric at sampling time")
    rm = cfg.reward.reward_model
    if rm.enable:
        c.check("reward_model.py:47 reward model path set", rm.model_path is not None, "reward.reward_model.model_path is null")
        rtp = rm.rollout.tensor_model_parallel_size * rm.rollout.data_parallel_size * rm.rollout.pipeline_model_parallel_size
        pool = rm.n_gpus_per_node * rm.nnodes if rm.enable_resource_pool else n_gpus
        c.check("reward_model.py:60 reward model fits its pool", pool // rtp > 0,
              f"Not enough GPUs to run the reward model. world_size ({pool}) < rollout_world_size ({rtp})")
        c.check("reward_loop.py:252 reward model engine", rm.rollout.name in ("vllm", "sglang"),
              f"reward model rollout name {rm.rollout.name!r} must be vllm or sglang")
    if model_cfg is not None and r.max_model_len is not None:
        mpe = getattr(getattr(model_cfg, "hf_config", None), "max_position_embeddings", None)
        if mpe is not None:
            c.check("vllm_async_server.py:1101 max_model_len within the model's context", r.max_model_len <= mpe,
                  f"max_model_len ({r.max_model_len}) should be less than or equal to max_position_embeddings ({mpe})")


def a_lora(cfg: Any) -> bool:
    return lora.trainer_rank(cfg.actor_rollout_ref.model) > 0


def need_ref(cfg: Any) -> bool:
    from verl.trainer.ppo.utils import need_reference_policy

    return bool(need_reference_policy(cfg))
