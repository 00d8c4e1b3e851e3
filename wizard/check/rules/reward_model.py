"""Reward-model rules: a reward model served by verl's reward loop (a classifier, or a generative judge with a custom
reward function) that verl would refuse only once Ray is up (VI887-VI889, VI957), or serves and never consults (VI975).

verl 0.9.1 (paths under verl/):
- With `reward.reward_model.enable`, the reward manager calls the custom reward function with two more keywords,
  `reward_router_address` and `reward_model_tokenizer` (experimental/reward_loop/reward_manager/naive.py:56-63, as
  dapo.py, gdpo.py, remote.py); without a reward model it passes neither. A function that does not take them (or
  **kwargs) fails with TypeError at the first reward; one that needs them without a reward model, too.
- With a custom reward function set, the reward loop scores every sample with it alone: `compute_score` returns
  `reward_manager.run_single(data)` when reward.custom_reward_function.path is set and calls the discriminative
  model's `compute_score_disrm` only without one (experimental/reward_loop/reward_loop.py:145-155, verl#2934). The
  reward model is still served (its GPUs and memory), and reached only by a function that posts to
  `reward_router_address` itself, as verl's own generative-judge function does (docs/advance/reward_loop.rst,
  tests/experimental/reward_loop/reward_fn.py in verl's repository). A reward manager of the user's own
  (`source: importlib`) may consult it itself: nothing is said then.
- The reward model's replicas have TP×DP×PP GPUs each; its GPUs are its own pool (`enable_resource_pool`:
  n_gpus_per_node × nnodes) or the trainer's (trainer/ppo/v1/trainer_base.py:823-835). Fewer GPUs than one replica:
  `Not enough GPUs to run the reward model` (experimental/reward_loop/reward_model.py:60-64), after the cluster and
  the policy's workers have started. A pool the replica does not divide: verl makes pool // replica replicas and
  then splits the pool into replica-sized parts, which asserts `split_size must be a divisor of world_size`
  (reward_model.py:63, 84-85; single_controller/ray/base.py:288-290), at the same late point (the class of verl
  PR#7170, which adds this fail-fast for the policy's rollout replicas; the test runs verl's own
  _initialize_llm_servers on the CPU as the oracle).
- VI700: without a custom reward function, the reward loop scores with the model as a classifier: on vLLM it posts to
  `/classify` (experimental/reward_loop/reward_loop.py:231-241) and raises on any 4xx answer without retrying
  (:165-172). verl starts the reward model's vLLM server with the user's engine_kwargs.vllm only
  (workers/rollout/vllm_rollout/vllm_async_server.py:287-349: no runner or convert of its own), so vLLM picks the
  runner from the checkpoint (vllm/config/model.py, ModelConfig._get_default_runner_type and _SUFFIX_TO_DEFAULTS):
  a Sentence-Transformers pooling config (modules.json) → pooling; else an architecture ending in ForCausalLM,
  ForConditionalGeneration, ChatModel or LMHeadModel → the generate runner, which serves no /classify. A chat model
  given as the reward model therefore fails at the first reward, after the GPUs are booked. SGLang's path
  (/v1/embeddings) is not judged here.
- VI957 (error): a classifier reward model on its own GPUs (`enable_resource_pool=True`) with no custom reward
  function. Then the reward loop hands its workers to the agent loop, which scores each sample as it finishes
  (experimental/reward_loop/reward_loop.py:313-322; trainer/ppo/v1/trainer_base.py:408-410 -> main_ppo.py:130, and
  ray_trainer.py:949-959, one_step_off_policy/ray_trainer.py:173-177, fully_async_rollouter.py:835-839), and reads
  `result["reward_extra_info"]` (experimental/agent_loop/agent_loop.py:1026-1028). Without a custom function the
  worker scores with `compute_score_disrm` (reward_loop.py:145-155), whose answer is `{"reward_score": rm_score}`
  alone (:270): KeyError at the first rollout, after the reward model's pool and the rollout engines are up (verl#7368;
  the colocated path reads it with .get, :365, and is fine). The test runs verl's own compute_score_disrm on the CPU.
"""

from __future__ import annotations

import ast
from pathlib import Path

from wizard._pysource import parse_reward_file, top_level_function
from wizard.check.rules.context import Ctx, Facts, local_path

RM = "reward.reward_model"
FN = "reward.custom_reward_function"
ROUTER_KWARGS = ("reward_router_address", "reward_model_tokenizer")


# vLLM's architecture suffixes that select its generate runner (vllm/config/model.py _SUFFIX_TO_DEFAULTS, the
# ("generate", "none") rows; the list's earlier rows win, and every pooling suffix comes after these)
GENERATE_SUFFIXES = ("ForCausalLM", "ForConditionalGeneration", "ChatModel", "LMHeadModel")


def rule_reward_model(c: Ctx, f: Facts) -> None:
    enabled = bool(c.v(f"{RM}.enable"))
    _rule_function_kwargs(c, enabled)
    if enabled:
        _rule_unused(c)
        _rule_pool(c, f)
        _rule_classifier(c)
        _rule_standalone_disrm(c)


def _signature(path: Path, name: str) -> tuple[set[str], set[str], bool] | None:
    """(parameters, parameters without a default, takes **kwargs) of a top-level function `name` in a Python file; None
    when the file cannot be read or parsed (VI870 / VI871 say why) or defines no such function."""
    tree = parse_reward_file(path)
    for node in tree.body if tree is not None else []:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            a = node.args
            positional = a.posonlyargs + a.args
            with_default = {p.arg for p in positional[len(positional) - len(a.defaults):]} if a.defaults else set()
            with_default |= {p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None}
            params = {p.arg for p in positional + a.kwonlyargs}
            return params, params - with_default, a.kwarg is not None
    return None


def _rule_function_kwargs(c: Ctx, enabled: bool) -> None:
    path, name = c.v(f"{FN}.path"), c.v(f"{FN}.name") or "compute_score"
    if not isinstance(path, str) or not path or c.unknown(f"{FN}.path", f"{FN}.name"):
        return
    local = local_path(c, path)
    sig = _signature(local, str(name)) if local is not None and local.is_file() else None
    if sig is None:
        return
    params, required, var_kw = sig
    keys = (f"{FN}.path", f"{FN}.name", f"{RM}.enable")
    if enabled and not var_kw and not set(ROUTER_KWARGS) <= params:
        lacking = ", ".join(k for k in ROUTER_KWARGS if k not in params)
        c.add("VI887", "error", keys,
              f"{Path(path).name}:{name} does not take {lacking}, which verl's reward manager passes to the custom reward "
              f"function when {RM}.enable is true (naive.py:56-63): TypeError at the first reward",
              f"add `{', '.join(f'{k}=None' for k in ROUTER_KWARGS)}` (or **kwargs) to {name}'s parameters; a judge "
              "posts its request to http://{reward_router_address}/v1/chat/completions")
    needs = [k for k in ROUTER_KWARGS if k in required]
    if not enabled and needs:
        c.add("VI888", "error", keys,
              f"{Path(path).name}:{name} requires {', '.join(needs)} (a generative reward model's router), but "
              f"{RM}.enable is false: verl passes no router, so every reward call fails with TypeError",
              f"set {RM}.enable=true with {RM}.model_path (the judge) and {RM}.rollout.name, or give the parameters "
              "defaults")


def reads_router(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether the function can reach the reward model's router: it uses its `reward_router_address` parameter, names
    the key as a string (kwargs["reward_router_address"], kwargs.get(...), pop(...)), or hands its **kwargs (or
    locals()/vars()) on to other code, which might. A parameter it never uses does not count."""
    var_kw = fn.args.kwarg.arg if fn.args.kwarg else None
    body = [n for stmt in fn.body for n in ast.walk(stmt)]
    for n in body:
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            if n.id == "reward_router_address" or (n.id == var_kw and not _only_looked_up(n, body)):
                return True
        elif isinstance(n, ast.Constant) and n.value == "reward_router_address":
            return True
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("locals", "vars"):
            return True
    return False


def _only_looked_up(name: ast.Name, body: list[ast.AST]) -> bool:
    """Whether this use of **kwargs only reads another key out of it (kwargs["x"], kwargs.get("x"), "x" in kwargs)."""
    for n in body:
        if isinstance(n, ast.Subscript) and n.value is name and isinstance(n.slice, ast.Constant):
            return True
        if isinstance(n, ast.Attribute) and n.value is name and n.attr in ("get", "pop", "setdefault", "keys"):
            return True
        if isinstance(n, ast.Compare) and name in n.comparators and all(isinstance(o, (ast.In, ast.NotIn)) for o in n.ops):
            return True
    return False


def _rule_unused(c: Ctx) -> None:
    """VI975 (the module's docstring has verl's side): a registered reward manager, a local reward file whose function
    never reads reward_router_address."""
    path, name = c.v(f"{FN}.path"), c.v(f"{FN}.name") or "compute_score"
    source = c.v("reward.reward_manager.source") or "register"
    if not isinstance(path, str) or not path or source != "register" or \
            c.unknown(f"{FN}.path", f"{FN}.name", "reward.reward_manager.source"):
        return
    local = local_path(c, path)
    fn = top_level_function(local, str(name)) if local is not None and local.is_file() else None
    if fn is None or reads_router(fn):
        return
    model = c.v(f"{RM}.model_path") or "the reward model"
    c.add("VI975", "warning", (f"{RM}.enable", f"{FN}.path", f"{FN}.name"),
          f"{RM}.enable with {FN}.path: verl's reward loop scores every sample with {Path(path).name}:{name} alone and "
          f"calls the reward model ({model}) only when no custom function is set "
          "(experimental/reward_loop/reward_loop.py:145-155); the model is served, with its GPUs and memory, but "
          f"{name} never reads reward_router_address, so no reward comes from it (verl#2934)",
          f"to score with the reward model alone, remove {FN}.path (verl then calls it for every sample); to combine "
          f"it with your rule, have {name} post to http://{{reward_router_address}} (a keyword verl passes it: "
          "naive.py:58-65) as compute_score_disrm does (/classify on vLLM, /v1/embeddings on SGLang: "
          f"reward_loop.py:231-249; /v1/chat/completions for a generative judge); or set {RM}.enable=False and free "
          "its GPUs")


def generating_architectures(folder: Path) -> list[str] | None:
    """The checkpoint's architectures when vLLM would serve it with its generate runner (every one ends in a
    generate suffix and no modules.json makes it a Sentence-Transformers pooling model), else None; None too when
    config.json cannot be read (bounded, never run)."""
    from wizard._io import read_user_file, safe_json

    if (folder / "modules.json").is_file():
        return None  # vLLM's get_pooling_config: pooling, whatever the architecture
    try:
        doc = safe_json(read_user_file(str(folder / "config.json"), 1 << 20))
    except (OSError, ValueError):
        return None
    archs = doc.get("architectures") if isinstance(doc, dict) else None
    if not isinstance(archs, list) or not archs or not all(isinstance(a, str) for a in archs):
        return None
    return archs if all(a.endswith(GENERATE_SUFFIXES) for a in archs) else None


def _rule_classifier(c: Ctx) -> None:
    """VI700 (the module's docstring has verl's and vLLM's side)."""
    from wizard.check.rules.context import model_folder

    path, engine = c.v(f"{RM}.model_path"), c.v(f"{RM}.rollout.name")
    engine_kwargs = f"{RM}.rollout.engine_kwargs.vllm"
    if engine != "vllm" or c.v(f"{FN}.path") or not isinstance(path, str) or not path or \
            c.unknown(f"{RM}.model_path", f"{RM}.rollout.name", f"{FN}.path"):
        return
    if c.v(f"{engine_kwargs}.runner") or c.v(f"{engine_kwargs}.convert") or \
            c.unknown(f"{engine_kwargs}.runner", f"{engine_kwargs}.convert"):
        return  # the user chose vLLM's runner: not judged
    folder = model_folder(c, path)
    archs = generating_architectures(folder) if folder is not None else None
    if archs is None:
        return
    c.add("VI700", "error", (f"{RM}.model_path", f"{FN}.path"),
          f"{RM}.model_path={path} is a generative model ({', '.join(archs)} in its config.json), but with no "
          f"{FN}.path verl scores with it as a classifier: it posts to vLLM's /classify "
          "(experimental/reward_loop/reward_loop.py:231-241), which vLLM serves only for a classification or reward "
          "checkpoint; for this one it picks the generate runner (vllm/config/model.py _get_default_runner_type), so "
          "the first reward fails with an HTTP error after the GPUs are booked",
          f"set {RM}.model_path to a reward model with a scoring head (architectures *ForSequenceClassification or "
          f"*RewardModel), or use this model as a generative judge: set {FN}.path to a function that posts "
          "/v1/chat/completions to its reward_router_address and parses the score")


def _rule_pool(c: Ctx, f: Facts) -> None:
    keys = (f"{RM}.rollout.tensor_model_parallel_size", f"{RM}.rollout.data_parallel_size",
            f"{RM}.rollout.pipeline_model_parallel_size")
    if c.unknown(*keys, f"{RM}.enable_resource_pool", f"{RM}.n_gpus_per_node", f"{RM}.nnodes"):
        return
    replica = 1
    for k in keys:
        replica *= c.int(k) or 1
    if bool(c.v(f"{RM}.enable_resource_pool")):
        gpn, nnodes = c.int(f"{RM}.n_gpus_per_node") or 0, c.int(f"{RM}.nnodes") or 0
        if gpn <= 0 or nnodes <= 0:  # verl raises its own ValueError (trainer_base.py:824-827)
            c.add("VI889", "error", (f"{RM}.n_gpus_per_node", f"{RM}.nnodes", f"{RM}.enable_resource_pool"),
                  f"{RM}.enable_resource_pool with n_gpus_per_node={gpn} × nnodes={nnodes}: verl raises "
                  f"`config.reward.reward_model.{'n_gpus_per_node' if gpn <= 0 else 'nnodes'} must be greater than 0`",
                  f"set {RM}.nnodes and {RM}.n_gpus_per_node to the reward model's own GPUs (nnodes=1 for one node)")
            return
        pool, where = gpn * nnodes, f"its own pool of {gpn} × {nnodes}"
        pool_keys: tuple[str, ...] = (f"{RM}.n_gpus_per_node", f"{RM}.nnodes")
    elif f.n_gpus is not None:
        pool, where = f.n_gpus, "the trainer's GPUs (colocated)"
        pool_keys = ("trainer.n_gpus_per_node", "trainer.nnodes")
    else:
        return
    if replica > pool:
        c.add("VI889", "error", (keys[0], *pool_keys),
              f"a reward-model replica needs TP×DP×PP={replica} GPUs but it has {pool} ({where}): verl stops with "
              f"`Not enough GPUs to run the reward model. world_size ({pool}) < rollout_world_size ({replica})` "
              "(reward_model.py:60) once the cluster is up",
              f"set {keys[0]} ≤ {pool}, or give the reward model more GPUs")
    elif pool % replica:
        c.add("VI889", "error", (keys[0], *pool_keys),
              f"a reward-model replica needs TP×DP×PP={replica} GPUs, which does not divide the {pool} GPUs "
              f"({where}): verl builds {pool // replica} replica(s) and then asserts `split_size must be a divisor of "
              "world_size` when it splits the pool (reward_model.py:63, 84-85; single_controller/ray/base.py:289) "
              "once the cluster is up",
              f"make TP×DP×PP of {RM}.rollout a divisor of {pool}, or give the reward model a pool it divides")


def _rule_standalone_disrm(c: Ctx) -> None:
    pool, fn, engine = f"{RM}.enable_resource_pool", f"{FN}.path", f"{RM}.rollout.name"
    if c.unknown(pool, fn, engine) or c.v(pool) is not True or c.v(fn) or c.v(engine) not in ("vllm", "sglang"):
        return
    c.add("VI957", "error", (f"{RM}.enable", pool, fn),
          f"{pool}=True with no {fn}: the agent loop scores each sample on the reward-loop workers and reads "
          "result['reward_extra_info'] (agent_loop.py:1026-1028), but the classifier path (compute_score_disrm) "
          "returns only reward_score (reward_loop.py:270): KeyError at the first rollout, after the GPUs are booked "
          "(verl#7368)",
          f"set {pool}=False (the colocated reward model is read with .get, reward_loop.py:365), or score through "
          f"{fn}.path with a function that posts to reward_router_address and returns a dict")
