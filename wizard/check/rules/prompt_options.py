"""Prompt-building options of an RL run that verl 0.9.1 takes and then does not act on (paths under
site-packages/verl):

- VI795 (warning): data.truncation set to error, right or middle, with data.filter_overlong_prompts off. RLHFDataset
  stores it (utils/dataset/rl_dataset.py:118) and nothing in verl reads self.truncation again; its __getitem__ hands
  the raw messages on (:385-388) and the agent loop tokenizes them and keeps the last rollout.prompt_length tokens of a
  longer text prompt (experimental/agent_loop/agent_loop.py:362, _cap_text_prompt_length :437-445: a log line, no
  error), and raises for one with images/videos/audio (:352-361). So 'error' does not stop, 'right' and 'middle' do
  not keep the start: the system prompt and the task's beginning go. With the filter on, verl drops the long rows at
  start-up instead (rl_dataset.py:197-277), so no prompt reaches the cut. A custom dataset class (data.custom_cls)
  may read it: silent then.
- VI796 (warning): a data.apply_chat_template_kwargs key (enable_thinking, ...) that the model's chat template never
  reads. verl passes the mapping to every apply_chat_template call of the agent loop (agent_loop.py:242,
  utils/tokenizer/continuous_token.py:233-240) and of the overlong filter (rl_dataset.py:210, :250); transformers
  hands the keys it does not take itself to the Jinja template as variables, where one the template never names is a
  silent no-op (a Qwen3 checkpoint carrying a Qwen2.5-style template keeps thinking with enable_thinking=False). The
  template is read as transformers loads it, without running anything: chat_template.jinja, else tokenizer_config.json's
  chat_template (every named one), plus the processor's chat_template.json, or the one model.custom_chat_template /
  data.apply_chat_template_kwargs.chat_template gives; its variables are jinja2's meta.find_undeclared_variables.
  Only for a model folder on this machine.
"""

from __future__ import annotations

import re

from wizard.check.rules.context import M, Ctx, Facts, model_folder
from wizard.check.shellargs import PLACEHOLDER
from wizard._chat_templates import folder_templates  # the planner reads templates with the same reader

TRUNC, FILTER = "data.truncation", "data.filter_overlong_prompts"
KWARGS = "data.apply_chat_template_kwargs"
# transformers' apply_chat_template's own parameters (PreTrainedTokenizerBase.apply_chat_template): not template
# variables (tests/test_check_rl_data.py compares this with transformers' signature)
CALL_PARAMETERS = frozenset({"conversation", "tools", "documents", "chat_template", "add_generation_prompt",
                             "continue_final_message", "tokenize", "padding", "truncation", "max_length",
                             "return_tensors", "return_dict", "return_assistant_tokens_mask", "tokenizer_kwargs"})


def rule_truncation(c: Ctx, f: Facts) -> None:
    value = c.v(TRUNC)
    if not c.set_by_user(TRUNC) or c.unknown(TRUNC) or value not in ("error", "right", "middle"):
        return
    if c.v(FILTER) or c.v("data.custom_cls.path"):
        return
    what = {"error": "does not stop the run on a long prompt",
            "right": "does not keep the prompt's start",
            "middle": "does not keep the prompt's start and end"}[value]
    c.add("VI795", "warning", (TRUNC, FILTER),
          f"{TRUNC}={value} {what}: verl 0.9.1's RLHFDataset stores it (utils/dataset/rl_dataset.py:118) and nothing "
          "reads it; with data.filter_overlong_prompts off the agent loop keeps the LAST rollout.prompt_length "
          "(= data.max_prompt_length) tokens of a longer text prompt (experimental/agent_loop/agent_loop.py:437-445, "
          "a log line, no error), cutting the system prompt and the task's start, and raises for one with images "
          "(:352-361)",
          f"set {FILTER}=True to drop prompts longer than data.max_prompt_length, or shorten the prompts (or raise "
          f"data.max_prompt_length); {TRUNC} has no effect on RL prompts in verl 0.9.1")


def template_kwargs(c: Ctx) -> list[str]:
    """The data.apply_chat_template_kwargs keys the user set that reach the template as variables."""
    prefix = KWARGS + "."
    keys = {k[len(prefix):].split(".", 1)[0] for k in c.res.user if k.startswith(prefix)}
    return sorted(k for k in keys if k not in CALL_PARAMETERS and not c.unknown(prefix + k))


_GENERATION = re.compile(r"\{%-?\s*(end)?generation\s*-?%\}")  # transformers' AssistantTracker tags


def template_variables(template: str) -> set[str] | None:
    """The variables a chat template reads (jinja2.meta.find_undeclared_variables on it as transformers compiles it:
    loopcontrols, its {% generation %} tags), or None when it does not parse."""
    try:
        import jinja2
        import jinja2.ext
        from jinja2 import meta
    except ImportError:
        return None
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    try:
        return set(meta.find_undeclared_variables(env.parse(_GENERATION.sub("", template))))
    except jinja2.TemplateError:
        return None


def rule_template_kwargs(c: Ctx, f: Facts) -> None:
    kwargs = template_kwargs(c)
    if not kwargs:
        return
    given_keys = (f"{KWARGS}.chat_template", f"{M}.custom_chat_template")  # first given wins (rules/toolformat.py)
    if c.unknown(*given_keys):
        return
    given = next((v for v in (c.v(k) for k in given_keys) if isinstance(v, str) and v), None)
    where: str
    if given is not None:
        if "{%" not in given and "{{" not in given:
            return  # a template's name or a path: not read here
        templates, where = [given], next(k for k in given_keys if c.v(k) == given)
    else:
        key = f"{M}.tokenizer_path" if c.v(f"{M}.tokenizer_path") else f"{M}.path"
        path = c.v(key)
        if not isinstance(path, str) or not path or c.unknown(key) or PLACEHOLDER in path:
            return
        folder = model_folder(c, path)
        found = folder_templates(folder) if folder is not None and folder.is_dir() else None
        if not found:
            return
        templates, where = found, f"{path}'s chat template"
    read: set[str] = set()
    for template in templates:
        names = template_variables(template)
        if names is None:
            return
        read |= names
    for kwarg in kwargs:
        if kwarg in read:
            continue
        value = c.v(f"{KWARGS}.{kwarg}")
        c.add("VI796", "warning", (f"{KWARGS}.{kwarg}",),
              f"{KWARGS}.{kwarg}={value!r} does nothing: {where} never reads `{kwarg}` (jinja2's "
              "find_undeclared_variables on it). verl passes the mapping to every apply_chat_template call "
              "(experimental/agent_loop/agent_loop.py:242, utils/tokenizer/continuous_token.py:233-240; "
              "utils/dataset/rl_dataset.py:250) and transformers hands the keys to the template, which ignores this "
              "one: the prompts are the same with any value" + (
                  " (a thinking model keeps thinking: the template pre-fills no empty <think></think>)"
                  if kwarg == "enable_thinking" else ""),
              f"use a chat template that reads `{kwarg}` ({M}.custom_chat_template, e.g. the model family's official "
              f"one), or remove {KWARGS}.{kwarg}")
