"""Hostile inputs are bounded: arithmetic as bash computes it (64-bit wraparound, compared with bash itself),
string/array growth, YAML aliases (a billion-laughs document), override counts. Past a bound, one line
names it (and the script line) and `check` exits 2; memory stays small. Speed lives in benchmarks/; here a
generous watchdog only proves the command ends."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from wizard.check.shellargs import _eval_int

EXPRESSIONS = ["((2**64)**64)**64", "1<<2**34", "2**63", "-2**63 - 1", "7 % -3", "-7 / 2", "1<<65", "3**40",
               "(1<<62) * 4 + 3", "~0 >> 1"]


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_arithmetic_is_bashs(expr):
    bash = subprocess.run(["bash", "-c", f"echo $(( {expr} ))"], capture_output=True, text=True, check=True)
    assert _eval_int(expr) == int(bash.stdout)


def _bomb(levels: int = 10) -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for name in "bcdefghijk"[:levels - 1]:
        lines.append(f"{name}: &{name} [" + ",".join(["*" + prev] * 9) + "]")
        prev = name
    return "\n".join(lines) + "\ntrainer:\n  nnodes: 1\n"


CASES = {
    "grow.sh": ("X=abcdefgh\n" + 'X="$X$X"\n' * 30 + "python3 -m verl.trainer.main_ppo trainer.project_name=$X\n",
                "more than 1048576 characters", "line 19"),
    "array.sh": ("A=(x)\n" + 'A+=("${A[@]}")\n' * 20 + 'python3 -m verl.trainer.main_ppo "${A[@]}"\n',
                 "more than 100000 items", "line "),
    "bomb.yaml": (_bomb(), "aliases expand to more than 1000000 values", ""),
    "many.sh": ("python3 -m verl.trainer.main_ppo " + " ".join(f"foo.bar{i}=1" for i in range(100_000)) + "\n",
                "100000 overrides, more than 20000", ""),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_input_ends_with_one_line_naming_the_bound(name, tmp_path, cli_env):
    body, says, where = CASES[name]
    target = tmp_path / name
    target.write_text(body)
    # check runs under a small wrapper that reports check's own peak RSS (RUSAGE_CHILDREN of the wrapper): Linux
    # keeps a process's peak across fork and exec, so a check started straight from this (xdist) worker would
    # report the worker's peak
    from test_reader_bounds import _WRAPPER

    out = subprocess.run([sys.executable, "-c", _WRAPPER, sys.executable, "-m", "wizard.cli.app", "check", str(target),
                          "--defaults", "snapshot"], capture_output=True, text=True, env=cli_env, cwd=tmp_path,
                         timeout=120, check=True)
    r = json.loads(out.stdout)
    assert r["rc"] == 2, (r["stdout"][-500:], r["stderr"][-500:])
    lines = [line for line in r["stderr"].splitlines() if line.strip()]
    assert len(lines) == 1 and says in lines[0] and where in lines[0], r["stderr"]
    assert "Traceback" not in r["stderr"]
    assert r["rss"] < 300 << 20, r["rss"]


def test_arithmetic_bombs_are_just_numbers(tmp_path, cli_env):
    script = tmp_path / "arith.sh"
    script.write_text("N=$(( ((2**64)**64)**64 ))\nM=$(( 1<<2**34 ))\n"
                      "python3 -m verl.trainer.main_ppo trainer.nnodes=$N trainer.n_gpus_per_node=$M\n")
    r = subprocess.run([sys.executable, "-m", "wizard.cli.app", "check", str(script), "--defaults", "snapshot", "--json"],
                       capture_output=True, text=True, env=cli_env, cwd=tmp_path, timeout=60)
    import json

    doc = json.loads(r.stdout)
    assert doc["config"]["trainer.nnodes"] == 0 and doc["config"]["trainer.n_gpus_per_node"] == 1  # bash's values
