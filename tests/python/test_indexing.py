"""Array.__getitem__: NumPy's basic slicing (ints, slices with any step, ..., tuples of
them) as views sharing the memory, checked element by element against NumPy on the same
data for many random indices; device memory of the CPU model through a copy to host;
everything else a clear error."""
import gc
import os

import numpy as np
import pytest

import gpuwrap

SEED = int(os.environ.get("GW_TEST_SEED", int.from_bytes(os.urandom(4), "little")))
rng = np.random.default_rng(SEED)


def random_item(size):
    """An int (negative too) or a slice (bounds past the ends, None, steps of both signs)."""
    if size > 0 and rng.random() < 0.3:
        return int(rng.integers(-size, size))

    def bound():
        return None if rng.random() < 0.25 else int(rng.integers(-size - 2, size + 3))
    step = None if rng.random() < 0.2 else int(rng.choice([-4, -3, -2, -1, 1, 2, 3, 5]))
    return slice(bound(), bound(), step)


def random_index(shape):
    """A random basic index for `shape`: fewer items than dims at times, at most one ...
    (the items after it index the last dims), a bare item or a tuple."""
    nd = len(shape)
    n = int(rng.integers(0, nd + 1))
    if rng.random() < 0.3:
        p = int(rng.integers(0, n + 1))  # the ellipsis stands for the dims between
        items = [random_item(shape[d]) for d in range(p)] + [Ellipsis]
        items += [random_item(shape[d]) for d in range(nd - (n - p), nd)]
    else:
        items = [random_item(shape[d]) for d in range(n)]
    if len(items) == 1 and rng.random() < 0.5:
        return items[0]  # a bare item, not a tuple
    return tuple(items)


def to_host(ctx, a):
    """The elements of any gpuwrap array, copied into host memory, as a NumPy array."""
    h = ctx.alloc("host", a.dtype, a.shape)
    h.copy_from(a)
    return np.asarray(h).copy()


@pytest.mark.parametrize("kind", ["host", "pinned", "managed", "device"])
def test_getitem_matches_numpy(ctx, kind):
    """Many random basic indices of random shapes (empty extents too): the view has NumPy's
    shape and every element NumPy's, and shares the memory (a write through it is seen
    in the parent where NumPy's view of the same index points)."""
    checked = 0
    for trial in range(300):
        nd = int(rng.integers(1, 5))
        shape = tuple(int(rng.integers(0 if rng.random() < 0.1 else 1, 7)) for _ in range(nd))
        ref = rng.integers(-10**6, 10**6, size=shape).astype(np.int32)
        a = ctx.alloc(kind, "int32", shape)
        src = ctx.wrap(ref, "int32", shape)
        a.copy_from(src)
        src.release()
        for _ in range(8):
            idx = random_index(shape)
            want = ref[idx]
            v = a[idx]
            assert isinstance(v, gpuwrap.Array)
            assert v.shape == want.shape, (shape, idx, v.shape, want.shape)
            assert v.kind == a.kind and v.dtype == "int32"
            got = np.asarray(v) if kind != "device" else to_host(ctx, v)
            assert got.shape == want.shape
            assert np.array_equal(got, want), (shape, idx)
            if v.size:  # shares the memory: write through the view, read the parent
                fresh = rng.integers(-10**6, 10**6, size=want.shape).astype(np.int32)
                w = ctx.wrap(fresh, "int32", fresh.shape)
                v.copy_from(w)
                w.release()
                ref[idx] = fresh
                whole = np.asarray(a) if kind != "device" else to_host(ctx, a)
                assert np.array_equal(whole, ref), (shape, idx)
            checked += 1
        a.release()
    assert checked == 300 * 8


def test_getitem_examples(ctx):
    x = np.arange(64 * 48, dtype=np.float64).reshape(64, 48)
    a = ctx.wrap(x, "float64", x.shape)
    v = a[2:62:3, 1:47:2]  # what a Python user types first
    assert v.shape == (20, 23) and v.strides == (3 * 48, 2)
    assert np.array_equal(np.asarray(v), x[2:62:3, 1:47:2])
    assert np.asarray(v).ctypes.data == x[2:62:3, 1:47:2].ctypes.data  # no copy
    assert np.array_equal(np.asarray(a[::-1, ::-5]), x[::-1, ::-5])
    assert np.array_equal(np.asarray(a[-1]), x[-1]) and a[-1].shape == (48,)
    assert np.array_equal(np.asarray(a[:, -3]), x[:, -3]) and a[:, -3].strides == (48,)
    assert np.array_equal(np.asarray(a[..., 7]), x[..., 7])
    assert np.array_equal(np.asarray(a[5, ...]), x[5, ...])
    assert np.array_equal(np.asarray(a[...]), x) and a[...].shape == x.shape
    assert np.array_equal(np.asarray(a[np.int64(3), np.uint8(4)]), x[3, 4])  # NumPy ints
    s = a[3, 4]  # all ints: a 0-d view, not a Python number
    assert isinstance(s, gpuwrap.Array) and s.shape == () and s.ndim == 0 and s.size == 1
    assert np.asarray(s).ctypes.data == x[3:, 4:].ctypes.data and float(np.asarray(s)) == x[3, 4]
    s.fill(-1.0)
    assert x[3, 4] == -1.0
    assert a[3, 4][...].shape == () and a[3][4].shape == ()
    e = a[10:2]
    assert e.shape == (0, 48) and e.size == 0
    # views of views, with negative steps, and strided parents
    vv = a[::-2][1::3, ::-1][2]
    assert np.array_equal(np.asarray(vv), x[::-2][1::3, ::-1][2])
    a.release()


def test_getitem_keeps_memory_and_flags(ctx, counter):
    x = np.arange(24, dtype=np.int16).reshape(4, 6)
    a = ctx.wrap(x.ctypes.data, "int16", (4, 6), deleter=counter)
    v = a[1::2, ::-1]
    a.release()
    del a
    gc.collect()
    assert counter.calls == 0  # the view keeps the memory
    assert np.array_equal(np.asarray(v), x[1::2, ::-1])
    v.release()
    del v  # (its NumPy view's reference goes with the object: __array_interface__'s rule)
    gc.collect()
    assert counter.calls == 1
    r = ctx.wrap(x, "int16", (4, 6), readonly=True)
    assert r[2].readonly and r[1:, 2].readonly
    with pytest.raises(gpuwrap.GpuwrapError):
        r[2].fill(1)
    r.release()


def test_getitem_errors(ctx):
    a = ctx.alloc("host", "float32", (4, 5))
    for bad in ([0, 1], np.array([0, 1]), None, True, np.bool_(False), 1.5, "x", (0, [1]),
                (None, 0), np.array([True, False, True, True]), (slice(None), None)):
        with pytest.raises(TypeError) as e:
            a[bad]
        msg = str(e.value)
        assert "basic slicing" in msg and "consumer library" in msg and "np.asarray" in msg, msg
    with pytest.raises(IndexError, match="out of bounds for axis 0 with size 4"):
        a[4]
    with pytest.raises(IndexError, match="-5 is out of bounds for axis 0"):
        a[-5]
    with pytest.raises(IndexError, match="axis 1 with size 5"):
        a[0, 5]
    with pytest.raises(IndexError, match="too many indices"):
        a[0, 0, 0]
    with pytest.raises(IndexError, match="too many indices"):
        a[..., 0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        a[..., ...]
    with pytest.raises(ValueError, match="zero"):
        a[::0]
    with pytest.raises(IndexError):
        a[1 << 70]
    z = a[1, 2]
    with pytest.raises(IndexError, match="too many indices"):
        z[0]
    assert z[()].shape == () and z[...].shape == ()
    a.release()
    with pytest.raises(ValueError, match="released"):
        a[0]
