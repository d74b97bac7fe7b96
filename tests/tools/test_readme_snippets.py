#!/usr/bin/env python3
"""Compiles every C++ snippet of README.md against the library just built, so that the README cannot
drift from the API; a snippet with its own main() also runs and must exit 0.

With --install-from BUILD, it also runs the README's install steps: the blocks marked
`<!-- readme-test: file NAME -->` are written to a scratch directory, and those marked
`<!-- readme-test: run -->` run there verbatim in one bash script, in order, with HOME a scratch
directory and no LD_LIBRARY_PATH. Only `meson` is stood in for, to keep it fast: `meson setup`
checks its options and records the prefix; `meson install` installs BUILD (already built) into
that prefix, as a build set up with those options would.

A fragment (no main) is compiled as the body of a function whose parameters are the names README
snippets use without declaring them (`traj`, `params`, `dir`...), in a block of its own so that a
fragment may declare them again. Every fragment is one function of a single file, so the library's
headers are parsed once; their #include lines go to its top, and #line directives make the
compiler's messages name README.md's lines.

Usage: test_readme_snippets.py README [--install-from BUILD] COMPILER... -- FLAGS...
       (FLAGS: include paths, the library)
"""

import concurrent.futures
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

PRELUDE = """\
#include <tensortree/tensortree.hpp>
#include <tensortree/dist_objects.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>
using namespace tensortree;
"""

# What README fragments use without declaring: the program's arguments and the trees and tensors
# a reader would have at hand.
FREE_NAMES = """\
[[maybe_unused]] int argc, [[maybe_unused]] char** argv,
[[maybe_unused]] TensorTree traj, [[maybe_unused]] TensorTree params, [[maybe_unused]] TensorTree tree,
[[maybe_unused]] TensorTree trajectory, [[maybe_unused]] TensorTree my_params,
[[maybe_unused]] TensorTree learner_batch, [[maybe_unused]] TensorTree received, [[maybe_unused]] TensorTree other,
[[maybe_unused]] TensorTree one_step, [[maybe_unused]] Tensor done_mask, [[maybe_unused]] Tensor obs, [[maybe_unused]] Tensor reward, [[maybe_unused]] std::int64_t T,
[[maybe_unused]] std::int64_t B, [[maybe_unused]] std::filesystem::path dir, [[maybe_unused]] std::filesystem::path dir2,
[[maybe_unused]] void (*act)(const TensorTree&, std::uint64_t)"""


def snippets(readme):
    """(line number, code) of every ```cpp block."""
    text = readme.read_text()
    for match in re.finditer(r"^```cpp\n(.*?)^```", text, re.S | re.M):
        yield text.count("\n", 0, match.start()) + 2, match.group(1)


# Stands in for `meson` in the README's install steps (see the docstring); TT_BUILD_DIR and
# TT_BUILD_PREFIX name the build installed and the prefix it was set up with.
MESON_STAND_IN = r"""
readme_prefix=/usr/local
meson() {
  case $1 in
    setup) shift; readme_meson_setup "$@" ;;
    install) readme_meson_install ;;
    *) echo "the README test stands in for 'meson setup' and 'meson install' only, not 'meson $1'" >&2; return 1 ;;
  esac
}
readme_meson_setup() {
  local tests_off=false
  while (($# > 0)); do
    case $1 in
      --prefix=*) readme_prefix=${1#--prefix=} ;;
      --prefix) readme_prefix=$2; shift ;;
      -Dtests=false) tests_off=true ;;
    esac
    shift
  done
  $tests_off || { echo "the README's meson setup leaves the tests in: -Dtests=false is missing" >&2; return 1; }
  [[ $readme_prefix == "$HOME"/* ]] || { echo "the README's prefix $readme_prefix is not under \$HOME: not installing there" >&2; return 1; }
}
readme_meson_install() {
  local stage pc
  stage=$(mktemp -d)
  command meson install -C "$TT_BUILD_DIR" --no-rebuild --quiet --destdir "$stage" >/dev/null
  mkdir -p "$readme_prefix"
  cp -a "$stage$TT_BUILD_PREFIX/." "$readme_prefix/"
  rm -rf "$stage"
  # A .pc that is not relocatable names the build's prefix; the README's build would name its own.
  pc=$(find "$readme_prefix" -name tensortree.pc -print -quit)
  sed -i "s|^prefix=/.*|prefix=$readme_prefix|" "$pc"
}
"""


def marked_blocks(readme):
    """(line number, kind, file name or None, code) of every block marked <!-- readme-test: ... -->."""
    text = readme.read_text()
    pattern = r"^<!-- readme-test: (run|file (\S+)) -->\n```\w+\n(.*?)^```"
    for match in re.finditer(pattern, text, re.S | re.M):
        kind = "run" if match.group(1) == "run" else "file"
        yield text.count("\n", 0, match.start()) + 3, kind, match.group(2), match.group(3)


def build_prefix(build_dir):
    options = json.loads(subprocess.run(["meson", "introspect", "--buildoptions", str(build_dir)],
                                        check=True, capture_output=True, text=True).stdout)
    return next(option["value"] for option in options if option["name"] == "prefix")


def run_install_steps(readme, build_dir, scratch):
    """Runs the README's marked install, pkg-config and CMake steps; an error message, or None."""
    blocks = list(marked_blocks(readme))
    runs = [block for block in blocks if block[1] == "run"]
    if not runs:
        return "README.md has no block marked <!-- readme-test: run -->: its install steps are untested"
    work, home = scratch / "project", scratch / "home"
    work.mkdir()
    home.mkdir()
    for _, _, name, code in (block for block in blocks if block[1] == "file"):
        (work / name).write_text(code)
    script = "set -euo pipefail\n" + MESON_STAND_IN + "".join(
        f"\necho '==> README.md:{line}'\n{code}" for line, _, _, code in runs)
    env = {name: value for name, value in os.environ.items()
           if name not in ("LD_LIBRARY_PATH", "PKG_CONFIG_PATH", "CMAKE_PREFIX_PATH")}
    env.update(HOME=str(home), TT_BUILD_DIR=str(build_dir), TT_BUILD_PREFIX=build_prefix(build_dir))
    ran = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True,
                         timeout=600)
    if ran.returncode != 0:
        return (f"the README's install steps exited {ran.returncode} (the last '==> README.md:N' is the "
                f"failing block):\n{ran.stdout[-3000:]}\n{ran.stderr[-3000:]}")
    print(ran.stdout[-2000:])
    return None


def has_main(code):
    return re.search(r"\bint main\s*\(", code) is not None


def fragments_program(fragments):
    """One translation unit for every fragment: the headers are parsed once, not once a snippet."""
    includes, bodies = [], []
    for index, (readme_line, code) in enumerate(fragments):
        lines = code.splitlines()
        includes += [line for line in lines if line.lstrip().startswith("#include")]
        # #line makes the compiler's messages name the README's own lines.
        body = "\n".join("" if line.lstrip().startswith("#include") else line for line in lines)
        bodies.append(f"[[maybe_unused]] void readme_snippet_{index}(\n{FREE_NAMES}) {{\n  {{\n"
                      f'#line {readme_line} "README.md"\n{body}\n  }}\n}}\n')
    return PRELUDE + "\n".join(dict.fromkeys(includes)) + "\n\n" + "\n".join(bodies) + "\nint main() { return 0; }\n"


def check(what, source_text, run, name, compiler, flags, scratch):
    """Compiles (and, when `run`, runs) one program; an error message naming `what`, or None."""
    source = scratch / f"{name}.cpp"
    binary = scratch / name
    source.write_text(source_text)
    built = subprocess.run([*compiler, "-std=c++20", "-o", str(binary), str(source), *flags],
                           capture_output=True, text=True)
    if built.returncode != 0:
        return f"{what} does not compile:\n{built.stderr[-3000:]}"
    if run:
        ran = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)
        if ran.returncode != 0:
            return f"{what} ran and exited {ran.returncode}:\n{ran.stderr[-2000:]}"
    return None


def main():
    readme = pathlib.Path(sys.argv[1])
    arguments = sys.argv[2:]
    install_from = None
    if arguments[:1] == ["--install-from"]:
        install_from, arguments = pathlib.Path(arguments[1]), arguments[2:]
    separator = arguments.index("--")
    compiler, flags = arguments[:separator], arguments[separator + 1:]
    found = list(snippets(readme))
    if not found:
        print("README.md has no C++ snippet: nothing checked", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as scratch, concurrent.futures.ThreadPoolExecutor(2) as pool:
        complete = [(line, code) for line, code in found if has_main(code)]
        fragments = [(line, code) for line, code in found if not has_main(code)]
        futures = [pool.submit(check, f"README.md:{line}: the snippet", code, True, f"snippet_{i}",
                               compiler, flags, pathlib.Path(scratch))
                   for i, (line, code) in enumerate(complete)]
        if fragments:
            lines = ", ".join(str(line) for line, _ in fragments)
            futures.append(pool.submit(check, f"README.md: the file of its fragments (lines {lines})",
                                       fragments_program(fragments), False, "fragments", compiler, flags,
                                       pathlib.Path(scratch)))
        if install_from is not None:
            install_dir = pathlib.Path(scratch) / "install"
            install_dir.mkdir()
            futures.append(pool.submit(run_install_steps, readme, install_from, install_dir))
        failures = [f.result() for f in futures if f.result() is not None]
    for failure in failures:
        print(failure, file=sys.stderr)
    print(f"{len(found)} README snippets compiled (and run where complete)"
          f"{', and its install steps run' if install_from is not None else ''}: {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
