#!/usr/bin/env python3
"""Checks that every #include between src/ folders follows src/CMakeLists.txt's link graph.

Each `ringtrain_area(NAME DIR DEPS...)` there makes src/DIR one library that may use the
libraries it names (and what those use, transitively). A file in src/DIR may include
"DIR/..." and "OTHER/..." only when OTHER is reachable that way: an include that runs
upward or sideways fails here, before it becomes a link-order puzzle. A folder under src/
that no ringtrain_area names fails too, so a new room declares its place.

usage: check_includes.py SRC_DIR
"""
import pathlib
import re
import sys


def areas(cmake_text):
    """{dir: (library name, [dependency library names])} from the ringtrain_area calls."""
    text = re.sub(r"#[^\n]*", "", cmake_text)
    out = {}
    for args in re.findall(r"ringtrain_area\(([^)]*)\)", text):
        words = args.split()
        name, folder, deps = words[0], words[1], words[2:]
        out[folder] = ("ringtrain_" + name, [d for d in deps if d.startswith("ringtrain_")])
    return out


def reachable(table):
    by_lib = {lib: folder for folder, (lib, _) in table.items()}
    closure = {}
    for folder in table:
        seen, todo = set(), list(table[folder][1])
        while todo:
            lib = todo.pop()
            if lib in seen or lib not in by_lib:
                continue
            seen.add(lib)
            todo.extend(table[by_lib[lib]][1])
        closure[folder] = {by_lib[lib] for lib in seen}
    return closure


def main():
    src = pathlib.Path(sys.argv[1])
    table = areas((src / "CMakeLists.txt").read_text())
    allowed = reachable(table)
    errors = []
    for folder in sorted(p.name for p in src.iterdir() if p.is_dir()):
        if folder not in table:
            errors.append(f"src/{folder}: no ringtrain_area in src/CMakeLists.txt names it")
            continue
        for path in sorted((src / folder).glob("*.[ch]*")):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                m = re.match(r'\s*#\s*include\s+"([^/"]+)/', line)
                if m and m.group(1) != folder and m.group(1) not in allowed[folder]:
                    errors.append(f"{path.relative_to(src.parent)}:{n}: includes {m.group(1)}/, "
                                  f"which {table[folder][0]} does not link (rooms: {sorted(allowed[folder])})")
    if not table:
        errors.append("no ringtrain_area calls found in src/CMakeLists.txt")
    for e in errors:
        print(e, file=sys.stderr)
    if not errors:
        print(f"check_includes: {len(table)} rooms, every include runs downward")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
