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

AnswerFormat = Literal["number", "boxed", "text"]

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

# What the response must look like for a verl scorer to give credit (None: not one of our formats).
SCORER_FORMAT: dict[str, Optional[AnswerFormat]] = {
    "gsm8k": "number",  # strict: the number after "#### "
    "math_reward": "boxed",
    "math_dapo": "boxed",  # "Answer: ..." first, then the last \boxed{}
}

# Data source verl-init writes when the scorer must be verl's own (reward=rule).
RULE_DATA_SOURCE: dict[str, str] = {"number": "openai/gsm8k", "boxed": "DigitalLearningGmbH/MATH-lighteval"}

INSTRUCTIONS: dict[str, str] = {
    # verl's examples/data_preprocess/gsm8k.py and math_dataset.py
    "number": 'Let\'s think step by step and output the final answer after "####".',
    "boxed": "Let's think step by step and output the final answer within \\boxed{}.",
    "text": 'Answer on the last line, starting with "Answer:".',
}

FORMAT_WORDS: dict[str, str] = {
    "number": 'the last number in the response (preferring the one after "####"), compared numerically',
    "boxed": "the last \\boxed{...} in the response, compared after LaTeX normalisation",
    "text": 'the text after the last "Answer:" (else the last line), compared case- and punctuation-insensitively',
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


HUB: dict[str, Hub] = {
    "gsm8k": Hub("openai/gsm8k", "main", "train", "test", "question", "answer", "gsm8k", ("main",)),
    "math": Hub("DigitalLearningGmbH/MATH-lighteval", None, "train", "test", "problem", "solution", "boxed", ("data",)),
}
HUB_FORMAT: dict[str, AnswerFormat] = {"gsm8k": "number", "math": "boxed"}
LOCAL_ONLY_KEYS = ("question_field", "answer_field", "messages_field", "val_fraction", "split_seed")


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
    input_path: Optional[str]  # local file (absolute, or ~/...), for source=file
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

    @property
    def scorer(self) -> Optional[str]:
        return scorer_for(self.data_source)


def _stem(path: str) -> str:
    base = posixpath.basename(path.replace("\\", "/"))
    stem = base.rsplit(".", 1)[0] if "." in base else base
    return stem or "local"


def input_path(dataset: str, base_dir: str) -> str:
    """The local file as prepare_data.py opens it: `~/...` kept (expanded at run time), else absolute."""
    if dataset.startswith("~") or dataset.startswith("/"):
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
        fmt_reason = f"{a.dataset}'s answers are " + ("numbers after ####" if fmt == "number" else "\\boxed{} expressions")
    else:
        fmt = "number"
        fmt_reason = "GSM8K-style numeric answers (set answer_format=boxed or text for other data)"

    if a.instruction is not None:
        instruction, instr_reason = a.instruction, "instruction (your answer)"
    else:
        instruction, instr_reason = INSTRUCTIONS[fmt], f"asks for the answer_format={fmt} the scorer reads"

    if a.data_source is not None:
        ds, ds_reason = a.data_source, "data_source (your answer)"
    elif hub is not None:
        ds, ds_reason = hub.name, f"the hub id, as verl's {a.dataset} preprocessing writes (selects verl's scorer)"
    elif a.reward == "rule" and fmt in RULE_DATA_SOURCE:
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
        system_prompt=a.system_prompt,
        data_source=ds,
        data_source_reason=ds_reason,
        ability="math" if fmt in ("number", "boxed") else "qa",
        val_fraction=a.val_fraction,
        split_seed=a.split_seed,
        reward_fn=a.reward == "function" and not a.reward_function,
        offline_dir=OFFLINE_DIR if offline_fallback(a) else None,
    )


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
