"""VI949 (error): a custom RL dataset class loaded from a FILE path that inherits verl's overlong-prompt filter for a
vision-language model (paths under site-packages/verl, 0.9.1).

data.custom_cls.path names the module of the class verl builds instead of RLHFDataset (get_dataset_class,
utils/dataset/rl_dataset.py:582-584, through load_extern_object). A file path (not `pkg://`) is executed under a
made-up name, custom_module_<hash>, that is NOT added to sys.modules (utils/import_utils.py:175-193: only a given
module_name is registered; load_extern_object passes none, :256).

With data.filter_overlong_prompts on, RLHFDataset.__init__ -> _read_files_and_tokenize -> maybe_filter_out_long_prompts
(rl_dataset.py:194-272) filters the rows with a closure `doc2len` that, when the model has a multimodal processor,
calls methods on self: self._build_messages (:208) and self._process_multi_modal_info (:217). HF datasets' filter
pickles that closure with its dill pickler; a class whose module is not importable is pickled by value, and the
re-created class has lost RLHFDataset from its bases (its MRO is (cls, Generic, object)), so every inherited method
is gone: each row raises AttributeError, the `except Exception` (:241-244) scores it max_prompt_length + 1, and the
filter drops EVERY row ("filter dataset len: 0") for the train and the validation set alike. The job then dies at
start-up on an empty dataloader, long after the filter ran over the whole set, with no word about the class (real
case: a public Keye-VLM launch with data.custom_cls.path=.../qwen3_rl_dataset.py, R73-01; verl#6472 the same).

The text-only branch (no processor, :248-266) reads only instance attributes and is not hit; a `pkg://` module is
imported by name (import_utils.py:170-172) and pickled by reference; a class that `def`s the methods itself keeps them
(they travel in its by-value dict; a body binding `_build_messages = RLHFDataset._build_messages` is lost too).
The methods the processor branch calls are read from verl's source
(FILTER_METHODS; tests/test_check_custom_dataset.py re-derives them from rl_dataset.py and compares). The test
proves the empty dataset with verl's own get_dataset_class and RLHFDataset on CPU (a file path: 0 of N rows; the
same class under pkg://: N of N).

The model counts as multimodal when verl would build a processor for it: hf_processor (utils/tokenizer/tokenizer.py:
182-200) returns None for text models, a processor when AutoProcessor finds a (pre)processor config, i.e. the model
folder holds preprocessor_config.json / processor_config.json / video_preprocessor_config.json, or the model shape
has a vision tower.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from wizard.check.rules.context import M, Ctx, Facts, local_path, parse_module
from wizard.check.shellargs import PLACEHOLDER

PATH, NAME, FILTER = "data.custom_cls.path", "data.custom_cls.name", "data.filter_overlong_prompts"
BASE = "RLHFDataset"
# the methods RLHFDataset.maybe_filter_out_long_prompts' processor branch calls on self (rl_dataset.py:208, :217)
FILTER_METHODS = ("_build_messages", "_process_multi_modal_info")
OWN_FILTER = "maybe_filter_out_long_prompts"
PROCESSOR_FILES = ("preprocessor_config.json", "processor_config.json", "video_preprocessor_config.json")


def _processor_model(c: Ctx, shape: Any) -> str | None:
    """Why verl builds a multimodal processor for the actor model, or None."""
    if shape is not None and getattr(shape, "vision", ""):
        return f"{getattr(shape, 'name', 'the model')} is a vision-language model"
    model = c.v(f"{M}.path")
    if not isinstance(model, str) or not model or c.unknown(f"{M}.path"):
        return None
    local = local_path(c, model)
    if local is None or not local.is_dir():
        return None
    for name in PROCESSOR_FILES:
        if (local / name).is_file():
            return f"{M}.path has {name} (verl builds a processor for it)"
    return None


def _classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def inherited_filter_methods(tree: ast.Module, name: str) -> list[str] | None:
    """The FILTER_METHODS class `name` takes from RLHFDataset (walking its in-file parents), [] when it defines them
    all, None when it does not reach RLHFDataset, overrides the filter itself, or overrides
    _read_files_and_tokenize without reaching the filter."""
    classes = _classes(tree)
    own: set[str] = set()
    seen: set[str] = set()
    todo, reaches = [name], False
    while todo:
        cls = classes.get(todo.pop())
        if cls is None or cls.name in seen:
            continue
        seen.add(cls.name)
        methods = {n.name: n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        if OWN_FILTER in methods:
            return None
        read = methods.get("_read_files_and_tokenize")
        if read is not None and not _reaches_filter(read):
            return None
        own |= set(methods)  # `def`s travel in the by-value class; a body binding `m = RLHFDataset.m` does not
        for base in cls.bases:
            bname = _base_name(base)
            if bname == BASE:
                reaches = True
            elif bname in classes:
                todo.append(bname)
    if not reaches:
        return None
    return [m for m in FILTER_METHODS if m not in own]


def _reaches_filter(fn: ast.AST) -> bool:
    """An overriding _read_files_and_tokenize that calls the filter or super()'s reader."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Attribute) and node.attr in (OWN_FILTER, "_read_files_and_tokenize"):
            return True
    return False


def rule_custom_dataset_filter(c: Ctx, f: Facts, shape: Any = None) -> None:
    path, name = c.v(PATH), c.v(NAME)
    if not (isinstance(path, str) and path and isinstance(name, str) and name) or c.unknown(PATH, NAME, FILTER):
        return
    if path.startswith("pkg://") or PLACEHOLDER in path or c.v(FILTER) is not True:
        return
    local = local_path(c, path[len("file://"):] if path.startswith("file://") else path)
    if local is None or not local.is_file():
        return
    why = _processor_model(c, shape)
    if why is None:
        return
    try:
        tree = parse_module(Path(local))
    except SyntaxError:
        return  # VI871/VI873 report the file
    if tree is None:
        return
    lost = inherited_filter_methods(tree, name)
    if not lost:
        return
    c.add("VI949", "error", (PATH, NAME, FILTER),
          f"{PATH}={path} is a file path and {name} inherits {', '.join(lost)} from RLHFDataset; {why} and "
          f"{FILTER}=True: the filter pickles the dataset, the class (module not in sys.modules, "
          "import_utils.py:175-193) is re-created "
          f"without RLHFDataset, every row raises AttributeError and is counted over-long (rl_dataset.py:208-244): "
          "the train and val sets filter to 0 rows",
          f"load the class by module: {PATH}=pkg://<module> with the file's folder on PYTHONPATH (or `def` them in "
          f"{name} itself), or set {FILTER}=False and filter the data offline")
