"""Errors a user can trust: status, name and gpuwrap's message; misspellings name the valid ones."""
import ctypes

import numpy as np
import pytest

import gpuwrap


def test_gpuwrap_error_fields(ctx):
    buf = (ctypes.c_float * 4)()
    with pytest.raises(gpuwrap.GpuwrapError) as e:
        ctx.wrap(ctypes.addressof(buf) + 1, "float32", (4,))  # misaligned
    err = e.value
    assert err.status == -1 and err.name == "GW_EINVAL" and err.detail
    assert str(err).startswith("gw_wrap: GW_EINVAL: ") and err.detail in str(err)
    with pytest.raises(gpuwrap.GpuwrapError) as e:
        ctx.wrap(0, "float32", (4,))  # NULL with elements
    assert e.value.name == "GW_EINVAL" and "ptr" in e.value.detail
    with pytest.raises(gpuwrap.GpuwrapError) as e:
        ctx.wrap(ctypes.addressof(buf), "float32", (-1,))
    assert e.value.name == "GW_EINVAL"


def test_wrap_unmapped(ctx):
    # Address 8 is in no mapping: the CPU model registered it as pinned memory and the
    # next fill died of SIGSEGV. Refused now as cudaHostRegister refuses it.
    with pytest.raises(gpuwrap.GpuwrapError) as e:
        ctx.wrap(8, "u1", (1,))
    assert e.value.name == "GW_EINVAL" and "not mapped" in e.value.detail
    assert "ptr" in e.value.detail


def test_misspelt_names(ctx):
    with pytest.raises(ValueError, match="'auto', 'cpu', 'cuda', 'hip'"):
        gpuwrap.Context("gpu")
    with pytest.raises(ValueError, match="'host', 'pinned', 'device', 'managed'"):
        ctx.alloc("devise", "float32", (1,))
    with pytest.raises(ValueError, match="float32"):
        ctx.alloc("host", "float33", (1,))
    with pytest.raises(ValueError, match="float32"):
        ctx.wrap(0, object(), (0,))
    with pytest.raises(ValueError, match="'cuda'"):
        ctx.alloc("host", "float32", (1,)).offer("gpu")


def test_device_and_context_errors():
    with pytest.raises(gpuwrap.GpuwrapError) as e:
        gpuwrap.Context("cpu", 7)
    assert e.value.name == "GW_ENODEV" and "7" in str(e.value)
    c = gpuwrap.Context("cpu")
    c.close()
    c.close()
    with pytest.raises(ValueError, match="context closed"):
        c.alloc("host", "float32", (1,))
    with pytest.raises(ValueError, match="context closed"):
        c.backend


def test_buffer_errors_carry_status(ctx):
    d = ctx.alloc("device", "float32", (4,))
    with pytest.raises(BufferError) as e:
        d.__dlpack__(max_version=(1, 0), dl_device=(gpuwrap.kDLCUDA, 0))  # no CUDA here
    assert isinstance(e.value, gpuwrap.GpuwrapError)
    assert e.value.name == "GW_ENOTSUP" and e.value.status == -4 and e.value.detail
    with pytest.raises(BufferError) as e:
        d.__dlpack__(stream=0x7F00DEAD0000)  # not a stream of the model: gw_stream_wrap says
    assert e.value.name == "GW_EINVAL"
    d.release()


def test_use_after_release(ctx):
    a = ctx.alloc("host", "float32", (4,))
    a.release()
    a.release()
    for use in (lambda: a.shape, lambda: a.fill(1.0), lambda: a.__dlpack__(),
                lambda: a.view((0,), (1,)), lambda: a.__array_interface__, lambda: np.asarray(a)):
        with pytest.raises((ValueError, TypeError), match="array released"):
            use()


def test_fill_values(ctx):
    a = ctx.alloc("host", "int8", (2,))
    with pytest.raises(OverflowError, match="int8"):
        a.fill(300)
    with pytest.raises(TypeError):
        a.fill(1.5)
    b = ctx.alloc("host", "uint16", (2,))
    with pytest.raises(OverflowError):
        b.fill(-1)
    c = ctx.alloc("host", "complex64", (2,))
    c.fill(1 + 2j)
    assert list(np.asarray(c)) == [1 + 2j, 1 + 2j]
    for x in (a, b, c):
        x.release()
    with pytest.raises(TypeError, match="gpuwrap.Array"):
        c2 = ctx.alloc("host", "float32", (2,))
        c2.copy_from(np.zeros(2, dtype=np.float32))


def test_dtype_spellings_refused(ctx):
    # True and 1.0 hash as 1 (int8's index): they were taken as int8
    for bad in (True, False, 1.0, 0.0):
        with pytest.raises(TypeError, match="is not a dtype"):
            ctx.alloc("host", bad, (2,))
    # a NumPy dtype of the other byte order has this host's name ('float32' for '>f4'): it was
    # taken as native float32 and read byte-swapped
    other = ">" if np.little_endian else "<"
    x = np.arange(4, dtype=other + "f4")
    for spelling in (x.dtype, x):
        with pytest.raises(ValueError, match="byte order"):
            ctx.wrap(x.ctypes.data, spelling, x.shape)
    # this host's order, and a byte order that does not apply, are fine
    y = np.arange(4, dtype="=f4")
    a = ctx.wrap(y.ctypes.data, y.dtype, y.shape)
    assert a.dtype == "float32" and np.array_equal(np.asarray(a), y)
    a.release()
    assert ctx.alloc("host", np.dtype(other + "i1"), (2,)).dtype == "int8"
    assert ctx.alloc("host", 1, (2,)).dtype == "int8"  # a gpuwrap dtype index still works


def test_shape_arguments(ctx):
    # any __index__ int (numpy's too) is a dim, alone or in a sequence
    assert ctx.alloc("host", "f8", np.int64(3)).shape == (3,)
    assert ctx.alloc("host", "f8", [np.int32(2), 3]).shape == (2, 3)
    # the rest is refused, saying which argument (and which entry) and why
    for bad, exc, says in [(None, TypeError, "shape: NoneType is not a sequence"),
                           (True, TypeError, "shape: bool True is not an int"),
                           ((2, 1.5), TypeError, r"shape\[1\]: float 1.5 is not an int"),
                           ((1 << 63,), OverflowError, r"shape\[0\]: 9223372036854775808 does not fit"),
                           ((2, False), TypeError, r"shape\[1\]: bool")]:
        with pytest.raises(exc, match=says):
            ctx.alloc("host", "f8", bad)


def test_int_arguments_checked_before_conversion(ctx):
    """Every int argument is range-checked as given (never truncated to its C type first),
    the error showing the value as given; a bool is never an int argument."""
    a = ctx.alloc("pinned", "float32", (4,))
    big = 2**32
    # a device id that a 32-bit store would make 0: refused, not exported as device 0
    for dev, says in [((gpuwrap.kDLCPU, big), r"dl_device\[1\]: 4294967296 does not fit"),
                      ((2**40, 0), r"dl_device\[0\]: 1099511627776 does not fit"),
                      ((gpuwrap.kDLCPU, -big), r"dl_device\[1\]: -4294967296 does not fit")]:
        with pytest.raises(OverflowError, match=says):
            a.__dlpack__(max_version=(1, 0), dl_device=dev)
    with pytest.raises(TypeError, match=r"dl_device\[0\]: bool"):
        a.__dlpack__(dl_device=(True, 0))
    with pytest.raises(gpuwrap.GpuwrapError, match="device"):  # the library's rule: id 0 on kDLCPU
        a.__dlpack__(max_version=(1, 0), dl_device=(gpuwrap.kDLCPU, 1))
    # a stream handle above INT64_MAX is reported as given (it was reported as stream=3)
    h = 2**64 - 1
    with pytest.raises(BufferError) as e:
        a.__dlpack__(stream=h)
    assert f"stream={h}" in str(e.value) and "stream=3" not in str(e.value)
    with pytest.raises(BufferError, match=str(2**64)):
        a.__dlpack__(stream=2**64)
    with pytest.raises(BufferError, match=str(-2**63 - 1)):
        a.__dlpack__(stream=-2**63 - 1)
    with pytest.raises(BufferError, match=str(-5)):  # the class rule still reads the value
        a.__dlpack__(stream=-5)
    with pytest.raises(OverflowError, match=r"max_version\[0\]: 4294967297 does not fit"):
        a.__dlpack__(max_version=(2**32 + 1, 0))
    # an address: a bool is not one (True was taken as address 1), nor a negative or too big int
    for bad, exc, says in [(True, TypeError, "ptr: bool True is not an int"),
                           (False, TypeError, "ptr: bool False is not an int"),
                           (-8, OverflowError, "ptr: -8 does not fit"),
                           (2**64, OverflowError, f"ptr: {2**64} does not fit")]:
        with pytest.raises(exc, match=says):
            ctx.wrap(bad, "float32", (0,))
    with pytest.raises(TypeError, match="Array.handle.: bool"):
        gpuwrap.Array(True)
    # backends and kinds given as numbers: checked before the cast to int (2**32 was 'auto')
    with pytest.raises(OverflowError, match=f"backend: {big} does not fit"):
        gpuwrap.Context(big)
    with pytest.raises(OverflowError, match=f"kind: {big + 1} does not fit"):
        ctx.alloc(big + 1, "float32", (1,))
    a.release()


def test_from_dlpack_of_what_is_not_an_array(ctx):
    """from_dlpack([1, 2, 3]) gave a bare AttributeError ('list' object has no attribute
    '__dlpack__'): a TypeError naming what is accepted."""
    for obj in ([1, 2, 3], (1.0,), 3.5, object(), "abc"):
        with pytest.raises(TypeError) as e:
            gpuwrap.from_dlpack(obj, ctx)
        msg = str(e.value)
        assert type(obj).__name__ in msg and "__dlpack__" in msg and "capsule" in msg, msg
        assert "__cuda_array_interface__" in msg and "__dlpack_c_exchange_api__" in msg, msg
    with pytest.raises(TypeError, match=r"np\.asarray"):
        gpuwrap.from_dlpack([1, 2, 3], ctx)
    # what is accepted still is
    x = np.arange(4.0)
    assert np.array_equal(np.asarray(gpuwrap.from_dlpack(x, ctx)), x)


def test_float16_fill_out_of_range(ctx):
    """A float16 fill out of range spoke the struct module's words ('float too large to pack
    with e format'): gpuwrap's own, with the range; the array is left as it was."""
    a = ctx.alloc("host", "float16", (5,))
    a.fill(2.5)
    for v in (65520.0, -1e5, 1e300):
        with pytest.raises(OverflowError) as e:
            a.fill(v)
        msg = str(e.value)
        assert msg.startswith("fill: ") and "float16" in msg and "65504" in msg, msg
        assert "pack" not in msg and "format" not in msg, msg
        assert (np.asarray(a) == 2.5).all()
    for v, want in ((65504.0, 65504.0), (65519.0, 65504.0), (-65504.0, -65504.0),
                    (float("inf"), np.inf)):
        a.fill(v)
        assert (np.asarray(a) == want).all(), v
    a.fill(float("nan"))
    assert np.isnan(np.asarray(a)).all()
