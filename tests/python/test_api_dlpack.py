"""DLPack in and out of stax without copies: kernel outputs exported to numpy, arrays imported
as stax tensors and as kernel inputs, lifetimes across the exchange, every dtype numpy and
stax share."""
import gc

import numpy as np
import pytest

from test_api_support import stax


class DLPackOnly:
    """An array that offers only DLPack (no buffer protocol), like a framework tensor."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def address(array):
    return array.__array_interface__["data"][0]


def test_output_to_numpy_is_zero_copy():
    x = stax.placeholder(["N", 3], name="x")
    k = stax.compile([x * 2, x.T])
    doubled, transposed = k.run([np.ones((4, 3), np.float32)], numpy=False)
    assert doubled.__dlpack_device__() == (1, 0)
    array = np.from_dlpack(doubled)
    assert address(array) == doubled.data_ptr
    np.testing.assert_array_equal(array, 2)
    array[0, 0] = 7  # the same memory
    assert np.asarray(doubled)[0, 0] == 7
    view = np.from_dlpack(transposed)
    assert view.shape == (3, 4) and view.strides == transposed.strides
    del doubled, transposed, k
    gc.collect()
    assert array[0, 0] == 7 and array.sum() == 7 + 2 * 11  # alive after the tensor is gone


def test_copy_true_copies():
    x = stax.placeholder([3], name="x")
    tensor = stax.compile(x + 1).run([np.zeros(3, np.float32)], numpy=False)[0]
    copied = np.from_dlpack(tensor, copy=True)
    assert address(copied) != tensor.data_ptr
    capsule_copy = stax.from_dlpack(tensor.__dlpack__(copy=True))
    assert capsule_copy.data_ptr != tensor.data_ptr
    np.testing.assert_array_equal(np.asarray(capsule_copy), 1)


def test_numpy_into_stax_is_zero_copy():
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    tensor = stax.from_dlpack(array)
    assert isinstance(tensor, stax.Tensor) and tensor.shape == (2, 3)
    assert tensor.data_ptr == address(array)
    array[1, 2] = 50
    assert np.asarray(tensor)[1, 2] == 50
    strided = array[:, ::2]
    view = stax.from_dlpack(strided)
    assert view.data_ptr == address(strided) and view.strides == strided.strides
    del array
    gc.collect()
    assert np.asarray(tensor)[1, 2] == 50  # the producer's memory stays alive


def test_dlpack_only_inputs_are_zero_copy():
    x = stax.placeholder(["N"], name="x")
    k = stax.compile([stax.identity(x), x * 3])
    base = np.arange(5, dtype=np.float32)
    same, tripled = k(DLPackOnly(base))
    assert np.shares_memory(same, base) and address(same) == address(base)
    np.testing.assert_array_equal(tripled, base * 3)


def test_round_trip_through_kernels():
    x = stax.placeholder(["N"], name="x")
    first = stax.compile(x + 1)
    second = stax.compile(x * 10)
    start = stax.from_dlpack(np.arange(4, dtype=np.float32))
    middle = first.run([start], numpy=False)[0]
    end = second.run([middle], numpy=False)[0]
    np.testing.assert_array_equal(np.from_dlpack(end), (np.arange(4) + 1) * 10)
    # kernels take stax tensors and DLPack objects directly
    np.testing.assert_array_equal(second(DLPackOnly(np.from_dlpack(middle))), [10, 20, 30, 40])


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "int16", "int32",
                                   "int64", "uint8", "uint16", "uint32", "uint64", "bool"])
def test_every_dtype_round_trips(dtype):
    values = np.array([0, 1, 1, 0, 1], dtype=dtype)
    x = stax.placeholder([5], dtype=dtype, name="x")
    k = stax.compile(stax.identity(x))
    out = k.run([stax.from_dlpack(values)], numpy=False)[0]
    assert out.dtype == dtype
    back = np.from_dlpack(out)
    assert back.dtype == values.dtype and address(back) == address(values)
    np.testing.assert_array_equal(back, values)
    assert np.asarray(out).dtype == values.dtype


def test_constants_are_exported_as_copies():
    x = stax.placeholder([2], name="x")
    table = np.array([4.0, 5.0], np.float32)
    k = stax.compile([x, stax.constant(table)])
    _, const = k.run([np.zeros(2, np.float32)], numpy=False)
    assert const.readonly
    exported = np.from_dlpack(const)
    exported[0] = -1  # a consumer may write: it got its own copy
    np.testing.assert_array_equal(k(np.zeros(2, np.float32))[1], table)


def test_unconsumed_capsules_are_released():
    x = stax.placeholder([1000], name="x")
    tensor = stax.compile(x + 1).run([np.zeros(1000, np.float32)], numpy=False)[0]
    for _ in range(100):
        capsule = tensor.__dlpack__()
        del capsule
    gc.collect()
    np.testing.assert_array_equal(np.asarray(tensor), 1)


def test_asarray_wraps_buffers_without_copying():
    array = np.arange(4, dtype=np.int32)
    tensor = stax.asarray(array)
    assert tensor.data_ptr == address(array) and tensor.dtype == "int32"
    listed = stax.asarray([1.5, 2.5])
    assert listed.dtype == "float32" and listed.shape == (2,)
    typed = stax.asarray([1, 2], dtype="int8")
    assert typed.dtype == "int8"
    mv = stax.asarray(memoryview(array))
    assert mv.data_ptr == address(array)


def test_versioned_capsules_and_read_only_producers():
    array = np.arange(4, dtype=np.float32)
    array.flags.writeable = False
    tensor = stax.from_dlpack(array)  # read-only arrays only leave numpy through DLPack 1.x
    assert tensor.readonly and tensor.data_ptr == address(array)
    assert memoryview(tensor).readonly
    x = stax.placeholder([4], name="x")
    k = stax.compile([stax.identity(x), x + 1])
    same, plus = k(DLPackOnly(array))
    assert address(same) == address(array)
    np.testing.assert_array_equal(plus, array + 1)
    out = k.run([array], numpy=False)[1]
    capsule = out.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(capsule)
    imported = stax.from_dlpack(capsule)
    assert imported.data_ptr == out.data_ptr and not imported.readonly
    legacy = out.__dlpack__()
    assert '"dltensor"' in repr(legacy)
    assert stax.from_dlpack(legacy).data_ptr == out.data_ptr
