#!/usr/bin/env python3
"""Compiles every C++ snippet of README.md against the library just built, so that the README cannot
drift from the API; a snippet with its own main() also runs and must exit 0.

A fragment (no main) is compiled as the body of a function whose parameters are the names README
snippets use without declaring them (`traj`, `params`, `dir`...), in a block of its own so that a
fragment may declare them again. Its #include lines go to the top of the file.

Usage: test_readme_snippets.py README COMPILER... -- FLAGS...   (FLAGS: include paths, the library)
"""

import concurrent.futures
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
[[maybe_unused]] std::int64_t B, [[maybe_unused]] std::filesystem::path dir,
[[maybe_unused]] void (*act)(const TensorTree&, std::uint64_t)"""


def snippets(readme):
    """(line number, code) of every ```cpp block."""
    text = readme.read_text()
    for match in re.finditer(r"^```cpp\n(.*?)^```", text, re.S | re.M):
        yield text.count("\n", 0, match.start()) + 2, match.group(1)


def program(code, index):
    """A translation unit for one snippet."""
    if re.search(r"\bint main\s*\(", code):
        return code
    includes = [line for line in code.splitlines() if line.lstrip().startswith("#include")]
    body = "\n".join(line for line in code.splitlines() if not line.lstrip().startswith("#include"))
    return (PRELUDE + "\n".join(includes) +
            f"\n\n[[maybe_unused]] void readme_snippet_{index}(\n{FREE_NAMES}) {{\n  {{\n{body}\n  }}\n}}\n"
            "\nint main() { return 0; }\n")


def check(readme_line, code, index, compiler, flags, scratch):
    source = scratch / f"snippet_{index}.cpp"
    binary = scratch / f"snippet_{index}"
    source.write_text(program(code, index))
    built = subprocess.run([*compiler, "-std=c++20", "-o", str(binary), str(source), *flags],
                           capture_output=True, text=True)
    if built.returncode != 0:
        return f"README.md:{readme_line}: the snippet does not compile:\n{built.stderr[-3000:]}"
    if re.search(r"\bint main\s*\(", code):
        ran = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)
        if ran.returncode != 0:
            return f"README.md:{readme_line}: the snippet ran and exited {ran.returncode}:\n{ran.stderr[-2000:]}"
    return None


def main():
    readme = pathlib.Path(sys.argv[1])
    separator = sys.argv.index("--")
    compiler, flags = sys.argv[2:separator], sys.argv[separator + 1:]
    found = list(snippets(readme))
    if not found:
        print("README.md has no C++ snippet: nothing checked", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as scratch, concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(check, line, code, i, compiler, flags, pathlib.Path(scratch))
                   for i, (line, code) in enumerate(found)]
        failures = [f.result() for f in futures if f.result() is not None]
    for failure in failures:
        print(failure, file=sys.stderr)
    print(f"{len(found) - len(failures)} of {len(found)} README snippets compile (and run where complete)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
