"""The stax command line: help, version and error behaviour."""
import subprocess


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True)


def test_version(stax_bin):
    r = run(stax_bin, "version")
    assert r.returncode == 0
    assert r.stdout.startswith("stax ")
    assert r.stdout.strip().split()[1].count(".") == 2


def test_version_verbose_reports_isa_and_cap(stax_bin):
    import os
    r = run(stax_bin, "version", "--verbose")
    assert r.returncode == 0, r.stderr
    lines = dict(line.split(": ", 1) for line in r.stdout.splitlines()[1:])
    cpu_isa = lines["isa"].split("the CPU's: ")[1].split(";")[0]
    assert cpu_isa in ("avx512", "avx2", "sse2")
    assert "jit" in lines and "jit cache" in lines
    env = dict(os.environ, STAX_ISA="sse2")
    capped = subprocess.run([stax_bin, "version", "-v"], capture_output=True, text=True, env=env)
    assert capped.returncode == 0
    assert "isa: sse2 (the CPU's: " + cpu_isa in capped.stdout
    if "llvm" in lines["jit"]:
        assert "128-bit vectors" in capped.stdout  # the JIT follows the cap
    env["STAX_ISA"] = "avx9"
    bad = subprocess.run([stax_bin, "version", "-v"], capture_output=True, text=True, env=env)
    assert bad.returncode == 0  # a typo in the environment is reported, not fatal
    assert "STAX_ISA=avx9 is not one of" in bad.stderr
    assert "isa: " + cpu_isa in bad.stdout


def test_help_lists_commands(stax_bin):
    r = run(stax_bin, "--help")
    assert r.returncode == 0
    assert "usage: stax" in r.stdout


def test_no_arguments_is_usage_error(stax_bin):
    r = run(stax_bin)
    assert r.returncode == 2
    assert "usage: stax" in r.stderr


def test_unknown_command_is_error(stax_bin):
    r = run(stax_bin, "frobnicate")
    assert r.returncode == 2
    assert "unknown command 'frobnicate'" in r.stderr


def test_build_info_matches_version_verbose(stax_bin):
    from test_api_support import stax
    info = stax.build_info()
    r = run(stax_bin, "version", "--verbose")
    lines = dict(line.split(": ", 1) for line in r.stdout.splitlines()[1:])
    assert r.stdout.split()[1] == info["version"]
    assert lines["isa"].startswith(f"{info['isa']} (the CPU's: {info['isa_detected']};")
    assert lines["generic gemm"] == f"{info['gemm']}, float32 tile {info['gemm_tile'][0]} x {info['gemm_tile'][1]}"
    assert (info["isa"], info["isa_detected"]) == stax.isa()
    if info["jit"] is None:
        assert info["jit_unavailable"] and "unavailable" in lines["jit"]
    else:
        jit = info["jit"]
        assert lines["jit"].startswith(f"{jit['backend']}, cpu {jit['cpu']}, {jit['vector_bits']}-bit")
        assert f"matmul tile {jit['matmul_tile'][0]} x {jit['matmul_tile'][1]}" in lines["jit"]
    assert info["gpu"] is False and info["gpu_unavailable"] in lines["gpu"]


def test_info_says_half_precision_nodes_interpret(stax_bin, tmp_path):
    # 16-bit nodes compute in float32 and round; the ones without a 16-bit compiled kernel run
    # interpreted, and `stax info` is where that is said, with the counts.
    import onnx
    from onnx import TensorProto, helper
    cases = ((TensorProto.FLOAT16, "Relu", "note: 1 of 2 nodes compute float16/bfloat16", None),
             (TensorProto.BFLOAT16, "GlobalAveragePool",
              "note: 1 of 2 nodes compute float16/bfloat16",
              "1 has no 16-bit compiled kernel and runs interpreted: GlobalAveragePool x1"),
             (TensorProto.FLOAT, "Relu", None, None))
    for dtype, op, expected, interpreted in cases:
        graph = helper.make_graph(
            [helper.make_node(op, ["x"], ["y"]),
             helper.make_node("Cast", ["y"], ["z"], to=TensorProto.DOUBLE)], "g",
            [helper.make_tensor_value_info("x", dtype, ["N", 3, 4])],
            [helper.make_tensor_value_info("z", TensorProto.DOUBLE, None)])
        path = tmp_path / f"m{dtype}.onnx"
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
        r = run(stax_bin, "info", str(path))
        assert r.returncode == 0, r.stderr
        if expected:
            assert expected in r.stdout, r.stdout
            assert (interpreted in r.stdout) if interpreted else ("interpreted" not in r.stdout), \
                r.stdout
        else:
            assert "float16" not in r.stdout, r.stdout
