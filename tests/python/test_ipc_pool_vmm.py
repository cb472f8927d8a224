"""Array.ipc_handle() / Context.ipc_open() of pool and VMM memory on the CPU model
(docs/IPC.md, "Pool memory", "VMM memory"): memory made as a framework makes it outside
gpuwrap (gpuwrap/cpu_testing.h: an IPC pool is a memfd, a VMM chunk made with the POSIX-fd
type is one), wrapped by address through the Python API, exported as a version-3 handle and
opened in a second interpreter started with exec (tests/python/_ipc_peer.py), which takes
the descriptors with the real pidfd_getfd. Both directions: the peer exports and this
process (its parent) opens, which Yama's ptrace_scope 1 allows; this process exports and
the peer opens, after prctl(PR_SET_PTRACER, peer) (what an exporter must do under scope 1).
Every element is checked against fresh random values, read and written back; afterwards
nothing of the import is left mapped or open."""
import errno
import secrets

import numpy as np
import pytest

import gpuwrap
from _ipc_peer import (HANDLE_KIND_AT, HANDLE_VERSION_AT, KIND_POOL, KIND_VMM, Peer, PeerError,
                       allow_ptracer, cpu_lib, from_host, index, make, maps_naming, open_fds,
                       to_host, values)

GRAN = None


def gran():
    global GRAN
    if GRAN is None:
        GRAN = cpu_lib().gw_cpu_vmm_granularity()
    return GRAN


def cs():
    return 2 * gran()  # the chunk size of _ipc_peer.Segment


# What each case makes (see _ipc_peer.make). VMM: a segment of 4 slots, 3 chunks mapped.
def cases():
    c = cs()
    return {
        # 1-D over 2 chunks: [cs/2, cs + cs/2)
        "vmm_2_chunks": dict(what="vmm", slots=4, mapped=3, at=c // 2, dtype="uint32",
                             shape=[c // 4]),
        # 2-D whose first element is in the MIDDLE chunk (1.5 cs), row 0 running down into
        # chunk 0, row 1 (at 2.5 cs) down into chunk 2: 3 chunks
        "vmm_3_chunks": dict(what="vmm", slots=4, mapped=3, at=c + c // 2, dtype="uint32",
                             shape=[2, c // 8 + 3], strides=[c // 4, -1]),
        # a view with an offset (and a step) of an array over all 3 chunks: its chunks only
        "vmm_view": dict(what="vmm", slots=4, mapped=3, at=0, dtype="float64",
                         shape=[3 * c // 8], view=[[c // 8 + 3, 3 * c // 8 - 5, 2]]),
        # 1-D over 12 chunks from the middle of chunk 0: more than the handle holds, listed
        # in a manifest it names
        "vmm_12_chunks": dict(what="vmm", slots=12, mapped=12, at=c // 2, dtype="uint32",
                              shape=[11 * c // 4]),
        # an allocation at an offset in its pool (another one first), whole
        "pool": dict(what="pool", pad=3 * gran(), dtype="float32", shape=[37, 53]),
        # a view of one, with an interior start and a negative step
        "pool_view": dict(what="pool", pad=gran(), dtype="int64", shape=[12, 21],
                          view=[[11, None, -3], [2, 20, 3]]),
    }


KIND = {"vmm": KIND_VMM, "pool": KIND_POOL}


@pytest.fixture
def peer():
    p = Peer(env={"GW_PEER_BACKEND": "cpu"})
    yield p
    p.kill()


def model_clean():
    """Nothing of an import left in this process: no imported pool or VMM range, no
    mapping of a pool or chunk memfd."""
    return (cpu_lib().gw_cpu_ipc_pool_mappings(), maps_naming("gw-cpu-pool-"),
            maps_naming("gw-cpu-vmm-"))


def check_handle(h, kind):
    b = bytes(h)
    assert len(b) == gpuwrap._c.IPC_HANDLE_BYTES == 256
    assert (b[:4], b[HANDLE_VERSION_AT], b[HANDLE_KIND_AT]) == (b"GWIP", 3, kind)


@pytest.mark.parametrize("case", ["vmm_2_chunks", "vmm_3_chunks", "vmm_12_chunks", "vmm_view",
                                  "pool", "pool_view"])
def test_peer_exports_this_process_opens(ctx, peer, case):
    spec = cases()[case]
    seed, new = secrets.randbits(63), secrets.randbits(63)
    clean, fds = model_clean(), open_fds()
    r = peer.ask("make", spec=spec, seed=seed)
    h = gpuwrap.IpcHandle(bytes.fromhex(r["handle"]))
    check_handle(h, KIND[spec["what"]])
    full = values(seed, spec["dtype"], spec["shape"])
    want = full[index(spec.get("view"))] if spec.get("view") else full
    try:
        b = ctx.ipc_open(h)
    except gpuwrap.GpuwrapError as e:  # the kernel's word on pidfd_getfd, not gpuwrap's fault
        if e.name == "GW_ENOTSUP" and "pidfd" in (e.detail or ""):
            pytest.skip(f"this kernel refuses pidfd_getfd from a parent: {e}")
        raise
    assert (b.kind, b.dtype, b.shape, list(b.strides)) == ("device", spec["dtype"], want.shape,
                                                          r["strides"])
    assert cpu_lib().gw_cpu_ipc_pool_mappings() > clean[0]
    np.testing.assert_array_equal(to_host(ctx, b), want)  # every element
    from_host(ctx, b, values(new, spec["dtype"], b.shape))
    ctx.synchronize()
    b.release()
    assert model_clean() == clean and open_fds() == fds  # closed once, no descriptor left
    # every element of the peer's memory: the view's are ours, the others untouched
    assert peer.ask("check", seed=seed, new=new) == dict(ok=True, bad=0)
    peer.close()


@pytest.mark.parametrize("case", ["vmm_3_chunks", "vmm_view", "pool_view"])
def test_this_process_exports_peer_opens(ctx, peer, case):
    spec = cases()[case]
    seed, new = secrets.randbits(63), secrets.randbits(63)
    made = make(ctx, spec, seed)
    try:
        h = made.out.ipc_handle()
        check_handle(h, KIND[spec["what"]])
        allow_ptracer(peer.pid)  # Yama ptrace_scope 1: the peer is not our ancestor
        try:
            r = peer.ask("open", handle=bytes(h).hex(), seed=seed, new=new,
                         full_shape=list(made.full.shape), view=spec.get("view"))
        except PeerError as e:
            if e.reply.get("status") == "GW_ENOTSUP" and "pidfd" in e.reply.get("detail", ""):
                pytest.skip(f"the kernel refuses the peer's pidfd_getfd: {e}")
            raise
        assert r == dict(ok=True, bad=0, kind="device", shape=list(made.out.shape),
                         dtype=spec["dtype"])
        want = values(seed, spec["dtype"], made.full.shape)
        want[index(spec.get("view"))] = values(new, spec["dtype"], made.out.shape)
        np.testing.assert_array_equal(to_host(ctx, made.full), want)  # the peer's writes
        peer.close()
    finally:
        made.release()


def test_opened_view_keeps_the_mapping(ctx, peer):
    """A view of an opened array outlives the opened array: the mapping stays until the
    last of them goes (the import table's reference), and then it is closed exactly once."""
    spec = cases()["vmm_2_chunks"]
    seed = secrets.randbits(63)
    clean = model_clean()
    r = peer.ask("make", spec=spec, seed=seed)
    try:
        b = ctx.ipc_open(bytes.fromhex(r["handle"]))
    except gpuwrap.GpuwrapError as e:
        if e.name == "GW_ENOTSUP" and "pidfd" in (e.detail or ""):
            pytest.skip(f"this kernel refuses pidfd_getfd from a parent: {e}")
        raise
    v = b[5:-7:3]
    again = ctx.ipc_open(bytes.fromhex(r["handle"]))  # a second open shares the mapping
    mapped = model_clean()
    b.release()
    again.release()
    assert model_clean() == mapped  # v still holds it
    np.testing.assert_array_equal(to_host(ctx, v), values(seed, "uint32", spec["shape"])[5:-7:3])
    del v  # the last reference: closed
    assert model_clean() == clean
    peer.close()


@pytest.mark.parametrize("err, says", [(errno.EPERM, "ptrace_scope"), (errno.ENOSYS, "5.6")])
def test_refused_pidfd_getfd_is_enotsup_naming_the_cause(ctx, peer, err, says):
    r = peer.ask("make", spec=cases()["pool"], seed=1)
    clean = model_clean()
    cpu_lib().gw_cpu_ipc_force_pidfd_errno(err)
    try:
        with pytest.raises(gpuwrap.GpuwrapError) as e:
            ctx.ipc_open(bytes.fromhex(r["handle"]))
    finally:
        cpu_lib().gw_cpu_ipc_force_pidfd_errno(0)
    assert e.value.name == "GW_ENOTSUP" and says in e.value.detail and "SCM_RIGHTS" in e.value.detail
    assert model_clean() == clean
    peer.close()


def test_more_than_8_chunks_export_with_a_manifest(ctx):
    from _ipc_peer import Segment
    seg = Segment(10, 10)
    try:
        n = 10 * seg.cs // 4
        a = ctx.wrap(seg.base, "uint32", (n,))
        h = a.ipc_handle()  # 10 chunks: listed in a manifest the handle names
        check_handle(h, KIND_VMM)
        assert bytes(h)[240] == 10
        v = a[seg.cs // 4: 9 * seg.cs // 4 - 1]  # chunks 1..8: 8 of them, in the handle
        hv = v.ipc_handle()
        check_handle(hv, KIND_VMM)
        assert bytes(hv)[240] == 8
        v.release()
        a.release()
    finally:
        seg.free()


def test_memory_without_a_shareable_type_is_refused_saying_how(ctx):
    lib = cpu_lib()
    import ctypes
    c = ctypes.c_void_p()
    base = ctypes.c_void_p()
    assert lib.gw_cpu_vmm_reserve(cs(), ctypes.byref(base)) == 0
    assert lib.gw_cpu_vmm_create(0, cs(), 0, ctypes.byref(c)) == 0  # no handle type
    assert lib.gw_cpu_vmm_map(base.value, cs(), c) == 0
    try:
        a = ctx.wrap(base.value, "uint8", (cs(),))
        with pytest.raises(gpuwrap.GpuwrapError) as e:
            a.ipc_handle()
        assert e.value.name == "GW_ENOTSUP" and "POSIX" in e.value.detail
        a.release()
    finally:
        assert lib.gw_cpu_vmm_release(c) == 0
        assert lib.gw_cpu_vmm_unmap(base.value, cs()) == 0
        assert lib.gw_cpu_vmm_free(base.value, cs()) == 0
