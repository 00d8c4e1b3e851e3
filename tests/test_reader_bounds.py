"""Bounds enforced while reading (issue 29 items 6-7): each hostile input, replayed through the command line,
ends with one line and exit 2, under 1 GiB of memory and within 10 s; none ends in "this is a bug in verl-init".

The static shell reader is forced (VERL_INIT_NO_SANDBOX=1: as where bubblewrap is missing). Memory is the child's
peak RSS (getrusage(RUSAGE_CHILDREN) of a wrapper process that runs only it). Time is the child's CPU time, and
its wall time stretched by how oversubscribed the machine is (a 2-core machine shared by many jobs makes every
program slower; CPU time is what the reader's bounds cap)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

LAUNCH = "python3 -m verl.trainer.main_ppo trainer.nnodes=1\n"
GIB = 1 << 30

_WRAPPER = r"""
import json, resource, subprocess, sys, time
t = time.monotonic()
p = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": p.returncode, "stderr": p.stderr, "stdout": p.stdout[-2000:], "wall": time.monotonic() - t,
                  "cpu": ru.ru_utime + ru.ru_stime, "rss": ru.ru_maxrss * 1024}))
"""


def run_measured(args: list[str], cwd, env_extra: dict[str, str] | None = None) -> dict:
    """`verl-init ARGS` in a process of its own: exit status, output, wall and CPU seconds, peak RSS in bytes."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(env_extra or {})
    out = subprocess.run([sys.executable, "-c", _WRAPPER, sys.executable, "-m", "wizard.cli.app", *args],
                         capture_output=True, text=True, env=env, cwd=cwd, timeout=400, check=True)
    return json.loads(out.stdout)


def assert_one_line_exit_2(r: dict, *says: str) -> str:
    lines = [line for line in r["stderr"].splitlines() if line.strip()]
    assert r["rc"] == 2, r
    assert len(lines) == 1, r["stderr"][-2000:]
    assert "Traceback" not in r["stderr"] and "bug in verl-init" not in r["stderr"], r["stderr"]
    for text in says:
        assert text in lines[0], lines[0]
    assert r["rss"] < GIB, r["rss"]
    assert r["cpu"] < 10, r
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    assert r["wall"] < 10 * max(1.0, min(load, 6.0)), (r["wall"], load)
    return lines[0]


SCRIPTS = {
    # a sparse array far past any launch script's
    "sparse.sh": ("A[2**40]=x\n" + LAUNCH, "array index A[1099511627776]"),
    # many sparse arrays: each small to write, together gigabytes
    "sparse_many.sh": ("".join(f"A{i}[99999]=x\n" for i in range(3000)) + LAUNCH, "variables would hold more than"),
    # a long string split into words, many times over on one command line
    "split.sh": ('s="a a a a a a a a"\n' + 's="$s $s"\n' * 16 + "python3 -m verl.trainer.main_ppo "
                 + " ".join(["$s"] * 2000) + "\n", "a command expands to more than"),
    # trimming a long value, again and again (each trim tries every cut)
    "trim.sh": ('s="' + "a" * 1000 + '"\n' + 's="$s$s"\n' * 9 + "t=${s#*b}\n" * 50 + LAUNCH, "reading the script takes more than"),
    # a replacement that multiplies the value, repeated
    "subst.sh": ("s=xxxxxxxx\n" + 's="$s$s"\n' * 15 + "t=${s//x/xxxx}\n" * 2000 + LAUNCH, "reading the script takes more than"),
    "subst_grow.sh": ("s=xxxxxxxx\n" + 's="$s$s"\n' * 16 + "s=${s//x/xxxx}\n" * 4 + LAUNCH, "more than 1048576 characters"),
    # an array grown line by line (a loop unrolled)
    "append.sh": ("A=(" + "x " * 50_000 + ")\n" + "A+=(\"${A[@]}\")\n" * 100 + LAUNCH, "more than 100000 items"),
    # expansions nested 50,000 deep
    "deep.sh": ("A=" + "${a:-" * 50_000 + "x" + "}" * 50_000 + "\n" + LAUNCH, "reading the script takes more than"),
    # arithmetic whose variables double at each level (2^40 evaluations)
    "arith.sh": ("".join(f'v{i}="v{i + 1}+v{i + 1}"\n' for i in range(40)) + "v40=1\nN=$((v0))\n" + LAUNCH,
                 "reading the script takes more than"),
    # a script of a million short commands, and one of a million heredocs on one line
    "tokens.sh": ("a=b c d\n" * 500_000, "reading the script takes more than"),
    "heredocs.sh": ("cat " + "<<A " * 500_000 + "\n" + "A\n" * 10 + LAUNCH, "reading the script takes more than"),
    # crashes before: a construct the reader does not follow ends as one line
    "quote.sh": ("A=${B:-'}\n" + LAUNCH, "unterminated single quote"),
    "ansi.sh": ("X=$'\\x'\n" + LAUNCH, "bad escape"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_hostile_script_stops_at_the_first_bound(name, tmp_path):
    body, says = SCRIPTS[name]
    (tmp_path / name).write_text(body)
    r = run_measured(["check", name, "--defaults", "snapshot"], tmp_path, {"VERL_INIT_NO_SANDBOX": "1"})
    assert_one_line_exit_2(r, says, name)


def test_brace_bombs_and_negative_indexes_are_read_not_crashed(tmp_path):
    """Brace expansion is bash's (never the static reader's): a bomb of them is text. `A[-5]=x` on a short array
    is bash's "bad array subscript": A stays unresolved, check goes on."""
    script = tmp_path / "run.sh"
    script.write_text("echo " + "{a,b}" * 40 + "\nA[-5]=x\nB=(1 2)\nB[-1]=9\n"
                      'python3 -m verl.trainer.main_ppo trainer.nnodes=1 trainer.project_name="${B[1]}" x.y=${A}\n')
    r = run_measured(["check", str(script), "--defaults", "snapshot", "--json"], tmp_path, {"VERL_INIT_NO_SANDBOX": "1"})
    assert "bug in verl-init" not in r["stderr"] and r["rc"] in (0, 1), r
    assert r["rss"] < GIB and r["cpu"] < 10


def test_the_budget_counts_while_expanding():
    """The step bound stops a run before its work is done, not after: a tiny budget stops the first expansion."""
    from wizard.check.shellargs import Budget, ShellLimitError, extract

    text = 's="' + "a" * 5000 + '"\n' + "t=${s%%*b}\n" + LAUNCH
    with pytest.raises(ShellLimitError, match="steps"):
        extract(text, budget=Budget(steps=20_000))
    assert extract(text).launch is not None  # the default budget reads it


def test_a_legit_script_is_far_from_every_bound():
    """verl's own example scripts use a few thousandths of the work bound."""
    from wizard.check.shellargs import Budget, ShellSyntaxError, extract

    used = []
    for path in sorted((ROOT / "tests" / "data" / "reference").glob("**/*.sh")):
        budget = Budget(seconds=600)
        try:
            extract(path.read_text(errors="replace"), script_path=str(path), budget=budget)
        except ShellSyntaxError:
            continue
        used.append(budget.steps)
    assert len(used) > 20 and max(used) < Budget().max_steps // 50, max(used)
