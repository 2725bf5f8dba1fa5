/* stax umbrella header: the whole public C API. */
#ifndef STAX_STAX_H_
#define STAX_STAX_H_

#include "stax/base.h"
#include "stax/runtime.h"
#include "stax/shape.h"
#include "stax/graph.h"
#include "stax/vm.h"
#include "stax/npy.h"
#include "stax/onnx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The library version, "MAJOR.MINOR.PATCH". */
const char* stax_version(void);

#ifdef __cplusplus
}
#endif

#endif /* STAX_STAX_H_ */
