"""Run one measurement in a fresh process: `python -m bench.task SETTINGS MODULE:FUNC PARAMS OUT`.

Each measurement gets its own interpreter so that product and peer settings never mix and no
state (connections, caches, imported modules) leaks from one row of the table into the next.
"""

from __future__ import annotations

import importlib
import json
import sys


def main(argv: list[str]) -> int:
    settings_module, target, params, out = argv
    from bench.common import bootstrap

    bootstrap(settings_module)
    module_name, func_name = target.split(":")
    func = getattr(importlib.import_module(module_name), func_name)
    result = func(json.loads(params))
    with open(out, "w") as fh:
        json.dump(result, fh, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
