"""File rules: data, model, reward-function and config files that do not exist here (VI870), a reward
function missing from its file (VI871) and fewer training rows than one batch (VI872).
"""

from __future__ import annotations

import difflib
import glob
import itertools
import os
import re
from pathlib import Path

from wizard.check.rules.context import M, R, Ctx, Facts, local_path, parse_module
from wizard.check.shellargs import PLACEHOLDER


def _looks_local(path: str) -> bool:
    return path.startswith(("/", "./", "../", "~"))


def _count_rows(path: Path, enough: int) -> int | None:
    """Rows in a local data file (wizard._io.count_file_rows: parquet footer, streamed JSONL), or None."""
    if path.suffix not in (".parquet", ".jsonl"):
        return None
    from wizard._io import count_file_rows

    return count_file_rows(str(path), enough)


def _kuberay_data(bundle: Path) -> tuple[str, str, str] | None:
    """For a KubeRay bundle (its verl-init.yaml says cluster: kuberay): where its pods get data/*.parquet, as
    (severity, message, hint); None for other bundles (data/prepare_data.py run here is what writes them)."""
    from wizard.check.source import read_yaml

    try:
        doc = read_yaml(bundle / "verl-init.yaml")
    except Exception:  # noqa: BLE001 - no or unreadable verl-init.yaml: not this rule's business
        return None
    answers = doc.get("answers") if isinstance(doc, dict) else None
    if not isinstance(answers, dict) or answers.get("cluster") != "kuberay":
        return None
    rayjob = bundle / "k8s" / "rayjob.yaml"
    if rayjob.is_file() and "name: prepare-data" in rayjob.read_text(encoding="utf-8", errors="replace")[:1 << 20]:
        return ("info", "the KubeRay pods write it themselves (init container prepare-data in k8s/rayjob.yaml)",
                "nothing to run here: kubectl apply the manifests (see PLAN.md)")
    pvc = answers.get("shared_pvc")
    if pvc:
        return ("info", f"the KubeRay pods read it from PVC {pvc}",
                f"run python3 {bundle / 'data' / 'prepare_data.py'} here, then copy data/ onto PVC {pvc} (see PLAN.md)")
    return ("error", "the KubeRay pods read it from a pod-local emptyDir, where nothing run here can put it",
            "re-render with shared_pvc=<a ReadWriteMany PVC> (or dataset=gsm8k / math, which the pods prepare "
            "themselves) [VI756]")


def _rule_enough_rows(c: Ctx) -> None:
    """verl's train dataloader drops the last incomplete batch (drop_last=True) and sets steps_per_epoch =
    rows // train_batch_size (trainer/ppo/v1/trainer_base.py): fewer rows than one batch train 0 steps."""
    key, batch = "data.train_files", c.int("data.train_batch_size")
    value = c.v(key)
    if not batch or c.unknown(key) or value is None:
        return
    total = 0
    for path in ([value] if isinstance(value, str) else value if isinstance(value, list) else []):
        local = local_path(c, path) if isinstance(path, str) and PLACEHOLDER not in path else None
        rows = _count_rows(local, batch) if local is not None and local.is_file() else None
        if rows is None:
            return  # not all files countable here: say nothing
        total += rows
    if total < batch:
        c.add("VI872", "error", (key, "data.train_batch_size"),
              f"{key} holds {total} row(s), fewer than data.train_batch_size={batch}: verl drops the incomplete "
              "batch and trains 0 steps", f"use more data, or data.train_batch_size ≤ {max(total, 1)}")


def _rule_steps_reached(c: Ctx) -> None:
    """VI869: trainer.total_training_steps beyond what the epochs hold. verl takes it as given (ray_trainer.py:435-
    449: the LR schedule is sized for it), but its loop runs trainer.total_epochs epochs of rows // train_batch_size
    batches (:1465, drop_last) and marks the last step only at global_steps >= total_training_steps (:1507): a run
    whose epochs end first never saves or validates that last step. The file's rows bound the batches from above
    (the overlong filter can only drop more)."""
    key, batch, steps = "data.train_files", c.int("data.train_batch_size"), c.int("trainer.total_training_steps")
    epochs, value = c.int("trainer.total_epochs"), c.v(key)
    if not batch or not steps or not epochs or value is None or c.unknown(key, "trainer.total_epochs"):
        return
    needed = batch * -(-steps // epochs)  # rows for `steps` steps in `epochs` epochs
    total = 0
    for path in ([value] if isinstance(value, str) else value if isinstance(value, list) else []):
        local = local_path(c, path) if isinstance(path, str) and PLACEHOLDER not in path else None
        rows = _count_rows(local, needed) if local is not None and local.is_file() else None
        if rows is None:
            return
        total += rows
    reached = total // batch * epochs
    if 0 < reached < steps:
        c.add("VI869", "warning", ("trainer.total_training_steps", "trainer.total_epochs", key),
              f"trainer.total_training_steps={steps} but {total} rows make at most {total // batch} batches of "
              f"{batch} an epoch, {reached} in total_epochs={epochs}: training ends at step {reached} or before, "
              "never reaching the last step verl saves and validates (ray_trainer.py:1507), with the learning-rate "
              f"schedule sized for {steps} steps", f"set trainer.total_epochs ≥ {-(-steps // (total // batch))} or "
              f"trainer.total_training_steps ≤ {reached} (or leave it null: verl then counts it)")


def _saved_folder(c: Ctx, key: str, path: str) -> None:
    """VI972: verl's RLHFDataset reads a .parquet file with load_dataset("parquet"), a .json/.jsonl one with
    load_dataset("json"), and raises ValueError("Unsupported file format") for anything else
    (verl/utils/dataset/rl_dataset.py:173-178): a `datasets` save_to_disk folder is not read."""
    from wizard._parquet import saved_dataset

    local = local_path(c, path)
    if local is not None and saved_dataset(str(local)):
        c.add("VI972", "error", (key,), f"{key} names {path}, a `datasets` folder saved with save_to_disk: verl's "
              "RLHFDataset reads .parquet/.json/.jsonl files only and stops with 'Unsupported file format'",
              f"render the bundle with dataset={path} (its data/prepare_data.py reads the folder and writes parquet), "
              f"or write it out once: datasets.load_from_disk({path!r}).to_parquet('train.parquet')")


def _no_files(c: Ctx) -> None:
    """VI870: no training or validation file at all. Both PPO trainers build the validation dataset whatever
    test_freq and val_before_train say (trainer/ppo/v1/trainer_base.py:718-725, ray_trainer.py:386-393), and
    verl's RLHFDataset stops on a null (TypeError: 'NoneType' object is not subscriptable) or an empty list
    ("Unable to concatenate an empty list of datasets") at start-up. A data.custom_cls may accept either."""
    if c.v("data.custom_cls.path"):
        return
    for key in ("data.train_files", "data.val_files"):
        value = c.v(key)
        if c.unknown(key) or not (value is None or value == []):
            continue
        skip = (" (to skip validation, keep a small file here and set trainer.test_freq=-1 "
                "trainer.val_before_train=false)" if key == "data.val_files" else "")
        c.add("VI870", "error", (key,),
              f"{key}={'null' if value is None else '[]'}: verl builds this dataset at start-up whatever "
              "trainer.test_freq says (trainer/ppo/v1/trainer_base.py:710-725) and its RLHFDataset stops on "
              f"{'a null' if value is None else 'an empty list'} (utils/dataset/rl_dataset.py:97-101)",
              f"give {key} a .parquet/.json/.jsonl file{skip}")


GLOB = re.compile(r"[*?\[]")
MAX_MATCHES = 10_000  # a pattern's matches looked at (bounded: the folder is the user's)


def matches(c: Ctx, path: str) -> list[Path] | None:
    """The local files a data path names: itself, or a glob pattern's matches (datasets' load_dataset expands the
    patterns verl passes it as data_files, utils/dataset/rl_dataset.py:173-176); None for a remote path."""
    local = local_path(c, path)
    if local is None:
        return None
    if not GLOB.search(str(local)):
        return [local]
    return [Path(p) for p in itertools.islice(glob.iglob(str(local), recursive=True), MAX_MATCHES)]


def _format(c: Ctx, key: str, path: str) -> None:
    """VI914: verl's RLHFDataset reads a data path ending in .parquet with load_dataset("parquet"), in .json/.jsonl
    with load_dataset("json"), and raises ValueError("Unsupported file format") for any other name
    (utils/dataset/rl_dataset.py:171-178); a folder (Spark's train.parquet/ of part files included) is not found by
    load_dataset (FileNotFoundError), while a pattern such as folder/*.parquet is. A data.custom_cls reads what it
    likes; a `datasets` save_to_disk folder is VI972's."""
    from wizard._parquet import saved_dataset

    local = local_path(c, path)
    if local is not None and local.is_dir():
        if saved_dataset(str(local)):
            return
        shards = sorted({p.suffix for p in itertools.islice(local.iterdir(), MAX_MATCHES)
                         if p.suffix in (".parquet", ".json", ".jsonl")})
        pattern = f"{path.rstrip('/')}/*{shards[0]}" if len(shards) == 1 else None
        named = path.rstrip("/").endswith((".parquet", ".json", ".jsonl"))
        why = ("verl passes it to datasets' load_dataset, which finds no data file in a folder path "
               "(FileNotFoundError at start-up, utils/dataset/rl_dataset.py:173-176)" if named else
               "verl's RLHFDataset raises 'Unsupported file format' for it at start-up (utils/dataset/rl_dataset.py:"
               "171-178)")
        c.add("VI914", "error", (key,), f"{key} names the folder {path}: {why}", f"name the files: {key}='{pattern}' (datasets expands the pattern)" if pattern else
              f"name the .parquet/.json/.jsonl files in it, as a list or a pattern such as {path.rstrip('/')}/*.parquet")
        return
    name = path.rstrip("/")
    if not name.endswith((".parquet", ".json", ".jsonl")):
        c.add("VI914", "error", (key,), f"{key}={path}: verl's RLHFDataset reads only names ending in .parquet, .json "
              "or .jsonl and raises 'Unsupported file format' for any other at start-up (utils/dataset/rl_dataset.py:"
              "171-178)", "convert it to parquet (pandas: pd.read_csv(...).to_parquet('train.parquet')), or rename a "
              "JSON Lines file to .jsonl")


def rule_files(c: Ctx, f: Facts) -> None:
    def missing(key: str, path: str, what: str, *, data: bool = False) -> None:
        local = local_path(c, path)
        if local is None or local.exists():
            return
        if data and GLOB.search(str(local)):
            if not matches(c, path):
                c.add("VI870", "warning", (key,), f"{what} pattern {path} matches no file here; verl fails at start-up "
                      "if it matches none where the job runs", "check the pattern")
            return
        bundle = c.src.bundle_dir
        if data and bundle is not None and (bundle / "data" / "prepare_data.py").is_file() and \
                bundle.resolve() in local.resolve().parents:
            kuberay = _kuberay_data(bundle)
            if kuberay is None:
                c.add("VI870", "info", (key,), f"{path} does not exist yet: the bundle's data/prepare_data.py writes it",
                      f"run: python3 {bundle / 'data' / 'prepare_data.py'}")
            else:
                severity, message, hint = kuberay
                c.add("VI870", severity, (key,), f"{path} does not exist here; {message}", hint)
            return
        relative = not os.path.isabs(path) and not path.startswith("~")
        c.add("VI870", "warning", (key,), f"{what} {path} does not exist here" + (f" ({local})" if str(local) != path else "")
              + "; verl fails at start-up if it is missing where the job runs",
              "check the path" + (f" (relative paths start from the folder verl is launched in: {c.src.workdir}; "
                                  "see --workdir)" if relative else ""))

    _no_files(c)
    for key in ("data.train_files", "data.val_files"):
        value = c.v(key)
        if c.unknown(key) or value is None:
            continue
        if not isinstance(value, (str, list)):
            c.add("VI808", "error", (key,), f"{key}={value!r} is not a file path or a list of paths",
                  "give a .parquet/.json/.jsonl path or a list of them")
            continue
        for path in ([value] if isinstance(value, str) else value):
            if isinstance(path, str) and PLACEHOLDER not in path:
                missing(key, path, "data file", data=True)
                _saved_folder(c, key, path)
                if not c.v("data.custom_cls.path"):
                    _format(c, key, path)
    _rule_enough_rows(c)
    _rule_steps_reached(c)
    models = [(f"{M}.path", True), ("critic.model.path", f.use_critic),
              ("reward.reward_model.model_path", bool(c.v("reward.reward_model.enable"))),
              (f"{M}.tokenizer_path", True)]
    for key, used in models:
        value = c.v(key)
        if not used or not isinstance(value, str) or c.unknown(key):
            continue
        if _looks_local(value):
            missing(key, value, "model folder")
    rf = c.v("reward.custom_reward_function.path")
    if isinstance(rf, str) and rf and not c.unknown("reward.custom_reward_function.path"):
        local = local_path(c, rf)
        if local is not None and not local.exists():
            missing("reward.custom_reward_function.path", rf, "reward function file")
        elif local is not None and local.is_file():
            name = c.v("reward.custom_reward_function.name") or "compute_score"
            _check_function(c, local, str(name))
    for key, what in (("data.custom_cls.path", "dataset class file"), (f"{R}.multi_turn.tool_config_path", "tool config"),
                      (f"{R}.agent.agent_loop_config_path", "agent loop config"),
                      ("reward.reward_manager.module.path", "reward manager module")):
        value = c.v(key)
        if isinstance(value, str) and value and not c.unknown(key) and not (key.startswith("reward.reward_manager")
                                                                             and c.v("reward.reward_manager.source") != "importlib"):
            missing(key, value, what)
    _check_classes(c)


def _check_classes(c: Ctx) -> None:
    """VI873: the class verl loads from a module path (data.custom_cls, an importlib reward manager) is defined in
    that file, read statically (wizard.planner.agent.read_class); the import is not tried (`check --deep` does)."""
    from wizard.planner.agent import NOT_TRIED, read_class

    pairs = [("data.custom_cls.path", "data.custom_cls.name", "dataset class")]
    if c.v("reward.reward_manager.source") == "importlib":
        pairs.append(("reward.reward_manager.module.path", "reward.reward_manager.name", "reward manager"))
    for path_key, name_key, what in pairs:
        value, name = c.v(path_key), c.v(name_key)
        if not (isinstance(value, str) and value and isinstance(name, str) and name) or c.unknown(path_key, name_key):
            continue
        if value.startswith("pkg://") or PLACEHOLDER in value:
            continue
        local = local_path(c, value)
        if local is None or not local.is_file():
            continue
        why = read_class(local, name)
        if why is not None:
            c.add("VI873", "error", (path_key, name_key), f"{what} {name}: {why} ({NOT_TRIED.split(' (')[0]})",
                  f"set {name_key} to the class defined in {local.name}, or fix {path_key}")


def _check_function(c: Ctx, path: Path, name: str) -> None:
    """The reward function file read (bounded, parsed with ast), never imported: `check --deep` imports it, in the
    sandbox."""
    import ast

    from wizard.planner.agent import MODULE_BYTES

    key = "reward.custom_reward_function.name"
    try:
        tree = parse_module(path, MODULE_BYTES)
    except SyntaxError as exc:
        c.add("VI871", "error", ("reward.custom_reward_function.path",), f"{path} is not valid Python (line {exc.lineno})",
              "fix the syntax error; verl imports the file when the reward loop starts")
        return
    if tree is None:
        return
    names = set()
    functions = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            if not isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                functions.append(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    if name not in names:
        close = difflib.get_close_matches(name, functions, n=1, cutoff=0.5) or (functions if len(functions) == 1 else [])
        c.add("VI871", "error", (key, "reward.custom_reward_function.path"), f"{path.name} defines no {name!r}: verl fails "
              "when the reward loop loads it", (f"did you mean {close[0]}? " if close else "") +
              f"set {key} to the scorer's name (signature: fn(data_source, solution_str, ground_truth, extra_info=None))")
