"""stax.Options: every field checked where it is set (naming it), merged with the keyword
shortcuts of load/compile (a disagreement names both), and each field reaching the model it
was given to: threads per model, JIT mode, threshold, version cap, verification, cache folder,
disabled passes."""
import numpy as np
import pytest

from test_api_support import stax

RNG = np.random.default_rng(7)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def jit_kernel(options=None, **keywords):
    x = stax.placeholder([stax.symbol("N"), 8], name="x")
    return stax.compile(stax.tanh(x) * 2 + 1, options=options, **keywords)


def want(x):
    return np.tanh(x) * 2 + 1


def has_jit():
    return stax.build_info()["jit"] is not None


@pytest.mark.parametrize("field, value, error, message", [
    ("num_threads", -1, ValueError, "Options.num_threads must be >= 0"),
    ("num_threads", 2.0, TypeError, "Options.num_threads must be an int"),
    ("num_threads", True, TypeError, "Options.num_threads must be an int"),
    ("jit", "fast", ValueError, "Options.jit must be 'on', 'sync' or 'off'"),
    ("jit", 1, ValueError, "Options.jit must be"),
    ("jit_threshold", 0, ValueError, "Options.jit_threshold must be >= 1"),
    ("jit_max_versions", "4", TypeError, "Options.jit_max_versions must be an int"),
    ("jit_cache_dir", "", ValueError, "Options.jit_cache_dir is empty"),
    ("jit_cache_dir", True, TypeError, "Options.jit_cache_dir must be a folder"),
    ("jit_cache_dir", "x" * 2000, ValueError, "Options.jit_cache_dir is 2000 bytes long"),
    ("jit_verify", 1, TypeError, "Options.jit_verify must be True or False"),
    ("jit_tolerance", -1e-3, ValueError, "Options.jit_tolerance must be a positive"),
    ("jit_tolerance", "big", TypeError, "Options.jit_tolerance must be a number"),
    ("jit_generic", "no", TypeError, "Options.jit_generic must be True or False"),
    ("disable_passes", ["fusion"], stax.InvalidArgumentError,
     "Options.disable_passes: unknown graph pass 'fusion'; the passes are fold"),
    ("disable_passes", [3], TypeError, "Options.disable_passes entries must be pass names"),
    ("dispatch", "jump", ValueError, "Options.dispatch must be 'default', 'switch' or 'goto'"),
    ("profile_timing", "yes", TypeError, "Options.profile_timing must be True or False"),
])
def test_every_field_is_checked_when_set(field, value, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(")):
        stax.Options(**{field: value})
    options = stax.Options()
    with pytest.raises(error, match=message.replace("(", r"\(")):
        setattr(options, field, value)
    assert getattr(options, field) is None  # a refused value leaves the field as it was


def test_unknown_field_and_wrong_options_type():
    with pytest.raises(TypeError, match="Options has no field 'threads'; the fields are num_threads"):
        stax.Options(threads=2)
    with pytest.raises(AttributeError):
        stax.Options().threads = 2
    with pytest.raises(TypeError, match="load: options must be a stax.Options, not dict"):
        stax.load(b"", options={"jit": "off"})


def test_fields_repr_copy_and_equality():
    options = stax.Options(num_threads=2, jit="background", disable_passes="fuse,cse")
    assert options.jit == "on" and options.disable_passes == ("cse", "fuse")
    assert options.to_dict() == {"num_threads": 2, "jit": "on", "disable_passes": ("cse", "fuse")}
    assert repr(options) == "stax.Options(num_threads=2, jit='on', disable_passes=('cse', 'fuse'))"
    assert options.copy(jit="off").jit == "off" and options.jit == "on"
    assert options == stax.Options(disable_passes=["fuse", "cse"], jit="on", num_threads=2)
    assert list(stax.Options.fields()) == [
        "num_threads", "jit", "jit_threshold", "jit_max_versions", "jit_cache_dir", "jit_verify",
        "jit_tolerance", "jit_generic", "disable_passes", "dispatch", "profile_timing", "trace"]


def test_keyword_and_field_disagreeing_name_both():
    options = stax.Options(jit="sync")
    with pytest.raises(ValueError, match=r"compile: jit='off' and options.jit='sync' disagree"):
        jit_kernel(options, jit="off")
    with pytest.raises(ValueError, match=r"dispatch='goto' and options.dispatch='switch'"):
        jit_kernel(stax.Options(dispatch="switch"), dispatch="goto")
    same = jit_kernel(options, jit="sync")  # the same value both ways is fine
    assert same.jit == "sync"
    with pytest.raises(ValueError, match="jit must be"):  # keywords keep their checks
        jit_kernel(options, jit="always")


def test_threads_are_per_model():
    one = jit_kernel(stax.Options(num_threads=1, jit="off"))
    three = jit_kernel(stax.Options(num_threads=3, jit="off"))
    shared = jit_kernel(stax.Options(jit="off"))
    assert one.num_threads == 1 and three.num_threads == 3
    assert shared.num_threads == stax.num_threads()
    x = rand(64, 8)
    for k in (one, three, shared):
        np.testing.assert_allclose(k(x), want(x), rtol=1e-5, atol=1e-6)
    assert one.options.num_threads == 1 and shared.options == stax.Options(jit="off")


def test_jit_threshold_and_version_cap():
    if not has_jit():
        pytest.skip(f"no JIT in this build: {stax.build_info()['jit_unavailable']}")
    # Shape-generic versions compile on first sight; the threshold counts exact shapes.
    late = jit_kernel(stax.Options(jit="sync", jit_threshold=4, jit_generic=False))
    x = rand(5, 8)
    for call in range(1, 5):
        np.testing.assert_allclose(late(x), want(x), rtol=1e-5, atol=1e-6)
        assert (late.stats["compiles"] > 0) == (call >= 4), call
    capped = jit_kernel(stax.Options(jit="sync", jit_threshold=1, jit_max_versions=1,
                                     jit_generic=False))
    for n in (3, 5, 7, 3):
        x = rand(n, 8)
        np.testing.assert_allclose(capped(x), want(x), rtol=1e-5, atol=1e-6)
    stats = capped.stats
    assert stats["evictions"] >= 2 and stats["generic_versions"] == 0
    assert all(s["versions"] <= 1 for s in stats["jit_segments"])


def test_jit_verify_runs_both_tiers():
    if not has_jit():
        pytest.skip(f"no JIT in this build: {stax.build_info()['jit_unavailable']}")
    k = jit_kernel(stax.Options(jit="sync", jit_threshold=1, jit_verify=True,
                                jit_tolerance=1e-3))
    x = rand(6, 8)
    for _ in range(3):
        np.testing.assert_allclose(k(x), want(x), rtol=1e-5, atol=1e-6)
    assert k.stats["hits"] > 0 and k.options.jit_verify is True


def test_jit_cache_dir_per_model(tmp_path, monkeypatch):
    if not has_jit():
        pytest.skip(f"no JIT in this build: {stax.build_info()['jit_unavailable']}")
    environment_dir = tmp_path / "from-environment"
    monkeypatch.setenv("STAX_JIT_CACHE_DIR", str(environment_dir))
    monkeypatch.delenv("STAX_JIT_CACHE", raising=False)
    mine = tmp_path / "mine"
    x = rand(9, 8)
    # A distinct graph (constant 3.25) so no earlier test's kernel is live under the same key.
    placeholder = stax.placeholder([stax.symbol("N"), 8], name="x")
    expression = stax.tanh(placeholder) * 3.25 - 1
    k = stax.compile(expression, options=stax.Options(jit="on", jit_threshold=1,
                                                      jit_cache_dir=mine))
    for _ in range(4):
        np.testing.assert_allclose(k(x), np.tanh(x) * 3.25 - 1, rtol=1e-5, atol=1e-6)
    k.drain()
    assert k.stats["compiles"] >= 1
    assert list(mine.glob("*.o")), "the model's own cache folder holds its kernels"
    assert not environment_dir.exists() or not list(environment_dir.glob("*.o"))
    off = stax.compile(stax.tanh(placeholder) * 5.5 - 1,
                       options=stax.Options(jit="on", jit_threshold=1, jit_cache_dir=False))
    for _ in range(4):
        off(x)
    off.drain()
    assert off.stats["compiles"] >= 1
    assert not environment_dir.exists() or not list(environment_dir.glob("*.o"))


def test_disable_passes_field():
    x = stax.placeholder([stax.symbol("N")], name="x")
    k = stax.compile(stax.relu(-(-x)), options=stax.Options(jit="off", disable_passes="all"))
    assert k.passes["runs"] == []
    np.testing.assert_array_equal(k(np.array([-1, 2], np.float32)), [0, 2])
