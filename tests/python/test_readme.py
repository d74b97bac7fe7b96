"""The README's Python section runs as written: its ```python blocks, in order, as one program
(the learner's publication lives while the actor's block reads it), with the names they use in
/dev/shm removed before and after."""
import os
import pathlib
import re
import shutil
import subprocess
import sys

import tensortree

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"
NAMES = ["demo"]


def python_section_blocks():
    text = README.read_text()
    section = text[text.index("\n## Python\n"):]
    section = section[: section.index("\n## ", 1)]
    return re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)


def remove_shared_objects():
    for name in NAMES:
        shutil.rmtree(tensortree.ReplayBuffer.shared_memory_path(name), ignore_errors=True)
        pathlib.Path(tensortree.WeightPublisher.shared_memory_path(name)).unlink(missing_ok=True)


def environment():
    """This process's, with the module found from any directory (PYTHONPATH may be relative)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(tensortree.__file__), env.get("PYTHONPATH", "")])
    return env


def test_the_python_section_runs(tmp_path):
    blocks = python_section_blocks()
    assert len(blocks) >= 2
    remove_shared_objects()
    try:
        ran = subprocess.run([sys.executable, "-c", "\n".join(blocks)], cwd=tmp_path, env=environment(),
                             capture_output=True, text=True, timeout=120)
    finally:
        remove_shared_objects()
    assert ran.returncode == 0, ran.stderr[-3000:]
