/* The library version string. */
#include "stax/stax.h"

const char* stax_version(void) { return "0.1.0"; }
