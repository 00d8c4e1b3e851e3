"""The per-row columns verl reads besides the prompt and the answer, mapped from the local data file's schema
(issue 27 item 2; wizard.planner.dataschema.apply calls `check` once the named columns exist):

- image_key: a vision-language model's images, a list of {bytes}/{path} structs or paths. verl's RLHFDataset reads
  `example[data.image_key]` (verl/utils/dataset/rl_dataset.py:109, :315) and pairs the n-th `<image>` with the n-th
  image (:381). With no image_key given, a vision model's one image column is mapped from the schema.
- data_source_field: each row's data_source, which selects verl's scorer row by row (the reward manager reads
  `non_tensor_batch["data_source"]`, experimental/reward_loop/reward_manager/naive.py:42; default_compute_score
  raises NotImplementedError for a data_source it does not know, utils/reward_score/__init__.py:107).
- agent_name_field: each row's agent_name, the agent loop that runs it (agent_loop.py:610-612 falls back to
  rollout.agent.default_agent_loop only when the column is absent; :678-682 asserts the name is registered).

Rules: VI970 (error) a named column holds something else than the key reads (text for data_source / agent_name,
images for image_key); VI513 (error) with reward=rule, a data_source value in the file's first rows that verl's
default scoring does not know; VI971 (warning) an agent_name value that is not one of verl's agent loops.
`b` is the planner's working state (wizard.planner.state.Build), typed loosely as in dataschema.
"""

from __future__ import annotations

from typing import Any

# verl 0.9.1's registered agent loops: @register("single_turn_agent") single_turn_agent_loop.py:28,
# @register("tool_agent") tool_agent_loop.py:101
AGENT_LOOPS = ("single_turn_agent", "tool_agent")
# names a data_source / agent_name column goes by (verl's own preprocessing writes exactly these)
OFFERS = {"data_source_field": ("data_source",), "agent_name_field": ("agent_name",)}
KIND = {"data_source_field": "text", "agent_name_field": "text", "image_key": "images"}
READS = {"data_source_field": "each row's data_source, which selects verl's scorer",
         "agent_name_field": "each row's agent_name, the verl agent loop that runs it",
         "image_key": "each row's images: a list of {bytes} or {path} structs, or paths"}


def offered(schema: Any, key: str) -> list[str]:
    """The file's columns that fit `key`: its image columns for image_key; for data_source_field / agent_name_field
    its text columns, the ones named as verl's preprocessing names them first."""
    if key == "image_key":
        return schema.of("images")
    texts = schema.of("text")
    named = [c for c in texts if c.lower() in OFFERS[key]]
    return named + [c for c in texts if c not in named]


def _values(schema: Any, column: str) -> list[str]:
    seen: list[str] = []
    for row in schema.rows:
        value = row.get(column)
        if isinstance(value, str) and value.strip() and value.strip() not in seen:
            seen.append(value.strip())
    return seen


def _map_images(b: Any, schema: Any, given: set[str]) -> None:
    """A vision model with no image_key given reads the file's one image column (when `images` is not it)."""
    from wizard.planner import dataprep

    columns = schema.of("images")
    if "image_key" in given or len(columns) != 1 or b.a.image_key in schema.columns or \
            dataprep.vision_shape(b.a) is None:
        return
    b.a = b.a.model_copy(update={"image_key": columns[0]})
    b.stored["image_key"] = columns[0]
    b.facts["image_mapping"] = f"image_key={columns[0]} (the file's only image column)"


def check(b: Any, schema: Any, name: str, given: set[str]) -> None:
    a = b.a
    for key in [k for k in ("image_key", *OFFERS) if k in given and getattr(a, k)]:
        column = getattr(a, key)
        kind = schema.columns.get(column)
        if kind not in (None, KIND[key], "other"):  # "other": no value in the first rows, or mixed ones
            fits = offered(schema, key)
            b.f.error("VI970", (key, "dataset"),
                      f"{key}={column!r}: {name}'s column {column!r} holds {kind}, but {key} names {READS[key]}",
                      f"use one of its {KIND[key]} columns: {', '.join(fits)}" if fits else f"leave {key} unset")
    _map_images(b, schema, given)
    if a.data_source_field and "data_source_field" in given and a.reward == "rule":
        from wizard.planner.dataprep import scorer_for

        values = _values(schema, a.data_source_field)
        unknown = [v for v in values if scorer_for(v) is None]
        _formats(b, values, name)
        if unknown:
            b.f.error("VI513", ("data_source_field", "reward"),
                      f"data_source_field={a.data_source_field!r}: data_source {', '.join(map(repr, unknown[:4]))} in "
                      f"{name}'s first rows has no scorer in verl's default scoring: those rows' rewards would fail "
                      "with NotImplementedError", "use reward=function (the bundle gets reward/reward_fn.py), or "
                      "data_source values verl knows (openai/gsm8k, DigitalLearningGmbH/MATH-lighteval, ...)")
    if a.agent_name_field and "agent_name_field" in given:
        odd = [v for v in _values(schema, a.agent_name_field) if v not in AGENT_LOOPS]
        if odd:
            b.f.warning("VI971", ("agent_name_field",),
                        f"agent_name_field={a.agent_name_field!r}: {', '.join(map(repr, odd[:4]))} in {name}'s first "
                        f"rows is not one of verl's agent loops ({', '.join(AGENT_LOOPS)}): verl stops with "
                        "'Agent loop ... not registered' unless your agent loop config registers it",
                        f"use {' or '.join(AGENT_LOOPS)}, or register the loop (rollout.agent.agent_loop_config_path)")


def _formats(b: Any, values: list[str], name: str) -> None:
    """VI514 row by row: a data_source whose verl scorer reads another answer format than the prompts ask for."""
    from wizard.planner import dataprep

    fmt = dataprep.resolve(b.a, b.base).answer_format
    for value in values:
        expects = dataprep.SCORER_FORMAT.get(dataprep.scorer_for(value) or "")
        if expects is not None and expects != fmt:
            b.f.error("VI514", ("data_source_field", "answer_format", "reward"),
                      f"data_source_field={b.a.data_source_field!r}: rows of {name} with data_source {value!r} are "
                      f"scored by verl's {dataprep.scorer_for(value)} scorer, which reads answer_format={expects}, but "
                      f"prompts ask for answer_format={fmt}: those rewards would be 0",
                      f"set answer_format={expects} if every row is {value!r}-style, or reward=function")
            return


def plan_note(b: Any, schema: Any) -> str:
    """PLAN.md: what the per-row columns come from, and the file's columns that could feed the ones left unset."""
    a, parts, offers = b.a, [], []
    for key in ("data_source_field", "agent_name_field"):
        column = getattr(a, key)
        if column:
            parts.append(f"{key}={column} ({READS[key]})")
            continue
        named = [c for c in offered(schema, key) if c.lower() in OFFERS[key]]
        if named:
            offers.append(f"`--set {key}={named[0]}` carries {READS[key]}")
    if b.facts.get("image_mapping"):
        parts.append(b.facts["image_mapping"])
    text = (f" Per-row columns: {'; '.join(parts)}." if parts else "")
    return text + (f" The file also offers: {'; '.join(offers)}." if offers else "")
