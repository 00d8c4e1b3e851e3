"""Code-execution rewards: test cases in the data rows that verl's code scorers cannot use (VI637, VI638).

verl 0.9.1 (paths under site-packages/verl/) scores a row whose data_source is codecontests / apps / codeforces / taco
(utils/reward_score/__init__.py:79-94) with its sandbox client when reward.sandbox_fusion.url is set
(trainer/ppo/reward.py:134-146 binds it only when no custom reward function is configured), else with prime_code.
Both read reward_model.ground_truth as JSON test cases and neither raises on a bad one: the row scores 0.

- VI637: test cases neither scorer can run (the class of verl PR #2199, PRIME-RL/Eurus-2-RL-Data's call-based rows).
  The structure (sandbox_fusion/__init__.py:63-77, sandbox_fusion/utils.py:479-503: a dict or its JSON text, inputs
  and outputs of equal length, or an assert_case list) is wizard.planner.dataprep.test_cases_problem. A call-based
  case (fn_name) passes its arguments as TEXT, one JSON value per line: the sandbox client puts str(input) on stdin
  (sandbox_fusion/utils.py:293) and its wrapper calls fn(*[json.loads(line) for line in stdin.split('\\n')])
  (:244, :269); prime_code calls inputs.split("\\n") and json.loads(outputs[i]) (prime_code/testing_util.py:235-236).
  An input stored as a list of arguments ([1237], the APPS/TACO raw form) calls the function with one list (sandbox)
  or raises AttributeError (prime_code): a correct solution scores 0 on every such row, with no error. prime_code also
  takes only text outputs for call-based cases (json.loads at :236) and needs inputs even with assert_case
  (prime_code/__init__.py:42-43).
- VI638: an expected output that makes a wrong answer pass (verl PR #7853, closed unmerged). The sandbox client
  counts a case passed when `expected_output is None` or stdout equals str(expected) (sandbox_fusion/utils.py:427),
  and its call-based wrapper catches the function's exception and exits 0 with nothing printed (:270-288, the
  sys.exit(1) commented out): a None output passes any program that runs, an empty one ('') passes a call-based
  solution that raises. prime_code is worse on an empty call-based output: json.loads('') (testing_util.py:236)
  stops the run before any result and `all([])` is True (prime_code/__init__.py:33-35), so every answer scores 1.
  The reward is then hackable: a policy learns to raise, or anything goes.

Rows are read as datacontent reads them (the first SAMPLE_ROWS of each local training/validation file); both rules
are silent when a custom reward function or a reward model scores, and on rows of other data_sources.
"""

from __future__ import annotations

import json
from typing import Any

from wizard.check.rules.context import Ctx, Facts, local_data_files
from wizard.check.rules.datacontent import SAMPLE_ROWS, file_rows
from wizard.check.shellargs import PLACEHOLDER
from wizard.planner.dataprep import CODE_DATA_SOURCES, test_cases_problem

URL = "reward.sandbox_fusion.url"


def _cases(value: Any) -> dict[str, Any] | None:
    """The test cases as verl reads them (sandbox_fusion/__init__.py:64-66: a dict, or json.loads of text)."""
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8", errors="replace")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def unusable(value: Any, sandbox: bool) -> str | None:
    """Why verl's code scorer (the sandbox client if `sandbox`, else prime_code) scores a correct solution 0 against
    this ground_truth, or None (VI637)."""
    why = test_cases_problem(value)
    if why is not None:
        return why
    cases = _cases(value) or {}
    if not sandbox and "inputs" not in cases:
        return "has an assert_case list but no inputs, which prime_code needs (prime_code/__init__.py:42)"
    if not isinstance(cases.get("fn_name"), str):
        return None
    args = [x for x in cases.get("inputs", []) if not isinstance(x, str)]
    if args:
        arg = args[0]
        return (f"is call-based (fn_name {cases['fn_name']!r}) but input {json.dumps(arg)[:60]} is a "
                f"{type(arg).__name__}, not text: verl reads each argument as one JSON line of a string "
                + ("(stdin=str(input), fn(*[json.loads(line) ...]): sandbox_fusion/utils.py:244,269,293)" if sandbox
                   else "(inputs.split('\\n'): prime_code/testing_util.py:235)"))
    # the sandbox wrapper reads no argument from blank stdin (utils.py:242); prime_code splits it regardless
    line = next((x for x in cases.get("inputs", [])
                 if (x.strip() or not sandbox) and not all(map(_json, x.split("\n")))), None)
    if line is not None:
        return (f"is call-based (fn_name {cases['fn_name']!r}) but input {json.dumps(line)[:60]} has a line that is "
                "not one JSON value (a trailing newline counts): verl json.loads every line of it "
                + ("(sandbox_fusion/utils.py:244)" if sandbox else "(prime_code/testing_util.py:235)"))
    outs = [x for x in cases.get("outputs", []) if not isinstance(x, str) or not _json(x)]
    if not sandbox and outs:
        out = outs[0]
        return (f"is call-based (fn_name {cases['fn_name']!r}) but output {json.dumps(out)[:60]} is not JSON "
                "text: prime_code json.loads it (prime_code/testing_util.py:236)")
    return None


def _json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def passes_anything(value: Any, sandbox: bool = True) -> str | None:
    """Why verl's code scorer (the sandbox client if `sandbox`, else prime_code) counts a wrong answer as passing
    these cases, or None (VI638)."""
    cases = _cases(value)
    if cases is None or test_cases_problem(value) is not None or isinstance(cases.get("assert_case"), list):
        return None  # with assert cases the assert appended to the program decides (outputs None: __init__.py:73-74)
    outputs = cases.get("outputs", [])
    if sandbox and any(x is None for x in outputs):
        return ("an expected output is null: the sandbox client passes any program that runs "
                "(`expected_output is None` at sandbox_fusion/utils.py:427)")
    if isinstance(cases.get("fn_name"), str) and any(x == "" for x in outputs):
        return ("a call-based expected output is empty: " + (
            "verl's wrapper catches the function's exception and exits 0 printing nothing "
            "(sandbox_fusion/utils.py:270-288), so a solution that raises passes" if sandbox else
            "prime_code's json.loads('') stops the run before any result (prime_code/testing_util.py:236) and "
            "all([]) is True (prime_code/__init__.py:33-35), so every answer scores 1"))
    return None


def _scored_by_verl(c: Ctx) -> bool:
    if c.unknown("reward.custom_reward_function.path", "reward.reward_model.enable"):
        return False
    return not c.v("reward.custom_reward_function.path") and not c.v("reward.reward_model.enable")


def _sandbox_on(c: Ctx) -> bool | None:
    url = c.v(URL)
    if c.unknown(URL):
        return None
    return isinstance(url, str) and bool(url) and PLACEHOLDER not in url


def _ground_truth(row: dict[str, Any]) -> Any:
    rm = row.get("reward_model")
    return rm.get("ground_truth") if isinstance(rm, dict) else None


def rule_code_tests(c: Ctx, f: Facts) -> None:
    sandbox = _sandbox_on(c)
    if sandbox is None or not _scored_by_verl(c):
        return
    scorer = f"verl's sandbox client ({URL})" if sandbox else "prime_code (no reward.sandbox_fusion.url)"
    for key, path, local in local_data_files(c, (".parquet", ".jsonl")):
        bad: list[tuple[int, str]] = []
        hack: list[tuple[int, str]] = []
        code_rows = 0
        try:
            for n, row in enumerate(file_rows(local)):
                if n >= SAMPLE_ROWS:
                    break
                if row.get("data_source") not in CODE_DATA_SOURCES:
                    continue
                code_rows += 1
                gt = _ground_truth(row)
                if (loose := passes_anything(gt, sandbox)) is not None:
                    hack.append((n, loose))
                elif (why := unusable(gt, sandbox)) is not None:
                    bad.append((n, why))
        except Exception:  # noqa: BLE001 - unreadable here: the data rules (VI870/VI878) speak about it
            continue
        if bad:
            n, why = bad[0]
            c.add("VI637", "error" if len(bad) == code_rows else "warning", (key, URL),
                  f"{path} row {n} (and {len(bad) - 1} more of {code_rows} code rows read): reward_model.ground_truth "
                  f"{why}; {scorer} scores a correct solution 0 on such rows, with no error",
                  "write each test case as verl reads it: {\"inputs\": [text], \"outputs\": [text]} (call-based: "
                  "\"fn_name\" and each input as one JSON value per argument per line, e.g. \"1237\" or \"[1, 2]\\n3\"); "
                  "list such rows with `verl-init validate-dataset`")
        if hack:
            n, why = hack[0]
            c.add("VI638", "warning", (key, URL),
                  f"{path} row {n} (and {len(hack) - 1} more of {code_rows} code rows read): {why}; the reward is "
                  "hackable (verl PR #7853)",
                  "give every case a real expected output (what the program prints; call-based: the json.dumps of "
                  "the return value for a list/dict/bool/None, str() otherwise), or drop such cases")
