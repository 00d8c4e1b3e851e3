"""Bundle files for the data capability (see renderer.ARTEFACT_PROVIDERS).

`data/prepare_data.py` is always rendered (it writes what `data.train_files` / `data.val_files`
read by default); `reward/reward_fn.py` when reward=function names no function of the user's;
`reward/genrm_fn.py` (the judge function) when reward=genrm.
Every value a template places in Python source is pre-rendered here as a Python literal with
`repr()`, so no answer (a path, an instruction, a system prompt) can break out of its slot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wizard.planner import dataprep, genrm

if TYPE_CHECKING:
    from wizard.planner.state import Plan
    from wizard.renderer.render import Artefact


def py_literal(value: Any) -> str:
    """A Python literal for str / int / float / bool / None and tuples or dicts of them."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    if isinstance(value, tuple):
        return "(" + "".join(py_literal(v) + ", " for v in value).rstrip(" ") + ")" if value else "()"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{py_literal(k)}: {py_literal(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no Python literal for {type(value).__name__}")


def prepare_context(prep: dataprep.DataPrep) -> dict[str, Any]:
    hub = prep.hub
    values = {
        "SOURCE": prep.source,
        "HUB_ID": hub.name if hub else None,
        "HUB_CONFIG": hub.config if hub else None,
        "HUB_SPLITS": {"train": hub.train_split, "val": hub.val_split} if hub else {"train": "train", "val": "val"},
        "LOCAL_SUBDIRS": hub.local_subdirs if hub else (),
        "INPUT_FILE": prep.input_path,
        "QUESTION_FIELD": prep.question_field,
        "ANSWER_FIELD": prep.answer_field,
        "MESSAGES_FIELD": prep.messages_field,
        "GROUND_TRUTH": prep.extract,
        "INSTRUCTION": prep.instruction,
        "SYSTEM_PROMPT": prep.system_prompt,
        "DATA_SOURCE": prep.data_source,
        "ABILITY": prep.ability,
        "OFFLINE_DIR": prep.offline_dir,
        "VAL_FRACTION": prep.val_fraction,
        "SEED": prep.split_seed,
        "IMAGE_KEY": prep.image_key,
        "OUT_IMAGE_KEY": prep.out_image_key,
        "IMAGE_MAX_PIXELS": prep.image_max_pixels,
        "IMAGE_FACTOR": prep.image_factor,
        "AGENT_NAME": prep.agent_name,
        "TOOL_NAME": prep.tool_name,
        "DATA_SOURCE_FIELD": prep.data_source_field,
        "AGENT_NAME_FIELD": prep.agent_name_field,
    }
    label = f"the hub dataset {hub.name}" if hub else "a local data file (INPUT_FILE below)"
    return {"py": {k: py_literal(v) for k, v in values.items()}, "source_label": label}


def artefacts(plan: "Plan") -> "list[Artefact]":
    from wizard.renderer.render import Artefact

    prep = dataprep.resolve(plan.answers, "")  # the plan's data paths are bundle-relative or absolute: kept
    out = [Artefact("data/prepare_data.py.j2", prepare_context(prep))]
    if prep.offline_dir:  # the built-in offline dataset, copied as it ships (tests/test_offline_data.py)
        from wizard.resources import offline_data

        for name in dataprep.OFFLINE_FILES:
            text = (offline_data() / name).read_text(encoding="utf-8")
            out.append(Artefact(f"data/{prep.offline_dir}/{name}.j2", {"rows": text}))
    if prep.reward_fn:
        out.append(Artefact("reward/reward_fn.py.j2", {"py": {"ANSWER_FORMAT": py_literal(prep.answer_format)}}))
    if genrm.BUNDLE_GENRM_FN in (str(plan.settings[k].value) for k in ("reward.custom_reward_function.path",)
                                 if k in plan.settings):
        out.append(Artefact("reward/genrm_fn.py.j2", {"py": genrm_context(plan)}))
    return out


def genrm_context(plan: "Plan") -> dict[str, str]:
    """The judge function's constants (reward=genrm), as Python literals."""
    return {"MAX_TOKENS": py_literal(plan.answers.judge_max_tokens), "TEMPERATURE": py_literal(genrm.JUDGE_TEMPERATURE),
            "TIMEOUT_S": py_literal(genrm.JUDGE_TIMEOUT_S)}
