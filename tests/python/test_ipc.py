"""Array.ipc_handle() / Context.ipc_open() on the CPU model: the exporting process here, the
importing one a multiprocessing child started with "spawn" (a fresh interpreter, not a
fork: the CPU model's device memory is opened through /proc/<pid>/fd, as the runtimes' IPC
maps it in a process that shares nothing with the exporter). Every element read and
written back is checked, with fresh random data each run."""
import multiprocessing
import pickle

import numpy as np
import pytest

import gpuwrap

SPAWN = multiprocessing.get_context("spawn")


def to_host(ctx, a):
    """A NumPy copy of any array (device memory is not host-accessible on the CPU model),
    through a poisoned host array, so an element the copy misses shows."""
    h = ctx.alloc("host", a.dtype, a.shape)
    n = np.asarray(h)
    n[...] = np.array(-7777, dtype=n.dtype)
    h.copy_from(a)
    out = n.copy()
    del n
    h.release()
    return out


def from_host(ctx, a, values):
    """Write values (a NumPy array of a's shape) into any array a."""
    h = ctx.alloc("host", a.dtype, a.shape)
    np.asarray(h)[...] = values
    a.copy_from(h)
    h.release()


def child(handle, new_values, out):
    """The importer: opens the handle, sends back what it sees and every element it reads,
    then writes new_values (unless None) through the opened array."""
    try:
        ctx = gpuwrap.Context("cpu")
        with ctx.ipc_open(handle) as b:
            seen = dict(kind=b.kind, dtype=b.dtype, shape=b.shape, strides=b.strides,
                        readonly=b.readonly, values=to_host(ctx, b))
            if b.readonly:
                try:
                    b.fill(1)
                    seen["fill"] = "no error"
                except gpuwrap.GpuwrapError as e:
                    seen["fill"] = e.name
            if new_values is not None:
                from_host(ctx, b, new_values)
        ctx.close()
        out.put(seen)
    except BaseException as e:  # noqa: B902 (the parent shows it)
        out.put(f"child failed: {e!r}")


def run_child(handle, new_values=None):
    q = SPAWN.Queue()
    p = SPAWN.Process(target=child, args=(handle, new_values, q))
    p.start()
    try:
        seen = q.get(timeout=120)
    finally:
        p.join(120)
    assert p.exitcode == 0, p.exitcode
    assert not isinstance(seen, str), seen
    return seen


@pytest.fixture
def rng():
    return np.random.default_rng()


def device_array(ctx, rng, dtype, shape):
    a = ctx.alloc("device", dtype, shape)
    if np.dtype(dtype).kind == "f":
        values = rng.standard_normal(shape).astype(dtype)
    else:
        values = rng.integers(-2**31, 2**31 - 1, size=shape, dtype=dtype)
    from_host(ctx, a, values)
    return a, values


def test_spawned_child_reads_every_element_and_writes_back(ctx, rng):
    a, values = device_array(ctx, rng, "float64", (37, 53))
    new = rng.standard_normal((37, 53))
    seen = run_child(a.ipc_handle(), new)
    assert (seen["kind"], seen["dtype"], seen["shape"], seen["strides"], seen["readonly"]) == \
        ("device", "float64", (37, 53), (53, 1), False)
    np.testing.assert_array_equal(seen["values"], values)
    np.testing.assert_array_equal(to_host(ctx, a), new)  # the child's writes, every element
    a.release()


def test_view_exports_its_offset_and_strides(ctx, rng):
    a, values = device_array(ctx, rng, "int32", (12, 21))
    v = a.view((11, 2), (4, 6), (-3, 3))  # an interior start, a negative and a positive step
    want = values[11::-3, 2::3][:4, :6]
    new = rng.integers(0, 1000, size=(4, 6), dtype=np.int32)
    seen = run_child(v.ipc_handle(), new)
    assert (seen["shape"], seen["strides"]) == ((4, 6), v.strides) == ((4, 6), (-63, 3))
    np.testing.assert_array_equal(seen["values"], want)
    expected = values.copy()
    expected[11::-3, 2::3][:4, :6] = new  # the view's elements, and nothing else, changed
    np.testing.assert_array_equal(to_host(ctx, a), expected)
    v.release()
    a.release()


def test_readonly_export_opens_readonly(ctx, rng):
    a, values = device_array(ctx, rng, "float32", (1000,))
    ro = ctx.wrap(a.data_ptr, "float32", (1000,), readonly=True)
    seen = run_child(ro.ipc_handle())
    assert seen["readonly"] is True and seen["fill"] == "GW_EREADONLY"
    np.testing.assert_array_equal(seen["values"], values)
    np.testing.assert_array_equal(to_host(ctx, a), values)  # unchanged
    ro.release()
    a.release()


def test_damaged_truncated_and_refused_handles(ctx):
    a = ctx.alloc("device", "float32", (8,))
    good = bytes(a.ipc_handle())
    assert len(good) == gpuwrap._c.IPC_HANDLE_BYTES == 256
    for i in (0, 5, 40, 100, 200, 255):  # magic, version, base, geometry, check value
        bad = bytearray(good)
        bad[i] ^= 0x10
        with pytest.raises(gpuwrap.GpuwrapError) as e:
            ctx.ipc_open(bytes(bad))
        assert e.value.status == -1 and e.value.name == "GW_EINVAL" and e.value.detail, i
        with pytest.raises(gpuwrap.GpuwrapError) as e:  # the same bytes as an IpcHandle
            ctx.ipc_open(gpuwrap.IpcHandle(bytes(bad)))
        assert e.value.name == "GW_EINVAL", i
    for n in (0, 10, 255, 257):
        data = (good * 2)[:n]
        with pytest.raises(gpuwrap.GpuwrapError) as e:
            ctx.ipc_open(data)
        assert e.value.name == "GW_EINVAL" and f"{n} bytes" in e.value.detail
        with pytest.raises(gpuwrap.GpuwrapError) as e:
            gpuwrap.IpcHandle(data)
        assert e.value.name == "GW_EINVAL"
    with pytest.raises(TypeError, match="IpcHandle or its 256 bytes"):
        ctx.ipc_open("not bytes")
    with pytest.raises(gpuwrap.GpuwrapError) as e:  # host memory is refused at export
        ctx.alloc("host", "float32", (8,)).ipc_handle()
    assert e.value.name == "GW_ENOTSUP" and "device memory" in e.value.detail
    a.release()
    with pytest.raises(ValueError, match="released"):
        a.ipc_handle()


def test_pickle_round_trip_and_open_in_the_exporting_process(ctx, rng):
    a, values = device_array(ctx, rng, "int64", (5, 9))
    h = a.ipc_handle()
    assert type(h) is gpuwrap.IpcHandle
    for copy in (pickle.loads(pickle.dumps(h)), gpuwrap.IpcHandle(bytes(h)), gpuwrap.IpcHandle(h),
                 gpuwrap.IpcHandle(bytearray(bytes(h))), gpuwrap.IpcHandle(memoryview(bytes(h)))):
        assert type(copy) is gpuwrap.IpcHandle
        assert copy == h and not copy != h and hash(copy) == hash(h) and bytes(copy) == bytes(h)
    other = ctx.alloc("device", "int64", (5, 9))
    assert other.ipc_handle() != h
    # Opened here: the original memory, no mapping (the runtimes refuse that open).
    for handle in (pickle.loads(pickle.dumps(h)), bytes(h)):
        with ctx.ipc_open(handle) as b:
            assert b.data_ptr == a.data_ptr and b.shape == (5, 9) and b.kind == "device"
            np.testing.assert_array_equal(to_host(ctx, b), values)
    other.release()
    a.release()
