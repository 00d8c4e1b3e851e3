"""wizard.check.shellargs: Hydra overrides of a main_ppo launch script, read without running it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from wizard.check.shellargs import ShellSyntaxError, extract, extract_file, looks_like_script


def ex(script: str, **kw):
    return extract(textwrap.dedent(script), **kw)


def test_continuation_lines_and_comments():
    e = ex("""\
        #!/usr/bin/env bash
        set -xeuo pipefail
        # a comment with python3 -m verl.trainer.main_ppo in it
        python3 -m verl.trainer.main_ppo \\
            algorithm.adv_estimator=grpo \\
            data.train_batch_size=64 \\
            trainer.logger='["console","wandb"]' $@
        """)
    assert e.launch is not None and e.launch.line == 4
    assert e.overrides == ["algorithm.adv_estimator=grpo", "data.train_batch_size=64", 'trainer.logger=["console","wandb"]']
    assert e.unresolved == []
    assert e.launch.passthrough


def test_literal_variables_and_defaults():
    e = ex("""\
        N=8
        export MODEL_PATH=${MODEL_PATH:-Qwen/Qwen2.5-7B-Instruct}
        BS=${BATCH:-1024}
        NAME="run_${N}gpu"
        SUB=${OUTER:-${INNER:-deep}}
        : ${ASSIGNED:=7}
        python3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=$N actor_rollout_ref.model.path="$MODEL_PATH" \\
            data.train_batch_size=${BS} trainer.experiment_name=$NAME a.b=$SUB a.c=$ASSIGNED
        """)
    assert e.overrides == ["trainer.n_gpus_per_node=8", "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct",
                           "data.train_batch_size=1024", "trainer.experiment_name=run_8gpu", "a.b=deep", "a.c=7"]
    assert e.unresolved == []


def test_environment_given_explicitly_wins_over_defaults():
    e = ex("BS=${BATCH:-1024}\npython3 -m verl.trainer.main_ppo data.train_batch_size=$BS\n", env={"BATCH": "32"})
    assert e.overrides == ["data.train_batch_size=32"]


def test_arithmetic():
    e = ex("""\
        NODES=2
        GPUS=8
        TOTAL=$((NODES * GPUS))
        python3 -m verl.trainer.main_ppo a.total=$TOTAL a.half=$(( TOTAL / 3 )) a.mod=$((-7 % 3)) \\
            a.neg=$((-7 / 2)) a.nested=$(( ($NODES + 1) ** 2 )) a.cmp=$((GPUS > 4 && NODES < 4))
        """)
    assert e.overrides == ["a.total=16", "a.half=5", "a.mod=-1", "a.neg=-3", "a.nested=9", "a.cmp=1"]


def test_arithmetic_with_an_unknown_variable_is_unresolved():
    e = ex("python3 -m verl.trainer.main_ppo trainer.nnodes=$((NNODES * 2))\n")
    assert e.overrides == ["trainer.nnodes=UNSET_NNODES"]
    assert [u.name for u in e.unresolved] == ["NNODES"]


def test_arrays_expanded_with_at():
    e = ex("""\
        LR=1e-6
        DATA=(
            data.train_batch_size=64   # trailing comment
            data.train_files="['$HOME/a.parquet', '$HOME/b.parquet']"
        )
        ACTOR=(actor_rollout_ref.actor.optim.lr=$LR)
        ACTOR+=(actor_rollout_ref.actor.ppo_mini_batch_size=32 "trainer.project_name=two words")
        EMPTY=()
        python3 -m verl.trainer.main_ppo "${DATA[@]}" "${ACTOR[@]}" "${EMPTY[@]}" trainer.n=${#ACTOR[@]} a.first=${ACTOR[0]}
        """, env={"HOME": "/home/me"})
    assert e.overrides == ["data.train_batch_size=64", "data.train_files=['/home/me/a.parquet', '/home/me/b.parquet']",
                           "actor_rollout_ref.actor.optim.lr=1e-6", "actor_rollout_ref.actor.ppo_mini_batch_size=32",
                           "trainer.project_name=two words", "trainer.n=3", "a.first=actor_rollout_ref.actor.optim.lr=1e-6"]


def test_unresolved_values_are_reported_not_guessed():
    e = ex("""\
        DEVICE=${DEVICE:-$(python3 -c 'import torch_npu' && echo npu || echo gpu)}
        GPUS=8
        if [ "$DEVICE" = npu ]; then
            GPUS=16
        fi
        [ -z "${TP:-}" ] && TP=2
        STAMP=$(date +%s)
        python3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=$GPUS trainer.device=$DEVICE \\
            actor_rollout_ref.rollout.tensor_model_parallel_size=$TP data.train_files=$DATA_HOME/train.parquet \\
            trainer.experiment_name=run_$STAMP trainer.nnodes=$1
        """)
    assert e.overrides == ["trainer.n_gpus_per_node=UNSET_GPUS", "trainer.device=UNSET_CMD",
                           "actor_rollout_ref.rollout.tensor_model_parallel_size=UNSET_TP",
                           "data.train_files=UNSET_DATA_HOME/train.parquet", "trainer.experiment_name=run_UNSET_CMD",
                           "trainer.nnodes=UNSET_ARG1"]
    reasons = {u.name: u.reason for u in e.unresolved}
    assert "conditional" in reasons["GPUS"] and "conditional" in reasons["TP"]
    assert "environment" in reasons["DATA_HOME"]
    assert "positional" in reasons["ARG1"]
    assert any("command substitution" in u.reason for u in e.unresolved if u.name == "CMD")


def test_case_statement_and_functions_do_not_hide_the_launch():
    e = ex("""\
        BACKEND=${BACKEND:-vllm}
        case "${BACKEND}" in
            vllm | sglang) ;;
            *) echo "bad" >&2; exit 1 ;;
        esac
        die() { echo "$*" >&2; exit 1; }
        python3 -c "import verl" 2>/dev/null || die "no verl"
        python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=$BACKEND 2>&1 | tee log.txt
        """)
    assert e.overrides == ["actor_rollout_ref.rollout.name=vllm"]
    assert e.launch is not None and not e.launch.conditional


def test_launcher_array_env_prefix_and_ray_job_submit():
    e = ex("""\
        LAUNCH=(uv run python3)
        PYTHONUNBUFFERED=1 "${LAUNCH[@]}" -m verl.trainer.main_ppo trainer.nnodes=1
        """)
    assert e.overrides == ["trainer.nnodes=1"]
    e = ex("ray job submit --address=http://head:8265 -- python3 -m verl.trainer.main_ppo trainer.nnodes=2\n")
    assert e.overrides == ["trainer.nnodes=2"]
    e = ex("python3 verl/trainer/main_ppo.py trainer.nnodes=3\n")
    assert e.overrides == ["trainer.nnodes=3"]


def test_script_folder_idiom_config_path_and_cd(tmp_path: Path):
    script = tmp_path / "sub" / "run.sh"
    script.parent.mkdir()
    script.write_text(textwrap.dedent("""\
        HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
        CFG=$(dirname "$0")/conf
        cd "$HERE"
        exec python3 -m verl.trainer.main_ppo --config-path "$HERE" --config-name=verl_config hydra.run.dir=. "$@"
        """))
    e = extract_file(script)
    assert e.launch is not None
    assert e.launch.config_path == str(script.parent)
    assert e.launch.config_name == "verl_config"
    assert e.workdir == str(script.parent)
    assert e.overrides == ["hydra.run.dir=."]
    assert e.launch.passthrough and e.unresolved == []


def test_heredoc_is_skipped_and_quotes_are_kept_literal():
    e = ex("""\
        cat > notes.txt <<'EOF'
        python3 -m verl.trainer.main_ppo not.this=1
        EOF
        X='$NOT_EXPANDED'
        python3 -m verl.trainer.main_ppo a.x="$X" a.y='${ALSO_NOT}' a.z=$'tab\\there'
        """)
    assert e.overrides == ["a.x=$NOT_EXPANDED", "a.y=${ALSO_NOT}", "a.z=tab\there"]


def test_prefix_assignment_is_for_one_command_only():
    e = ex("""\
        A=1
        A=2 true
        python3 -m verl.trainer.main_ppo a.a=$A
        """)
    assert e.overrides == ["a.a=1"]


def test_parameter_operations():
    e = ex("""\
        P=/data/models/Qwen2.5-7B.tar
        B=VLLM
        python3 -m verl.trainer.main_ppo a.base=${P##*/} a.dir=${P%/*} a.stem=${P%.tar} a.low=${B,,} a.rep=${P/models/ckpt} \\
            a.alt=${B:+set} a.len=${#B}
        """)
    assert e.overrides == ["a.base=Qwen2.5-7B.tar", "a.dir=/data/models", "a.stem=/data/models/Qwen2.5-7B", "a.low=vllm",
                           "a.rep=/data/ckpt/Qwen2.5-7B.tar", "a.alt=set", "a.len=4"]


def test_no_launch_and_syntax_errors():
    assert ex("echo hello\npython3 train.py a=1\n").launch is None
    with pytest.raises(ShellSyntaxError):
        ex("python3 -m verl.trainer.main_ppo a.b='unterminated\n")


def test_looks_like_script():
    assert looks_like_script("#!/bin/bash\necho hi\n")
    assert looks_like_script("python3 -m verl.trainer.main_ppo a=1\n")
    assert not looks_like_script("data:\n  train_batch_size: 8\n")


def test_bundle_run_sh_points_at_its_own_config(tmp_path: Path):
    import wizard

    out = wizard.write_bundle(wizard.render(wizard.plan(wizard.load_profile("single-gpu"), base_dir=str(tmp_path))),
                              tmp_path / "b")
    e = extract_file(out / "run.sh")
    assert e.launch is not None
    assert e.launch.config_path == str(out.resolve()) and e.launch.config_name == "verl_config"
    assert e.overrides == [] and e.unresolved == []
    assert e.workdir == str(out.resolve())


def test_pwd_is_the_scripts_folder_or_where_it_cd_ed(tmp_path):
    """verl's examples pass --config-path=$(pwd)/...: the folder the script runs in (its own, or after a cd)."""
    script = tmp_path / "run.sh"
    script.write_text(textwrap.dedent("""\
        python3 -m verl.trainer.main_ppo --config-path=$(pwd)/cfg --config-name=mycfg data.train_files=$PWD/t.parquet
    """))
    r = extract_file(script)
    assert r.launch is not None and r.launch.config_path == f"{tmp_path}/cfg" and r.launch.config_name == "mycfg"
    assert f"data.train_files={tmp_path}/t.parquet" in r.launch.overrides and not r.unresolved
    r = ex("""\
        cd /opt/verl
        python3 -m verl.trainer.main_ppo --config-path "$(pwd)/cfg" trainer.nnodes=1
    """, script_path=str(script))
    assert r.launch.config_path == "/opt/verl/cfg"
