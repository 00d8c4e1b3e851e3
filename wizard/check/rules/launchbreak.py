"""VI928: Hydra overrides the launch command never receives, because the command ended before them.

bash ends a command at a newline that no backslash escapes. Inside a backslash-continued `python3 -m
verl.trainer.main_ppo \\` launch, a `# comment` line (the backslash before it joins it to the command, where `#`
starts a comment to the end of the line, and that line has no backslash of its own), a blank line, a line missing its
trailing backslash, or a space after the backslash each end the launch there. The overrides below become a command
of their own, whose name is the first override: verl starts without them (each falls back to verl's default, e.g.
trainer.save_freq=-1, total_epochs=30 in trainer/config/_generated_ppo_megatron_trainer.yaml:987-989 for verl 0.9.1),
and once training is over bash reports `+actor_rollout_ref...: command not found`. Real case: verl PR#4103 put
`# Use aux_loss and z_loss ...` inside the launch of examples/grpo_trainer/run_qwen3_vl-30b-megatron.sh, which cut
the MoE aux/z-loss overrides and every trainer.* key after it. The static reader records such a command
(wizard.check.shell.interp: a command after the launch whose first word is a dotted key=value); bash's own trace
(--bash) runs the script and has no such record."""

from __future__ import annotations

from wizard.check.rules.context import Ctx, Facts, script_text


def _cause(lines: list[str], line: int) -> str:
    """Why the command before `line` (1-based) ended: the physical line just above it."""
    above = lines[line - 2] if 2 <= line <= len(lines) + 1 else ""
    at = f"line {line - 1}"
    if above.strip().startswith("#"):
        return f"the comment at {at} sits inside the backslash-continued launch, and bash ends the command there"
    if not above.strip():
        return f"the blank {at} ends the launch command"
    if above.rstrip().endswith("\\") and above != above.rstrip():
        return f"{at} has blanks after its backslash, so the backslash escapes a blank and the newline ends the command"
    return f"{at} does not end with a backslash, so the newline ends the launch command"


def rule_launch_break(c: Ctx, f: Facts) -> None:
    ex = c.src.extraction
    if ex is None or not getattr(ex, "stray", None) or ex.launch is None:
        return
    text = script_text(c) or ""
    lines = text.splitlines()
    for line, word, count in ex.stray:
        key = word.partition("=")[0].lstrip("+~")
        more = f" and {count - 1} more override(s) after it" if count > 1 else ""
        c.add("VI928", "error", (key,),
              f"line {line}: {word}{more} never reach verl: {_cause(lines, line)}; the launch at line "
              f"{ex.launch.line} runs without them (their keys keep verl's defaults) and bash then runs line {line} as "
              "a command of its own ('command not found')",
              "move the comment above the launch (or end the previous line with a backslash and nothing after it), "
              "so these overrides stay in the launch command")
