"""Launch scripts of verl 0.9.1's other entry points (wizard.check.entrypoints) are read with that entry point's own
config tree, the one its `@hydra.main` declares: sft_trainer (sft_trainer_engine, verl/trainer/sft_trainer.py:461),
fully_async_main (fully_async_ppo_trainer, fully_async_main.py:222), the one-step-off main_ppo
(one_step_off_ppo_trainer, one_step_off_policy/main_ppo.py:109), main_generation_server (ppo_trainer,
main_generation_server.py:122) and main_eval (evaluation, trainer/main_eval.py:41).

For each: a script with a key only that tree holds is clean (the same key under main_ppo is unknown), and a
misspelt key is named. Both readers are covered: bash in the sandbox, and the static reader where no sandbox runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from wizard.check.entrypoints import ENTRIES, entry_of_word, launch_index
from wizard.check.lint import check

pytestmark = pytest.mark.verl  # the other entry points' trees are composed by Hydra from the installed verl

PPO = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", "actor_rollout_ref.rollout.name=vllm",
       "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
       "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8", "algorithm.adv_estimator=grpo",
       "actor_rollout_ref.rollout.n=4", "trainer.nnodes=1", "trainer.n_gpus_per_node=4"]

# entry point → (launch words, the scope name, its tree, overrides with a key only its tree holds, that key,
#                the same kind of key misspelt)
CASES = {
    "sft_trainer": (
        "torchrun --nnodes=1 --nproc_per_node=8 -m verl.trainer.sft_trainer", "sft", "sft_trainer_engine",
        # fixed micro-batches: with the SFT default use_dynamic_bsz=True verl ignores the micro batch size (VI786)
        ["model.path=Qwen/Qwen2.5-0.5B-Instruct", "trainer.n_gpus_per_node=8", "data.micro_batch_size_per_gpu=2",
         "data.max_length=2048", "data.use_dynamic_bsz=false"], "data.micro_batch_size_per_gpu",
        "data.micro_batch_size_per_gpus=2"),
    "fully_async": (
        "python3 -m verl.experimental.fully_async_policy.fully_async_main", "fully_async", "fully_async_ppo_trainer",
        # hybrid_engine off: FullyAsyncTrainer asserts it too (VI995; every fully async script verl ships sets it)
        [*PPO, "rollout.nnodes=1", "rollout.n_gpus_per_node=4", "async_training.staleness_threshold=0.5",
         "actor_rollout_ref.hybrid_engine=False"],
        "async_training.staleness_threshold", "async_training.stalenes_threshold=0.5"),
    "one_step_off": (
        "python3 -m verl.experimental.one_step_off_policy.main_ppo", "one_step_off", "one_step_off_ppo_trainer",
        # hybrid_engine off: the one-step-off trainer asserts it (VI995; every one-step-off script verl ships sets it)
        [*PPO, "rollout.nnodes=1", "rollout.n_gpus_per_node=4", "actor_rollout_ref.hybrid_engine=False"],
        "rollout.n_gpus_per_node",
        "rollout.n_gpu_per_node=4"),
    "main_eval": (
        "python3 -m verl.trainer.main_eval", "eval", "evaluation",
        ["data.path=/tmp/gen/test-output-8.parquet", "data.response_key=responses",
         # verl 0.9.1's get_custom_reward_fn reads reward.custom_reward_function (trainer/ppo/reward.py:70), a node
         # evaluation.yaml lacks: given with + (VI708)
         "+reward.custom_reward_function.path=/tmp/gen/reward_score.py",
         "+reward.custom_reward_function.name=reward_func"],
        "data.response_key", "data.response_kye=responses"),
    "generation": (
        "python3 -m verl.trainer.main_generation_server", "generation", "ppo_trainer",
        ["actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", "actor_rollout_ref.rollout.name=vllm",
         "actor_rollout_ref.rollout.n=4", "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
         "trainer.nnodes=1", "trainer.n_gpus_per_node=8", "data.prompt_key=prompt",
         "+data.output_path=/tmp/out/gen.parquet", "actor_rollout_ref.rollout.load_format=auto"],
        "data.output_path", "actor_rollout_ref.rollout.temprature=0.7"),
}


def _script(tmp_path: Path, launch: str, overrides: list[str], name: str = "run.sh") -> Path:
    path = tmp_path / name
    path.write_text("#!/bin/bash\nset -x\n" + launch + " \\\n" + " \\\n".join(f"    {o}" for o in overrides) + "\n",
                    encoding="utf-8")
    return path


def entry_module(launch: str) -> str:
    return next(w for w in launch.split() if w.startswith("verl."))


def _lines(report) -> list[str]:
    return [f.problem.line() for f in report.findings]


@pytest.fixture(params=["bash", "static"])
def reader(request, monkeypatch):
    if request.param == "static":
        monkeypatch.setenv("VERL_INIT_NO_SANDBOX", "1")
    return request.param


@pytest.mark.parametrize("which", sorted(CASES))
def test_a_valid_script_of_each_entry_point_is_read_with_its_own_tree(which, tmp_path, reader):
    launch, scope, tree, overrides, own_key, _ = CASES[which]
    report = check(str(_script(tmp_path, launch, overrides)), env={"HOME": str(tmp_path)})
    assert report.source.extraction.launch.module == entry_module(launch)
    assert (report.source.entry, report.source.config_name) == (scope, tree)
    assert report.source.config_missing is None
    assert not report.errors, _lines(report)
    assert not {"VI801", "VI802", "VI804", "VI891"} & set(report.ids()), _lines(report)
    assert not [f for f in report.findings if own_key in f.problem.keys and f.problem.severity != "info"], \
        _lines(report)


@pytest.mark.parametrize("which", sorted(CASES))
def test_a_misspelt_key_is_named_under_each_entry_point(which, tmp_path, reader):
    launch, scope, _, overrides, _, wrong = CASES[which]
    key = wrong.split("=", 1)[0]
    report = check(str(_script(tmp_path, launch, [*overrides, wrong])), env={"HOME": str(tmp_path)})
    assert report.source.entry == scope
    hits = [f.problem for f in report.findings if key in f.problem.keys and f.problem.rule == "VI801"]
    assert hits and hits[0].severity == "error", _lines(report)


@pytest.mark.parametrize("which", ["fully_async", "one_step_off", "sft_trainer", "main_eval"])
def test_the_entry_points_own_keys_are_unknown_to_main_ppo(which, tmp_path):
    """The control: the same overrides launched by main_ppo name the entry point's own key as unknown, so the
    clean result above comes from reading the entry point's tree."""
    _, _, _, overrides, own_key, _ = CASES[which]
    report = check(str(_script(tmp_path, "python3 -m verl.trainer.main_ppo", overrides)), env={"HOME": str(tmp_path)})
    assert report.source.entry == "ppo"
    assert any(own_key in f.problem.keys for f in report.findings if f.problem.rule in ("VI801", "VI802")), \
        _lines(report)


def test_generations_output_path_is_read_by_its_main_only(tmp_path):
    """+data.output_path: main_generation_server reads it (main_generation_server.py:186); main_ppo never does."""
    gen = CASES["generation"][3]
    ppo = check(str(_script(tmp_path, "python3 -m verl.trainer.main_ppo", [*PPO, "+data.output_path=/tmp/o.parquet"])),
                env={"HOME": str(tmp_path)})
    assert [f.problem.rule for f in ppo.findings if "data.output_path" in f.problem.keys] == ["VI802"], _lines(ppo)
    report = check(str(_script(tmp_path, "python3 -m verl.trainer.main_generation_server", gen)),
                   env={"HOME": str(tmp_path)})
    assert not [f for f in report.findings if "data.output_path" in f.problem.keys], _lines(report)
    # the PPO training rules do not apply: no critic, batch or memory findings for a generation run
    assert not {"VI846", "VI821", "VI807", "VI860"} & set(report.ids()), _lines(report)


def test_the_file_form_and_the_megatron_tree_of_an_entry_point(tmp_path):
    path = _script(tmp_path, "python3 verl/experimental/fully_async_policy/fully_async_main.py --config-path=config "
                   "--config-name=fully_async_ppo_megatron_trainer", [*PPO, "async_training.require_batches=2"])
    report = check(str(path), env={"HOME": str(tmp_path)})
    assert (report.source.entry, report.source.config_name) == ("fully_async", "fully_async_ppo_megatron_trainer")
    assert report.config.get("actor_rollout_ref.actor.strategy") == "megatron"
    assert not {"VI801", "VI891"} & set(report.ids()), _lines(report)


def test_a_missing_recipe_config_under_another_entry_point_is_one_finding(tmp_path):
    path = _script(tmp_path, "python3 -m verl.experimental.fully_async_policy.fully_async_main "
                   "--config-path=recipe/config --config-name=my_async_megatron", [*PPO, "my_recipe.knob=1"])
    report = check(str(path), env={"HOME": str(tmp_path)}, workdir=str(tmp_path))
    assert [f.problem.rule for f in report.findings].count("VI891") == 1, _lines(report)
    assert report.source.config_name == "fully_async_ppo_megatron_trainer"
    assert not [f for f in report.findings if f.problem.rule == "VI801"], _lines(report)


def test_launch_words_name_the_entry_point():
    assert launch_index(["torchrun", "-m", "verl.trainer.sft_trainer", "a=1"])[1].name == "sft"
    assert entry_of_word("verl/experimental/one_step_off_policy/main_ppo.py").name == "one_step_off"
    assert entry_of_word("main_ppo.py").name == "ppo" and entry_of_word("/x/verl/trainer/main_ppo.py").name == "ppo"
    assert entry_of_word("prepare_data.py") is None and launch_index(["python3", "train.py"]) is None
    # every entry point's module is a file of the installed verl, with the @hydra.main its row cites
    import importlib.util

    root = Path(importlib.util.find_spec("verl").origin).parent
    for e in ENTRIES:
        file, line = e.cite.split(":")
        text = (root.parent / file).read_text(encoding="utf-8").splitlines()
        assert f'config_name="{e.config_name}"' in text[int(line) - 1], e
        for key, where in e.reads_outside:
            f, n = where.split(":")
            cited = (root.parent / f).read_text(encoding="utf-8").splitlines()[int(n) - 1]
            # the key after its section (data.output_path), or a nested node's last name read there with .get("path")
            assert key.split(".", 1)[1] in cited or f'"{key.rsplit(".", 1)[1]}"' in cited, (key, cited)


def test_a_config_group_selection_is_composed_as_hydra_would(tmp_path):
    """sft_trainer_engine's defaults pick engine@engine: fsdp and optim@optim: fsdp; `engine=megatron optim=megatron`
    (verl's own examples/sft/gsm8k/run_qwen3_5_397b_a17b_megatron.sh) brings the Megatron engine's and optimizer's
    keys, so engine.tensor_model_parallel_size and optim.min_lr are known. Without the selections Hydra refuses both
    (the planted fault: the same keys under the default groups are VI801)."""
    launch = CASES["sft_trainer"][0]
    base = CASES["sft_trainer"][3]
    keys = ["engine.tensor_model_parallel_size=2", "optim.min_lr=1e-6"]
    selected = check(str(_script(tmp_path, launch, [*base, "engine=megatron", "optim=megatron", *keys], "a.sh")),
                     env={"HOME": str(tmp_path)})
    assert not [f for f in selected.findings if f.problem.rule in ("VI800", "VI801")], \
        [f.problem.line() for f in selected.findings]
    default = check(str(_script(tmp_path, launch, [*base, *keys], "b.sh")), env={"HOME": str(tmp_path)})
    assert {k for f in default.findings if f.problem.rule == "VI801" for k in f.problem.keys} == \
        {"engine.tensor_model_parallel_size", "optim.min_lr"}


def test_the_sft_trainers_take_after_each_epoch_for_a_frequency(tmp_path):
    """verl's SFT trainers turn trainer.test_freq / save_freq "after_each_epoch" into an epoch's steps
    (trainer/sft_trainer.py:191-196; verl's own tests/special_e2e/sft/run_sft_engine.sh passes it): no VI808 there.
    main_ppo compares the frequency with numbers, so the same word under main_ppo stays VI808."""
    launch, _, _, base = CASES["sft_trainer"][:4]
    words = ["trainer.test_freq=after_each_epoch", "trainer.save_freq=after_each_epoch"]
    sft = check(str(_script(tmp_path, launch, [*base, *words], "sft.sh")), env={"HOME": str(tmp_path)})
    assert "VI808" not in {f.problem.rule for f in sft.findings}
    ppo = check(str(_script(tmp_path, "python3 -m verl.trainer.main_ppo", [*PPO, *words], "ppo.sh")),
                env={"HOME": str(tmp_path)})
    assert {k for f in ppo.findings if f.problem.rule == "VI808" for k in f.problem.keys} == \
        {"trainer.test_freq", "trainer.save_freq"}


def test_a_recipe_yaml_finds_verls_tree_where_its_recipe_runs(tmp_path):
    """verl's recipe YAMLs name verl's tree as `file://verl/trainer/config` (recipe/dapo/config/dapo_trainer.yaml),
    which Hydra reads from the working folder, a verl checkout's root. Checked away from one, that is the installed
    verl's tree: the YAML composes (no VI801 "Hydra cannot compose") and its own keys are read over verl's. The planted
    fault, a search path that names no verl tree, is the compose error."""
    def yaml_with(searchpath: str) -> Path:
        folder = tmp_path / searchpath.replace("/", "_")
        folder.mkdir()
        path = folder / "dapo_trainer.yaml"
        path.write_text(f"hydra:\n  searchpath:\n    - {searchpath}\ndefaults:\n  - ppo_trainer\n  - _self_\n"
                        "data:\n  gen_batch_size: ${data.train_batch_size}\nreward:\n  reward_manager:\n    name: dapo\n",
                        encoding="utf-8")
        return path

    overrides = [*PPO, "data.train_batch_size=64"]
    report = check(str(yaml_with("file://verl/trainer/config")), overrides, env={"HOME": str(tmp_path)})
    assert not [f for f in report.findings if "cannot compose" in f.problem.message], \
        [f.problem.line() for f in report.findings]
    assert report.defaults.startswith("verl")
    assert report.config["reward.reward_manager.name"] == "dapo"
    # without a scheme Hydra reads the entry as a file path (the recipe dapo_transfer_queue's YAML writes it so)
    bare = check(str(yaml_with("verl/trainer/config")), overrides, env={"HOME": str(tmp_path)})
    assert not [f for f in bare.findings if "cannot compose" in f.problem.message]
    planted = check(str(yaml_with("file://vrl/trainer/config")), overrides, env={"HOME": str(tmp_path)})
    assert [f for f in planted.findings if "cannot compose" in f.problem.message]


def test_main_eval_reads_its_reward_function_where_its_tree_holds_it(tmp_path):
    """main_eval's evaluation tree holds custom_reward_function.*, but verl 0.9.1's get_custom_reward_fn reads
    reward.custom_reward_function (trainer/ppo/reward.py:70; main_eval.py:35): the tree's own keys are VI708 (not a
    legacy reward key as under main_ppo), the + keys are read (no VI802), and no PPO training rule runs."""
    overrides = CASES["main_eval"][3]
    report = check(str(_script(tmp_path, "python3 -m verl.trainer.main_eval", overrides)), env={"HOME": str(tmp_path)})
    assert not {"VI802", "VI805", "VI807", "VI846", "VI860", "VI895", "VI708"} & set(report.ids()), _lines(report)
    own = ["custom_reward_function.path=/tmp/gen/reward_score.py", "custom_reward_function.name=reward_func"]
    tree_keys = check(str(_script(tmp_path, "python3 -m verl.trainer.main_eval", [*overrides[:2], *own])),
                      env={"HOME": str(tmp_path)})
    assert "VI708" in tree_keys.ids() and "VI805" not in tree_keys.ids(), _lines(tree_keys)
    ppo = check(str(_script(tmp_path, "python3 -m verl.trainer.main_ppo", [*PPO, *own])),
                env={"HOME": str(tmp_path)})
    assert {k for f in ppo.findings if f.problem.rule == "VI805" for k in f.problem.keys} >= \
        {"custom_reward_function.path"}, _lines(ppo)


def test_a_script_that_launches_no_entry_point_is_refused_naming_every_one(tmp_path):
    """A model-merge script launches nothing check reads: one line naming every entry point it knows (from
    ENTRIES, so main_eval among them), non-zero exit from the CLI."""
    from conftest import run_cli

    path = tmp_path / "merge.sh"
    path.write_text("python3 -m verl.model_merger merge --backend fsdp --local_dir ckpt --target_dir out\n",
                    encoding="utf-8")
    r = run_cli(["check", str(path)], env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert r.returncode != 0 and "[VI800]" in r.stderr
    line = next(x for x in r.stderr.splitlines() if "does not launch" in x)
    for e in ENTRIES[1:]:
        assert e.module.rsplit(".", 1)[-1] in line, (e.module, line)


@pytest.mark.verl
def test_a_removed_entry_point_is_named_with_its_successor(tmp_path):
    """verl.trainer.main_generation (real case verl#5593): the installed verl has no such module (importlib, the
    oracle), and check names the entry point closest by name instead of listing every one."""
    import importlib.util

    from conftest import run_cli

    assert importlib.util.find_spec("verl.trainer.main_generation") is None
    assert importlib.util.find_spec("verl.trainer.main_generation_server") is not None
    path = tmp_path / "gen.sh"
    path.write_text("python3 -m verl.trainer.main_generation trainer.nnodes=1 data.path=test.parquet "
                    "data.n_samples=4 model.path=Qwen/Qwen2.5-0.5B-Instruct rollout.temperature=1.0\n", encoding="utf-8")
    r = run_cli(["check", str(path)], env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert r.returncode != 0 and "[VI800]" in r.stderr
    line = next(x for x in r.stderr.splitlines() if "[VI800]" in x)
    assert "`python -m verl.trainer.main_generation`, which verl" in line
    assert "launch verl.trainer.main_generation_server" in line


@pytest.mark.parametrize("flag", ["deep", "run_verl"])
def test_deep_and_verl_do_not_judge_an_sft_launch_by_ppo_code(tmp_path, flag):
    """--deep / --verl run verl's PPO-family code; an sft_trainer launch (its own tree, sft_trainer_engine) used to
    get PPO's Hydra errors ('Could not override data.messages_key'). It is checked on its own tree and says so."""
    launch, _, _, overrides, _, _ = CASES["sft_trainer"]
    path = _script(tmp_path, launch, [*overrides, "data.messages_key=messages"])
    report = check(str(path), **{flag: True})
    assert not report.errors, [f.problem.line() for f in report.errors]
    assert any("checked against its own tree" in n for n in report.deep_notes)
