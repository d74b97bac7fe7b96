"""Prints where this interpreter reads modules below an install prefix (argv[1]), relative to it,
and on a second line the library directory (argv[2], relative to the prefix) as seen from there,
for the module's rpath. Where:
Debian's /usr/bin/python3 reads /usr/local/lib/python3.11/dist-packages for /usr/local and
~/.local/lib/python3.11/site-packages for ~/.local. For any other prefix, the interpreter's own
layout below it (<prefix>/lib/python3.11/site-packages), which PYTHONPATH then names."""
import os
import pathlib
import site
import sys
import sysconfig


def site_dir(prefix):
    for candidate in map(pathlib.Path, site.getsitepackages() + [site.getusersitepackages()]):
        try:
            relative = candidate.relative_to(prefix)
        except ValueError:
            continue
        if relative.parts[:1] == ("lib",):
            return relative
    paths = {"base": str(prefix), "platbase": str(prefix)}
    return pathlib.Path(sysconfig.get_path("platlib", "posix_prefix", vars=paths)).relative_to(prefix)


modules = site_dir(pathlib.Path(sys.argv[1]))
print(modules)
print(os.path.relpath(sys.argv[2], modules))
