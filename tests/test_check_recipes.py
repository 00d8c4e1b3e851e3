"""A recipe's own entry point (`python3 -m recipe.dapo.main_dapo`: verl-recipe checked out as verl's `recipe/`, run
from the verl checkout's root) is read with the tree its own `@hydra.main` names (wizard.check.recipes), from the
recipe's source, which is parsed and never imported. The recipe here is written the way verl-recipe's DAPO is
(recipe/dapo/main_dapo.py:114 `@hydra.main(config_path="config", config_name="dapo_trainer")`, :117
`migrate_legacy_reward_impl(config)`; config/dapo_trainer.yaml: verl's tree by `file://verl/trainer/config`, then
the recipe's own `reward.reward_kwargs`).

Both readers are covered where the launch is read: bash in the sandbox, and the static reader where no sandbox runs.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from wizard.check.entrypoints import entry_of_module, entry_of_word, launch_index
from wizard.check.lint import check
from wizard.check.recipes import hydra_main
from wizard.check.report import fixed_overrides

pytestmark = pytest.mark.verl  # the recipe's YAML is composed by Hydra over the installed verl's tree

PPO = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", "actor_rollout_ref.rollout.name=vllm",
       "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
       "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8", "algorithm.adv_estimator=grpo",
       "actor_rollout_ref.rollout.n=4", "trainer.nnodes=1", "trainer.n_gpus_per_node=4", "data.train_batch_size=64",
       "actor_rollout_ref.actor.ppo_mini_batch_size=16"]
# keys only the recipe's YAML holds (verl 0.9.1's ppo_trainer has no reward.reward_kwargs)
OWN = ["reward.reward_kwargs.overlong_buffer_cfg.enable=True", "reward.reward_kwargs.overlong_buffer_cfg.len=512",
       "reward.reward_kwargs.max_resp_len=1024"]
LAUNCH = "python3 -m recipe.dapo.main_dapo"

MAIN = '''import hydra
from verl.experimental.reward_loop import migrate_legacy_reward_impl

raise SystemExit("a recipe's module is read, never imported")


@hydra.main(config_path="config", config_name="{name}", version_base=None)
def main(config):
    config = migrate_legacy_reward_impl(config)
'''
YAML = """hydra:
  searchpath:
    - file://verl/trainer/config
defaults:
  - {tree}
  - _self_
data:
  gen_batch_size: ${{data.train_batch_size}}
reward:
  reward_manager:
    name: dapo
  reward_kwargs:
    overlong_buffer_cfg:
      enable: False
      len: 0
      penalty_factor: 0.0
      log: False
    max_resp_len: null
"""


def _recipe(root: Path, main: str = MAIN, name: str = "dapo_trainer") -> Path:
    folder = root / "recipe" / "dapo"
    (folder / "config").mkdir(parents=True)
    (folder / "main_dapo.py").write_text(main.replace("{name}", name), encoding="utf-8")
    (folder / "config" / "dapo_trainer.yaml").write_text(YAML.format(tree="ppo_trainer"), encoding="utf-8")
    (folder / "config" / "dapo_megatron_trainer.yaml").write_text(YAML.format(tree="ppo_megatron_trainer"),
                                                                  encoding="utf-8")
    return folder


def _script(path: Path, launch: str, overrides: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/bash\nset -x\n" + launch + " \\\n" + " \\\n".join(f"    {o}" for o in overrides) + "\n",
                    encoding="utf-8")
    return path


def _lines(report) -> list[str]:
    return [f.problem.line() for f in report.findings]


def _check(path: Path, home: Path, **kw):
    return check(str(path), env={"HOME": str(home)}, **kw)


@pytest.fixture(params=["bash", "static"])
def reader(request, monkeypatch):
    if request.param == "static":
        monkeypatch.setenv("VERL_INIT_NO_SANDBOX", "1")
    return request.param


def test_a_recipe_script_is_read_with_the_recipes_own_tree(tmp_path, reader):
    folder = _recipe(tmp_path)
    report = _check(_script(folder / "run.sh", LAUNCH, [*PPO, *OWN]), tmp_path)
    assert report.source.recipe == "recipe.dapo.main_dapo"
    assert report.source.yaml_path == folder / "config" / "dapo_trainer.yaml"
    assert not report.errors, _lines(report)
    assert not {"VI801", "VI802", "VI891"} & set(report.ids()), _lines(report)
    # the control: main_ppo's tree has no reward.reward_kwargs, so the same overrides there are refused
    ppo = _check(_script(tmp_path / "ppo.sh", "python3 -m verl.trainer.main_ppo", [*PPO, *OWN]), tmp_path)
    assert {k for f in ppo.findings if f.problem.rule == "VI801" for k in f.problem.keys} >= \
        {o.split("=")[0] for o in OWN}, _lines(ppo)


def test_a_misspelt_key_under_a_recipe_is_named(tmp_path, reader):
    folder = _recipe(tmp_path)
    report = _check(_script(folder / "run.sh", LAUNCH, [*PPO, "reward.reward_kwargs.overlong_bufer_cfg.len=512"]),
                    tmp_path)
    hits = [f.problem for f in report.findings if f.problem.rule == "VI801"]
    assert hits and hits[0].keys == ("reward.reward_kwargs.overlong_bufer_cfg.len",), _lines(report)
    assert hits[0].severity == "error"


def test_the_scripts_config_name_is_found_beside_the_recipes_main(tmp_path):
    """--config-name on the command line replaces the decorator's, in the same folder (relative to the recipe's
    file, as Hydra resolves it): the recipe's megatron YAML composes verl's megatron tree."""
    folder = _recipe(tmp_path)
    report = _check(_script(tmp_path / "run.sh", f"{LAUNCH} --config-name=dapo_megatron_trainer", [*PPO, *OWN]),
                    tmp_path, workdir=str(tmp_path))
    assert report.source.yaml_path == folder / "config" / "dapo_megatron_trainer.yaml"
    assert report.config["actor_rollout_ref.actor.strategy"] == "megatron"
    assert not {"VI801", "VI891"} & set(report.ids()), _lines(report)


def test_a_recipe_away_from_its_source_is_checked_against_ppo_trainer_and_says_so(tmp_path, reader):
    """The script alone (no recipe/ beside it or above it): verl's ppo_trainer, one VI891 warning that names the
    recipe's source, and the recipe's own keys left unchecked rather than called unknown."""
    report = _check(_script(tmp_path / "run.sh", LAUNCH, [*PPO, *OWN]), tmp_path)
    assert report.source.recipe == "recipe.dapo.main_dapo" and report.source.yaml_path is None
    [warning] = [f.problem for f in report.findings if f.problem.rule == "VI891"]
    assert "recipe/dapo/main_dapo.py" in warning.message and "ppo_trainer" in warning.message
    assert "recipe/" in warning.hint
    assert not report.errors, _lines(report)


def test_legacy_reward_keys_follow_what_the_recipes_main_does(tmp_path):
    """A main that calls migrate_legacy_reward_impl takes reward_model.reward_manager over (a deprecation warning
    citing the call's line); the migration does not carry reward_model.overlong_buffer.*, deleting it with the rest
    (verl 0.9.1 reward_loop.py:84-88), so that stays an error, fixed to where verl's DAPO reward manager reads it
    (reward.reward_kwargs.overlong_buffer_cfg, experimental/reward_loop/reward_manager/dapo.py:33). A main that
    does not call it ignores them all. The fixed overrides check clean."""
    legacy = ["reward_model.reward_manager=dapo", "reward_model.overlong_buffer.len=512"]
    folder = _recipe(tmp_path)
    report = _check(_script(folder / "run.sh", LAUNCH, [*PPO, *legacy]), tmp_path)
    found = {f.problem.keys[0]: f for f in report.findings if f.problem.rule == "VI805"}
    assert set(found) == {"reward_model.reward_manager", "reward_model.overlong_buffer.len"}, _lines(report)
    assert found["reward_model.reward_manager"].problem.severity == "warning"
    assert "recipe/dapo/main_dapo.py:9" in found["reward_model.reward_manager"].problem.message
    dropped = found["reward_model.overlong_buffer.len"]
    assert dropped.problem.severity == "error" and "does not carry it" in dropped.problem.message
    assert dropped.fix.set == {"reward.reward_kwargs.overlong_buffer_cfg.len": 512}  # the recipe's YAML holds it
    lines, _ = fixed_overrides(report)
    fixed = _check(_script(folder / "fixed.sh", LAUNCH, lines), tmp_path)
    assert not fixed.errors and "VI805" not in fixed.ids(), _lines(fixed)

    quiet = _recipe(tmp_path / "plain", main=MAIN.replace("    config = migrate_legacy_reward_impl(config)\n", ""))
    plain = _check(_script(quiet / "run.sh", LAUNCH, [*PPO, *legacy]), tmp_path)
    assert [f.problem.severity for f in plain.findings if f.problem.rule == "VI805"] == ["error", "error"]


def test_main_ppo_fixes_a_legacy_key_outside_verls_tree_with_a_plus(tmp_path):
    """Under main_ppo the overlong buffer's place, reward.reward_kwargs, is not in verl's tree: the fix adds it
    with `+`, and the fixed overrides check clean (without it Hydra refuses them: `Key ... is not in struct`)."""
    report = _check(_script(tmp_path / "run.sh", "python3 -m verl.trainer.main_ppo",
                            [*PPO, "reward_model.reward_manager=dapo", "reward_model.overlong_buffer.len=512"]), tmp_path)
    [dropped] = [f for f in report.findings if f.problem.keys[:1] == ("reward_model.overlong_buffer.len",)]
    assert dropped.fix.set == {"+reward.reward_kwargs.overlong_buffer_cfg.len": 512}
    lines, _ = fixed_overrides(report)
    assert "+reward.reward_kwargs.overlong_buffer_cfg.len=512" in lines
    fixed = check(None, lines, env={"HOME": str(tmp_path)})
    assert not fixed.errors, _lines(fixed)


def test_fully_async_main_drops_what_its_migration_does_not_carry(tmp_path):
    """fully_async_main.py:237 migrates too: the same two keys there are a warning and an error."""
    report = _check(_script(tmp_path / "run.sh", "python3 -m verl.experimental.fully_async_policy.fully_async_main",
                            [*PPO, "rollout.nnodes=1", "rollout.n_gpus_per_node=4", "reward_model.reward_manager=dapo",
                             "reward_model.overlong_buffer.len=512"]), tmp_path)
    severity = {f.problem.keys[0]: f.problem.severity for f in report.findings if f.problem.rule == "VI805"}
    assert severity == {"reward_model.reward_manager": "warning", "reward_model.overlong_buffer.len": "error"}


def test_no_key_is_called_ineffective_under_a_recipe(tmp_path):
    """VI890 ("read by nothing this configuration runs") cannot hold for a recipe, whose own trainer may read any
    key: verl's ignored algorithm.filter_groups.max_num_gen_batches is flagged under main_ppo, not under the recipe."""
    key = "algorithm.filter_groups.max_num_gen_batches=3"
    ppo = _check(_script(tmp_path / "ppo.sh", "python3 -m verl.trainer.main_ppo", [*PPO, key]), tmp_path)
    assert "VI890" in ppo.ids(), _lines(ppo)
    folder = _recipe(tmp_path)
    recipe = _check(_script(folder / "run.sh", LAUNCH, [*PPO, key]), tmp_path)
    assert "VI890" not in recipe.ids(), _lines(recipe)


def test_the_words_that_launch_a_recipe():
    module = entry_of_module("recipe.dapo.main_dapo")
    assert module is not None and module.recipe and module.name == "ppo"
    assert entry_of_word("recipe/dapo/main_dapo.py").module == "recipe.dapo.main_dapo"
    assert entry_of_word("/src/verl/recipe/dapo/main_dapo.py").module == "recipe.dapo.main_dapo"
    assert launch_index(["python3", "-m", "recipe.dapo.main_dapo", "a=1"])[0] == 3
    # verl's own entry points keep their rows; an override that merely starts with `recipe.` launches nothing
    assert not entry_of_module("verl.trainer.main_ppo").recipe
    assert launch_index(["python3", "train.py", "recipe.x=1"]) is None
    assert entry_of_module("recipe") is None and entry_of_module("recipe.dapo-x.main") is None
    # a recipe's helper is not its entry point: verl-recipe's r1 script prepares data with recipe.r1.data_process
    # before it launches recipe.r1.main_eval; its dynamo script starts recipe/dynamo/metrics_sidecar.py first
    assert entry_of_module("recipe.r1.data_process") is None and entry_of_word("recipe/dynamo/metrics_sidecar.py") is None
    assert all(entry_of_module(m) for m in ("recipe.async_flow.grpo_main", "recipe.spo.spo_main_ppo",
                                             "recipe.reward_queue.main", "recipe.dapo.dapo_transfer_queue.main_dapo"))


def test_a_recipes_package_is_the_folder_below_recipe():
    """The code read for a recipe's keys is its own package, recipe/<name>/ (recipe/ itself for a module directly in
    it), never a folder above recipe/."""
    from wizard.check.recipes import RecipeMain, module_of, package_dir

    def main(path: str) -> RecipeMain:
        return RecipeMain(Path(path), None, None)

    assert package_dir(main("/v/recipe/dapo/main_dapo.py"), "recipe.dapo.main_dapo") == Path("/v/recipe/dapo")
    assert package_dir(main("/v/recipe/dapo/tq/main_dapo.py"), "recipe.dapo.tq.main_dapo") == Path("/v/recipe/dapo")
    assert package_dir(main("/v/recipe/main.py"), "recipe.main") == Path("/v/recipe")
    assert module_of(("/", "v", "recipe", "dapo", "main_dapo.py")) == "recipe.dapo.main_dapo"
    assert module_of(("/", "v", "recipes", "main.py")) is None


def test_the_decorator_is_read_from_the_source_without_importing_it(tmp_path):
    path = tmp_path / "main.py"
    path.write_text('from hydra import main\nraise SystemExit(1)\n\n@main(config_path="cfg", config_name="x")\n'
                    "def run(c):\n    pass\n", encoding="utf-8")
    found = hydra_main(path)
    assert (found.config_path, found.config_name, found.migrates_legacy_reward) == ("cfg", "x", 0)
    path.write_text("import hydra\nNAME = 'x'\n\n@hydra.main(config_path='c', config_name=NAME)\ndef run(c): pass\n",
                    encoding="utf-8")
    assert (hydra_main(path).config_path, hydra_main(path).config_name) == ("c", None)  # not a literal: not followed
    path.write_text("def broken(:\n", encoding="utf-8")
    assert hydra_main(path).config_name is None



def test_keys_the_recipes_own_code_reads_are_the_recipes(tmp_path):
    """verl's tree lacks them, the recipe's code reads them (its package parsed, wizard.check.recipes.recipe_reads):
    a YAML key of the recipe's own (`entropy_cfg.clip_cov_ratio`, read as `config.entropy_cfg.clip_cov_ratio`) is
    no finding, and a legacy reward key the recipe's main reads itself without migrating (the entropy recipe's
    `config.reward_model.overlong_buffer`, recipe/entropy/main_entropy.py:153) is not called ineffective. What its
    code never names keeps its finding: a YAML key as a warning (VI801), a legacy key as an error (VI805)."""
    main = ("import hydra\n\n\n@hydra.main(config_path='config', config_name='dapo_trainer', version_base=None)\n"
            "def main(config):\n    ratio = config.entropy_cfg.clip_cov_ratio\n"
            "    kwargs = {'overlong_buffer_cfg': config.reward_model.overlong_buffer}\n")
    folder = _recipe(tmp_path, main=main)
    yaml = folder / "config" / "dapo_trainer.yaml"
    yaml.write_text(yaml.read_text(encoding="utf-8") + "entropy_cfg:\n  clip_cov_ratio: 0.0002\n  unused_knob: 1\n",
                    encoding="utf-8")
    report = _check(_script(folder / "run.sh", LAUNCH,
                            [*PPO, "entropy_cfg.clip_cov_ratio=0.0005", "reward_model.overlong_buffer.len=512",
                             "reward_model.sandbox_fusion_url=http://x"]), tmp_path)
    by_key = {f.problem.keys[0]: f.problem for f in report.findings if f.problem.keys}
    assert "entropy_cfg.clip_cov_ratio" not in by_key and "reward_model.overlong_buffer.len" not in by_key, \
        _lines(report)
    assert by_key["entropy_cfg.unused_knob"].rule == "VI801"
    assert by_key["entropy_cfg.unused_knob"].severity == "warning"
    assert "never names it" in by_key["entropy_cfg.unused_knob"].message
    # planted: the same recipe whose code reads neither
    bare = _recipe(tmp_path / "bare", main=main.replace("config.entropy_cfg.clip_cov_ratio", "None")
                   .replace("config.reward_model.overlong_buffer", "None"))
    (bare / "config" / "dapo_trainer.yaml").write_text(yaml.read_text(encoding="utf-8"), encoding="utf-8")
    planted = _check(_script(bare / "run.sh", LAUNCH,
                             [*PPO, "entropy_cfg.clip_cov_ratio=0.0005", "reward_model.overlong_buffer.len=512"]),
                     tmp_path)
    found = {f.problem.keys[0]: f.problem for f in planted.findings if f.problem.keys}
    assert found["entropy_cfg.clip_cov_ratio"].rule == "VI801"
    assert found["reward_model.overlong_buffer.len"].severity == "error"
    assert "recipe's own code never reads it" in found["reward_model.overlong_buffer.len"].message


def test_a_recipe_yaml_given_as_the_target_is_read_with_its_recipes_code(tmp_path):
    """recipe/<name>/config/<it>.yaml, named by the @hydra.main of a main beside the config folder, is read as the
    recipe's launch reads it. The recipe's code counts with the verl modules it imports, one level deep: a recipe
    built on verl's fully async trainer (which reads config.async_training.require_batches,
    fully_async_trainer.py:158) may carry async_training.* in its YAML. The control: the same YAML with a main that
    imports nothing from verl keeps the warning."""
    def recipe(root: Path, imports: str) -> Path:
        folder = root / "recipe" / "rq"
        (folder / "config").mkdir(parents=True)
        (folder / "main.py").write_text(
            imports + "import hydra\n\n\n@hydra.main(config_path='config', config_name='fully_async', "
            "version_base=None)\ndef main(config):\n    pass\n", encoding="utf-8")
        path = folder / "config" / "fully_async.yaml"
        path.write_text(YAML.format(tree="ppo_trainer") + "async_training:\n  require_batches: 4\n", encoding="utf-8")
        return path

    built_on = recipe(tmp_path / "a", "from verl.experimental.fully_async_policy.fully_async_trainer import "
                                      "FullyAsyncTrainer\n")
    report = check(str(built_on), PPO, env={"HOME": str(tmp_path)})
    assert report.source.recipe == "recipe.rq.main"
    assert "async_training.require_batches" not in {k for f in report.findings for k in f.problem.keys}, \
        _lines(report)
    alone = check(str(recipe(tmp_path / "b", "")), PPO, env={"HOME": str(tmp_path)})
    [found] = [f.problem for f in alone.findings if "async_training.require_batches" in f.problem.keys]
    assert (found.rule, found.severity) == ("VI801", "warning")
    # a YAML outside any recipe/ folder stays a plain YAML: an unknown key there is an error
    plain = tmp_path / "mine.yaml"
    plain.write_text(YAML.format(tree="ppo_trainer") + "async_training:\n  require_batches: 4\n", encoding="utf-8")
    mine = check(str(plain), PPO, env={"HOME": str(tmp_path)})
    assert mine.source.recipe is None
    assert [f.problem.severity for f in mine.findings if "async_training.require_batches" in f.problem.keys] == \
        ["error"]

VERL_RECIPE = Path(__file__).resolve().parent / "data" / "reference" / "verl-recipe"


def test_verl_recipes_own_dapo_script_has_one_class_of_error_the_dropped_overlong_buffer(tmp_path):
    """verl-recipe's DAPO script (at 48ea0a7) sets the overlong buffer the old way, reward_model.overlong_buffer.*.
    Under verl 0.9.1 the recipe's main migrates the legacy reward keys, and the migration drops those three with the
    rest of reward_model (reward_loop.py:84-88); verl's DAPO reward manager reads
    reward.reward_kwargs.overlong_buffer_cfg (reward_manager/dapo.py:33), which the recipe's YAML leaves disabled.
    So the penalty is silently off: those three are the only errors, the reward manager a deprecation warning. With
    the fix applied (the YAML holds the keys: no `+`), the script checks clean; without the max_resp_len the fix
    brings, verl's DAPO manager would assert (VI892)."""
    root = tmp_path / "verl"
    shutil.copytree(VERL_RECIPE / "dapo", root / "recipe" / "dapo")
    (root / "recipe" / "dapo" / "main_dapo.py").write_text(
        "import hydra\nfrom verl.experimental.reward_loop import migrate_legacy_reward_impl\n\n\n"
        '@hydra.main(config_path="config", config_name="dapo_trainer", version_base=None)\ndef main(config):\n'
        "    config = migrate_legacy_reward_impl(config)\n", encoding="utf-8")
    script = root / "recipe" / "dapo" / "run_dapo_qwen2.5_32b.sh"
    report = _check(script, tmp_path, gpu_type="H100", gpu_memory_gb=80)
    assert report.source.recipe == "recipe.dapo.main_dapo"
    assert report.source.yaml_path == root / "recipe" / "dapo" / "config" / "dapo_trainer.yaml"
    assert {k for f in report.errors for k in f.problem.keys} == {
        f"reward_model.overlong_buffer.{k}" for k in ("enable", "len", "penalty_factor")}, _lines(report)
    assert {f.problem.rule for f in report.errors} == {"VI805"}
    assert [f.problem.keys for f in report.warnings if f.problem.rule == "VI805"] == [("reward_model.reward_manager",)]
    lines, _ = fixed_overrides(report)
    # the buffer on by its new key, with the max_resp_len verl 0.4-0.6's DAPO main passed beside it
    # (config.data.max_response_length, recipe/dapo/main_dapo.py:143 at v0.4.0): verl 0.9.1 asserts it is set
    assert {"reward.reward_kwargs.overlong_buffer_cfg.enable=true", "reward.reward_kwargs.max_resp_len=20480"} <= \
        set(lines)
    fixed = _check(_script(root / "recipe" / "dapo" / "fixed.sh", LAUNCH, lines), tmp_path, gpu_type="H100",
                   gpu_memory_gb=80)
    assert not fixed.errors, _lines(fixed)
    half = _check(_script(root / "recipe" / "dapo" / "half.sh", LAUNCH,
                          [o for o in lines if "max_resp_len" not in o]), tmp_path, gpu_type="H100", gpu_memory_gb=80)
    assert [f.problem.keys[0] for f in half.errors] == ["reward.reward_kwargs.max_resp_len"], _lines(half)


def test_reading_a_recipes_code_is_bounded(tmp_path, monkeypatch):
    """At most MAX_RECIPE_FILES files are parsed and the walk stops after MAX_WALK entries; a file past the byte
    budget is skipped, and nothing is imported (a module that raises on import is read all the same)."""
    from wizard.check import recipes

    pkg = tmp_path / "recipe" / "big"
    pkg.mkdir(parents=True)
    for k in range(30):
        (pkg / f"m{k:02d}.py").write_text(f"raise SystemExit\nx = config.opt.knob_{k:02d}\n", encoding="utf-8")
    assert recipes.recipe_reads(pkg, tmp_path).reads("opt.knob_29")
    monkeypatch.setattr(recipes, "MAX_RECIPE_FILES", 10)
    bounded = recipes.recipe_reads(pkg, tmp_path)
    assert bounded.reads("opt.knob_09") == "recipe/big/m09.py:2" and not bounded.reads("opt.knob_29")
    monkeypatch.setattr(recipes, "MAX_RECIPE_FILES", 400)
    monkeypatch.setattr(recipes, "MAX_WALK", 5)
    assert len(recipes._python_files(pkg)) == 30  # one folder is one step of the walk
    (pkg / "sub").mkdir()
    (pkg / "sub" / "deep.py").write_text("y = config.opt.deep_knob\n", encoding="utf-8")
    assert not recipes.recipe_reads(pkg, tmp_path).reads("opt.deep_knob")  # past the walk's bound



def test_a_recipes_helper_before_its_launch_is_not_read_as_the_launch(tmp_path, reader):
    """The first `python3 -m recipe.*` of a script may prepare data (argparse, no Hydra): both readers go on to the
    recipe's entry point."""
    folder = _recipe(tmp_path)
    path = folder / "run.sh"
    path.write_text("#!/bin/bash\npython3 -m recipe.dapo.prepare_data --local_dir /data --tasks all\n"
                    f"{LAUNCH} \\\n" + " \\\n".join(f"    {o}" for o in [*PPO, *OWN]) + "\n", encoding="utf-8")
    report = _check(path, tmp_path)
    assert report.source.recipe == "recipe.dapo.main_dapo"
    assert report.source.extraction.launch.line == 3 or reader == "bash"
    assert not report.errors, _lines(report)


def test_a_local_alias_is_followed_to_the_key_it_reads(tmp_path):
    """`cfg = config.get("custom_reward_function") or {}; cfg.get("path")` reads custom_reward_function.path (the
    shape of verl's get_custom_reward_fn): the alias is followed back, within its function."""
    from wizard.check import recipes

    pkg = tmp_path / "recipe" / "ev"
    pkg.mkdir(parents=True)
    (pkg / "main_eval.py").write_text(
        "def load(config):\n    cfg = config.get('custom_reward_function') or {}\n    return cfg.get('path')\n\n\n"
        "def other(config):\n    return cfg.get('name')\n", encoding="utf-8")
    reads = recipes.recipe_reads(pkg, tmp_path)
    assert reads.reads("custom_reward_function.path", frozenset({"path", "name"})) == "recipe/ev/main_eval.py:3"
    # the alias lives in its function only: `cfg` in other() is another name
    assert reads.reads("custom_reward_function.name", frozenset({"path", "name"})) is None


REGISTERS = '''from verl.experimental.agent_loop import register
from verl.single_controller.base.decorator import Dispatch, register as dispatch  # a worker method's, not a name
from verl.trainer.ppo.core_algos import register_adv_est
from verl.workers.rollout.base import _ROLLOUT_REGISTRY
from verl.workers.rollout.replica import RolloutReplicaRegistry

RolloutReplicaRegistry.register("myengine", lambda: None)
_ROLLOUT_REGISTRY[("myengine", "async")] = "recipe.dapo.mine.ServerAdapter"


@register("my_agent")
class MyAgentLoop:
    pass


@register_adv_est("my_adv")
def my_advantage(*args):
    pass


class Worker:
    @dispatch(dispatch_mode=Dispatch.ONE_TO_ALL)
    def step(self):
        pass


class MyActor:
    def update(self):
        loss_mode = self.config.policy_loss.get("loss_mode", "vanilla")
        if loss_mode == "mine":
            return 1
        if mode == "loose":  # a bare name read from nowhere: says nothing of any key
            return 2


def pick(config):
    if config.rollout.name == "compared_only":  # handled here, registered nowhere: nothing to import
        return 3
'''


@pytest.mark.slow
def test_names_a_recipe_registers_or_handles_are_values_verl_accepts_under_it(tmp_path, reader):
    """verl-recipe's dynamo registers a rollout (recipe/dynamo/register.py: RolloutReplicaRegistry.register and
    _ROLLOUT_REGISTRY), spo an agent loop (`@register("spo_tool_agent")`), gvpo handles its own loss mode
    (`if loss_mode == "gvpo"` in its actor): under the recipe those values are not VI809 errors. A value it neither
    registers nor handles still is, and so is the same value under main_ppo."""
    folder = _recipe(tmp_path)
    (folder / "mine.py").write_text(REGISTERS, encoding="utf-8")
    ours = ["actor_rollout_ref.rollout.name=myengine", "actor_rollout_ref.rollout.agent.default_agent_loop=my_agent",
            "algorithm.adv_estimator=my_adv", "actor_rollout_ref.actor.policy_loss.loss_mode=mine"]
    base = [o for o in PPO if not o.startswith(("actor_rollout_ref.rollout.name=", "algorithm.adv_estimator="))]
    report = _check(_script(folder / "run.sh", LAUNCH, [*base, *OWN, *ours]), tmp_path)
    # no error; the rollout's module is imported by nothing at this launch: a warning (the test below)
    assert [(f.problem.severity, f.problem.keys) for f in report.findings if f.problem.rule == "VI809"] == \
        [("warning", ("actor_rollout_ref.rollout.name",))], _lines(report)
    for planted in ("actor_rollout_ref.rollout.name=otherengine", "actor_rollout_ref.actor.policy_loss.loss_mode=loose",
                    "actor_rollout_ref.rollout.agent.default_agent_loop=step"):
        key = planted.split("=")[0]
        bad = _check(_script(folder / "bad.sh", LAUNCH, [*base, *OWN, *[o for o in ours if not o.startswith(key)],
                                                          planted]), tmp_path)
        assert [f.problem.keys for f in bad.findings if f.problem.rule == "VI809" and f.problem.severity == "error"] \
            == [(key,)], _lines(bad)
    ppo = _check(_script(tmp_path / "ppo.sh", "python3 -m verl.trainer.main_ppo", [*base, *ours]), tmp_path)
    assert {k for f in ppo.findings if f.problem.rule == "VI809" for k in f.problem.keys} == \
        {o.split("=")[0] for o in ours}, _lines(ppo)


def test_what_a_recipes_code_registers_and_compares_is_read_with_its_line(tmp_path):
    from wizard.check import recipes

    pkg = tmp_path / "recipe" / "mine"
    pkg.mkdir(parents=True)
    (pkg / "mine.py").write_text(REGISTERS, encoding="utf-8")
    reads = recipes.recipe_reads(pkg, tmp_path)
    assert reads.registered == {"rollout": {"myengine": "recipe/mine/mine.py:7"},
                                "agent_loop": {"my_agent": "recipe/mine/mine.py:11"},
                                "adv_estimator": {"my_adv": "recipe/mine/mine.py:16"}}
    assert reads.accepts("actor_rollout_ref.actor.policy_loss.loss_mode", "mine") == "recipe/mine/mine.py:30"
    assert reads.accepts("actor_rollout_ref.actor.policy_loss.loss_mode", "loose") is None
    assert reads.accepts("critic.policy_loss.loss_mode", "mine") == "recipe/mine/mine.py:30"  # the last two names
    assert reads.accepts("algorithm.adv_estimator", "myengine") is None  # a rollout's name, not an estimator's


def test_a_recipe_that_runs_verls_evaluation_with_its_own_copy_is_checked_as_main_eval(tmp_path, reader):
    """recipe/r1's main_eval declares config "evaluation" and ships a copy of verl's evaluation.yaml with no
    `defaults:` (Hydra composes it alone): it is checked as verl's main_eval, not against main_ppo's tree, whose
    training rules (VI807: no rollout name, no micro-batch) would refuse an evaluation. The planted control: the
    same YAML with verl's ppo_trainer in its defaults is a PPO tree again."""
    import importlib.util

    verl_eval = Path(importlib.util.find_spec("verl").origin).parent / "trainer" / "config" / "evaluation.yaml"
    folder = tmp_path / "recipe" / "r1"
    (folder / "config").mkdir(parents=True)
    (folder / "main_eval.py").write_text(
        "import hydra\n\n\n@hydra.main(config_path='config', config_name='evaluation', version_base=None)\n"
        "def main(config):\n    pass\n", encoding="utf-8")
    (folder / "config" / "evaluation.yaml").write_text(verl_eval.read_text(encoding="utf-8"), encoding="utf-8")
    overrides = ["data.path=/tmp/gen/test-output-8.parquet", "data.response_key=responses",
                 "custom_reward_function.path=recipe/r1/reward_score.py", "custom_reward_function.name=reward_func"]
    report = _check(_script(folder / "run.sh", "python3 -m recipe.r1.main_eval", overrides), tmp_path)
    assert (report.source.recipe, report.source.entry, report.source.config_name) == \
        ("recipe.r1.main_eval", "eval", "evaluation")
    assert not report.errors and not {"VI805", "VI891"} & set(report.ids()), _lines(report)
    wrong = _check(_script(folder / "bad.sh", "python3 -m recipe.r1.main_eval", [*overrides, "data.prompt_kye=p"]),
                   tmp_path)
    assert [f.problem.keys for f in wrong.findings if f.problem.rule == "VI801"] == [("data.prompt_kye",)]
    (folder / "config" / "evaluation.yaml").write_text(
        "hydra:\n  searchpath:\n    - file://verl/trainer/config\ndefaults:\n  - ppo_trainer\n  - _self_\n"
        + verl_eval.read_text(encoding="utf-8"), encoding="utf-8")
    ppo = _check(_script(folder / "ppo.sh", "python3 -m recipe.r1.main_eval", overrides), tmp_path)
    assert ppo.source.entry == "ppo" and "VI807" in ppo.ids(), _lines(ppo)


@pytest.mark.slow
def test_a_rollout_registered_in_a_module_nothing_imports_is_a_warning(tmp_path):
    """verl-recipe's dynamo registers its rollout in recipe/dynamo/register.py, which neither its main nor its
    package imports: verl loads it only where VERL_USE_EXTERNAL_MODULES names it (verl/__init__.py:49), as
    dynamo's scripts export. Without that, one VI809 warning naming the module; with it (in the script, or given to
    check with --env), or imported by the recipe's main, none."""
    import wizard.check.rules.values  # noqa: F401  (the rule under test)
    from wizard.check.recipes import imported_at_launch

    folder = _recipe(tmp_path)
    (folder / "register.py").write_text(REGISTERS, encoding="utf-8")
    base = [o for o in PPO if not o.startswith("actor_rollout_ref.rollout.name=")]
    ours = [*base, *OWN, "actor_rollout_ref.rollout.name=myengine"]
    bare = _check(_script(folder / "run.sh", LAUNCH, ours), tmp_path)
    warned = [f.problem for f in bare.findings if f.problem.rule == "VI809"]
    assert [(p.severity, p.keys) for p in warned] == [("warning", ("actor_rollout_ref.rollout.name",))], _lines(bare)
    assert "VERL_USE_EXTERNAL_MODULES=recipe.dapo.register" in warned[0].hint
    # a value the recipe's code only compares with (no registration) has no module to import: no finding
    compared = _check(_script(folder / "cmp.sh", LAUNCH, [*base, *OWN, "actor_rollout_ref.rollout.name=compared_only"]),
                      tmp_path)
    assert "VI809" not in compared.ids(), _lines(compared)
    exported = folder / "exported.sh"
    _script(exported, LAUNCH, ours)
    exported.write_text(exported.read_text(encoding="utf-8").replace(
        "set -x\n", "set -x\nexport VERL_USE_EXTERNAL_MODULES=recipe.dapo.register\n"), encoding="utf-8")
    assert "VI809" not in _check(exported, tmp_path).ids()
    given = check(str(folder / "run.sh"), env={"HOME": str(tmp_path),
                                              "VERL_USE_EXTERNAL_MODULES": "other.mod,recipe.dapo.register"})
    assert "VI809" not in given.ids(), _lines(given)
    (folder / "main_dapo.py").write_text(MAIN.replace("{name}", "dapo_trainer").replace(
        "import hydra\n", "import hydra\nfrom . import register  # noqa: F401\n"), encoding="utf-8")
    assert "VI809" not in _check(folder / "run.sh", tmp_path).ids()
    # what a launch imports: its packages, itself, its imports (relative ones against its package)
    assert imported_at_launch("recipe.dapo.main_dapo", (".register", "..common.x", "verl.trainer")) >= \
        {"recipe", "recipe.dapo", "recipe.dapo.main_dapo", "recipe.dapo.register", "recipe.common.x", "verl.trainer"}


OWN_ACTOR = '''from dataclasses import dataclass

from verl.workers.config import FSDPActorConfig


@dataclass
class OwnActorConfig(FSDPActorConfig):
    own_eta: float = 1.0
'''


def test_a_field_of_the_recipes_own_actor_dataclass_is_not_refused(tmp_path, monkeypatch):
    """The SPPO recipe's YAML sets actor._target_: recipe.sppo.config.SPPOActorConfig, a subclass of verl's
    FSDPActorConfig with its own field sppo_eta. verl 0.9.1's engine worker builds the actor config with
    omega_conf_to_dataclass(self.config.actor) and no type (engine_workers.py:593), which instantiates `_target_`:
    the oracle below is that call, on verl's own composed actor node. Without the `_target_`, verl's FSDPActorConfig
    refuses the field, and VI804 says so (the control)."""
    import os

    import verl
    from hydra import compose, initialize_config_dir
    from verl.utils.config import omega_conf_to_dataclass

    folder = _recipe(tmp_path)
    (folder / "config.py").write_text(OWN_ACTOR, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with initialize_config_dir(config_dir=os.path.join(os.path.dirname(verl.__file__), "trainer/config"),
                               version_base=None):
        cfg = compose(config_name="ppo_trainer", overrides=[
            "actor_rollout_ref.actor._target_=recipe.dapo.config.OwnActorConfig", "+actor_rollout_ref.actor.own_eta=2.0",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4"])
    assert omega_conf_to_dataclass(cfg.actor_rollout_ref.actor).own_eta == 2.0
    with pytest.raises(Exception, match="own_eta"):
        cfg.actor_rollout_ref.actor._target_ = "verl.workers.config.FSDPActorConfig"
        omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)

    yaml = folder / "config" / "dapo_trainer.yaml"
    base = yaml.read_text(encoding="utf-8")
    yaml.write_text(base + "actor_rollout_ref:\n  actor:\n    _target_: recipe.dapo.config.OwnActorConfig\n"
                    "    own_eta: 1.0\n", encoding="utf-8")
    report = _check(_script(folder / "run.sh", LAUNCH, PPO), tmp_path)
    assert "VI804" not in report.ids(), _lines(report)
    yaml.write_text(base + "actor_rollout_ref:\n  actor:\n    own_eta: 1.0\n", encoding="utf-8")
    report = _check(_script(folder / "run.sh", LAUNCH, PPO), tmp_path)
    assert any(f.problem.rule == "VI804" and "own_eta" in f.problem.message for f in report.findings), _lines(report)
