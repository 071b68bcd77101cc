#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""check-layering: fails when the layering of CAIS breaks (issue 12, item 7).

Rules, each checked on the source tree or on the objects of a build:

  include   control/ (manager/ too) includes no DPDK header and nothing of
            agent/ or dataplane/; agent/ includes no DPDK header and nothing
            of dataplane/; dataplane/ includes nothing of agent/ (nor
            <cais/cais.h>, the agent's API); common/ includes only libc and
            system headers and its own; include/cais/ only system headers and
            its own (it is installed).
  include-cycle
            no file of the tree includes itself through other files.
  call-cycle
            no two files of agent/ (libcais: not perf.c, not nccl/),
            dataplane/ (not main.c) or control/manager/ (not main.c) call each
            other, directly or round a circle. "A calls B" when A's object
            leaves undefined a global symbol that B's object defines (nm).
  cross-call
            no agent/ object uses a symbol of a dataplane/ object or the
            reverse; no control/ object uses a DPDK (rte_*) symbol.
  not-built
            every source of those groups is compiled by the build, so that
            none escapes the call check.
  export    libcais.so exports only cais_* names declared in
            include/cais/cais.h.

One line per violation, grouped by rule, then a summary. Exit status: 0 no
violation, 1 violations, 2 usage error or missing input (no build, an
object file listed in compile_commands.json but absent, no nm).
--selftest builds a small tree with one violation of each kind (gcc, nm) and
checks that they are reported, and that a clean tree passes.
Python 3 standard library only.
"""
import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# The include path of the project (meson.build's `inc`, plus common/ from
# cmn_dep); a quoted include looks in the including file's folder first.
INCLUDE_DIRS = ["include", "control", "dataplane", "common"]

# The folders whose files are read for #include lines.
PARTS = ["agent", "dataplane", "control", "common", "include"]

# Call-cycle groups: name -> (folder, files of the folder left out). Only the
# folder's own files: agent/nccl/ is a separate module on top of libcais.
CALL_GROUPS = {
    "agent": ("agent", {"perf.c"}),
    "dataplane": ("dataplane", {"main.c"}),
    "control/manager": ("control/manager", {"main.c"}),
}

# Headers of third-party libraries the project links; none is libc or the
# system, though all sit in /usr/include (common/ must stay libc-only).
THIRD_PARTY = ["jansson.h", "openssl/*", "sqlite3.h", "cmocka.h", "mpi.h", "cuda*.h",
               "cuda/*", "nccl*.h", "numa.h", "pcap.h", "pcap/*", "infiniband/*", "rdma/*"]

# Symbols the linker puts into every shared object's dynamic symbol table.
LINKER_SYMBOLS = {"_init", "_fini", "_edata", "_end", "__bss_start"}

# nm types: a global definition, and a reference left to another object.
NM_DEFINED = set("TDBRGSCWVi")
NM_UNDEFINED = set("Uwv")


class InputError(Exception):
    """An input the check needs is missing: exit 2, never a silent pass."""


class Report:
    """Violations by rule, in the order the rules run."""

    def __init__(self):
        self.rules = {}
        self.notes = []

    def rule(self, name, title):
        self.rules[name] = (title, [])

    def add(self, rule, line, details=()):
        self.rules[rule][1].append((line, list(details)))

    def count(self):
        return sum(len(v) for _, v in self.rules.values())

    def print(self, out):
        for name, (title, items) in self.rules.items():
            print("== %s: %s ==" % (name, title), file=out)
            for line, details in items:
                print("%s: %s" % (name, line), file=out)
                for d in details:
                    print("    " + d, file=out)
            if not items:
                print("ok", file=out)
        for n in self.notes:
            print("note: " + n, file=out)
        print("== summary ==", file=out)
        for name, (_, items) in self.rules.items():
            print("%-14s %d" % (name, len(items)), file=out)
        total = self.count()
        print("FAIL: %d violations" % total if total else "OK: layering holds", file=out)


# ---------------------------------------------------------------- sources

def strip_comments(text):
    """The text with C comments blanked (newlines kept: line numbers hold)."""
    def blank(m):
        s = m.group(0)
        if s[0] in "\"'":
            return s
        return re.sub(r"[^\n]", " ", s)
    return re.sub(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                  blank, text, flags=re.S)


INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"]+)[>"]', re.M)


def parse_includes(path):
    """[(line, name, quoted)] of a file's #include lines, #if or not."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = strip_comments(f.read())
    result = []
    for m in INCLUDE_RE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        result.append((line, m.group(2).strip(), m.group(1) == '"'))
    return result


class Tree:
    """The source files of the parts and how their includes resolve."""

    def __init__(self, src):
        self.src = os.path.abspath(src)
        self.files = []
        for part in PARTS:
            top = os.path.join(self.src, part)
            for d, dirs, names in os.walk(top):
                dirs.sort()
                for n in sorted(names):
                    if n.endswith((".c", ".h")):
                        self.files.append(os.path.relpath(os.path.join(d, n), self.src))
        if not self.files:
            raise InputError("no C sources under %s (%s): wrong --src?"
                             % (self.src, ", ".join(PARTS)))
        self.includes = {f: parse_includes(os.path.join(self.src, f)) for f in self.files}

    def resolve(self, name, quoted, frm):
        """The tree file an include names (relative path), or None."""
        dirs = ([os.path.dirname(frm)] if quoted else []) + INCLUDE_DIRS
        for d in dirs:
            p = os.path.normpath(os.path.join(d, name))
            if os.path.isfile(os.path.join(self.src, p)):
                return p
        return None

    def headers_of(self, part):
        """Names under which part/'s headers could be included."""
        names = set()
        for f in self.files:
            if f.startswith(part + "/") and f.endswith(".h"):
                names.add(os.path.basename(f))
                names.add(os.path.relpath(f, part))
        return names


def under(path, part):
    return path is not None and (path + "/").startswith(part + "/")


def matches(name, patterns):
    return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(os.path.basename(name), p)
               for p in patterns)


def dpdk_headers():
    """Header names in DPDK's include folders (pkg-config), if it is there."""
    try:
        out = subprocess.run(["pkg-config", "--cflags-only-I", "libdpdk"],
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return set()
    names = set()
    for flag in out.split():
        d = flag[2:]
        if "dpdk" not in d or not os.path.isdir(d):
            continue
        for root, _, files in os.walk(d):
            names.update(os.path.relpath(os.path.join(root, n), d) for n in files)
    return names


def system_include_dirs():
    """The C compiler's default <...> search path, or None without a compiler."""
    cc = os.environ.get("CC", "cc").split()
    try:
        err = subprocess.run(cc + ["-xc", "-E", "-Wp,-v", "-"], input="", capture_output=True,
                             text=True, timeout=30).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"#include <\.\.\.> search starts here:\n(.*?)\nEnd of search list", err, re.S)
    return [l.strip() for l in m.group(1).splitlines()] if m else None


class IncludeRules:
    """Who may include what: from_part() gives the reason an include breaks a rule, or None."""

    def __init__(self, tree):
        self.tree = tree
        self.dpdk = dpdk_headers()
        self.sysdirs = system_include_dirs()
        self.agent_h = tree.headers_of("agent")
        self.dp_h = tree.headers_of("dataplane")

    def is_dpdk(self, name):
        return name in self.dpdk or matches(name, ["rte_*", "generic/rte_*"])

    def from_part(self, name, quoted, res, part):
        """Reason a file in part/ may not include name (resolved to res)."""
        if part in ("control", "agent") and self.is_dpdk(name):
            return "DPDK header in %s/" % part
        if part in ("control", "agent") and (under(res, "dataplane") or (
                quoted and res is None and (name in self.dp_h or matches(name, ["dp_*.h"])))):
            return "dataplane/ header in %s/" % part
        if part in ("control", "dataplane") and (under(res, "agent") or (
                quoted and res is None and name in self.agent_h)):
            return "agent/ header in %s/" % part
        if part == "dataplane" and res == "include/cais/cais.h":
            return "<cais/cais.h> is the agent's API, not the dataplane's"
        if part in ("common", "include"):
            return self.libc_only(name, res, part)
        return None

    def libc_only(self, name, res, part):
        own = "include/cais" if part == "include" else part
        if res is not None:
            return None if under(res, own) else "%s/ includes only libc and its own" % own
        if self.is_dpdk(name) or matches(name, THIRD_PARTY):
            return "third-party header in %s/ (libc and system only)" % own
        if self.sysdirs is not None and not any(
                os.path.isfile(os.path.join(d, name)) for d in self.sysdirs):
            return "not a system header (not in the compiler's default path)"
        return None

    def check(self, report):
        for f in self.tree.files:
            part = f.split("/")[0]
            for line, name, quoted in self.tree.includes[f]:
                res = self.tree.resolve(name, quoted, f)
                why = self.from_part(name, quoted, res, part)
                if why:
                    shown = '"%s"' % name if quoted else "<%s>" % name
                    target = " (%s)" % res if res and res != name else ""
                    report.add("include", "%s:%d: #include %s%s: %s"
                               % (f, line, shown, target, why))


# ---------------------------------------------------------------- graphs

def sccs(nodes, edges):
    """Strongly connected components (Tarjan), each a sorted list."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def shortest_cycle(start, edges, comp):
    """A shortest path start -> ... -> start inside comp (breadth first)."""
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(edges.get(v, ())):
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return list(reversed(path)) + [start]
                if w in comp and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return [start]


def check_include_cycles(tree, report):
    edges = {}
    for f in tree.files:
        for _, name, quoted in tree.includes[f]:
            res = tree.resolve(name, quoted, f)
            if res is not None:
                edges.setdefault(f, set()).add(res)
    for comp in sccs(tree.files, edges):
        if len(comp) > 1 or comp[0] in edges.get(comp[0], ()):
            cycle = shortest_cycle(comp[0], edges, set(comp))
            extra = [] if len(comp) == len(cycle) - 1 else ["all in the cycle: " + ", ".join(comp)]
            report.add("include-cycle", " -> ".join(cycle), extra)


# ---------------------------------------------------------------- objects

def load_objects(build, src):
    """{source (relative to src): [object paths]} from compile_commands.json."""
    path = os.path.join(build, "compile_commands.json")
    try:
        with open(path) as f:
            entries = json.load(f)
    except (OSError, ValueError) as e:
        raise InputError("cannot read %s (%s): is --build a configured meson build dir?"
                         % (path, e))
    objects = {}
    for e in entries:
        d = e.get("directory", build)
        source = os.path.relpath(os.path.normpath(os.path.join(d, e["file"])), src)
        obj = os.path.normpath(os.path.join(d, e["output"]))
        objects.setdefault(source, []).append(obj)
    return objects


def pick_object(source, candidates, build):
    """The object built in the source's own build folder, else any; it must exist."""
    own = os.path.join(build, os.path.dirname(source)) + "/"
    obj = min(candidates, key=lambda o: (os.path.dirname(os.path.dirname(o)) + "/" != own, o))
    if not os.path.isfile(obj):
        raise InputError("%s: object %s is missing: run `meson compile -C %s` first"
                         % (source, obj, build))
    return obj


def nm(args, path):
    """[(name, type)] that nm lists for path."""
    try:
        r = subprocess.run(["nm", "-P"] + args + [path], capture_output=True, text=True)
    except OSError as e:
        raise InputError("cannot run nm (binutils): %s" % e)
    if r.returncode != 0:
        raise InputError("nm %s: %s" % (path, r.stderr.strip()))
    syms = []
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            syms.append((parts[0].split("@")[0], parts[1]))
    return syms


class Symbols:
    """Global definitions and undefined references of one object file."""

    def __init__(self, obj):
        syms = nm([], obj)
        self.defined = {n for n, t in syms if t in NM_DEFINED}
        self.undefined = {n for n, t in syms if t in NM_UNDEFINED}


def group_sources(tree, folder, left_out):
    return [f for f in tree.files if os.path.dirname(f) == folder and f.endswith(".c")
            and os.path.basename(f) not in left_out]


def symbol_list(syms, most=2):
    s = sorted(syms)
    return ", ".join(s[:most]) + (" (+%d more)" % (len(s) - most) if len(s) > most else "")


class Build:
    """The objects of the build, read once."""

    def __init__(self, tree, build, skip):
        self.tree, self.build, self.skip = tree, os.path.abspath(build), skip
        self.objects = load_objects(self.build, tree.src)
        self.symbols = {}

    def of(self, source):
        """Symbols of the object compiled from source, or None when none is."""
        if source not in self.objects:
            return None
        if source not in self.symbols:
            obj = pick_object(source, self.objects[source], self.build)
            if os.path.getmtime(obj) < os.path.getmtime(os.path.join(self.tree.src, source)):
                print("warning: %s is older than %s (stale build?)" % (obj, source),
                      file=sys.stderr)
            self.symbols[source] = Symbols(obj)
        return self.symbols[source]

    def group(self, name, report):
        """{source: Symbols} of a call group; unbuilt sources are violations."""
        folder, left_out = CALL_GROUPS[name]
        found = {}
        for s in group_sources(self.tree, folder, left_out):
            syms = self.of(s)
            if syms is None:
                report.add("not-built", "%s: compiled by no target of %s (not in a meson.build?):"
                           " its calls go unchecked" % (s, self.build))
            else:
                found[s] = syms
        return found

    def check_calls(self, report):
        groups = {}
        for name in CALL_GROUPS:
            if name in self.skip:
                report.notes.append("%s: skipped (--skip %s: not built here)" % (name, name))
                continue
            groups[name] = self.group(name, report)
            check_call_cycles(name, groups[name], report)
        self.check_cross_calls(groups, report)

    def check_cross_calls(self, groups, report):
        agent = self.all_in("agent")
        dp = self.all_in("dataplane") if "dataplane" in groups else {}
        for users, owners in ((agent, dp), (dp, agent)):
            for user, syms in sorted(users.items()):
                for owner, osyms in sorted(owners.items()):
                    common = syms.undefined & osyms.defined
                    if common:
                        report.add("cross-call", "%s uses %s of %s"
                                   % (user, symbol_list(common), owner))
        for s in [f for f in self.tree.files if f.startswith("control/") and f.endswith(".c")]:
            syms = self.of(s)
            dpdk = {n for n in syms.undefined if n.startswith("rte_")} if syms else set()
            if dpdk:
                report.add("cross-call", "%s uses DPDK: %s" % (s, symbol_list(dpdk)))

    def all_in(self, folder):
        """{source: Symbols} of every built source under folder/, main.c included."""
        out = {}
        for s in self.tree.files:
            if s.startswith(folder + "/") and s.endswith(".c"):
                syms = self.of(s)
                if syms is not None:
                    out[s] = syms
        return out


def check_call_cycles(name, objs, report):
    definer = {}
    for s, syms in objs.items():
        for d in syms.defined:
            definer.setdefault(d, set()).add(s)
    edges, why = {}, {}
    for s, syms in objs.items():
        for u in syms.undefined:
            for t in definer.get(u, ()):
                if t != s:
                    edges.setdefault(s, set()).add(t)
                    why.setdefault((s, t), set()).add(u)
    for comp in sccs(objs.keys(), edges):
        if len(comp) < 2:
            continue
        names = [os.path.basename(c) for c in comp]
        lines = ["%s -> %s: %s" % (a, b, symbol_list(why[(a, b)]))
                 for a in comp for b in sorted(edges.get(a, ())) if b in comp]
        report.add("call-cycle", "%s: %d files call each other: %s"
                   % (name, len(comp), " ".join(names)), lines)


# ---------------------------------------------------------------- exports

C_WORDS = {"void", "char", "short", "int", "long", "float", "double", "signed", "unsigned",
           "const", "volatile", "extern", "inline", "struct", "enum", "union", "sizeof"}


def declared_api(path):
    """Names of the non-static functions and objects a header declares."""
    with open(path, encoding="utf-8") as f:
        text = strip_comments(f.read())
    text = re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", "", text, flags=re.M)
    text = re.sub(r'extern\s*"C"\s*\{', "", text)
    text = re.sub(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)", "", text)
    flat, depth = [], 0
    for ch in text:
        if ch == "{":
            depth += 1
        elif ch == "}":
            if depth == 0:
                continue
            depth -= 1
            if depth == 0:
                flat.append(";")
        elif depth == 0:
            flat.append(ch)
    names = set()
    for decl in "".join(flat).split(";"):
        decl = " ".join(decl.split())
        if not decl or re.match(r"(static|typedef)\b", decl):
            continue
        pointer = re.search(r"\(\s*\*\s*([A-Za-z_]\w*)\s*\)", decl)
        called = [n for n in re.findall(r"\b([A-Za-z_]\w*)\s*\(", decl)
                  if not n.startswith("__") and n not in C_WORDS]
        if pointer:
            names.add(pointer.group(1))
        elif called:
            names.add(called[0])
        elif decl.startswith("extern "):
            m = re.search(r"([A-Za-z_]\w*)\s*(\[[^\]]*\])?$", decl)
            if m:
                names.add(m.group(1))
    return names


def find_libcais(build):
    d = os.path.join(build, "agent")
    for name in ["libcais.so"] + sorted(os.listdir(d) if os.path.isdir(d) else []):
        p = os.path.join(d, name)
        if name.startswith("libcais.so") and os.path.isfile(p):
            return p
    raise InputError("no libcais.so in %s: run `meson compile -C %s` first" % (d, build))


def check_exports(b, report):
    lib = find_libcais(b.build)
    header = os.path.join(b.tree.src, "include", "cais", "cais.h")
    api = declared_api(header)
    where = {}
    for s in b.objects:
        syms = b.of(s) if s.startswith(("agent/", "control/", "common/")) else None
        for d in syms.defined if syms else ():
            where.setdefault(d, s)
    exported = nm(["-D", "--defined-only"], lib)
    for name, t in sorted(exported, key=lambda x: (where.get(x[0], ""), x[0])):
        if t in "AU" or name in LINKER_SYMBOLS:
            continue
        src = where.get(name, "defined where unknown")
        if not name.startswith("cais_"):
            report.add("export", "%s (%s, %s): exported, not cais_*" % (name, t, src))
        elif name not in api:
            report.add("export", "%s (%s, %s): exported, not declared in include/cais/cais.h"
                       % (name, t, src))


# ---------------------------------------------------------------- main

def check(src, build, skip, out):
    report = Report()
    report.rule("include", "who includes what")
    report.rule("include-cycle", "files that include themselves through others")
    report.rule("call-cycle", "files of agent/, dataplane/, control/manager/ calling each other")
    report.rule("cross-call", "agent/ <-> dataplane/ symbols, DPDK in control/")
    report.rule("not-built", "sources the call check cannot see")
    report.rule("export", "libcais.so exports beyond include/cais/cais.h")
    print("check-layering: source %s, build %s" % (os.path.abspath(src), os.path.abspath(build)),
          file=out, flush=True)
    tree = Tree(src)
    IncludeRules(tree).check(report)
    check_include_cycles(tree, report)
    b = Build(tree, build, skip)
    b.check_calls(report)
    check_exports(b, report)
    report.print(out)
    return 1 if report.count() else 0


def main(argv):
    p = argparse.ArgumentParser(
        description=__doc__,
        epilog="Run after `meson compile`: the call and export checks read the build's objects.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--src", help="the source root (where agent/, dataplane/, control/ are)")
    p.add_argument("--build", help="the meson build dir (compile_commands.json, objects)")
    p.add_argument("--skip", action="append", default=[], choices=sorted(CALL_GROUPS),
                   help="a call group the build lacks (dataplane without DPDK); repeatable")
    p.add_argument("--selftest", action="store_true",
                   help="check the checker on a small tree of its own (needs gcc, nm)")
    args = p.parse_args(argv)
    try:
        if args.selftest:
            return selftest()
        if not args.src or not args.build:
            p.print_usage(sys.stderr)
            print("check-layering: --src and --build are required", file=sys.stderr)
            return 2
        return check(args.src, args.build, set(args.skip), sys.stdout)
    except InputError as e:
        print("check-layering: error: %s" % e, file=sys.stderr)
        return 2


# ---------------------------------------------------------------- self-test

# A tree with one violation of each kind; CLEAN tells what the clean variant
# writes instead. Files are (path, text); "*.c" of the call groups are built.
BROKEN = {
    "include/cais/cais.h": "int cais_ok(void);\nstatic inline int cais_inl(void) { return 0; }\n",
    "include/cais/proto.h": "#include <stdint.h>\n",
    "agent/h1.h": '#pragma once\n#include "h2.h"\n',
    "agent/h2.h": '#pragma once\n#include "h1.h"\n',
    "agent/quant.h": "int quant(void);\n",
    "agent/a.c": '#include "dp_x.h"\n#include "h1.h"\nint b_fn(void);\n'
                 "int a_fn(void) { return b_fn(); }\nint cais_ok(void) { return 0; }\n"
                 "int cais_extra(void) { return 1; }\n",
    "agent/b.c": "int a_fn(void);\nint perf(void);\nint b_fn(void) { return a_fn() + perf(); }\n"
                 "int dp_fn(void);\nint b_dp(void) { return dp_fn(); }\n",
    "agent/perf.c": "int a_fn(void);\nint perf(void) { return a_fn(); }\n",
    "agent/orphan.c": "int orphan(void) { return 0; }\n",
    "dataplane/dp_x.h": "int dp_fn(void);\n",
    "dataplane/dp_x.c": "#include <cais/cais.h>\nint dp_fn(void) { return 0; }\n",
    "control/ctl_x.c": "/* #include <rte_ring.h> is commented out */\n#include <rte_mbuf.h>\n",
    "control/manager/m1.c": "int m2(void);\nint main_helper(void);\n"
                            "int m1(void) { return m2() + main_helper(); }\n",
    "control/manager/m2.c": "int m2(void) { return 0; }\n",
    "control/manager/main.c": "int m1(void);\nint main_helper(void) { return 0; }\n"
                              "int main(void) { return m1(); }\n",
    "common/cmn.c": "#include <string.h>\n#include <jansson.h>\n",
}
CLEAN = dict(BROKEN)
HIDDEN = '__attribute__((visibility("hidden"))) '
CLEAN.update({
    "agent/h2.h": "int h2(void);\n",
    "agent/a.c": '#include "h1.h"\nint b_fn(void);\n' + HIDDEN
                 + "int a_fn(void) { return b_fn(); }\nint cais_ok(void) { return 0; }\n",
    "agent/b.c": HIDDEN + "int b_fn(void) { return 0; }\n",
    "dataplane/dp_x.c": "#include <cais/proto.h>\nint dp_fn(void) { return 0; }\n",
    "control/ctl_x.c": "/* #include <rte_ring.h> is commented out */\n#include <stdio.h>\n",
    "common/cmn.c": "#include <string.h>\n",
})
del CLEAN["agent/orphan.c"]

EXPECTED = [
    'include: agent/a.c:1: #include "dp_x.h" (dataplane/dp_x.h): dataplane/ header in agent/',
    "include: dataplane/dp_x.c:1: #include <cais/cais.h> (include/cais/cais.h): <cais/cais.h>",
    "include: control/ctl_x.c:2: #include <rte_mbuf.h>: DPDK header in control/",
    "include: common/cmn.c:2: #include <jansson.h>: third-party header in common/",
    "include-cycle: agent/h1.h -> agent/h2.h -> agent/h1.h",
    "call-cycle: agent: 2 files call each other: a.c b.c",
    "    agent/a.c -> agent/b.c: b_fn",
    "    agent/b.c -> agent/a.c: a_fn",
    "cross-call: agent/b.c uses dp_fn of dataplane/dp_x.c",
    "not-built: agent/orphan.c: compiled by no target",
    "export: a_fn (T, agent/a.c): exported, not cais_*",
    "export: cais_extra (T, agent/a.c): exported, not declared in include/cais/cais.h",
    "export: b_dp (T, agent/b.c): exported, not cais_*",
    "FAIL: 12 violations",
]
NOT_EXPECTED = ["perf.c ->", "main.c ->", "m1.c -> ", "rte_ring", "cais_ok ", "cais_inl",
                "string.h"]


# What declared_api() must make of a header: only the non-static names.
API_HEADER = """#ifndef API_H
#define API_H
#define CAIS_CALL(x) cais_macro(x)
#ifdef __cplusplus
extern "C" {
#endif
struct cais_s { int (*cais_member)(int); int n; };
enum cais_e { CAIS_A = 0 };
typedef void (*cais_cb)(int);
/** cais_in_comment() */
int cais_fn(struct cais_s *s,
\tint n);
const struct cais_s *cais_get(void) __attribute__((pure));
__attribute__((visibility("default"))) void cais_vis(void);
extern int cais_object;
extern const char cais_table[4];
extern int (*cais_hook)(int);
static inline int cais_inline(void) { return cais_fn(0, 0); }
#ifdef __cplusplus
}
#endif
#endif
"""
API_DECLARED = {"cais_fn", "cais_get", "cais_vis", "cais_object", "cais_table", "cais_hook"}


def gcc(args):
    r = subprocess.run(["gcc"] + args, capture_output=True, text=True)
    if r.returncode != 0:
        raise InputError("--selftest: gcc %s: %s" % (" ".join(args), r.stderr[-2000:]))


def make_tree(root, files):
    """Writes files under root/src, compiles the groups' sources into root/src/build."""
    src = os.path.join(root, "src")
    build = os.path.join(src, "build")
    for path, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(src, path)), exist_ok=True)
        with open(os.path.join(src, path), "w") as f:
            f.write(text)
    commands, agent_objs = [], []
    incs = ["-I" + os.path.join(src, d) for d in INCLUDE_DIRS]
    for path in sorted(files):
        folder = os.path.dirname(path)
        if not path.endswith(".c") or folder not in [g[0] for g in CALL_GROUPS.values()] \
                or path == "agent/orphan.c":
            continue
        out = os.path.join(folder, "lib.p", os.path.basename(path) + ".o")
        os.makedirs(os.path.join(build, os.path.dirname(out)), exist_ok=True)
        gcc(["-c", "-fPIC", "-I" + os.path.join(src, folder)] + incs
            + ["-o", os.path.join(build, out), os.path.join(src, path)])
        commands.append({"directory": build, "file": os.path.join("..", path), "output": out})
        if folder == "agent" and path != "agent/perf.c":
            agent_objs.append(os.path.join(build, out))
    with open(os.path.join(build, "compile_commands.json"), "w") as f:
        json.dump(commands, f)
    gcc(["-shared", "-o", os.path.join(build, "agent", "libcais.so")] + agent_objs)
    return src, build


def run_checker(src, build, *extra):
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--src", src,
                        "--build", build] + list(extra), capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def selftest():
    if shutil.which("gcc") is None or shutil.which("nm") is None:
        raise InputError("--selftest needs gcc and nm")
    failures = []
    with tempfile.TemporaryDirectory(prefix="check-layering-") as tmp:
        header = os.path.join(tmp, "api.h")
        with open(header, "w") as f:
            f.write(API_HEADER)
        got = declared_api(header)
        if got != API_DECLARED:
            failures.append("declared_api: got %s, want %s" % (sorted(got), sorted(API_DECLARED)))

        src, build = make_tree(os.path.join(tmp, "broken"), BROKEN)
        rc, out = run_checker(src, build)
        if rc != 1:
            failures.append("broken tree: exit %d, want 1" % rc)
        failures += ["broken tree: missing %r" % e for e in EXPECTED if e not in out.splitlines()
                     and not any(l.startswith(e) for l in out.splitlines())]
        failures += ["broken tree: unexpected %r" % n for n in NOT_EXPECTED if n in out]
        broken_out = out

        src, build = make_tree(os.path.join(tmp, "clean"), CLEAN)
        rc, out = run_checker(src, build)
        if rc != 0 or "OK: layering holds" not in out:
            failures.append("clean tree: exit %d, want 0:\n%s" % (rc, out))

        os.remove(os.path.join(build, "dataplane", "lib.p", "dp_x.c.o"))
        rc, miss = run_checker(src, build)
        if rc != 2 or "dp_x.c.o is missing" not in miss:
            failures.append("missing object: exit %d, want 2:\n%s" % (rc, miss))
        rc, skip = run_checker(src, build, "--skip", "dataplane")
        if rc != 0 or "note: dataplane: skipped" not in skip:
            failures.append("--skip dataplane: exit %d, want 0 and a note:\n%s" % (rc, skip))
        os.remove(os.path.join(build, "agent", "libcais.so"))
        rc, nolib = run_checker(src, build)
        if rc != 2:
            failures.append("missing libcais.so: exit %d, want 2:\n%s" % (rc, nolib))
    if failures:
        print("check-layering --selftest: FAIL\n" + "\n".join(failures))
        print("--- output on the broken tree ---\n" + broken_out)
        return 1
    print("check-layering --selftest: OK (broken tree: 12 violations found;"
          " clean tree passes; missing inputs exit 2)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
