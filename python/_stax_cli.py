"""The `stax` console script's entry point, kept outside the package on purpose.

A console script `stax._cli:main` imports the package `stax` first, and its __init__ loads
numpy and the extension: about 150 ms before the program even starts, against 8 ms for the
program itself. This module finds the package's folder without importing it
(importlib.util.find_spec runs no package code) and replaces itself with the bundled program
(stax/_bin/stax), so `stax version` costs an interpreter start and an exec. Only `stax
report`, which is the Python package's own command, imports the package.
"""

import importlib.util
import os
import pathlib
import sys


def _package_dir():
    spec = importlib.util.find_spec("stax")
    if spec is None or not spec.submodule_search_locations:
        return None
    return pathlib.Path(list(spec.submodule_search_locations)[0])


def program_in(package_dir):
    """Where the package build puts the command-line program inside the package folder."""
    return pathlib.Path(package_dir) / "_bin" / "stax"


def exec_program(program, args):
    """Replaces this process with `program args...` (flushing Python's buffers first), so its
    arguments, output, exit status and signals are the program's. Returns only by raising."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(str(program), [str(program), *args])
    return 127  # not reached: execv returns only by raising


def main(argv=None):
    args = sys.argv[1:] if argv is None else list(argv)
    package = _package_dir()
    program = program_in(package) if package else None
    if (args and args[0] == "report") or program is None or not os.access(program, os.X_OK):
        # stax report, or a message about the missing program: the package's own code.
        from stax._cli import main as package_main
        return package_main(args)
    return exec_program(program, args)


if __name__ == "__main__":
    sys.exit(main())
