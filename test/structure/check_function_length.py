#!/usr/bin/env python3
"""Fails when a function defined in src/ or apps/ spans more than MAX lines.

design.md: functions read top to bottom and stay short; past 80 lines the details belong
in named helpers. A definition is found where it starts at column 0 of a .cpp file (what
every definition here does, including member functions) and ends at the first '}' back at
column 0; its length counts from the line naming it to that brace.

usage: check_function_length.py MAX DIR...
"""
import pathlib
import re
import sys

NOT_A_FUNCTION = re.compile(r"^(namespace|struct|class|enum|union|using|template|typedef|extern|static_assert|#|//|/\*|\*|}|\))")


def functions(path):
    """(name line, first line, last line) of each top-level definition in path."""
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line or line[0].isspace() or NOT_A_FUNCTION.match(line) or "(" not in line:
            i += 1
            continue
        start = i
        # The signature may wrap; the body opens with '{' at the end of one of its lines.
        while i < len(lines) and not lines[i].rstrip().endswith("{"):
            if lines[i].rstrip().endswith(";"):
                break
            i += 1
        if i >= len(lines) or not lines[i].rstrip().endswith("{") or lines[i].rstrip().endswith("= {"):
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not lines[end].startswith("}"):
            end += 1
        yield line.split("(")[0].split()[-1], start + 1, end + 1
        i = end + 1


def main():
    limit = int(sys.argv[1])
    long = []
    count = 0
    for root in sys.argv[2:]:
        for path in sorted(pathlib.Path(root).rglob("*.cpp")):
            for name, first, last in functions(path):
                count += 1
                if last - first + 1 > limit:
                    long.append(f"{path}:{first}: {name} is {last - first + 1} lines (at most {limit})")
    for entry in long:
        print(entry, file=sys.stderr)
    if count == 0:
        print("check_function_length: no function found", file=sys.stderr)
        return 1
    if not long:
        print(f"check_function_length: {count} functions, none over {limit} lines")
    return 1 if long else 0


if __name__ == "__main__":
    sys.exit(main())
