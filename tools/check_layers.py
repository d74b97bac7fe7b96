#!/usr/bin/env python3
"""Fails the build when a file includes a header of a layer it may not use.

src/meson.build runs this before compiling the library, with the rules each folder's meson.build
declares:
  --layer NAME=DEP,DEP   folder src/NAME may include its own headers and those of the DEP folders
  --public NAME=H,H      the public headers include/tensortree/H belong to layer NAME ("tree.hpp",
                         or "detail/x.hpp" for the installed helpers of public templates)
  --foreign NAME=P,P     the system headers matching the patterns P ("mpi.h", "cuda*.h") are the
                         layer NAME's alone: an #include <...> of one anywhere else fails
  --internal NAME=P,P    layer NAME is a client of the layers it may use: of their internal headers
                         it may include only those matching the patterns P ("core/*",
                         "memmap/memmap_fs.hpp"), the exceptions its meson.build gives a reason for;
                         their public headers it may include as any other layer
Every source and header under src/ and every public header is checked: an internal header is named
by folder path ("tree/layout_plan.hpp"), a public one as "tensortree/tree.hpp" or
"tensortree/detail/object_archive.hpp". A file whose folder
is not a declared layer, or a public header that belongs to no layer, is an error too, so a new
file cannot slip past the rules. Writes a depfile so that Ninja reruns it when any file changes.
"""

import argparse
import fnmatch
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SYSTEM_INCLUDE = re.compile(r'^\s*#\s*include\s+<([^>]+)>', re.M)
SOURCE_SUFFIXES = {".cpp", ".hpp", ".cu", ".h"}


def parse_pairs(values):
    """NAME=A,B pairs as {NAME: [A, B]}; a name given again adds to its list (each part of a layer
    declares its own public headers)."""
    table = {}
    for value in values:
        name, _, items = value.partition("=")
        table.setdefault(name, []).extend(item for item in items.split(",") if item)
    return table


def layer_of_source(path, src_root, layers):
    """The longest declared layer folder that holds `path` (transport/mpi before transport)."""
    relative = path.relative_to(src_root).as_posix()
    matches = [name for name in layers if relative.startswith(name + "/")]
    return max(matches, key=len) if matches else None


def allowed_layers(layer, layers):
    return {layer, *layers[layer]}


def check_include(include, allowed, layers, public_layer):
    """None when `include` may be used from a file whose allowed layers are `allowed`; else why not."""
    if include.startswith("tensortree/"):
        header = include.removeprefix("tensortree/")
        owner = public_layer.get(header)
        if owner is None:
            return f"public header {include} belongs to no layer (declare it with --public)"
        return None if owner in allowed else f"{include} is a public header of layer '{owner}'"
    folder = next((name for name in sorted(layers, key=len, reverse=True)
                   if include.startswith(name + "/")), None)
    if folder is None:
        return None  # a header beside the file (tests, tools) or a system header in quotes
    return None if folder in allowed else f"{include} is in layer '{folder}'"


def check_client_include(include, layer, internal, layers):
    """None unless `layer` is a client (--internal) and `include` is another layer's internal header
    that none of its patterns names; else why not."""
    patterns = internal.get(layer)
    if patterns is None or include.startswith("tensortree/") or include.startswith(layer + "/"):
        return None
    if not any(include.startswith(name + "/") for name in layers):
        return None
    if any(fnmatch.fnmatchcase(include, pattern) for pattern in patterns):
        return None
    return f"{include} is an internal header, not one of the exceptions of client layer '{layer}'"


def check_system_include(include, allowed, foreign):
    """None when `include` (an #include <...>) is no layer's own or one of `allowed`'s; else why not."""
    owners = sorted(layer for layer, patterns in foreign.items()
                    if any(fnmatch.fnmatchcase(include, pattern) for pattern in patterns))
    if not owners or allowed.intersection(owners):
        return None
    return f"<{include}> may be included only by layer {' or '.join(repr(o) for o in owners)}"


def is_library_header(include, layers):
    return include.startswith("tensortree/") or any(include.startswith(name + "/") for name in layers)


def line_of(text, match):
    return text.count("\n", 0, match.start()) + 1


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--src", required=True, type=pathlib.Path)
    parser.add_argument("--include", required=True, type=pathlib.Path)
    parser.add_argument("--layer", action="append", default=[])
    parser.add_argument("--public", action="append", default=[])
    parser.add_argument("--foreign", action="append", default=[])
    parser.add_argument("--internal", action="append", default=[])
    parser.add_argument("--stamp", required=True, type=pathlib.Path)
    parser.add_argument("--depfile", required=True, type=pathlib.Path)
    args = parser.parse_args()

    layers = parse_pairs(args.layer)
    foreign = parse_pairs(args.foreign)
    internal = parse_pairs(args.internal)
    public_layer = {header: layer for layer, headers in parse_pairs(args.public).items()
                    for header in headers}
    problems = []
    for dep_list in layers.values():
        problems += [f"unknown layer '{dep}' in the rules" for dep in dep_list if dep not in layers]
    problems += [f"unknown layer '{layer}' in --foreign" for layer in foreign if layer not in layers]
    problems += [f"unknown layer '{layer}' in --internal" for layer in internal if layer not in layers]

    checked = []
    files = [(path, layer_of_source(path, args.src, layers))
             for path in sorted(args.src.rglob("*")) if path.suffix in SOURCE_SUFFIXES]
    for path in sorted(args.include.glob("*.hpp")) + sorted(args.include.glob("detail/*.hpp")):
        owner = public_layer.get(path.relative_to(args.include).as_posix())
        if owner is None:
            problems.append(f"{path}: public header belongs to no layer (declare it with --public)")
        files.append((path, owner))
    for path, layer in files:
        checked.append(path)
        if layer is None:
            if path.is_relative_to(args.src):
                problems.append(f"{path}: its folder is not a declared layer")
            continue
        allowed = allowed_layers(layer, layers)
        text = path.read_text(encoding="utf-8")
        for match in INCLUDE.finditer(text):
            why = (check_include(match.group(1), allowed, layers, public_layer) or
                   check_client_include(match.group(1), layer, internal, layers))
            if why:
                may = ", ".join(sorted(allowed))
                problems.append(f"{path}:{line_of(text, match)}: layer '{layer}' may include only {may}: {why}")
        # A foreign header is the layer's own, not its dependents': <mpi.h> in transport/mpi alone
        # (and "mpi.h" in quotes, which the compiler finds on the same paths; a quoted path into a
        # layer's folder, "cuda/cuda_ipc.hpp", is the library's own).
        for match in [*SYSTEM_INCLUDE.finditer(text), *INCLUDE.finditer(text)]:
            if match.re is INCLUDE and is_library_header(match.group(1), layers):
                continue
            why = check_system_include(match.group(1), {layer}, foreign)
            if why:
                problems.append(f"{path}:{line_of(text, match)}: {why}")

    if problems:
        print("layering violations:", *problems, sep="\n  ", file=sys.stderr)
        return 1
    args.stamp.write_text("// Written by tools/check_layers.py: the includes follow the layer rules.\n")
    deps = " ".join(str(path.resolve()).replace(" ", "\\ ") for path in checked)
    args.depfile.write_text(f"{args.stamp}: {deps}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
