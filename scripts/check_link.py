#!/usr/bin/env python3
"""Fails when a shared library has an undefined dynamic symbol that its declared dependencies do
not provide (docs/design.md, "Link mode").

For each LIBRARY: the strong (non-weak) undefined symbols of its .dynsym (``readelf --dyn-syms``)
must each be defined, with the same symbol version, by the library itself or by one of the
libraries in its DT_NEEDED closure, found the way the dynamic loader finds them: a NEEDED name
with a slash as a path ($ORIGIN = the directory of the object that needs it), otherwise DT_RPATH
(when there is no DT_RUNPATH), LD_LIBRARY_PATH and --lib-path, DT_RUNPATH, the ldconfig cache and
the default directories. A symbol that only some other object in the process would provide (the
executable, another LD_PRELOAD library, a library the linker reached indirectly at link time) is
an error: that is what made the preload stop programs at start ("symbol lookup error").

``--twin TWIN CORE`` also checks that the link-time twin of the core exports the same dynamic
symbols and needs the same libraries as the core that is loaded at run time.

Usage:
  check_link.py [--lib-path DIR]... [--twin TWIN CORE] [--remove-on-failure] LIBRARY...
  check_link.py $(python -m dftracer --preload-path) "$(dirname $(python -m dftracer --preload-path))/libdftracer_core.so"

Exit status 0 when every library passes, 1 when one does not (each missing symbol is printed
with the library that needs it), 2 on a usage error or a library that cannot be read.
Needs binutils' readelf (or READELF=path)."""

import argparse
import os
import re
import shutil
import subprocess
import sys

READELF = os.environ.get("READELF") or shutil.which("readelf") or "readelf"
_DYN_RE = re.compile(r"^\s*0x[0-9a-f]+\s+\((\w+)\)\s+.*?\[(.*)\]\s*$")
# "   12: 0000000000000000     0 FUNC    GLOBAL DEFAULT  UND _ZdlPvm@CXXABI_1.3.9 (4)"
_SYM_RE = re.compile(r"^\s*\d+:\s+[0-9a-f]+\s+\S+\s+(\w+)\s+(\w+)\s+(\w+)\s+(\S+)\s+(\S+)")


class ElfError(Exception):
    pass


def _readelf(args, path):
    try:
        res = subprocess.run([READELF, "-W", *args, path], capture_output=True, text=True, check=False)
    except FileNotFoundError as exc:
        raise ElfError(f"cannot run {READELF} (binutils): {exc}") from exc
    if res.returncode != 0 or "Not an ELF file" in res.stderr:
        raise ElfError(f"{path}: readelf failed: {res.stderr.strip() or res.returncode}")
    return res.stdout


def dynamic_entries(path):
    """{'NEEDED': [names in order], 'RPATH': [...], 'RUNPATH': [...], 'SONAME': [...]}."""
    out = {"NEEDED": [], "RPATH": [], "RUNPATH": [], "SONAME": []}
    for line in _readelf(["-d"], path).splitlines():
        m = _DYN_RE.match(line)
        if m and m.group(1) in out:
            out[m.group(1)].append(m.group(2))
    return out


def dynamic_symbols(path):
    """(defined, undefined): defined is a set of (name, version, default); undefined a list of
    (name, version, weak). version is None for an unversioned symbol."""
    defined, undefined = set(), []
    for line in _readelf(["--dyn-syms"], path).splitlines():
        m = _SYM_RE.match(line)
        if not m:
            continue
        bind, _vis, ndx, raw = m.group(2), m.group(3), m.group(4), m.group(5)
        if bind == "LOCAL" or not raw:
            continue
        if "@@" in raw:
            name, version, default = *raw.split("@@", 1), True
        elif "@" in raw:
            name, version, default = *raw.split("@", 1), False
        else:
            name, version, default = raw, None, True
        if ndx == "UND":
            undefined.append((name, version, bind == "WEAK"))
        else:
            defined.add((name, version, default))
    return defined, undefined


def _ldconfig_cache():
    cache = {}
    exe = shutil.which("ldconfig") or "/sbin/ldconfig"
    try:
        text = subprocess.run([exe, "-p"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return cache
    want64 = sys.maxsize > 2**32
    for line in text.splitlines():
        m = re.match(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)", line)
        if m and (("64" in m.group(2)) == want64 or "x32" in m.group(2)):
            cache.setdefault(m.group(1), m.group(3))
    return cache


DEFAULT_DIRS = ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"]


class Resolver:
    def __init__(self, lib_path):
        self.lib_path = list(lib_path)
        env = os.environ.get("LD_LIBRARY_PATH", "")
        self.ld_library_path = [d for d in env.split(":") if d]
        self._cache = None

    def _expand(self, entry, origin):
        return entry.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)

    def find(self, name, loader_path, rpath_chain, runpath):
        """Path of NEEDED `name` of the object at loader_path, or None."""
        origin = os.path.dirname(os.path.abspath(loader_path))
        if "/" in name:
            path = self._expand(name, origin)
            if os.path.exists(path):
                return path
            # Build tree only: the core is not next to the preload there (--lib-path names it).
            for d in self.lib_path:
                cand = os.path.join(d, os.path.basename(path))
                if os.path.exists(cand):
                    return cand
            return None
        dirs = []
        if not runpath:
            dirs += rpath_chain
        dirs += self.ld_library_path + self.lib_path
        dirs += [self._expand(d, origin) for d in runpath]
        for d in dirs:
            cand = os.path.join(d, name)
            if os.path.exists(cand):
                return cand
        if self._cache is None:
            self._cache = _ldconfig_cache()
        if name in self._cache:
            return self._cache[name]
        for d in DEFAULT_DIRS:
            cand = os.path.join(d, name)
            if os.path.exists(cand):
                return cand
        return None


def check_library(path, resolver):
    """List of problems (strings) for one library; empty when every strong undefined dynamic
    symbol is provided by the library or its NEEDED closure."""
    problems = []
    defined, undefined = dynamic_symbols(path)
    # Breadth-first over the NEEDED closure, as the loader builds the library's search scope.
    seen = {}
    queue = [(path, [])]
    providers = []
    while queue:
        obj, inherited_rpath = queue.pop(0)
        dyn = dynamic_entries(obj)
        obj_dir = os.path.dirname(os.path.abspath(obj))
        own_rpath = [resolver._expand(d, obj_dir) for entry in dyn["RPATH"] for d in entry.split(":") if d]
        runpath = [d for entry in dyn["RUNPATH"] for d in entry.split(":") if d]
        chain = own_rpath + inherited_rpath
        for name in dyn["NEEDED"]:
            if name in seen:
                continue
            found = resolver.find(name, obj, chain, runpath)
            seen[name] = found
            if found is None:
                problems.append(f"NEEDED {name} (of {obj}) not found")
                continue
            providers.append(found)
            queue.append((found, chain))
    all_defined = set(defined)
    for lib in providers:
        all_defined |= dynamic_symbols(lib)[0]
    by_name = {}
    for name, version, default in all_defined:
        by_name.setdefault(name, []).append((version, default))
    for name, version, weak in undefined:
        if weak:
            continue  # a weak reference may stay unresolved (the loader binds it to 0)
        defs = by_name.get(name, [])
        if version is None:
            ok = any(default for _v, default in defs)
        else:
            ok = any(v == version for v, _d in defs)
        if not ok:
            label = f"{name}@{version}" if version else name
            problems.append(f"undefined symbol {label} is provided by none of its NEEDED libraries")
    return problems


def check_twin(twin, core):
    """The link-time twin must export what the real core exports and need what it needs."""
    problems = []
    t_def, _ = dynamic_symbols(twin)
    c_def, _ = dynamic_symbols(core)
    if t_def != c_def:
        only_t = sorted(n for n, _v, _d in t_def - c_def)[:10]
        only_c = sorted(n for n, _v, _d in c_def - t_def)[:10]
        problems.append(f"twin and core export different symbols: only in twin {only_t}, only in core {only_c}")
    t_need = dynamic_entries(twin)["NEEDED"]
    c_need = dynamic_entries(core)["NEEDED"]
    if t_need != c_need:
        problems.append(f"twin NEEDED {t_need} != core NEEDED {c_need}")
    return problems


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("libraries", nargs="*", help="shared libraries to check")
    ap.add_argument(
        "--lib-path",
        action="append",
        default=[],
        metavar="DIR",
        help="also search DIR for NEEDED libraries (like LD_LIBRARY_PATH; build tree)",
    )
    ap.add_argument(
        "--twin", nargs=2, metavar=("TWIN", "CORE"), help="check that TWIN (link-time twin of the core) matches CORE"
    )
    ap.add_argument(
        "--remove-on-failure",
        action="store_true",
        help="delete the checked LIBRARY files when a check fails (build use: the next "
        "build relinks and checks again instead of finding an up-to-date bad library)",
    )
    args = ap.parse_args(argv)
    if not args.libraries and not args.twin:
        ap.error("nothing to check")
    resolver = Resolver(args.lib_path)
    failed = False
    try:
        for lib in args.libraries:
            if not os.path.isfile(lib):
                raise ElfError(f"{lib}: no such file")
            problems = check_library(lib, resolver)
            for p in problems:
                print(f"check_link: {lib}: {p}", file=sys.stderr)
            failed |= bool(problems)
            if not problems:
                print(
                    f"check_link: {os.path.basename(lib)}: every undefined symbol is provided by its NEEDED libraries"
                )
        if args.twin:
            problems = check_twin(*args.twin)
            for p in problems:
                print(f"check_link: {args.twin[0]}: {p}", file=sys.stderr)
            failed |= bool(problems)
            if not problems:
                print(
                    f"check_link: {os.path.basename(args.twin[0])}: same exports and NEEDED as {os.path.basename(args.twin[1])}"
                )
    except ElfError as exc:
        print(f"check_link: {exc}", file=sys.stderr)
        failed = 2
    if failed and args.remove_on_failure:
        for lib in args.libraries:
            if os.path.isfile(lib):
                os.remove(lib)
                print(f"check_link: removed {lib}", file=sys.stderr)
    return 2 if failed == 2 else 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
