"""gpuwrap <-> NumPy on the CPU backend: DLPack and the array interface both ways, every
dtype, lifetimes (the producer's deleter exactly once), the protocol's arguments."""
import ctypes
import gc
import itertools
import os
import sys
import weakref

import numpy as np
import pytest

import gpuwrap
from conftest import Counter

NP_VERSION = tuple(int(x) for x in np.__version__.split(".")[:2])
NP_2 = NP_VERSION >= (2, 0)          # numpy 1.x: read-only DLPack imports, no bool
NP_VERSIONED = NP_VERSION >= (2, 1)  # numpy asks for versioned capsules

SEED = int(os.environ.get("GW_TEST_SEED", int.from_bytes(os.urandom(4), "little")))
rng = np.random.default_rng(SEED)

NUMPY_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                "float16", "float32", "float64", "complex64", "complex128"]


def wrapped(ctx, counter, n=12, ctype=ctypes.c_float, dtype="float32", **kw):
    buf = (ctype * n)(*range(n))
    return buf, ctx.wrap(ctypes.addressof(buf), dtype, (n,), deleter=counter, **kw)


def test_to_numpy_dlpack(ctx, counter):
    buf, a = wrapped(ctx, counter)
    a2 = a.view((0,), (12,))  # exported through a view: a second gpuwrap reference
    n = np.from_dlpack(a2).reshape(3, 4)
    assert n.ctypes.data == ctypes.addressof(buf) and n.dtype == np.float32
    assert (n.ravel() == np.arange(12, dtype=np.float32)).all()
    if n.flags.writeable:  # numpy 1.x makes DLPack imports read-only
        i = int(rng.integers(12))
        n.flat[i] = 42.0
        assert buf[i] == 42.0, "a numpy write lands in the wrapped buffer"
    v = float(rng.random())
    a.fill(v)
    assert (n == np.float32(v)).all()
    a.release()
    a2.release()
    gc.collect()
    assert counter.calls == 0, "numpy's view keeps the memory alive after release()"
    del n
    gc.collect()
    assert counter.calls == 1 and counter.ptr == ctypes.addressof(buf)


def test_to_numpy_array_interface(ctx, counter):
    buf, a = wrapped(ctx, counter)
    n = np.asarray(a)
    assert n.ctypes.data == ctypes.addressof(buf) and n.dtype == np.float32 and n.shape == (12,)
    n[3] = 42.0
    assert buf[3] == 42.0, "NumPy writes through the array interface"
    v = a.view((10,), (4,), (-3,))  # 10, 7, 4, 1: negative strides in bytes
    nv = np.asarray(v)
    assert list(nv) == [10.0, 7.0, 4.0, 1.0] and nv.strides == (-12,)
    ai = a.__array_interface__
    assert ai["version"] == 3 and ai["typestr"] == "<f4" and ai["strides"] is None
    assert ai["data"] == (ctypes.addressof(buf), False)
    ro = ctx.wrap(ctypes.addressof(buf), "float32", (12,), readonly=True)
    assert not np.asarray(ro).flags.writeable
    assert np.array(a).ctypes.data != n.ctypes.data  # np.array copies, as for any object
    for x in (a, v, ro):
        x.release()
    del n, nv


def test_device_memory_refused_by_numpy(ctx):
    d = ctx.alloc("device", "float32", (4,))
    assert not hasattr(d, "__array_interface__")
    with pytest.raises(TypeError, match="not host-accessible"):
        np.asarray(d)
    # Issue 43 item 13: DLPack too, as on a GPU (kDLCUDA there, kDLExtDev on the model:
    # NumPy refuses both), so code that passes here does not break on a GPU.
    assert d.__dlpack_device__() == (12, 0)
    with pytest.raises((RuntimeError, BufferError, TypeError, ValueError)):
        np.from_dlpack(d)
    with pytest.raises(BufferError, match="not host-accessible") as e:
        d.__dlpack__(max_version=(1, 0), dl_device=(gpuwrap.kDLCPU, 0))
    assert e.value.name == "GW_ENOTSUP"
    # The named way to read it on the host: a copy.
    d.fill(2.5)
    h = ctx.alloc("pinned", "float32", (4,))
    h.copy_from(d)
    assert (np.asarray(h) == 2.5).all() and (np.from_dlpack(h) == 2.5).all()
    # gpuwrap takes its own export back.
    back = gpuwrap.from_dlpack(d, ctx)
    assert back.kind == "device" and back.data_ptr == d.data_ptr
    for x in (back, h, d):
        x.release()


@pytest.mark.parametrize("name", NUMPY_DTYPES)
def test_every_dtype_both_ways(ctx, name):
    x = np.zeros(4, dtype=name)
    if name != "bool" or NP_2:
        g = gpuwrap.from_dlpack(x, ctx)
        assert g.dtype == name and g.host_ptr == x.ctypes.data
        back = np.from_dlpack(g)
        assert back.dtype == np.dtype(name) and back.ctypes.data == x.ctypes.data
        g.release()
    # the array interface, and each spelling of the dtype
    for spelling in (name, np.dtype(name), np.dtype(name).type, np.dtype(name).str):
        w = ctx.wrap(x.ctypes.data, spelling, x.shape)
        assert w.dtype == name, spelling
        y = np.asarray(w)
        assert y.dtype == np.dtype(name) and y.ctypes.data == x.ctypes.data
        w.release()
    a = ctx.alloc("host", name, (3,))
    assert a.itemsize == np.dtype(name).itemsize and a.nbytes == 3 * a.itemsize
    a.fill(1)
    assert (np.asarray(a) == 1).all()
    a.release()


def test_bfloat16(ctx):
    a = ctx.alloc("host", "bfloat16", (4,))
    a.fill(1.5)
    raw = (ctypes.c_uint16 * 4).from_address(a.host_ptr)
    assert list(raw) == [0x3FC0] * 4
    a.release()


def test_bfloat16_to_numpy(ctx):
    """np.asarray of a bfloat16 array gave AttributeError: NumPy has no bfloat16, so its
    elements come as two opaque bytes ('|V2') over the same memory, which .view(np.uint16)
    shows as their bits (documented in docs/API.md)."""
    bits = rng.integers(0, 1 << 16, size=(3, 5), dtype=np.uint16)
    for kind in ("host", "pinned", "managed"):
        a = ctx.alloc(kind, "bfloat16", (3, 5))
        w = ctx.wrap(a.host_ptr, "uint16", (3, 5))
        np.asarray(w)[...] = bits
        n = np.asarray(a)
        assert n.dtype == np.dtype("V2") and n.shape == (3, 5)
        assert n.ctypes.data == a.host_ptr  # the same memory, no copy
        assert np.array_equal(n.view(np.uint16), bits)
        v = a.view((2, 4), (2, 3), (-1, -2))  # strided too
        assert np.array_equal(np.asarray(v).view(np.uint16), bits[2::-1, 4::-2][:2, :3])
        a.fill(1.5)  # writes seen through NumPy's view, and NumPy's writes through gpuwrap
        assert (n.view(np.uint16) == 0x3FC0).all()
        n.view(np.uint16)[0, 0] = 0x4000  # 2.0
        assert np.asarray(w)[0, 0] == 0x4000
        w.release()
        del n
        a.release()


def test_from_numpy(ctx):
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    refs = sys.getrefcount(x)
    g = gpuwrap.from_dlpack(x, ctx)
    assert g.host_ptr == x.ctypes.data and g.shape == (3, 4) and g.strides == (4, 1)
    assert g.kind in ("host", "pinned") and sys.getrefcount(x) == refs + 1
    val = float(rng.random())
    g.fill(val)
    assert (x == val).all()
    v = g.view((0, 1), (3, 2), (1, 2))
    g.release()
    assert sys.getrefcount(x) == refs + 1, "a view keeps numpy's array"
    v.release()
    gc.collect()
    assert sys.getrefcount(x) == refs, "numpy's deleter ran exactly once"
    g = gpuwrap.from_dlpack(x[:, ::2], ctx)
    assert g.strides == (4, 2) and g.shape == (3, 2)
    g.release()


def test_round_trip(ctx, counter):
    buf, a = wrapped(ctx, counter, 6)
    n = np.from_dlpack(a)  # read-only on NumPy 1.x, which then refuses to export it by DLPack
    b = gpuwrap.from_dlpack(n, ctx)  # ...so it comes through the array interface, read-only
    assert b.readonly == (not n.flags.writeable) and b.shape == (6,) and b.dtype == "float32"
    assert (np.asarray(b) == np.arange(6, dtype=np.float32)).all()
    c = gpuwrap.from_dlpack(a.__dlpack__(max_version=(1, 0)), ctx)
    d = gpuwrap.from_dlpack(a.__dlpack__(), ctx)
    e = gpuwrap.from_dlpack(np.asarray(a), ctx)  # array interface out, DLPack in
    for x in (b, c, d, e):
        assert x.host_ptr == ctypes.addressof(buf)
    for x in (a, b, c, d, e):
        x.release()
    del a, b, x, n  # `a`, `b` exported their array interface: each object holds a reference until collected
    gc.collect()
    assert counter.calls == 1


def test_release_orders(ctx):
    for order in itertools.permutations(range(3)):
        counter = Counter()
        buf, a = wrapped(ctx, counter, 8)
        objs = [a, np.from_dlpack(a), a.__dlpack__(max_version=(1, 0))]
        for i in order:
            assert counter.calls == 0
            if i == 0:
                objs[0].release()
            objs[i] = None
            gc.collect()
        assert counter.calls == 1, order
        del a


def test_dlpack_arguments(ctx, counter):
    buf, a = wrapped(ctx, counter, 4)
    with pytest.raises(BufferError, match="never copies"):
        a.__dlpack__(copy=True)
    gpuwrap.from_dlpack(a.__dlpack__(copy=False), ctx).release()
    for bad in ((1,), [1, 0], "1.0", (1, "0"), 1):
        with pytest.raises(TypeError, match="max_version"):
            a.__dlpack__(max_version=bad)
    with pytest.raises(ValueError):
        a.__dlpack__(max_version=(-1, 0))
    with pytest.raises(TypeError):
        a.__dlpack__(copy="yes")
    with pytest.raises(TypeError):
        a.__dlpack__(1)
    with pytest.raises(TypeError, match="dl_device"):
        a.__dlpack__(dl_device=1)
    with pytest.raises(TypeError, match="unexpected keyword"):
        a.__dlpack__(strem=None)
    import ctypes as C
    get_name = C.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = C.c_char_p, [C.py_object]
    assert get_name(a.__dlpack__(max_version=(1, 0))) == b"dltensor_versioned"
    # A consumer of a later major still gets 1.x (it reads the version field and decides).
    assert get_name(a.__dlpack__(max_version=(2, 3))) == b"dltensor_versioned"
    assert get_name(a.__dlpack__(max_version=(0, 8))) == b"dltensor"
    assert get_name(a.__dlpack__()) == b"dltensor"
    assert a.__dlpack_device__() == (gpuwrap.kDLCPU, 0)
    n = np.from_dlpack(a.offer("cpu"))
    assert n.ctypes.data == ctypes.addressof(buf)
    with pytest.raises(BufferError):
        a.offer("cuda")
    with pytest.raises(ValueError, match="'cpu'"):
        a.offer("cdua")
    del n
    a.release()


def test_readonly(ctx, counter):
    buf, a = wrapped(ctx, counter, 4, readonly=True)
    with pytest.raises(BufferError) as e:
        a.__dlpack__()
    assert isinstance(e.value, gpuwrap.GpuwrapError) and e.value.name == "GW_EREADONLY"
    assert "read-only" in str(e.value) or "readonly" in str(e.value).lower()
    g = gpuwrap.from_dlpack(a.__dlpack__(max_version=(1, 0)), ctx)
    assert g.readonly
    with pytest.raises(gpuwrap.GpuwrapError) as e:
        g.fill(1.0)
    assert e.value.name == "GW_EREADONLY" and e.value.status == -8
    if NP_VERSIONED:
        n = np.from_dlpack(a)
        assert not n.flags.writeable, "numpy >= 2.1 gets a read-only array"
        del n
    else:  # legacy capsules only: no read-only flag to carry it
        with pytest.raises(BufferError):
            np.from_dlpack(a)
    g.release()
    a.release()
    gc.collect()
    assert counter.calls == 1


def test_strided_and_zero_size_dlpack(ctx, counter):
    n = 20
    x = rng.random(n)
    buf = (ctypes.c_double * n)(*x)
    a = ctx.wrap(ctypes.addressof(buf), "float64", (n,), deleter=counter)
    v = a.view((19,), (5,), (-3,))  # 19, 16, 13, 10, 7
    nv = np.from_dlpack(v)
    assert nv.strides == (-24,), "numpy's strides in bytes"
    assert np.array_equal(nv, x[19:6:-3])
    z = ctx.wrap(0, "int32", (0, 4))  # NULL is fine without elements
    nz = np.from_dlpack(z)
    assert nz.shape == (0, 4) and nz.dtype == np.int32
    # and through __array_interface__ (NumPy refuses a data address of 0, even empty)
    na = np.asarray(z)
    assert na.shape == (0, 4) and na.dtype == np.int32 and na.size == 0
    del nv, nz, na
    v.release()
    z.release()
    a.release()
    gc.collect()
    assert counter.calls == 1


# A hand-made DLPack producer: a refused import still runs its deleter exactly once.
V_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(gpuwrap.DLManagedTensorVersioned))


def test_import_refusals(ctx):
    deleted = []

    @V_DELETER
    def v_deleter(p):
        deleted.append(1)
    capsule_new = ctypes.pythonapi.PyCapsule_New
    capsule_new.restype = ctypes.py_object
    capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    data = (ctypes.c_float * 4)()
    shape = (ctypes.c_int64 * 1)(4)
    strides = (ctypes.c_int64 * 1)(1)
    for devtype, major, want in [(gpuwrap.kDLCUDA, 1, "GW_EDEVICE"), (gpuwrap.kDLCPU, 2, "GW_ENOTSUP")]:
        t = gpuwrap.DLTensor(ctypes.addressof(data), gpuwrap.DLDevice(devtype, 0), 1,
                             gpuwrap.DLDataType(2, 32, 1), shape, strides, 0)
        m = gpuwrap.DLManagedTensorVersioned(gpuwrap.DLPackVersion(major, 0), None, v_deleter, 0, t)
        cap = capsule_new(ctypes.addressof(m), b"dltensor_versioned", None)
        before = len(deleted)
        with pytest.raises(gpuwrap.GpuwrapError) as e:
            gpuwrap.from_dlpack(cap, ctx)
        assert e.value.name == want, (devtype, major, str(e.value))
        assert len(deleted) == before + 1, "the refused tensor's deleter ran exactly once"
        del cap


def test_capsule_rules(ctx, counter):
    buf, a = wrapped(ctx, counter, 4)
    cap = a.__dlpack__(max_version=(1, 0))
    g = gpuwrap.from_dlpack(cap, ctx)
    with pytest.raises(ValueError, match="already consumed"):
        gpuwrap.from_dlpack(cap, ctx)

    def gen():  # capsules freed while an exception is pending: it survives, tensors go
        yield a.__dlpack__(max_version=(1, 0))
        yield a.__dlpack__()
        raise KeyError("pending")
    for _ in range(3):
        with pytest.raises(KeyError):
            tuple(gen())
    g.release()
    a.release()
    del cap
    gc.collect()
    assert counter.calls == 1


def test_properties_and_repr(ctx, counter):
    buf, a = wrapped(ctx, counter, 12)
    assert (a.size, a.nbytes, a.itemsize, a.ndim, a.readonly) == (12, 48, 4, 1, False)
    assert a.kind == "pinned"  # the CPU model registers pageable memory on wrap
    r = repr(a)
    assert f"0x{ctypes.addressof(buf):x}" in r and "float32[12]" in r, r
    other = (ctypes.c_float * 12)()  # not registered by anyone: stays pageable
    h = ctx.wrap(ctypes.addressof(other), "float32", (12,), no_register=True)
    assert h.kind == "host" and h.data_ptr is None and h.host_ptr == ctypes.addressof(other)
    assert f"host=0x{ctypes.addressof(other):x}" in repr(h), repr(h)
    with a:
        pass
    assert a.released and repr(a) == "<gpuwrap.Array released>"
    h.release()


def test_array_interface_keeps_memory(ctx, counter):
    # NumPy's view through __array_interface__ holds the Array object; release() must not
    # free the memory under it: the deleter runs once both are gone.
    buf, a = wrapped(ctx, counter, 8)
    n = np.asarray(a)
    a.release()
    gc.collect()
    assert counter.calls == 0 and n[7] == 7.0
    del a
    gc.collect()
    assert counter.calls == 0, "the view still holds the object"
    del n
    gc.collect()
    assert counter.calls == 1


class _Owner:
    """A buffer owner whose array's deleter is its own bound method: the cycle
    owner -> array -> (the library) -> deleter -> owner, which only gpuwrap can show the
    collector. A weakref.finalize on it stands for any finalizer that frees what the
    memory belongs to: it must not run while anything can still read the memory."""

    def __init__(self, ctx, log, n):
        self.buf = (ctypes.c_double * n)(*rng.standard_normal(n))
        self.log = log
        self.arr = ctx.wrap(ctypes.addressof(self.buf), "float64", (n,), deleter=self._free)
        weakref.finalize(self, log.append, "finalized")

    def _free(self, ptr):
        # Runs before the collector clears anything (PEP 442): self is whole here.
        self.log.append((ptr, ctypes.addressof(self.buf), len(self.buf)))


def _owners(log):
    return [x for x in gc.get_objects() if isinstance(x, _Owner) and x.log is log]


def test_deleter_cycle_is_collected(ctx):
    log = []
    n = int(rng.integers(1, 512))
    o = _Owner(ctx, log, n)
    addr, ref = ctypes.addressof(o.buf), weakref.ref(o)
    del o
    assert log == [] and ref() is not None, "a cycle: nothing is freed before a collection"
    gc.collect()
    assert ref() is None, "the owner, its array and the deleter were collected"
    # (CPython runs the weak reference callbacks of garbage first, then the finalizers)
    assert sorted(log, key=str) == sorted([(addr, addr, n), "finalized"], key=str), \
        "the deleter ran once, with its owner intact, and the owner was finalized"
    assert _owners(log) == []
    gc.collect()
    assert len(log) == 2


def test_deleter_cycle_after_array_interface(ctx):
    """np.asarray(a) through __array_interface__ gives NumPy a reference the Array keeps
    for its whole life (NumPy's views hold the Array, not a reference of their own): such
    an owner cycle is not freed (docs/RELIABILITY.md, left), and above all nothing of it is
    finalized while a view reads the memory."""
    log = []
    n = int(rng.integers(1, 512))
    o = _Owner(ctx, log, n)
    expect = np.ctypeslib.as_array(o.buf).copy()
    v = np.asarray(o.arr)
    del o
    gc.collect()
    assert log == [] and np.array_equal(v, expect)
    views = [v[::2], v[1:]]
    del v
    gc.collect()
    assert log == [], "views of it still read the memory: nothing finalized"
    assert np.array_equal(views[0], expect[::2]) and np.array_equal(views[1], expect[1:])


_saved = []


class _Resurrecting(_Owner):
    """An owner whose own finalizer makes a NumPy array of its memory during the
    collection that finds its cycle, and keeps it: that array must stay readable."""

    def __del__(self):
        try:
            _saved.append((np.asarray(self.arr), self.log))
        except gpuwrap.GpuwrapError:
            pass  # the array was given up first: no NumPy array of it can be made
        except ValueError:
            pass


def test_deleter_cycle_resurrected_by_a_finalizer(ctx):
    log = []
    n = int(rng.integers(1, 512))
    o = _Resurrecting(ctx, log, n)
    expect = np.ctypeslib.as_array(o.buf).copy()
    addr = ctypes.addressof(o.buf)
    del o
    gc.collect()
    mine = [v for v, lg in _saved if lg is log]
    if mine:  # the finalizer ran first: the array it made keeps the memory
        assert (addr, addr, n) not in log, "no deleter under a NumPy array of the memory"
        assert np.array_equal(mine[0], expect), "every element still readable"
    else:     # the array was given up first: the deleter ran, with the owner whole
        assert (addr, addr, n) in log
    _saved[:] = [(v, lg) for v, lg in _saved if lg is not log]


@pytest.mark.parametrize("holder", ["dlpack", "view"])
def test_deleter_cycle_waits_for_other_holders(ctx, holder):
    """A NumPy array made through DLPack, or a gpuwrap view, holds the wrap's root from C:
    collecting must not treat the owner as garbage (no finalizer, no cleared weak
    reference, no deleter) while it reads the memory; all of it goes after it does."""
    log = []
    n = int(rng.integers(2, 512))
    o = _Owner(ctx, log, n)
    expect = np.ctypeslib.as_array(o.buf).copy()
    if holder == "dlpack":
        keep = np.from_dlpack(o.arr)
        read = lambda: np.array(keep)
    else:
        keep = o.arr.view((1,), (n - 1,))
        read = lambda: np.from_dlpack(keep).copy()
    addr, ref = ctypes.addressof(o.buf), weakref.ref(o)
    del o
    gc.collect()
    assert log == [], "the memory is still read: no deleter, no finalizer"
    assert ref() is not None, "and the owner is not garbage (its weak references stand)"
    got = read()
    assert np.array_equal(got, expect if holder == "dlpack" else expect[1:])
    del keep, read, got
    gc.collect()
    assert sorted(log, key=str) == sorted([(addr, addr, n), "finalized"], key=str), \
        "the deleter ran once, after the holder went, owner intact"
    assert ref() is None and _owners(log) == []


def test_read_only_numpy_round_trip(ctx, counter):
    """np.from_dlpack of a gpuwrap array and back: on NumPy < 2 the NumPy array is read-only
    and NumPy refuses to export it by DLPack; gpuwrap takes it through the array interface
    as a read-only array over the same memory. A read-only gpuwrap array asked for a legacy
    capsule names the Python ways to share it."""
    vals = rng.random(8).astype(np.float32)
    buf = (ctypes.c_float * 8)(*vals)
    a = ctx.wrap(ctypes.addressof(buf), "float32", (2, 4), deleter=counter)
    n = np.from_dlpack(a)
    ro = np.asarray(a)
    ro.flags.writeable = False
    for src in (n, ro, ro[:, ::2]):
        b = gpuwrap.from_dlpack(src, ctx)
        assert b.readonly == (not src.flags.writeable)
        assert b.host_ptr == src.ctypes.data and b.shape == src.shape
        assert b.strides == tuple(s // 4 for s in src.strides)
        assert (np.asarray(b) == src).all()
        if b.readonly:
            with pytest.raises(gpuwrap.GpuwrapError, match="GW_EREADONLY"):
                b.fill(0.0)
        b.release()
    assert list(buf) == list(vals), "nothing wrote into the memory"
    r = ctx.wrap(ctypes.addressof(buf), "float32", (8,), readonly=True)
    with pytest.raises(BufferError) as e:
        r.__dlpack__()  # what NumPy < 2.1's np.from_dlpack asks for: a legacy capsule
    msg = str(e.value)
    assert "gw_to_dlpack" not in msg and "max_version=(1, 0)" in msg and "np.asarray" in msg
    assert not np.asarray(r).flags.writeable
    r.release()
    a.release()
    del a, b, n, ro, src, r
    gc.collect()
    assert counter.calls == 1


class _Holder:
    """Holds an array whose deleter is its own bound method: holder -> array -> (the
    library) -> deleter -> holder, a cycle only the collector can break."""

    def __init__(self, ctx, log, n):
        self.vals = rng.random(n)
        self.buf = (ctypes.c_double * n)(*self.vals)
        self.log = log
        self.arr = ctx.wrap(ctypes.addressof(self.buf), "float64", (n,), deleter=self._free)

    def _free(self, ptr):
        # runs with the holder intact: its attributes and its buffer's values still there
        self.log.append((ptr, ptr == ctypes.addressof(self.buf), list(self.buf) == list(self.vals)))


@pytest.mark.parametrize("release", [False, True])
def test_bound_method_deleter_after_numpy(ctx, release):
    """A deleter that refers back to its holder runs exactly once when NumPy's views and the
    holder are gone and the collector runs: the array object shows the collector the
    deleter while its references are all the wrap has, NumPy's included."""
    log = []
    h = _Holder(ctx, log, 16)
    views = [np.asarray(h.arr), np.asarray(h.arr)[::3], np.from_dlpack(h.arr)]
    assert (views[0] == h.vals).all() and (views[1] == h.vals[::3]).all()
    if release:
        h.arr.release()  # NumPy's views keep the memory: the array object still holds it
    gc.collect()
    assert log == [], "the views hold the memory"
    assert (views[0] == h.vals).all()
    ref = weakref.ref(h)
    del views, h
    gc.collect()
    assert len(log) == 1 and log[0][1:] == (True, True), log
    assert ref() is None, "the holder was collected"
    gc.collect()
    assert len(log) == 1


def test_bound_method_deleter_new_view_in_finalizer(ctx):
    """A finalizer of the same garbage that makes a NumPy view of the array and keeps it
    past the collection keeps the memory (the deleter waits for that view); one that runs
    after the array's finalizer finds it released. Either way the deleter runs once and no
    view reads freed memory."""
    log, kept, errors = [], [], []

    class Rescuer:
        def __del__(self):
            try:
                kept.append(np.asarray(self.h.arr))
            except ValueError as e:  # the array's finalizer ran first: released
                errors.append(str(e))

    r = Rescuer()  # made first: CPython finalizes this garbage in the order it was made
    h = _Holder(ctx, log, 8)
    vals, addr = list(h.vals), ctypes.addressof(h.buf)
    np.asarray(h.arr)  # the array object holds a reference for NumPy from now on
    r.h, h.r = h, r
    del h, r
    gc.collect()
    if kept:
        assert log == [] and not errors, "a view made during the collection keeps the memory"
        assert kept[0].ctypes.data == addr and list(kept[0]) == vals
        del kept[:]
        gc.collect()
    else:
        assert errors and "released" in errors[0]
    assert len(log) == 1 and log[0][1:] == (True, True), log


def test_wrap_object_refuses_span_outside_it(ctx):
    """Context.wrap of an object that exposes its memory checks shape and strides (in
    elements) against it: NumPy's byte strides given by mistake are refused with GW_ERANGE
    naming the extent, before anything is written."""
    y = rng.random((3, 4))
    guard = y.copy()
    with pytest.raises(gpuwrap.GpuwrapError) as e:
        ctx.wrap(y, "float64", (3, 4), y.strides)  # (32, 8): bytes, not elements
    err = e.value
    assert err.name == "GW_ERANGE" and err.status == -5
    assert "strides (32, 8)" in err.detail and "0 .. 712" in err.detail and "0 .. 96" in err.detail
    assert "not bytes" in err.detail
    assert (y == guard).all()
    for shape, strides in [((13,), None), ((3, 5), None), ((4, 3), (4, 1)), ((2,), (12,)),
                           ((2, 2), (-1, 1)), ((1 << 62,), (1 << 62,))]:
        with pytest.raises(gpuwrap.GpuwrapError, match="GW_ERANGE"):
            ctx.wrap(y, "float64", shape, strides)
    with pytest.raises(gpuwrap.GpuwrapError, match="GW_ERANGE"):
        ctx.wrap(y, "complex128", (7,))  # 112 bytes of 96
    with pytest.raises(gpuwrap.GpuwrapError, match="GW_ERANGE"):  # a view starts inside its base
        ctx.wrap(y[1:], "float64", (3, 4))
    with pytest.raises(gpuwrap.GpuwrapError, match="GW_ERANGE"):  # the interface says 4 bytes
        ctx.wrap(_Iface(y[0, :1]), "float64", (2,))
    assert (y == guard).all()
    # inside: every element written where the shape and strides say, the rest untouched
    for shape, strides in [((3, 4), (4, 1)), ((3, 4), None), ((12,), None), ((2, 2), (4, 2)),
                           ((0, 99), (1, 1))]:
        y[...] = guard
        a = ctx.wrap(y, np.float64, shape, strides)
        v = float(rng.random())
        a.fill(v)
        want = guard.copy()
        if 0 not in shape:
            idx = np.lib.stride_tricks.as_strided(np.arange(12), shape,
                                                  tuple(8 * s for s in strides) if strides else None)
            want.flat[idx.ravel()] = v
        assert (y == want).all()
        assert np.asarray(a).shape == shape
        a.release()
    # an object whose element 0 is not its first byte: negative strides reach back inside it
    y[...] = guard
    r = y[::-1, ::-1]
    a = ctx.wrap(r, "float64", (3, 4), (-4, -1))
    assert a.host_ptr == r.ctypes.data == y[2:, 3:].ctypes.data
    a.fill(5.0)
    assert (y == 5.0).all()
    with pytest.raises(gpuwrap.GpuwrapError, match="GW_ERANGE"):
        ctx.wrap(r, "float64", (3, 4))  # forward from the last element
    a.release()


class _Iface:
    """An object with only __array_interface__ (NumPy's), no buffer protocol."""

    def __init__(self, arr):
        self.arr = arr
        self.__array_interface__ = arr.__array_interface__


def test_wrap_object_memory_and_lifetime(ctx, counter):
    """wrap(obj, ...): the buffer protocol, __array_interface__ and a gpuwrap Array's
    interface; the object stays alive (its buffer exported) while wrapped; a read-only
    buffer gives a read-only array; own=True is refused; a deleter runs once, after which
    the object is let go."""
    x = rng.random(8)
    ref = weakref.ref(_Iface(x))  # dropped at once
    assert ref() is None
    for make in (lambda: x, lambda: memoryview(x), lambda: _Iface(x)):
        obj = make()
        r = weakref.ref(obj) if not isinstance(obj, (np.ndarray, memoryview)) else None
        a = ctx.wrap(obj, "float64", (2, 4))
        assert a.host_ptr == x.ctypes.data and not a.readonly
        del obj
        gc.collect()
        if r is not None:
            assert r() is not None, "the array keeps the object"
        v = float(rng.random())
        a.fill(v)
        assert (x == v).all()
        a.release()
        gc.collect()
        if r is not None:
            assert r() is None, "released: the object is let go"
    ba = bytearray(rng.bytes(32))
    a = ctx.wrap(ba, "uint8", (32,), deleter=counter)
    with pytest.raises(BufferError):
        ba.extend(b"x")  # exported: it cannot move under the array
    a.fill(7)
    assert ba == bytearray([7] * 32)
    a.release()
    assert counter.calls == 1 and counter.ptr == np.frombuffer(ba, np.uint8).ctypes.data
    ba.extend(b"x")  # let go
    data = rng.bytes(16)
    ro = ctx.wrap(data, "uint8", (16,))
    assert ro.readonly and bytes(np.asarray(ro)) == data
    with pytest.raises(gpuwrap.GpuwrapError, match="GW_EREADONLY"):
        ro.fill(0)
    ro.release()
    frozen = x.copy()
    frozen.flags.writeable = False
    ro = ctx.wrap(frozen, "float64", (8,))
    assert ro.readonly
    ro.release()
    with pytest.raises(ValueError, match="own=True"):
        ctx.wrap(x, "float64", (8,), own=True)
    src = ctx.alloc("host", "float32", (6,))  # a gpuwrap Array through its array interface
    w = ctx.wrap(src, "float32", (2, 3))
    assert w.host_ptr == src.host_ptr
    with pytest.raises(gpuwrap.GpuwrapError, match="GW_ERANGE"):
        ctx.wrap(src, "float32", (7,))
    with pytest.raises(TypeError, match="exposes its memory"):
        ctx.wrap(object(), "float32", (1,))
    with pytest.raises(TypeError, match="exposes its memory"):
        ctx.wrap("0x1000", "float32", (1,))
    assert ctx.wrap(np.uint64(0), "float32", (0,)).size == 0  # an integer scalar is an address
    for z in (w, src):
        z.release()


@pytest.mark.parametrize("dt", ["int8", "int16", "int32", "int64",
                                "uint8", "uint16", "uint32", "uint64"])
def test_fill_integers_every_width(ctx, dt):
    """fill() stores an integer as the dtype's width does: the extremes, -1 and a fresh value,
    over a poisoned buffer, every element checked."""
    info = np.iinfo(dt)
    fresh = int(rng.integers(int(info.min), int(info.max), endpoint=True, dtype=np.int64
                             if info.min < 0 else np.uint64))
    for v in (int(info.min), int(info.max), -1 if info.min < 0 else 1, fresh):
        x = np.full(7, info.max // 3, dtype=dt)  # poison
        a = ctx.wrap(x, dt, (7,))
        a.fill(v)
        assert (x == np.array(v, dtype=dt)).all(), (dt, v, x)
        a.release()
