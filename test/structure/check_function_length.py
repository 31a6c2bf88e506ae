#!/usr/bin/env python3
"""Fails when a function defined in src/ or apps/ spans more than MAX lines.

design.md: functions read top to bottom and stay short; past 80 lines the details belong
in named helpers. Every .cpp and .h is read with its comments and string literals blanked
and its braces counted, so a definition is found wherever it stands: at namespace scope,
inside a class body (inline in a header too), indented or not. A brace block is a function
body when it opens at namespace or class scope after a head with a parenthesis that is not
an initialiser ('... = {'); lambdas and blocks inside a function count toward it. Its
length counts from the line where its head starts to its closing brace.

usage: check_function_length.py MAX DIR...
"""
import pathlib
import re
import sys


def blanked(text):
    """text with comments, string and character literals (raw strings too) and preprocessor
    lines replaced by spaces, newlines kept, so that braces and line numbers are the code's own."""
    out = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i) + 2
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            delimiter = re.match(r'R"([^(\s]*)\(', text[i:]).group(1)
            j = text.find(")" + delimiter + '"', i) + len(delimiter) + 2
        elif text[i] in "\"'" and not (text[i] == "'" and i > 0 and text[i - 1].isalnum()):
            # (a ' after a digit or letter is C++14's digit separator, 1'000)
            j = i + 1
            while j < n and text[j] != text[i]:
                j += 2 if text[j] == "\\" else 1
            j += 1
        else:
            out.append(text[i])
            i += 1
            continue
        out.append(re.sub(r"[^\n]", " ", text[i:j]))
        i = j
    # Preprocessor lines (continued ones too) are no part of a function's head.
    return re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", lambda m: re.sub(r"[^\n]", " ", m.group(0)), "".join(out),
                  flags=re.M)


def without_template_heads(flat):
    """flat without its leading "template <...>" parameter lists (where "class" names a
    type parameter, not a class being defined)."""
    while flat.startswith("template"):
        depth, i = 0, flat.find("<")
        if i < 0:
            return flat
        for j in range(i, len(flat)):
            depth += {"<": 1, ">": -1}.get(flat[j], 0)
            if depth == 0:
                break
        flat = flat[j + 1:].lstrip()
    return flat


def functions(path):
    """(name, first line, last line) of each function body in path."""
    text = blanked(path.read_text())
    stack = []  # (kind, first line, name) of each open brace
    head_start = 0
    line = 1
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c == ";":
            head_start = i + 1
        elif c == "{":
            head = re.sub(r"^\s*(public|protected|private)\s*:(?!:)", "", text[head_start:i])
            flat = without_template_heads(" ".join(head.split()))
            outer = stack[-1][0] if stack else "scope"
            if re.search(r"\bnamespace\b", flat) or re.search(r"\bextern\s*$", flat):  # extern "C" (blanked)
                kind = "scope"
            elif re.search(r"\b(class|struct|union|enum)\b", flat.split("(")[0]):
                kind = "scope"
            elif outer == "scope" and "(" in flat and not flat.endswith("="):
                kind = "function"
            else:
                kind = "block"
            first = line - head.lstrip().count("\n")  # where the head's text starts
            name = flat.split("(")[0].split()[-1] if kind == "function" and flat.split("(")[0].split() else flat[:40]
            stack.append((kind, first, name))
            head_start = i + 1
        elif c == "}":
            if not stack:
                raise SystemExit(f"{path}:{line}: unbalanced '}}'")
            kind, first, name = stack.pop()
            if kind == "function":
                yield name, first, line
            head_start = i + 1


def main():
    limit = int(sys.argv[1])
    long = []
    count = 0
    for root in sys.argv[2:]:
        for path in sorted(p for p in pathlib.Path(root).rglob("*") if p.suffix in (".cpp", ".h")):
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
