"""VI939 (an override the shell rewrites before Hydra reads it) and VI938 (a `set -u` script that stops on an unset
variable): held-out cases R37-04 (verl PR#2509, `trainer.logger=['console']` in zsh) and R37-03 (verl PR#6430,
`case "${DEVICE}"` under `set -xeuo pipefail`).

The oracles are the shells themselves, run here on the planted script with the launcher replaced by a stub that
records its arguments (bash with failglob, which stops on an unmatched pattern as zsh's default NOMATCH does, and
with nullglob; zsh itself is not a dependency of this suite), and verl's own Hydra config for what the
brace-expanded words become.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from wizard.check import bashtrace
from wizard.check.lint import check
from wizard.check.rules.globwords import unquoted

LAUNCH = ("python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo "
          "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct actor_rollout_ref.rollout.name=vllm "
          "data.train_batch_size=16 actor_rollout_ref.actor.ppo_mini_batch_size=8 actor_rollout_ref.rollout.n=4 "
          "actor_rollout_ref.actor.use_dynamic_bsz=True trainer.n_gpus_per_node=2 trainer.nnodes=1 {extra}\n")
STUB = '#!/bin/sh\nprintf "%s\\n" "$@" > "$ARGS_OUT"\n'


def _run(tmp_path, shell: list[str], script: str, env: dict[str, str] | None = None):
    """Run `script` under `shell` in an empty folder with python3 stubbed: (exit status, stderr, argv or None)."""
    bin_dir, work = tmp_path / "bin", tmp_path / "work"
    bin_dir.mkdir(exist_ok=True)
    work.mkdir(exist_ok=True)
    (bin_dir / "python3").write_text(STUB, encoding="utf-8")
    (bin_dir / "python3").chmod(0o755)
    path = tmp_path / "run.sh"
    path.write_text(script, encoding="utf-8")
    out = tmp_path / "argv.txt"
    out.unlink(missing_ok=True)
    run_env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "ARGS_OUT": str(out), **(env or {})}
    proc = subprocess.run([*shell, str(path)], cwd=work, env=run_env, capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stderr, (out.read_text(encoding="utf-8").split("\n")[:-1] if out.exists() else None)


def _ids(tmp_path, script: str, rule: str, env: dict[str, str] | None = None):
    path = tmp_path / "launch.sh"
    path.write_text(script, encoding="utf-8")
    return [f for f in check(str(path), env=env).findings if f.problem.rule == rule]


# --- VI939: the oracle is the shell ---------------------------------------------------------------------------------

def test_bash_failglob_stops_and_nullglob_drops_an_unquoted_list(tmp_path):
    status, err, argv = _run(tmp_path, ["bash"], "shopt -s failglob\n" + LAUNCH.format(extra="trainer.logger=[console]"))
    assert status != 0 and "no match" in err and argv is None  # the launch never ran
    status, _, argv = _run(tmp_path, ["bash"], "shopt -s nullglob\n" + LAUNCH.format(extra="trainer.logger=[console]"))
    assert status == 0 and not any(a.startswith("trainer.logger") for a in argv)  # the override vanished
    _, _, argv = _run(tmp_path, ["bash"], "shopt -s failglob\n" + LAUNCH.format(extra="'trainer.logger=[console]'"))
    assert "trainer.logger=[console]" in argv  # quoted: passed unchanged
    _, _, argv = _run(tmp_path, ["bash"], LAUNCH.format(extra="trainer.logger=[console]"))
    assert "trainer.logger=[console]" in argv  # plain bash passes an unmatched pattern on


@pytest.mark.verl
def test_brace_expansion_leaves_verl_the_last_part(tmp_path):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from wizard.check.entrypoints import verl_config_dir

    _, _, argv = _run(tmp_path, ["bash"], LAUNCH.format(extra="trainer.logger={console,wandb}"))
    assert [a for a in argv if a.startswith("trainer.logger")] == ["trainer.logger=console", "trainer.logger=wandb"]
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(verl_config_dir()), version_base=None):
        cfg = compose(config_name="ppo_trainer", overrides=argv[3:])
    GlobalHydra.instance().clear()
    assert cfg.trainer.logger == "wandb"  # not the list written


# --- VI939: check agrees ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("script", "severity"), [
    ("#!/usr/bin/env zsh\n" + LAUNCH.format(extra="trainer.logger=['console']"), "error"),  # R37-04
    ("#!/bin/bash\nshopt -s failglob\n" + LAUNCH.format(extra="trainer.logger=[console]"), "error"),
    ("#!/bin/bash\nshopt -s nullglob\n" + LAUNCH.format(extra="trainer.logger=[console]"), "warning"),
    ("#!/bin/bash\n" + LAUNCH.format(extra="trainer.logger={console,wandb}"), "error"),
    ("#!/bin/bash\nARGS=(\n  +actor_rollout_ref.rollout.engine_kwargs.vllm={swap_space:4,seed:1}\n)\n"
     + LAUNCH.format(extra='"${ARGS[@]}"'), "error"),
])
def test_check_names_the_rewritten_override(tmp_path, script, severity):
    [hit] = _ids(tmp_path, script, "VI939")
    assert hit.problem.severity == severity and "quote the whole word" in hit.problem.hint


@pytest.mark.parametrize("script", [
    "#!/bin/bash\n" + LAUNCH.format(extra="trainer.logger=[console]"),  # plain bash passes it on
    "#!/usr/bin/env zsh\n" + LAUNCH.format(extra="trainer.logger='[console]'"),  # quoted
    "#!/usr/bin/env zsh\n" + LAUNCH.format(extra="\"trainer.logger=['console']\""),
    "#!/usr/bin/env zsh\nsetopt nonomatch\n" + LAUNCH.format(extra="trainer.logger=[console]"),
    "#!/usr/bin/env zsh\n" + LAUNCH.format(extra="trainer.logger=console"),  # verl takes the string
    "#!/bin/bash\nL='{console,wandb}'\n" + LAUNCH.format(extra="trainer.logger=$L"),  # no brace expansion of $L
    "#!/bin/bash\n" + LAUNCH.format(extra="'+actor_rollout_ref.rollout.engine_kwargs.vllm={swap_space:4,seed:1}'"),
    "#!/bin/bash\n" + LAUNCH.format(extra="trainer.experiment_name=run_${RUN_ID:-a,b}"),
])
def test_check_is_silent_where_the_shell_passes_the_word_unchanged(tmp_path, script):
    assert not _ids(tmp_path, script, "VI939")


def test_unquoted_masks_what_the_shell_does_not_expand():
    assert unquoted("'[a]'x[b]") == "_____x[b]"
    assert unquoted('"{a,b}"${X:-{c,d}}$(echo [e])\\[f]') == "_" * 7 + "_" * 11 + "_" * 11 + "__f]"


# --- VI938 -----------------------------------------------------------------------------------------------------------

BRANCH = ('set -xeuo pipefail\n{default}case "${{DEVICE}}" in\n  gpu) ;;\n  npu) export VLLM_USE_V1=1 ;;\n'
          '  *) echo "Unsupported DEVICE=${{DEVICE}}" >&2; exit 1 ;;\nesac\n')
DEFAULT = "DEVICE=${DEVICE:-gpu}\n"


def test_bash_stops_on_the_unset_variable_before_the_launch(tmp_path):
    status, err, argv = _run(tmp_path, ["bash"], BRANCH.format(default="") + LAUNCH.format(extra=""))
    assert status != 0 and "DEVICE: unbound variable" in err and argv is None
    status, _, argv = _run(tmp_path, ["bash"], BRANCH.format(default=DEFAULT) + LAUNCH.format(extra=""))
    assert status == 0 and argv and argv[:2] == ["-m", "verl.trainer.main_ppo"]
    status, _, argv = _run(tmp_path, ["bash"], BRANCH.format(default="") + LAUNCH.format(extra=""), {"DEVICE": "gpu"})
    assert status == 0 and argv


needs_sandbox = pytest.mark.skipif(not bashtrace.available(), reason="no bubblewrap sandbox here")


@needs_sandbox
def test_check_names_the_variable_and_its_line(tmp_path):
    [hit] = _ids(tmp_path, "#!/bin/bash\n" + BRANCH.format(default="") + LAUNCH.format(extra=""), "VI938")
    assert hit.problem.severity == "warning" and "$DEVICE" in hit.problem.message and "(line 3)" in hit.problem.message
    assert "DEVICE=${DEVICE:-" in hit.problem.hint


@needs_sandbox
@pytest.mark.parametrize(("script", "env"), [
    ("#!/bin/bash\n" + BRANCH.format(default=DEFAULT) + LAUNCH.format(extra=""), None),  # verl's fix
    ("#!/bin/bash\n" + BRANCH.format(default="") + LAUNCH.format(extra=""), {"DEVICE": "gpu", "HOME": "/root"}),
    ("#!/bin/bash\nset -u\nM=${MODEL:?give MODEL}\n" + LAUNCH.format(extra="trainer.experiment_name=$M"), None),
    ("#!/bin/bash\nset -u\n" + LAUNCH.format(extra="trainer.experiment_name=job_$SLURM_JOB_ID"), None),
    ("#!/bin/bash\ncase \"${DEVICE}\" in *) ;; esac\n" + LAUNCH.format(extra=""), None),  # no set -u
])
def test_check_is_silent_where_bash_reaches_the_launch(tmp_path, script, env):
    assert not _ids(tmp_path, script, "VI938", env)


@needs_sandbox
def test_the_trace_records_unbound_variables_with_their_line(tmp_path):
    path = tmp_path / "t.sh"
    path.write_text("set -u\necho start\nX=$FOO\n" + LAUNCH.format(extra=""), encoding="utf-8")
    traced = bashtrace.trace(path, {"HOME": os.environ.get("HOME", "/tmp")})
    assert traced.unbound == [("FOO", 3)] and traced.needed == ["FOO"]
