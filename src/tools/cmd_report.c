/* `stax report`: the plots are drawn by the Python package (python/stax/_report.py, with
 * matplotlib), so this program only says where that command is: the `stax` command that
 * `pip install` puts on PATH runs it before it would start this program. */
#include "tools/cli.h"

int stax_cli_report(int argc, char** argv) {
  (void)argc, (void)argv;
  fprintf(stderr,
          "stax report: the plots are drawn by the Python package, with matplotlib: run\n"
          "'python -m stax report FILE', or the 'stax' command that 'pip install .' (or\n"
          "'pip install -e .') puts on PATH, which runs report itself and every other\n"
          "command through this program\n");
  return STAX_CLI_USAGE;
}
