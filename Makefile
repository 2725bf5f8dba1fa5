# Thin wrapper over the README commands; CMake is the build system.
.PHONY: all build demo test tsan fuzz wheel clean

all: build

build:
	./scripts/setup.sh
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build build -j$$(nproc)

demo:
	./scripts/demo.sh

test:
	./scripts/test.sh

tsan:
	./scripts/tsan.sh

# The Python wheel, self-contained and auditwheel-repaired, into dist/ (scripts/wheel.sh).
wheel:
	./scripts/wheel.sh

# The fuzzers for FUZZ_SECONDS (default 300) each; make test runs a short pass of them.
fuzz:
	./scripts/fuzz.sh

clean:
	rm -rf build build-asan build-tsan build-fuzz
