#!/usr/bin/env python3
"""tools/check_layers.py on small trees it must pass or fail: a layer that includes another it may
not use, and a foreign API's system header outside the layer that owns it (<nccl.h> in tree/); a
layer's public headers declared in parts."""

import pathlib
import subprocess
import sys
import tempfile

CHECKER = pathlib.Path(__file__).resolve().parents[2] / "tools" / "check_layers.py"
RULES = ["--layer", "core=", "--layer", "cuda=core", "--layer", "tree=core", "--layer", "transport/nccl=core,cuda",
         # A client layer: tree's public headers, core's internals, and one named internal of tree.
         "--layer", "rl=core,tree", "--internal", "rl=core/*,tree/plan.hpp",
         "--foreign", "cuda=cuda_*.h,cuda/*", "--foreign", "transport/nccl=nccl.h,cuda_runtime_api.h",
         # Declared in two parts, as the parts of a layer do: each header must still belong to it.
         "--public", "tree=tree.hpp", "--public", "tree=schema.hpp"]


def check(files):
    """Runs the checker over a tree holding `files` (path: text); returns (exit code, stderr)."""
    with tempfile.TemporaryDirectory() as root:
        root = pathlib.Path(root)
        for name, text in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        (root / "include" / "tensortree").mkdir(parents=True, exist_ok=True)
        result = subprocess.run(
            [sys.executable, str(CHECKER), "--src", str(root / "src"),
             "--include", str(root / "include" / "tensortree"), "--stamp", str(root / "stamp"),
             "--depfile", str(root / "stamp.d"), *RULES],
            capture_output=True, text=True, check=False)
        return result.returncode, result.stderr


def expect(name, files, passes, message=""):
    code, stderr = check(files)
    if (code == 0) != passes or message not in stderr:
        print(f"FAIL {name}: exit {code}, stderr:\n{stderr}")
        return False
    print(f"ok   {name}")
    return True


def main():
    legal = {
        "src/core/a.hpp": "#include <vector>\n",
        "src/cuda/ipc.hpp": "#include <cuda_runtime_api.h>\n",
        "src/transport/nccl/d.hpp": '#include "cuda/ipc.hpp"\n',
        "src/tree/b.cpp": '#include "core/a.hpp"\n#include <string>\n',
        "src/transport/nccl/c.cpp": '#include <nccl.h>\n#include <cuda_runtime_api.h>\n#include "core/a.hpp"\n',
        "include/tensortree/tree.hpp": "#include <map>\n",
        "include/tensortree/schema.hpp": '#include "tensortree/tree.hpp"\n',
        "src/rl/r.cpp": '#include "rl/s.hpp"\n#include "core/a.hpp"\n#include "tree/plan.hpp"\n'
                        '#include "tensortree/tree.hpp"\n',
    }
    results = [
        expect("the legal tree passes", legal, passes=True),
        expect("<nccl.h> in src/tree fails", {**legal, "src/tree/d.hpp": "#  include <nccl.h>\n"},
               passes=False, message="d.hpp:1: <nccl.h> may be included only by layer 'transport/nccl'"),
        expect("<cuda_runtime_api.h> in src/core fails",
               {**legal, "src/core/e.cpp": "#include <cstddef>\n#include <cuda_runtime_api.h>\n"},
               passes=False, message="e.cpp:2: <cuda_runtime_api.h> may be included only"),
        expect("a public header including <nccl.h> fails",
               {**legal, "include/tensortree/tree.hpp": "#include <nccl.h>\n"},
               passes=False, message="tree.hpp:1: <nccl.h>"),
        expect('a foreign header in quotes fails too ("nccl.h" in src/tree)',
               {**legal, "src/tree/g.cpp": '#include "nccl.h"\n'},
               passes=False, message="g.cpp:1: <nccl.h> may be included only by layer 'transport/nccl'"),
        expect("a client layer including an internal header it names no exception for fails",
               {**legal, "src/rl/t.cpp": '#include "tree/b.hpp"\n'},
               passes=False, message="t.cpp:1: layer 'rl' may include only core, rl, tree: tree/b.hpp is an internal "
                                     "header, not one of the exceptions of client layer 'rl'"),
        expect("core including a tree header fails", {**legal, "src/core/f.cpp": '#include "tree/b.hpp"\n'},
               passes=False, message="layer 'core' may include only core"),
    ]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
