#!/usr/bin/env python3
"""The tool-call parser names verl 0.9.1 registers: writes wizard/check/data/verl_tool_parsers.json, read by check's
VI691.

    python scripts/verl_tool_parsers.py           # regenerate the table from the installed verl
    python scripts/verl_tool_parsers.py --check   # exit 1 when the committed table differs

The tool agent loop builds its parser with ToolParser.get_tool_parser(rollout.multi_turn.format, tokenizer)
(experimental/agent_loop/tool_agent_loop.py:120), which raises ValueError("Unknown tool parser: ...") for a name not
in ToolParser._registry (experimental/agent_loop/tool_parser.py:82-85). verl fills the registry with
`@ToolParser.register("<name>")` on each parser class of that module (tool_parser.py:96, 132, 189, 377, 452, 510,
563, 651, 742 in 0.9.1). The table is read from that file's text (the agent-loop package does not import on a
CPU box without cachetools); tests/test_check_agent_formats.py compares it with the live registry.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import from_installed_verl, table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_tool_parsers.json"
SOURCE = "experimental/agent_loop/tool_parser.py"
_REGISTER = re.compile(r"""^@ToolParser\.register\(\s*["']([^"']+)["']\s*\)""", re.M)


def _from(root: Path) -> dict[str, Any]:
    text = (root / SOURCE).read_text(encoding="utf-8")
    return {"source": f"verl/{SOURCE}", "parsers": sorted(set(_REGISTER.findall(text)))}


def build() -> dict[str, Any]:
    return from_installed_verl(_from)


if __name__ == "__main__":
    sys.exit(table_main(__doc__, build, OUT))
