#!/usr/bin/env python3
"""Checks that the library keeps small functions and small files.

Every function defined under src/ or include/ must be at most FUNCTION_LIMIT lines (from its signature's first line
to its closing brace), and every file there at most FILE_LIMIT lines, except the entries of the allow-lists below,
each with the reason it may stay (or the issue that splits it). An allow-list entry that no longer exceeds the limit
is reported too, so the lists only shrink. Prints "path:line: ..." for each problem and exits 1 when there is one.

The function finder is a small brace matcher, not a C++ parser: comments, strings and character literals are blanked
out, a '{' whose preceding text (since the last ';', '{' or '}') looks like a signature opens a function, and
namespaces, classes, structs, unions, enums and extern blocks are walked into. Lambdas and local classes count as
part of the function that holds them.
"""
import pathlib
import re
import sys

FUNCTION_LIMIT = 80
FILE_LIMIT = 500

# "path:qualified name" -> why it may be longer than FUNCTION_LIMIT.
FUNCTION_ALLOW = {
    # The pickle machine's opcode switch: one case per opcode of Python's pickle protocol, each a few lines; split,
    # the dispatch would be spread over files for no reader's benefit.
    "src/formats/detail/python_pickle.cpp:step": "the pickle opcode switch",
}

# path -> why it may be longer than FILE_LIMIT.
FILE_ALLOW = {}

KEYWORD_BLOCKS = re.compile(r"\b(namespace|class|struct|union|enum)\b|\bextern\s*$")
CONTROL = re.compile(r"^\s*(if|for|while|switch|catch|do|else|try)\b")
NAME = re.compile(r"((?:[A-Za-z_~][A-Za-z_0-9]*\s*::\s*)*(?:operator\s*[^\s(]+|~?[A-Za-z_][A-Za-z_0-9]*))\s*\($")


def blank_literals(text):
    """The text with comments, string and character literals replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # a digit separator, 1'000
                out.append(c)
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def blank_preprocessor(code):
    """The code with preprocessor directives (and their continuation lines) replaced by empty lines."""
    out, continued = [], False
    for line in code.split("\n"):
        directive = continued or line.lstrip().startswith("#")
        continued = directive and line.rstrip().endswith("\\")
        out.append("" if directive else line)
    return "\n".join(out)


def function_name(header):
    """The qualified name of the function a signature declares, or None when `header` is no signature."""
    if "(" not in header or ")" not in header or CONTROL.match(header):
        return None
    depth, first = 0, None
    for k, ch in enumerate(header):
        if ch == "(":
            if depth == 0 and first is None:
                first = k
            depth += 1
        elif ch == ")":
            depth -= 1
    head = header[:first]
    if "=" in head.replace("operator=", "").replace("==", ""):
        return None  # an initializer: int x = f({...})
    m = NAME.search(head.rstrip() + "(")
    return re.sub(r"\s+", "", m.group(1)) if m else None


def functions(text):
    """(name, first line, last line) of each function defined at namespace or class level."""
    code = blank_preprocessor(blank_literals(text))
    stack = []  # "scope" (namespace, class), "function", "other", "init" (a brace initializer in a ctor's list)
    header, header_start, found = "", None, []
    line = 1
    for ch in code:
        if ch == "\n":
            line += 1
        in_function = any(kind == "function" for kind, _, _ in stack)
        if ch == "{":
            if in_function:
                stack.append(("other", None, None))
                continue
            stripped = header.strip()
            name = function_name(stripped)
            if name and re.search(r"\)\s*(noexcept\s*)?:", stripped) and re.search(r"[\w>]\s*$", stripped):
                stack.append(("init", None, None))  # y_{b} in "Foo() : x_(a), y_{b} {"
                header += ch
                continue
            if name:
                stack.append(("function", name, header_start or line))
            elif KEYWORD_BLOCKS.search(stripped.split("(")[0]) or stripped.endswith('extern "C"') or stripped == "":
                stack.append(("scope", None, None))
            else:
                stack.append(("other", None, None))
            header, header_start = "", None
        elif ch == "}":
            kind, name, start = stack.pop() if stack else ("other", None, None)
            if kind == "init":
                header += ch
                continue
            if kind == "function":
                found.append((name, start, line))
            if not in_function or kind == "function":
                header, header_start = "", None
        elif ch == ";" and not in_function:
            header, header_start = "", None
        elif not in_function:
            if header_start is None and not ch.isspace():
                header_start = line
            header += ch
    return found


def main(root):
    problems, seen_functions, seen_files = [], set(), set()
    files = sorted(p for base in ("src", "include") for p in (root / base).rglob("*") if p.suffix in (".h", ".cpp"))
    for f in files:
        rel = str(f.relative_to(root))
        text = f.read_text()
        lines = text.count("\n") + (0 if text.endswith("\n") else 1)
        if lines > FILE_LIMIT:
            if rel in FILE_ALLOW:
                seen_files.add(rel)
            else:
                problems.append(f"{rel}:1: {lines} lines, over the {FILE_LIMIT}-line limit; split it by concept")
        for name, start, end in functions(text):
            length = end - start + 1
            if length <= FUNCTION_LIMIT:
                continue
            key = f"{rel}:{name}"
            short = f"{rel}:{name.split('::')[-1]}"
            if key in FUNCTION_ALLOW or short in FUNCTION_ALLOW:
                seen_functions.add(key if key in FUNCTION_ALLOW else short)
            else:
                problems.append(f"{rel}:{start}: {name} is {length} lines, over the {FUNCTION_LIMIT}-line limit; "
                                "split it into named steps")
    for key in sorted(set(FUNCTION_ALLOW) - seen_functions):
        problems.append(f"tools/ci/check_sizes.py: FUNCTION_ALLOW's {key} is within the limit now (or gone); "
                        "remove it from the list")
    for key in sorted(set(FILE_ALLOW) - seen_files):
        problems.append(f"tools/ci/check_sizes.py: FILE_ALLOW's {key} is within the limit now (or gone); remove it")
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} size problem(s) (limits: {FUNCTION_LIMIT} lines a function, {FILE_LIMIT} a file)")
        return 1
    print(f"sizes: {len(files)} files, every function within {FUNCTION_LIMIT} lines and every file within "
          f"{FILE_LIMIT} (allowed: {len(FUNCTION_ALLOW)} functions, {len(FILE_ALLOW)} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(__file__).resolve().parents[2]))
