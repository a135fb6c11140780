#!/usr/bin/env python3
"""Checks that the component folders include each other only downwards, and that no library code outside dist/
includes or casts to a concrete strategy.

Each folder of include/composer/ (and its mirror in src/) may include only the folders listed below it in LAYERS'
allowed sets; a folder's own files and <torch/...>, <std> headers are always fine. Prints every violation as
"file:line: <dir> includes <other> (allowed: ...)" and exits 1 when there is one; also fails when LAYERS itself has a
cycle or misses a folder.
"""
import pathlib
import re
import sys

# folder -> the folders it may include. Lower layers first; no folder may reach back up.
LAYERS = {
    "utils": set(),
    "data": {"utils", "storage", "dist", "formats"},
    "metrics": {"utils"},
    "nn": {"utils"},
    "dist": {"utils", "nn"},
    "storage": {"utils"},
    "formats": {"utils"},
    "core": {"utils", "data", "metrics", "dist"},
    "loss": {"utils", "core"},
    "models": {"utils", "data", "metrics", "nn", "core", "formats", "loss"},
    "optim": {"utils", "core"},
    "algorithms": {"utils", "data", "metrics", "nn", "dist", "core", "models", "optim", "loss"},
    "loggers": {"utils", "dist", "core", "storage"},
    "datasets": {"utils", "data", "dist", "core"},
    "checkpoint": {"utils", "data", "metrics", "nn", "dist", "core", "models", "optim", "algorithms", "storage",
                   "formats"},
    "callbacks": {"utils", "data", "metrics", "nn", "dist", "core", "models", "optim", "checkpoint", "storage",
                  "formats"},
    "profiler": {"utils", "dist", "core", "callbacks", "storage"},
    "trainer": {"utils", "data", "metrics", "nn", "dist", "core", "loss", "models", "optim", "algorithms", "loggers",
                "checkpoint", "callbacks", "profiler", "storage", "formats"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"(?:composer/)?([a-z_]+)/')


def check_acyclic():
    seen, done = set(), set()

    def visit(d, path):
        if d in done:
            return
        if d in seen:
            sys.exit("LAYERS has a cycle: " + " -> ".join(path + [d]))
        seen.add(d)
        for dep in LAYERS[d]:
            visit(dep, path + [d])
        done.add(d)

    for d in LAYERS:
        visit(d, [])


# Outside dist/ the library asks dist::Strategy (and dist::ShardedState) its questions; it never includes a concrete
# strategy's header (but for the umbrella composer.h) nor casts to one, so that a new strategy needs no edit elsewhere.
CONCRETE_INCLUDE = re.compile(r'^\s*#\s*include\s+"composer/dist/(fully_sharded)\.h"')
CONCRETE_CAST = re.compile(r"dynamic(_pointer)?_cast<[^>]*\b(FullyShardedDataParallel|DataParallel|SingleProcess)\b")


def concrete_strategy_uses(root):
    found = []
    for base in (root / "include/composer", root / "src"):
        for f in sorted(base.rglob("*")):
            rel = f.relative_to(root)
            if f.suffix not in (".h", ".cpp") or rel.parts[1] == "dist" or str(rel) == "include/composer/composer.h":
                continue
            if rel.parts[0] == "include" and rel.parts[2] == "dist":
                continue
            for n, line in enumerate(f.read_text().splitlines(), 1):
                if CONCRETE_INCLUDE.match(line) or CONCRETE_CAST.search(line):
                    found.append(f"{rel}:{n}: names a concrete strategy outside dist/; ask dist::Strategy instead "
                                 "(docs/architecture.md, the distributed strategy)")
    return found


def main(root):
    check_acyclic()
    folders = sorted(p.name for p in (root / "include/composer").iterdir() if p.is_dir())
    missing = [f for f in folders if f not in LAYERS]
    if missing:
        sys.exit("tools/ci/check_layering.py: no layer for folder(s) " + ", ".join(missing) + "; add them to LAYERS")
    problems = []
    for folder in folders:
        for base in (root / "include/composer" / folder, root / "src" / folder):
            for f in sorted(base.rglob("*")) if base.exists() else []:
                if f.suffix not in (".h", ".cpp"):
                    continue
                for n, line in enumerate(f.read_text().splitlines(), 1):
                    m = INCLUDE.match(line)
                    if not m or m.group(1) == folder or m.group(1) not in LAYERS:
                        continue
                    if m.group(1) not in LAYERS[folder]:
                        problems.append(f"{f.relative_to(root)}:{n}: {folder} includes {m.group(1)} "
                                        f"(allowed: {', '.join(sorted(LAYERS[folder])) or 'nothing'})")
    problems += concrete_strategy_uses(root)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} include(s) point up the layers or name a concrete strategy "
              "(tools/ci/check_layering.py lists the layers)")
        return 1
    print(f"layering: {len(folders)} folders, every include points down")
    return 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()))
