"""What the bundle's data/prepare_data.py and reward/reward_fn.py do, derived from the answers.

Pure and light (no pandas, pyarrow, datasets or verl): the planner uses it for its VI5xx data rules,
the data artefact provider for the template context, `validate-dataset` for verl's scorer table.
Every derived value carries the reason it was chosen, like the plan's settings.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Optional

if TYPE_CHECKING:
    from wizard.intent.answers import Answers

AnswerFormat = Literal["number", "boxed", "text", "code"]

# Bundle-relative paths (run.sh runs verl from the bundle folder).
PREPARED_TRAIN = "data/train.parquet"
PREPARED_VAL = "data/val.parquet"
# The built-in offline dataset (wizard/offline_data, scripts/make_offline_dataset.py): GSM8K-style rows a
# CPU plan's bundle ships in data/offline/, which its data/prepare_data.py reads when the hub is unreachable.
OFFLINE_DIR = "offline"  # relative to the bundle's data/ folder
OFFLINE_FILES = ("train.jsonl", "test.jsonl")
BUNDLE_REWARD_FN = "reward/reward_fn.py"
BUNDLE_REWARD_NAME = "compute_score"

# verl 0.9.1 default scoring (verl/utils/reward_score/__init__.py:default_compute_score):
# data_source -> scorer module. `aime*` prefixes are matched separately.
DEFAULT_SCORERS: dict[str, str] = {
    "openai/gsm8k": "gsm8k",
    "lighteval/MATH": "math_reward",
    "DigitalLearningGmbH/MATH-lighteval": "math_reward",
    "HuggingFaceH4/MATH-500": "math_reward",
    "math_dapo": "math_dapo",
    "math": "math_dapo",
    "math_dapo_reasoning": "math_dapo",
    "numina_aops_forum": "prime_math",
    "numina_synthetic_math": "prime_math",
    "numina_amc_aime": "prime_math",
    "numina_synthetic_amc": "prime_math",
    "numina_cn_k12": "prime_math",
    "numina_olympiads": "prime_math",
    "codecontests": "prime_code",
    "apps": "prime_code",
    "codeforces": "prime_code",
    "taco": "prime_code",
    "hiyouga/geometry3k": "geo3k",
    "searchR1_nq": "search_r1_like_qa_em",
    "searchR1_triviaqa": "search_r1_like_qa_em",
    "searchR1_popqa": "search_r1_like_qa_em",
    "searchR1_hotpotqa": "search_r1_like_qa_em",
    "searchR1_2wikimultihopqa": "search_r1_like_qa_em",
    "searchR1_musique": "search_r1_like_qa_em",
    "searchR1_bamboogle": "search_r1_like_qa_em",
}

# The data sources verl 0.9.1 routes to its code scorers (reward_score/__init__.py:79-94): sandbox_fusion when
# reward.sandbox_fusion.url is set (reward=sandbox), else prime_code, which runs the program in the reward worker.
CODE_DATA_SOURCES = ("codecontests", "apps", "codeforces", "taco")
# How many test cases verl's code scorers count (continuous=True: the first 10, sandbox_fusion/__init__.py:97-103).
SCORED_CASES = 10

# What the response must look like for a verl scorer to give credit (None: not one of our formats).
SCORER_FORMAT: dict[str, Optional[AnswerFormat]] = {
    "gsm8k": "number",  # strict: the number after "#### "
    "math_reward": "boxed",
    "math_dapo": "boxed",  # "Answer: ..." first, then the last \boxed{}
}

# Data source verl-init writes when the scorer must be verl's own (reward=rule).
RULE_DATA_SOURCE: dict[str, str] = {"number": "openai/gsm8k", "boxed": "DigitalLearningGmbH/MATH-lighteval",
                                     "code": "codecontests"}

INSTRUCTIONS: dict[str, str] = {
    # verl's examples/data_preprocess/gsm8k.py and math_dataset.py
    "number": 'Let\'s think step by step and output the final answer after "####".',
    "boxed": "Let's think step by step and output the final answer within \\boxed{}.",
    "text": 'Answer on the last line, starting with "Answer:".',
    # verl's code scorers read the program from the last ```python block (sandbox_fusion/__init__.py:47-48)
    "code": ("Write a Python 3 program that reads the input from standard input and writes the answer to standard "
             "output. Put the whole program in one ```python code block."),
}

FORMAT_WORDS: dict[str, str] = {
    "number": 'the last number in the response (preferring the one after "####"), compared numerically',
    "boxed": "the last \\boxed{...} in the response, compared after LaTeX normalisation",
    "text": 'the text after the last "Answer:" (else the last line), compared case- and punctuation-insensitively',
    "code": ("the program in the response's ```python block, run on each test case's input; the score is the share "
             f"of the first {SCORED_CASES} cases whose output matches"),
}


@dataclass(frozen=True)
class Hub:
    name: str  # hub id
    config: Optional[str]  # dataset config name
    train_split: str
    val_split: str
    question_field: str
    answer_field: str
    extract: str  # how the ground truth is read from answer_field
    local_subdirs: tuple[str, ...]  # where a hub snapshot keeps the split files
    instruction: Optional[str] = None  # the instruction verl's own preprocessing adds (None: by answer_format)
    images: bool = False  # rows carry images (an `images` column): for a vision-language model
    data_source: Optional[str] = None  # the data_source written, when verl's scorer knows the data by another name


# verl's examples/data_preprocess/geo3k.py: its instruction, added after the problem (which holds the <image>)
GEO3K_INSTRUCTION = (
    "You FIRST think about the reasoning process as an internal monologue and then provide the final answer. "
    "The reasoning process MUST BE enclosed within <think> </think> tags. The final answer MUST BE put in \\boxed{}."
)

HUB: dict[str, Hub] = {
    "gsm8k": Hub("openai/gsm8k", "main", "train", "test", "question", "answer", "gsm8k", ("main",)),
    "math": Hub("DigitalLearningGmbH/MATH-lighteval", None, "train", "test", "problem", "solution", "boxed", ("data",)),
    # verl's geo3k.py: problem (with <image>), answer (the ground truth as it is), images ({bytes, path} list)
    "geo3k": Hub("hiyouga/geometry3k", None, "train", "test", "problem", "answer", "text", ("data",),
                 instruction=GEO3K_INSTRUCTION, images=True),
    # DeepMind's CodeContests: description, public_tests {input: [...], output: [...]} (stdin → stdout); verl's
    # scorer knows it as data_source "codecontests" (reward_score/__init__.py:79)
    "codecontests": Hub("deepmind/code_contests", None, "train", "valid", "description", "public_tests", "code",
                        ("data",), data_source="codecontests"),
}
HUB_FORMAT: dict[str, AnswerFormat] = {"gsm8k": "number", "math": "boxed", "geo3k": "boxed", "codecontests": "code"}
HUB_IMAGE_KEY = "images"  # the hub datasets' image column (geometry3k's)
LOCAL_ONLY_KEYS = ("question_field", "answer_field", "messages_field", "data_source_field", "agent_name_field",
                   "val_fraction", "split_seed")


def scorer_for(data_source: str) -> Optional[str]:
    """verl's default scorer module for a data_source, or None (NotImplementedError at reward time)."""
    if data_source in DEFAULT_SCORERS:
        return DEFAULT_SCORERS[data_source]
    if data_source.startswith("aime"):
        return "math_dapo"
    return None


@dataclass(frozen=True)
class DataPrep:
    """Everything data/prepare_data.py and reward/reward_fn.py need, with reasons."""

    source: Literal["gsm8k", "math", "file"]
    hub: Optional[Hub]
    input_path: Optional[str]  # local file as the bundle names it (relative to the bundle, absolute, or ~/...)
    question_field: str
    answer_field: str
    messages_field: Optional[str]
    extract: str  # gsm8k | boxed | number | text: how the ground truth is read from the answer
    answer_format: AnswerFormat
    answer_format_reason: str
    instruction: str
    instruction_reason: str
    system_prompt: Optional[str]
    data_source: str
    data_source_reason: str
    ability: str
    val_fraction: float
    split_seed: int
    reward_fn: bool  # the bundle ships reward/reward_fn.py (reward=function without reward_function)
    offline_dir: Optional[str] = None  # gsm8k on a CPU plan: data/<this> holds the built-in offline dataset
    image_key: Optional[str] = None  # vision-language model: the image column read (None: text only)
    out_image_key: Optional[str] = None  # the image column written (data.image_key)
    image_max_pixels: int = 0  # images larger than this are shrunk (Qwen-VL's rounding to image_factor included)
    image_factor: int = 0  # pixels per image-token side: patch_size × spatial_merge_size
    agent_name: Optional[str] = None  # agent=tool: every row's agent_name (verl's tool agent loop)
    data_source_field: Optional[str] = None  # the column each row's data_source comes from (else data_source)
    agent_name_field: Optional[str] = None  # the column each row's agent_name comes from (else agent_name)
    tool_name: Optional[str] = None  # the tool whose create_kwargs carry the ground truth (extra_info.tools_kwargs)

    @property
    def scorer(self) -> Optional[str]:
        return scorer_for(self.data_source)


def _stem(path: str) -> str:
    base = posixpath.basename(path.replace("\\", "/"))
    stem = base.rsplit(".", 1)[0] if "." in base else base
    return stem or "local"


def input_path(dataset: str, base_dir: str) -> str:
    """The local file as prepare_data.py names it: `~/...` kept (expanded at run time), absolute kept, and a
    relative path as the plan stores it (relative to the bundle when the plan knows its folder: prepare_data.py
    resolves it there), else made absolute against `base_dir`."""
    if dataset.startswith("~") or dataset.startswith("/") or base_dir == "":
        return dataset
    return posixpath.normpath(posixpath.join(base_dir, dataset))


def resolve(a: "Answers", base_dir: str) -> DataPrep:
    """Derive the data preparation for answers (never rejects; the planner's rules do that)."""
    builtin = a.dataset in HUB
    hub = HUB.get(a.dataset)

    if a.answer_format is not None:
        fmt: AnswerFormat = a.answer_format
        fmt_reason = "answer_format (your answer)"
    elif hub is not None:
        fmt = HUB_FORMAT[a.dataset]
        fmt_reason = f"{a.dataset}'s answers are " + {"number": "numbers after ####", "code": "programs run against "
                                                      "test cases"}.get(fmt, "\\boxed{} expressions")
    elif a.reward == "sandbox":
        fmt = "code"
        fmt_reason = "reward=sandbox: the answer field holds each row's test cases, the response a program"
    else:
        fmt = "number"
        fmt_reason = "GSM8K-style numeric answers (set answer_format=boxed or text for other data)"

    if a.instruction is not None:
        instruction, instr_reason = a.instruction, "instruction (your answer)"
    elif hub is not None and hub.instruction is not None:
        instruction, instr_reason = hub.instruction, f"verl's own {a.dataset} preprocessing (examples/data_preprocess)"
    else:
        instruction, instr_reason = INSTRUCTIONS[fmt], f"asks for the answer_format={fmt} the scorer reads"

    if a.data_source is not None:
        ds, ds_reason = a.data_source, "data_source (your answer)"
    elif hub is not None and hub.data_source:
        ds, ds_reason = hub.data_source, f"the name verl's scorer knows {hub.name} by (selects its code scorer)"
    elif hub is not None:
        ds, ds_reason = hub.name, f"the hub id, as verl's {a.dataset} preprocessing writes (selects verl's scorer)"
    elif a.reward in ("rule", "sandbox") and fmt in RULE_DATA_SOURCE:
        ds = RULE_DATA_SOURCE[fmt]
        ds_reason = f"reward=rule: selects verl's {scorer_for(ds)} scorer, which reads answer_format={fmt}"
    else:
        ds, ds_reason = _stem(a.dataset), "the data file's name"

    if hub is not None:
        qf, af, extract = hub.question_field, hub.answer_field, hub.extract
    else:
        qf, af, extract = a.question_field, a.answer_field, fmt

    return DataPrep(
        source="file" if not builtin else a.dataset,  # type: ignore[arg-type]
        hub=hub,
        input_path=None if builtin else input_path(a.dataset, base_dir),
        question_field=qf,
        answer_field=af,
        messages_field=None if builtin else a.messages_field,
        extract=extract,
        answer_format=fmt,
        answer_format_reason=fmt_reason,
        instruction=instruction,
        instruction_reason=instr_reason,
        system_prompt=a.system_prompt if a.system_prompt is not None else agent_system_prompt(a),
        data_source=ds,
        data_source_reason=ds_reason,
        ability="math" if fmt in ("number", "boxed") else "code" if fmt == "code" else "qa",
        val_fraction=a.val_fraction,
        split_seed=a.split_seed,
        reward_fn=a.reward == "function" and not a.reward_function,
        offline_dir=OFFLINE_DIR if offline_fallback(a) else None,
        data_source_field=None if builtin else a.data_source_field,
        agent_name_field=None if builtin else a.agent_name_field,
        **_images(a, hub),
        **agent_fields(a),
    )


def vision_shape(a: "Answers"):  # -> Optional[ModelShape]
    """The model's shape when it is a vision-language model (a vision tower in the catalogue or its config.json),
    else None (a text model, or a model that cannot be sized: the planner says so)."""
    from wizard.planner.shapes import resolve_shape

    try:
        shape = resolve_shape(a.model, a.model_params_b)
    except (OSError, ValueError):
        return None
    return shape if shape is not None and shape.vision else None


def _images(a: "Answers", hub: Optional[Hub]) -> dict:
    """The image settings of data/prepare_data.py: for a vision-language model (or a hub dataset with images)."""
    shape = vision_shape(a)
    if shape is None and not (hub is not None and hub.images):
        return {}
    factor = shape.vision_patch * shape.vision_merge if shape is not None else 28
    return {"image_key": HUB_IMAGE_KEY if hub is not None else a.image_key, "out_image_key": a.image_key,
            "image_max_pixels": a.image_max_pixels, "image_factor": factor}


GSM8K_TOOL_NAME = "calc_gsm8k_reward"  # the bundle's GSM8K tool (wizard.planner.agent), as verl's example names it
# agent=tool with the bundle's GSM8K tool: the system message verl's multi-turn GSM8K preprocessing writes, in short
TOOL_SYSTEM_PROMPT = ("You are a math expert. Solve the question step by step. Before giving the final answer, call "
                      "the `calc_gsm8k_reward` tool with it at least once and refine the answer if the tool says it is "
                      "not correct. Put the final answer in the format `#### <answer>`.")


def agent_fields(a: "Answers") -> dict:
    """The DataPrep fields of agent=tool (verl's multi-turn rows: agent_name, extra_info.tools_kwargs)."""
    if getattr(a, "agent", "single_turn") != "tool":
        return {}
    gsm8k = (a.tool or "gsm8k") == "gsm8k"
    return {"agent_name": "tool_agent", "tool_name": GSM8K_TOOL_NAME if gsm8k else None}


def agent_system_prompt(a: "Answers") -> Optional[str]:
    """The default system message: with agent=tool and the GSM8K tool, one that tells the model to call it."""
    return TOOL_SYSTEM_PROMPT if getattr(a, "agent", "single_turn") == "tool" and (a.tool or "gsm8k") == "gsm8k" else None


def offline_fallback(a: "Answers") -> bool:
    """A CPU plan (the cpu-smoke laptop profile) on gsm8k: its bundle ships the built-in offline dataset and
    falls back to it, saying so, when the hub is unreachable. GPU plans never swap their data silently."""
    return a.dataset == "gsm8k" and a.gpu_type.strip().lower() == "cpu"


def local_only_keys_given(a: "Answers") -> list[str]:
    return [k for k in LOCAL_ONLY_KEYS if k in a.model_fields_set]


def hub_prepared_in_place(a: "Answers", base_dir: str, train_files: str, val_files: str) -> Optional[str]:
    """The hub dataset a cluster node can prepare by itself (running data/prepare_data.py where the job
    runs), or None: only for gsm8k / math when the config reads the bundle's own data/ files."""
    hub = HUB.get(a.dataset)
    if hub is None or (train_files, val_files) != (PREPARED_TRAIN, PREPARED_VAL):
        return None
    return hub.name


# -- what data/prepare_data.py makes of one input row (mirrors templates/data/prepare_data.py.j2: build(),
# ground_truth() and split_file(); tests/test_dataset_overlong.py runs both on the same rows) --------------

ROLES = ("system", "user", "assistant", "tool")


class Skip(Exception):
    """A row prepare_data.py skips (it writes no training example for it)."""


def _last_boxed(text: str) -> Optional[str]:
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if start < 0:
        return None
    if text.startswith("\\boxed ", start):
        return text[start + len("\\boxed "):].split("$")[0].strip()
    open_at = text.find("{", start)
    if open_at < 0:
        return None
    depth = 0
    for i in range(open_at, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[open_at + 1:i]
    return None


def _plain_number(text: str) -> str:
    import re

    text = text.replace(",", "").replace("$", "").rstrip(".")
    return re.sub(r"^(-?\d+)\.0+$", r"\1", text)


def _ground_truth(answer: str, extract: str) -> str:
    import re

    if extract == "gsm8k":
        found = re.search(r"#### (\-?[0-9\.\,]+)", answer)
        if found is None:
            raise Skip("no '#### <number>' in the answer")
        return found.group(1).replace(",", "")
    if extract == "number":
        after_hashes = re.search(r"####\s*(\-?[0-9\.\,]+)", answer)
        if after_hashes:
            return _plain_number(after_hashes.group(1))
        numbers = re.findall(r"-?\d[\d,]*(?:\.\d+)?", answer)
        if not numbers:
            raise Skip("no number in the answer")
        return _plain_number(numbers[-1])
    if extract == "code":
        return code_tests(answer)
    if extract == "boxed":
        boxed = _last_boxed(answer)
        return (boxed if boxed is not None else answer).strip()
    return answer.strip()


def _text_field(row: dict, name: str) -> str:
    import json

    value = row.get(name)
    if value is None or (isinstance(value, float) and value != value):
        raise Skip(f"no {name!r} value")
    text = value if isinstance(value, str) else json.dumps(value) if isinstance(value, (list, dict)) else str(value)
    if not text.strip():
        raise Skip(f"{name!r} is empty")
    return text


def _with_instruction(question: str, instruction: str) -> str:
    if "{question}" in instruction:
        return instruction.replace("{question}", question)
    return f"{question} {instruction}" if instruction else question


def _chat_of(value: object, field_name: str) -> list[dict]:
    import json

    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise Skip(f"{field_name!r} is text, not a JSON list of messages") from None
    if not isinstance(value, (list, tuple)) or not value:
        raise Skip(f"{field_name!r} is not a non-empty list of messages")
    chat = []
    for i, message in enumerate(value):
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            raise Skip(f"message {i} is not a mapping with a role and text content")
        if message.get("role") not in ROLES:
            raise Skip(f"message {i} has role {message.get('role')!r}")
        chat.append({"role": message["role"], "content": message["content"]})
    return chat


def prompt_of(row: dict, prep: DataPrep) -> list[dict]:
    """The prompt (chat messages) data/prepare_data.py writes for one input row; raises Skip where it skips it."""
    if prep.messages_field:
        chat = _chat_of(row.get(prep.messages_field), prep.messages_field)
        replies = []
        while chat and chat[-1]["role"] == "assistant":
            replies.insert(0, chat.pop()["content"])
        if not chat or chat[-1]["role"] != "user":
            raise Skip("the chat has no user turn to answer")
        has_answer = row.get(prep.answer_field) not in (None, "")
        if not has_answer and not replies:
            raise Skip(f"no {prep.answer_field!r} value and no assistant reply to take the answer from")
        answer = _text_field(row, prep.answer_field) if has_answer else replies[-1]
        chat[-1] = {"role": "user", "content": _with_instruction(chat[-1]["content"], prep.instruction)}
        if prep.system_prompt and chat[0]["role"] != "system":
            chat.insert(0, {"role": "system", "content": prep.system_prompt})
    else:
        question = _text_field(row, prep.question_field)
        answer = _text_field(row, prep.answer_field)
        chat = [{"role": "system", "content": prep.system_prompt}] if prep.system_prompt else []
        chat.append({"role": "user", "content": _with_instruction(question, prep.instruction)})
    if not _ground_truth(answer, prep.extract):
        raise Skip("the reference answer is empty")
    if prep.image_key:  # prepare_data.py's with_images(): placeholders put in front when the prompt has none
        raw = row.get(prep.image_key)
        if isinstance(raw, str) and raw.strip().startswith("["):  # a csv cell's JSON list
            import json

            try:
                raw = json.loads(raw)
            except ValueError:
                raise Skip(f"{prep.image_key!r} is text, not a JSON list") from None
        n_images = len(raw) if isinstance(raw, (list, tuple)) else (0 if raw is None or raw != raw else 1)
        placeholders = sum(m["content"].count("<image>") for m in chat)
        if n_images and placeholders == 0:
            last_user = max(i for i, m in enumerate(chat) if m["role"] == "user")
            chat[last_user] = {"role": "user", "content": "<image>" * n_images + chat[last_user]["content"]}
        elif placeholders != n_images:
            raise Skip(f"{placeholders} <image> placeholder(s) for {n_images} image(s)")
    return chat


def held_out(n_rows: int, val_fraction: float, seed: int) -> set[int]:
    """Which of prepare_data.py's converted rows go to val.parquet (its split_file): the same draw."""
    import random

    if val_fraction <= 0 or n_rows < 2:
        return set()
    n_val = min(n_rows - 1, max(1, round(n_rows * val_fraction)))
    return set(random.Random(seed).sample(range(n_rows), n_val))


# -- code rows: the test cases verl's code scorers read ------------------------------------------------------------


def test_cases_problem(value: object) -> Optional[str]:
    """Why verl 0.9.1's sandbox scorer cannot score against this reward_model.ground_truth, or None. Mirrors
    reward_score/sandbox_fusion/__init__.py:62-76 (a dict, or JSON text of one; `assert_case` list, else `inputs`
    and `outputs`) and sandbox_fusion/utils.py:check_correctness (:505-521: as many outputs and assert cases as
    inputs, at least one case); on any of these verl scores every response 0 without running it."""
    import json

    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8", errors="replace")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            return f"not JSON ({exc.msg} at character {exc.pos})"
    if not isinstance(value, dict):
        return f"a JSON {type(value).__name__}, not an object with inputs and outputs"
    asserts = value.get("assert_case")
    if isinstance(asserts, list):
        inputs = value.get("inputs", [""] * len(asserts))
        outputs = value.get("outputs", [None] * len(asserts))
    elif "inputs" not in value or "outputs" not in value:
        return "has no inputs/outputs lists (nor an assert_case list)"
    else:
        inputs, outputs = value["inputs"], value["outputs"]
    if not isinstance(inputs, list) or not isinstance(outputs, list):
        return "inputs and outputs must be lists"
    if not inputs:
        return "has no test case (empty inputs)"
    if len(inputs) != len(outputs):
        return f"{len(inputs)} inputs but {len(outputs)} outputs"
    if isinstance(asserts, list) and len(asserts) != len(inputs):
        return f"{len(asserts)} assert cases for {len(inputs)} inputs"
    if "fn_name" in value and not isinstance(value["fn_name"], str):
        return "fn_name is not a string"
    return None


def code_tests(answer: str) -> str:
    """A code row's ground truth as verl's scorer reads it: JSON text of {"inputs": [...], "outputs": [...]}
    (fn_name / assert_case kept). CodeContests' {"input": [...], "output": [...]} is renamed. Raises Skip (with
    test_cases_problem's reason) for test cases verl could not run."""
    import json

    try:
        value = json.loads(answer)
    except ValueError as exc:
        raise Skip(f"the test cases are not JSON ({exc.msg} at character {exc.pos})") from None
    if isinstance(value, dict) and "inputs" not in value and "outputs" not in value and "input" in value:
        value = {"inputs": value.get("input"), "outputs": value.get("output"),
                 **{k: v for k, v in value.items() if k not in ("input", "output")}}
    why = test_cases_problem(value)
    if why is not None:
        raise Skip(f"the test cases: {why}")
    return json.dumps(value, ensure_ascii=False)
