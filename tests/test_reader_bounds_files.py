"""Every reader of a user-supplied file is bounded in bytes and time, and a crash becomes one line and exit 2
(issue 29 items 6-7): answers files (a FIFO, /dev/zero, duplicate keys, a YAML alias bomb under `overrides:`,
nesting), check's YAML and script, JSON (200,000 levels deep), a sandbox output file check cannot read, an
immutable file under --force, and strings OmegaConf would read as numbers."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from test_reader_bounds import assert_one_line_exit_2, run_measured

PROFILE = "amd-mi300x-kuberay"


def _alias_bomb(levels: int = 9) -> str:
    lines = ['x0: &x0 ["a=1","a=1","a=1","a=1","a=1","a=1","a=1","a=1","a=1"]']
    for k in range(1, levels):
        lines.append(f"x{k}: &x{k} [" + ",".join([f"*x{k - 1}"] * 9) + "]")
    return "\n".join(lines) + f"\nanswers:\n  overrides: *x{levels - 1}\n"


ANSWERS = {
    "dup.yaml": ("answers:\n  nnodes: 1\n  model: Qwen/Qwen2.5-0.5B-Instruct\n  nnodes: 4\n", "key 'nnodes' is given twice"),
    "bomb.yaml": (_alias_bomb(), "aliases expand to more than"),
    "deep.yaml": ("answers:\n  overrides: " + "[" * 100_000 + "]" * 100_000 + "\n", "nested"),
    "big.yaml": ("answers:\n  overrides:\n" + "    - a.b=1\n" * 2_000_000, "larger than 16 MiB"),
}


@pytest.mark.parametrize("name", sorted(ANSWERS))
@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_hostile_answers_file_is_one_line(name, tmp_path):
    body, says = ANSWERS[name]
    (tmp_path / name).write_text(body)
    r = run_measured(["--answers", name, "--out", "b", "--dry-run"], tmp_path)
    assert_one_line_exit_2(r, says)
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_special_file_as_answers_is_refused_without_reading(special, tmp_path):
    path = special
    if special == "fifo":
        os.mkfifo(tmp_path / "answers.yaml")  # nobody writes to it: reading would block for ever
        path = "answers.yaml"
    r = run_measured(["--answers", path, "--out", "b"], tmp_path)
    assert_one_line_exit_2(r, "not a regular file")


def test_check_refuses_a_yaml_that_gives_a_key_twice(tmp_path):
    """OmegaConf (verl's reader) refuses it too (omegaconf/_utils.py get_yaml_loader)."""
    (tmp_path / "c.yaml").write_text("trainer:\n  nnodes: 1\n  nnodes: 2\n")
    r = run_measured(["check", "c.yaml", "--defaults", "snapshot"], tmp_path)
    assert_one_line_exit_2(r, "'nnodes' is given twice")


def test_check_of_deep_yaml_is_one_line(tmp_path):
    (tmp_path / "c.yaml").write_text("trainer: " + "[" * 200_000 + "]" * 200_000 + "\n")
    r = run_measured(["check", "c.yaml", "--defaults", "snapshot"], tmp_path)
    assert_one_line_exit_2(r, "nested")


def test_json_nested_200000_deep_is_refused():
    from wizard._io import UnsafeInput, safe_json

    with pytest.raises(UnsafeInput, match="nested"):
        safe_json("[" * 200_000 + "]" * 200_000)
    with pytest.raises(UnsafeInput, match="more than 200 levels"):
        safe_json("[" * 300 + "]" * 300)
    assert safe_json('{"a": [1, {"b": 2}]}') == {"a": [1, {"b": 2}]}


def test_model_config_json_200000_deep_is_a_value_error(tmp_path):
    """A local model folder's config.json (read by plan, render and check): bounded, refused as any bad config."""
    from wizard.planner.shapes import from_local

    (tmp_path / "config.json").write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ValueError, match="nested"):
        from_local(str(tmp_path))
    (tmp_path / "config.json").unlink()
    os.mkfifo(tmp_path / "config.json")
    with pytest.raises(ValueError, match="not a regular file"):
        from_local(str(tmp_path))


def test_user_file_bytes_are_counted_while_reading(tmp_path):
    from wizard._io import UnsafeInput, read_user_file

    (tmp_path / "f").write_bytes(b"x" * 2000)
    assert len(read_user_file(str(tmp_path / "f"), 2000)) == 2000
    with pytest.raises(UnsafeInput, match="larger than"):
        read_user_file(str(tmp_path / "f"), 1999)


def test_a_trace_file_named_evil_is_one_line(tmp_path):
    """bubblewrap is required by the suite (conftest); the script plants a file the stubs never write."""
    script = tmp_path / "evil.sh"
    script.write_text('#!/bin/bash\n: > "$VI_TRACE_OUT/evil"\npython3 -m verl.trainer.main_ppo trainer.nnodes=1\n')
    from wizard.check import bashtrace

    if not bashtrace.available():
        pytest.fail("bubblewrap is installed but cannot make a sandbox here")
    r = run_measured(["check", "evil.sh", "--defaults", "snapshot"], tmp_path)
    # the sandbox hands the launch back through a pipe (wizard._sandbox): a file planted in the trace folder is
    # never opened, so check reads the launch as usual instead of crashing or refusing
    assert r["rc"] in (0, 1), r
    assert "Traceback" not in r["stderr"] and "bug in verl-init" not in r["stderr"] + r["stdout"], r
    assert "trainer.nnodes" in r["stdout"] or "errors found" in r["stdout"] or "no error" in r["stdout"], r


def _chattr(path: Path, flag: str) -> bool:
    return shutil.which("chattr") is not None and subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_immutable_file_under_force_is_refused_and_leaves_nothing(tmp_path):
    r = run_measured(["--profile", PROFILE, "--out", "b"], tmp_path)
    assert r["rc"] == 0, r["stderr"]
    pinned = tmp_path / "b" / "run.sh"
    if not _chattr(pinned, "+i"):
        pytest.fail("chattr +i is not allowed here (needs CAP_LINUX_IMMUTABLE on ext4/xfs/btrfs)")
    try:
        r = run_measured(["--profile", PROFILE, "--out", "b", "--force"], tmp_path)
        assert_one_line_exit_2(r, "immutable", "run.sh")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["b"], list(tmp_path.iterdir())
    finally:
        _chattr(pinned, "-i")


def test_immutable_fix_target_leaves_no_hidden_copy(tmp_path):
    (tmp_path / "run.sh").write_text("python3 -m verl.trainer.main_ppo trainer.nnodes=1 trainer.n_gpus_per_node=3\n")
    target = tmp_path / "fixed.txt"
    target.write_text("old\n")
    if not _chattr(target, "+i"):
        pytest.fail("chattr +i is not allowed here")
    try:
        r = run_measured(["check", "run.sh", "--defaults", "snapshot", "--fix", "fixed.txt", "--force"], tmp_path,
                         {"VERL_INIT_NO_SANDBOX": "1"})
        assert r["rc"] == 2 and "bug in verl-init" not in r["stderr"], r
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".fixed.txt.tmp-")]
    finally:
        _chattr(target, "-i")


@pytest.mark.parametrize("value", ["1e3", "1_000.5", "true", "yes", ".inf", "0x1F", "1e-3", "+12"])
def test_string_answers_stay_strings_for_omegaconf_and_hydra(value, tmp_path):
    from omegaconf import OmegaConf

    from wizard.verlspec.hydra_overrides import format_value, parse_value

    r = run_measured(["--profile", PROFILE, "--set", f"experiment_name={value}", "--out", "b"], tmp_path)
    assert r["rc"] == 0, r["stderr"]
    conf = OmegaConf.load(tmp_path / "b" / "verl_config.yaml")
    assert conf.trainer.experiment_name == value and isinstance(conf.trainer.experiment_name, str)
    answers = OmegaConf.load(tmp_path / "b" / "verl-init.yaml")
    assert answers.answers.experiment_name == value
    override = f"trainer.experiment_name={format_value(value)}"  # as the bundle's overrides and check --fix write it
    assert parse_value(override.partition("=")[2]) == value


def test_cluster_mode_reads_bundle_yamls_bounded(tmp_path):
    """`check --mode cluster` reads the bundle's verl_config.yaml, verl-init.yaml and k8s manifests with the same
    bounds: an alias bomb or a FIFO is invalid YAML there (its own one-line finding), never a hang or gigabytes."""
    import yaml

    from wizard.env.cluster import _bounded_yaml, _bounded_yaml_all

    (tmp_path / "bomb.yaml").write_text(_alias_bomb())
    with pytest.raises(yaml.YAMLError, match="aliases expand"):
        _bounded_yaml(tmp_path / "bomb.yaml")
    os.mkfifo(tmp_path / "fifo.yaml")
    with pytest.raises(yaml.YAMLError, match="not a regular file"):
        _bounded_yaml_all(tmp_path / "fifo.yaml")
    (tmp_path / "two.yaml").write_text("kind: A\n---\nkind: B\n")
    assert _bounded_yaml_all(tmp_path / "two.yaml") == [{"kind": "A"}, {"kind": "B"}]
