/* The stax command-line program. Verbs are added as the layers behind them land. */
#include <stdio.h>
#include <string.h>

#include "stax/stax.h"

static void print_usage(FILE* f) {
  fprintf(f,
          "usage: stax <command> [options]\n"
          "\n"
          "commands:\n"
          "  version     print the stax version\n"
          "  help        print this text\n");
}

int main(int argc, char** argv) {
  if (argc < 2 || strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
      strcmp(argv[1], "-h") == 0) {
    print_usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
    printf("stax %s\n", stax_version());
    return 0;
  }
  fprintf(stderr, "stax: unknown command '%s' (see 'stax --help')\n", argv[1]);
  return 2;
}
