"""The test data the installed onnx package ships (onnx/backend/test/data), run through
onnx_node_suite: `simple`, `pytorch-converted` and `pytorch-operator` are node-test folders
(model.onnx + test_data_set_*); the `light` models (alexnet, resnet50, ...: real layouts with
small weights) ship only a model and its expected outputs, so they are staged into that layout
with the inputs onnx's own backend runner makes for them (every float input arange(n) / n in
its declared shape, unknown dims 1: onnx.backend.test.runner generate_dummy_data).

usage: shipped_suite.py NODE_SUITE WORK_DIR [--jit]

Prints each folder's summary and a total; exits 1 when any test fails, 77 (ctest's skip)
when onnx is not importable, 0 otherwise. Tests using ops stax does not support (strings,
training) are counted as unsupported, as in the Debian node suite; shipped_exceptions.txt lists
the expected failures.
"""
import os
import shutil
import subprocess
import sys

FOLDERS = ("simple", "pytorch-converted", "pytorch-operator")
# Expected failures (one file for every folder; see tests/onnx/node_exceptions.txt's format).
EXCEPTIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shipped_exceptions.txt")


def stage_light(light_dir, out_dir):
    import numpy as np
    import onnx
    from onnx import numpy_helper

    os.makedirs(out_dir, exist_ok=True)
    staged = 0
    for entry in sorted(os.listdir(light_dir)):
        if not entry.endswith(".onnx"):
            continue
        name = entry[:-len(".onnx")]
        model = onnx.load(os.path.join(light_dir, entry))
        test_dir = os.path.join(out_dir, "test_" + name)
        data_dir = os.path.join(test_dir, "test_data_set_0")
        os.makedirs(data_dir, exist_ok=True)
        shutil.copy(os.path.join(light_dir, entry), os.path.join(test_dir, "model.onnx"))
        initializers = {i.name for i in model.graph.initializer}
        inputs = [i for i in model.graph.input if i.name not in initializers]
        for k, x in enumerate(inputs):
            shape = tuple(d.dim_value if d.HasField("dim_value") else 1
                          for d in x.type.tensor_type.shape.dim)
            n = int(np.prod(shape))
            value = (np.arange(n).reshape(shape) / n).astype(np.float32)
            with open(os.path.join(data_dir, f"input_{k}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(value, x.name).SerializeToString())
        for k in range(len(model.graph.output)):
            expected = os.path.join(light_dir, f"{name}_output_{k}.pb")
            shutil.copy(expected, os.path.join(data_dir, f"output_{k}.pb"))
        staged += 1
    return staged


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    suite, work = sys.argv[1], sys.argv[2]
    extra = sys.argv[3:]
    try:
        import onnx
    except ImportError as error:
        print(f"skipped: onnx is not importable ({error}); its shipped test data is not run")
        return 77
    data = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    print(f"onnx {onnx.__version__}: {data}")
    if os.path.isdir(work):
        shutil.rmtree(work)
    folders = []
    for name in FOLDERS:
        path = os.path.join(data, name)
        if os.path.isdir(path):
            folders.append((name, path))
    light = os.path.join(data, "light")
    if os.path.isdir(light):
        staged_dir = os.path.join(work, "light")
        print(f"light: {stage_light(light, staged_dir)} models staged")
        folders.append(("light", staged_dir))
    failed = False
    for name, path in folders:
        print(f"== {name}", flush=True)
        # Dim_params may be 0 here, as ONNX allows: simple's test_sequence_model8 is fed an
        # empty input (stax's own default range starts at 1).
        run = subprocess.run([suite, "--data", path, "--quiet", "--exceptions", EXCEPTIONS,
                              "--dims-may-be-zero"] + extra)
        failed = failed or run.returncode != 0
    print("shipped onnx test data:", "FAILED" if failed else "all ran tests passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
