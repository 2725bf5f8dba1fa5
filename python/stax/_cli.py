"""The `stax` console script: runs the command-line program the package build bundles.

`pip install` builds the C command-line program (CMake target stax_cli, the same program as
`build/stax`) next to the extension, as stax/_bin/stax. The `stax` command is the top-level
module _stax_cli (which does not import this package, for start-up time); it hands `stax
report` and a missing program to :func:`main` here, which `python -m stax` also runs. Either
replaces itself with that program (exec), so arguments, output, exit status and signals are
exactly the program's. One command is the
Python package's own: `stax report` (stax._report: plots drawn with matplotlib).
"""

import os
import pathlib
import sys

__all__ = ["main", "program_path"]


def program_path():
    """The path of the bundled `stax` command-line program (it may be missing when the
    package was imported from a source tree whose extension was built by hand)."""
    from _stax_cli import program_in  # beside the package: python/, or site-packages
    return program_in(pathlib.Path(__file__).resolve().parent)


def main(argv=None):
    """Runs the bundled `stax` program with ``argv`` (default: this process's arguments) in
    place of this process, or `stax report` here. Returns an error status, with a message,
    only when the program is not there (or report's status)."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args and args[0] == "report":
        from ._report import main as report
        return report(args[1:])
    program = program_path()
    if not os.access(program, os.X_OK):
        sys.stderr.write(
            f"stax: the command-line program is not in this installation ({program} is "
            "missing); reinstall the package with pip, or run build/stax from a source "
            "build (make build)\n")
        return 127
    from _stax_cli import exec_program  # beside the package: python/, or site-packages
    return exec_program(program, args)


if __name__ == "__main__":
    sys.exit(main())
