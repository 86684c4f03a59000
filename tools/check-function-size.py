#!/usr/bin/env python3
"""House rules (docs/architecture.md): no function in libcore/ or services/ over 100 lines, no
file there over 700 lines.

Reads clang-formatted C++ (tools/check-format.sh keeps the tree so): a function body opens with
a line ending in '{' whose statement has a parameter list, at namespace level (column 0) or in a
class body (column 2), and closes at the first later line with the same indentation starting with
'}'. A function counts from the first line of its signature to its closing brace; lambdas count
in their enclosing function. Data tables are not functions and are not counted.

Usage: check-function-size.py ROOT [LIMIT]   (exit 1 and one line per function over LIMIT and
per file over 7 x LIMIT lines)
"""
import pathlib
import re
import sys

CONTROL = re.compile(r"^\s*(if|for|while|switch|do|else|try|catch|return|namespace|class|struct|"
                     r"union|enum|extern)\b")
PARAMS = re.compile(r"\)\s*(const|override|final|noexcept|mutable|&|&&|\s|->[^{]*)*"
                    r"(:[^{]*)?\{\s*$")


def statement_start(lines, i):
    """First line of the declaration whose last line is lines[i]."""
    j = i
    while j > 0:
        prev = lines[j - 1]
        stripped = prev.strip()
        if (not stripped or stripped.startswith(("//", "#")) or stripped.endswith((";", "{", "}"))
                or re.match(r"^\s*(public|private|protected)\s*:\s*$", prev)):
            break
        j -= 1
    return j


def functions(path):
    lines = path.read_text(errors="replace").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        start = statement_start(lines, i) if line.rstrip().endswith("{") else i
        indent = len(lines[start]) - len(lines[start].lstrip())
        if indent in (0, 2) and line.rstrip().endswith("{") and not line.lstrip().startswith("}"):
            text = " ".join(l.strip() for l in lines[start:i + 1])
            if not CONTROL.match(text) and PARAMS.search(text) and "=" not in text.split("(")[0]:
                end = i + 1
                closer = " " * indent + "}"
                while end < len(lines) and not lines[end].startswith(closer):
                    end += 1
                yield start + 1, end - start + 1, lines[start].strip()
                i = end + 1
                continue
        i += 1


def main():
    root = pathlib.Path(sys.argv[1])
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    over = []
    for top in ("libcore", "services"):
        for path in sorted(list((root / top).rglob("*.cpp")) + list((root / top).rglob("*.hpp"))):
            total = path.read_text(errors="replace").count("\n")
            if total > 7 * limit:
                over.append(f"{path.relative_to(root)}: file of {total} lines (over {7 * limit})")
            for line, length, head in functions(path):
                if length > limit:
                    over.append(f"{path.relative_to(root)}:{line}: {length} lines: {head[:80]}")
    for o in over:
        print(o)
    if over:
        print(f"{len(over)} function(s) or file(s) too long (docs/architecture.md, house rules)")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
