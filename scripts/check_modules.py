#!/usr/bin/env python3
"""The module rule of docs/design.md ("Modules"), checked on the tree's #include lines.

    scripts/check_modules.py [--root DIR] [--plant FILE=HEADER ...]

The module table of docs/design.md names each module's folders, its CMake target and the modules it depends on. This
reads every #include "..." of every source and header under those folders, finds the module of the included file,
and fails (exit 1, one line per fault) where
  * the declared dependencies form a cycle,
  * an include crosses the declared direction (module A includes B where B is not A's dependency, directly or
    through others), or two modules include each other (a cycle among the includes themselves),
  * a module includes another's private file: where a module has public headers (a folder under include/), the rest
    of its files are its own (the tests may read those of the modules named in "reads the private files of"),
  * an included file of the tree lies in no module's folder, a folder does not exist, or a module's folder does not
    define its target (add_library(<target> ALIAS ...) in its CMakeLists.txt; a module whose target is "—", the
    programs, benches and tests, has none).
An include is found beside the including file, under include/ for "optimus/...", or else as the one file of the tree
whose path is or ends in it (the programs, benches and tests include through their targets' include directories).
--plant FILE=HEADER adds an include of HEADER to FILE as if it were there (the CTest that shows the check fails on a
planted cycle).
"""
import argparse
import os
import re
import sys

SOURCE = re.compile(r"\.(hpp|cpp|cuh|cu|h)$")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
ROW = re.compile(r"^\|(.+)\|\s*$")


def module_table(design):
    """Rows of the "## Modules" table: name -> {folders, target, depends}."""
    text = open(design, encoding="utf-8").read()
    start = text.index("\n## Modules")
    end = text.index("\n## ", start + 1)
    rows = [ROW.match(line) for line in text[start:end].splitlines()]
    cells = [[c.strip() for c in r.group(1).split("|")] for r in rows if r]
    header, body = cells[0], [c for c in cells[2:]]  # cells[1] is the |---| line
    col = {name: header.index(name) for name in ("module", "folders", "target", "depends on", "reads the private "
                                                  "files of")}
    modules = {}
    for c in body:
        name = re.sub(r"[*`]", "", c[col["module"]]).split(":")[0].strip()
        folders = re.findall(r"`([^`]+)`", c[col["folders"]])
        target = re.sub(r"[`]", "", c[col["target"]]).strip()
        depends = [d for d in re.findall(r"`([^`]+)`", c[col["depends on"]])]
        reads = [d for d in re.findall(r"`([^`]+)`", c[col["reads the private files of"]])]
        modules[name] = {"folders": folders, "target": target, "depends": depends, "reads": reads}
    for name, m in modules.items():
        for d in m["depends"] + m["reads"]:
            if d not in modules:
                raise SystemExit(f"check_modules: docs/design.md: {name} names '{d}', which is no module")
    return modules


def closure(modules):
    """Each module's transitive dependencies; a cycle among the declared ones is reported."""
    faults, reach = [], {}

    def visit(name, path):
        if name in path:
            faults.append("declared dependencies form a cycle: " + " -> ".join(path[path.index(name):] + [name]))
            return set()
        if name in reach:
            return reach[name]
        out = set()
        for d in modules[name]["depends"]:
            out |= {d} | visit(d, path + [name])
        reach[name] = out
        return out

    for name in modules:
        visit(name, [])
    return reach, faults


def owner(path, folders):
    """The module whose folder holds `path` (the longest matching folder), or None."""
    best, length = None, -1
    for folder, name in folders.items():
        if (path == folder or path.startswith(folder.rstrip("/") + "/")) and len(folder) > length:
            best, length = name, len(folder)
    return best


def private(path, module):
    """Whether `path` is a private file of `module`: one outside include/ of a module that has public headers there."""
    public = [f for f in module["folders"] if f.startswith("include/")]
    return bool(public) and not any(path == f or path.startswith(f.rstrip("/") + "/") for f in public)


def resolve(root, path, name, files):
    """The tree's file that `#include "name"` in `path` reads, or None (a generated or system header)."""
    if name.startswith("optimus/"):
        target = os.path.join("include", name)
        return target if os.path.exists(os.path.join(root, target)) else None
    target = os.path.normpath(os.path.join(os.path.dirname(path), name))
    if os.path.exists(os.path.join(root, target)):
        return target
    found = [f for f in files if f == name or f.endswith("/" + name)]
    return found[0] if len(found) == 1 else None


def edges_of(root, modules, planted):
    folders = {f.rstrip("/"): name for name, m in modules.items() for f in m["folders"]}
    files, faults = [], []
    for folder in folders:
        full = os.path.join(root, folder)
        if os.path.isfile(full):
            files.append(folder)
        elif os.path.isdir(full):
            for dirpath, _, names in os.walk(full):
                files += [os.path.relpath(os.path.join(dirpath, n), root) for n in names if SOURCE.search(n)]
        else:
            faults.append(f"{folders[folder]}'s folder {folder} does not exist")
    edges = {}  # (from, to) -> first "file:line includes header"
    files = sorted(set(files))
    for path in files:
        mine = owner(path, folders)
        lines = open(os.path.join(root, path), encoding="utf-8", errors="replace").read().splitlines()
        extra = [f'#include "{h}"' for f, h in planted if f == path]
        for number, line in enumerate(lines + extra, 1):
            number = number if number <= len(lines) else "planted"
            m = INCLUDE.match(line)
            if not m:
                continue
            name = m.group(1)
            target = resolve(root, path, name, files)
            if target is None and name.startswith(("optimus/", "../")):
                faults.append(f"{path}:{number} includes {name}, which is no file of the tree")
            if target is None:
                continue  # a generated or system header
            theirs = owner(target, folders)
            if theirs is None:
                faults.append(f"{path}:{number} includes {name}, which lies in no module's folder")
            elif theirs != mine:
                edges.setdefault((mine, theirs), f"{path}:{number} includes {name}")
                if private(target, modules[theirs]) and theirs not in modules[mine]["reads"]:
                    faults.append(f"{path}:{number} includes {name}, a private file of {theirs} (another module "
                                  f"includes only its headers under include/)")
    return edges, faults


def include_cycles(edges):
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    faults, state = [], {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                cycle = path[path.index(nxt):] + [nxt]
                where = "; ".join(edges[(x, y)] for x, y in zip(cycle, cycle[1:]))
                faults.append("the includes form a cycle: " + " -> ".join(cycle) + f" ({where})")
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return faults


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.dirname(here))
    parser.add_argument("--plant", action="append", default=[], metavar="FILE=HEADER")
    args = parser.parse_args()
    planted = [tuple(p.split("=", 1)) for p in args.plant]
    modules = module_table(os.path.join(args.root, "docs/design.md"))
    reach, faults = closure(modules)
    edges, found = edges_of(args.root, modules, planted)
    faults += found
    for (a, b), where in sorted(edges.items()):
        if b not in reach[a]:
            faults.append(f"{a} includes {b}, which is not among its dependencies in docs/design.md ({where})")
    faults += include_cycles(edges)
    for name, m in modules.items():
        if m["target"] == "—":
            continue  # programs, benches, tests: executables, no library target
        # A folder's own CMakeLists.txt; for a file (the umbrella header) the project's.
        lists = [os.path.join(args.root, f, "CMakeLists.txt") if os.path.isdir(os.path.join(args.root, f))
                 else os.path.join(args.root, "CMakeLists.txt") for f in m["folders"]]
        lists = [f for f in lists if os.path.isfile(f)]
        alias = re.compile(r"add_library\(\s*" + re.escape(m["target"]) + r"\s+ALIAS\b")
        if not any(alias.search(open(f).read()) for f in lists):
            faults.append(f"{name}: no CMakeLists.txt of its folders defines its target {m['target']}")
    for f in faults:
        print("check_modules: " + f)
    if faults:
        return 1
    print(f"check_modules: {len(modules)} modules, {len(edges)} dependencies among them in the includes, each in the "
          f"declared direction; no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
