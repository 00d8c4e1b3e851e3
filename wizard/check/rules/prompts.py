"""Prompt lengths against data.max_prompt_length (VI867), counted with the model's own tokenizer on the local data
files as verl's overlong filter counts them (wizard.planner.overlong: the chat template with the generation prompt,
rl_dataset.py:197-277; a prompt the template refuses counts as too long).

- data.filter_overlong_prompts off (verl 0.9.1's default, trainer/config/data/legacy_data.yaml:83): nothing refuses
  a longer prompt. RLHFDataset stores data.truncation (rl_dataset.py:118) and nothing reads it; the agent loop keeps
  the prompt's last rollout.prompt_length tokens (= data.max_prompt_length, rollout.yaml:35), cutting its start (the
  system prompt, the task) with a log line (agent_loop.py:437-445), and raises for a prompt with images (:352-361).
- filter on: those rows are dropped at start-up; a training set left with fewer rows than one batch empties the
  train dataloader (drop_last=True), and verl stops: "Train dataloader is empty!" (ray_trainer.py:409, :427).
Only when the model's tokenizer is a local folder and the files are local; the count is bounded as the planner's is.
"""

from __future__ import annotations

from wizard.check.rules.context import M, Ctx, Facts, local_data_files, model_folder
from wizard.check.shellargs import PLACEHOLDER

UNBOUNDED = 1 << 60  # `needed` for overlong.count: never stop early, count every row (within its own bounds)


def _tokenizer(c: Ctx):
    from wizard.planner import overlong

    for key in (f"{M}.tokenizer_path", f"{M}.path"):
        value = c.v(key)
        if isinstance(value, str) and value and not c.unknown(key) and PLACEHOLDER not in value:
            local = model_folder(c, value)
            folder = overlong.local_tokenizer(str(local)) if local is not None else None
            if folder is not None:
                return overlong.load_tokenizer(folder)[0]
            return None
    return None


def _files(c: Ctx) -> list[tuple[str, str]]:
    return [(key, str(local)) for key, _, local in local_data_files(c, (".parquet", ".jsonl", ".json"))]


def rule_prompt_lengths(c: Ctx, f: Facts) -> None:
    limit = c.int("data.max_prompt_length")
    files = _files(c) if limit and not c.unknown("data.max_prompt_length") else []
    tok = _tokenizer(c) if files else None
    if tok is None:
        return
    from wizard.planner import overlong

    key = c.v("data.prompt_key") if isinstance(c.v("data.prompt_key"), str) else "prompt"
    filtering = bool(c.v("data.filter_overlong_prompts"))
    batch = c.int("data.train_batch_size")
    for files_key, path in files:
        # with the filter on, only the training set's size matters: the count may stop once a batch survives
        needed = batch if filtering and batch else UNBOUNDED
        n = overlong.count(path, tok, limit, needed, prompt_key=key)
        if not n.complete or not n.rows:
            continue
        over = n.rows - n.train_kept - n.train_refused  # a prompt the template raises on is not a long one
        if not filtering and over:
            c.add("VI867", "warning", ("data.max_prompt_length", "data.filter_overlong_prompts", files_key),
                  f"{over} of the {n.rows} prompts of {path} are longer than data.max_prompt_length={limit} tokens "
                  "under the model's chat template, and data.filter_overlong_prompts is off: verl 0.9.1 keeps each "
                  "one's last tokens, cutting its start (agent_loop.py:437-445; data.truncation is not read), and "
                  "stops on one with images (:352-361)",
                  "set data.filter_overlong_prompts=true to drop them, or raise data.max_prompt_length")
        if not filtering and n.train_refused:
            c.add("VI867", "warning", ("data.filter_overlong_prompts", files_key),
                  f"the model's chat template raises on {n.train_refused} of the {n.rows} prompts of {path}, and "
                  "data.filter_overlong_prompts is off: verl 0.9.1's agent loop renders each prompt with it "
                  "(utils/tokenizer/chat_template.py:166-190, agent_loop.py:242-254) and fails on those rows",
                  "fix those rows for the template (`verl-init validate-dataset` lists them), or set "
                  "data.filter_overlong_prompts=true, which drops them")
        if filtering and files_key == "data.train_files" and batch and n.train_kept < batch:
            c.add("VI867", "error", ("data.max_prompt_length", files_key),
                  f"only {n.train_kept} of the {n.rows} prompts of {path} fit data.max_prompt_length={limit} tokens: "
                  f"verl's overlong filter drops the rest, and fewer rows than one batch of {batch} leave the train "
                  "dataloader empty (drop_last; 'Train dataloader is empty!', ray_trainer.py:427)",
                  "raise data.max_prompt_length" + (f" (≥ {n.kth_length} keeps {batch})" if n.kth_length else ""))


def rule_chat_template(c: Ctx, f: Facts) -> None:
    """VI908: a model whose tokenizer has no chat template (a base model's), with none given. verl applies the template
    to every prompt: with data.filter_overlong_prompts on, its length count catches the error and drops the row as if
    overlong (utils/dataset/rl_dataset.py:248-266), so every row goes; off, the agent loop's prompt builder applies it
    at the first rollout (experimental/agent_loop/agent_loop.py:248-254)."""
    given = [k for k in (f"{M}.custom_chat_template", "data.apply_chat_template_kwargs.chat_template") if c.v(k)]
    key = f"{M}.tokenizer_path" if c.v(f"{M}.tokenizer_path") else f"{M}.path"
    path = c.v(key)
    if given or not isinstance(path, str) or c.unknown(key) or PLACEHOLDER in path:
        return
    from wizard.planner.overlong import has_chat_template

    folder = model_folder(c, path)
    if folder is None or has_chat_template(folder) is not False:
        return
    c.add("VI908", "error", (key, f"{M}.custom_chat_template"),
          f"{path} has no chat template (tokenizer_config.json has none, nor chat_template.jinja/.json) and none is "
          f"given: verl applies one to every prompt; with data.filter_overlong_prompts on the error drops every row "
          "as if overlong (rl_dataset.py:248-266), off the first rollout stops (agent_loop.py:248-254)",
          f"set {M}.custom_chat_template to a Jinja chat template (a base model's own format), or use the model's "
          "instruct variant")
