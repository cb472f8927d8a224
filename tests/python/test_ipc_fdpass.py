"""IpcHandle.send(sock) / IpcHandle.recv(sock) (gw_ipc_handle_send / gw_ipc_handle_recv,
docs/IPC.md "Passing the descriptors over a Unix socket") on the CPU model.

The exporter is this process: pool memory (gw_cpu_pool_*, a pool made shareable) and VMM
memory over 2 chunks (gw_cpu_vmm_*), made through ctypes as a framework makes them outside
gpuwrap, wrapped and exported. The importer is a fresh interpreter (exec'd, sharing nothing)
with one end of a socketpair and pidfd_getfd forced to fail as Yama's ptrace_scope 1 makes
it fail for a child taking its parent's descriptors (gw_cpu_ipc_force_pidfd_errno(EPERM)):
every open that works there worked through the descriptors that came over the socket.
Every element is checked both ways, with fresh random data each run; descriptors are
counted in /proc/self/fd on both sides."""
import ctypes
import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

import gpuwrap

POSIX_FD = 1  # GW_CPU_HANDLE_POSIX_FD (gpuwrap/cpu_testing.h)

# The importer. argv: seed, the socket's descriptor. Each line "open K N" on stdin: receive
# a handle (N descriptors filed with it), open it, read every element, compare with the
# values of seed+2K, write those of seed+2K+1, release; "refused" opens the last handle
# again with nothing received. One JSON line answers each.
CHILD = r"""
import ctypes, errno, json, os, socket, sys
import numpy as np
import gpuwrap

seed, fd = int(sys.argv[1]), int(sys.argv[2])
lib = gpuwrap.load_library()
lib.gw_cpu_ipc_force_pidfd_errno.restype = None
lib.gw_cpu_ipc_force_pidfd_errno.argtypes = [ctypes.c_int]
lib.gw_cpu_ipc_force_pidfd_errno(errno.EPERM)
sock = socket.socket(fileno=fd)
ctx = gpuwrap.Context("cpu")


def nfds():
    return len(os.listdir("/proc/self/fd"))


def values(seed, shape):
    return np.random.default_rng(seed).standard_normal(shape)


h = None
for line in sys.stdin:
    cmd = line.split()
    out = {}
    if cmd[0] == "open":
        k = int(cmd[1])
        before = nfds()
        h = gpuwrap.IpcHandle.recv(sock if k % 2 else sock.fileno())  # either spelling
        out["received"] = nfds() - before
        b = ctx.ipc_open(h)
        out["after_open"] = nfds() - before
        host = ctx.alloc("host", b.dtype, b.shape)
        n = np.asarray(host)
        n[...] = -7777.0  # poison: an element the copy misses shows
        host.copy_from(b)
        want = values(seed + 2 * k, b.shape)
        out["kind"], out["shape"] = b.kind, list(b.shape)
        out["mismatches"] = int(np.count_nonzero(n != want))
        n[...] = values(seed + 2 * k + 1, b.shape)
        b.copy_from(host)
        del n
        host.release()
        b.release()
        out["after_release"] = nfds() - before
    else:
        before = nfds()
        try:
            ctx.ipc_open(h)
            out["refused"] = "opened"
        except gpuwrap.GpuwrapError as e:
            out["refused"], out["detail"] = e.name, e.detail
        out["after"] = nfds() - before
    print(json.dumps(out), flush=True)
ctx.close()
"""


@pytest.fixture(scope="module")
def cpu_lib(lib):
    """The CPU model's pools and VMM calls (gpuwrap/cpu_testing.h) through ctypes."""
    c, sz, vp, u = ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_uint
    pvp = ctypes.POINTER(vp)
    for name, args in [("gw_cpu_pool_create", [c, sz, u, pvp]), ("gw_cpu_pool_alloc", [vp, sz, pvp]),
                       ("gw_cpu_pool_free", [vp]), ("gw_cpu_pool_destroy", [vp]),
                       ("gw_cpu_vmm_reserve", [sz, pvp]), ("gw_cpu_vmm_free", [vp, sz]),
                       ("gw_cpu_vmm_create", [c, sz, u, pvp]), ("gw_cpu_vmm_release", [vp]),
                       ("gw_cpu_vmm_map", [vp, sz, vp]), ("gw_cpu_vmm_unmap", [vp, sz])]:
        f = getattr(lib, name)
        f.restype, f.argtypes = c, args
    lib.gw_cpu_vmm_granularity.restype, lib.gw_cpu_vmm_granularity.argtypes = sz, []
    return lib


def ok(status):
    assert status == 0, gpuwrap.GpuwrapError("gw_cpu_*", status)


def nfds():
    return len(os.listdir("/proc/self/fd"))


class Importer:
    """The exec'd importer, its socket's other end here."""

    def __init__(self, tmp_path, seed):
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.p = subprocess.Popen([sys.executable, "-c", CHILD, str(seed), str(theirs.fileno())],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  pass_fds=(theirs.fileno(),), cwd=tmp_path)
        theirs.close()

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        answer = self.p.stdout.readline()
        assert answer, f"the importer died (exit status {self.p.wait(60)})"
        return json.loads(answer)

    def finish(self):
        self.p.stdin.close()
        assert self.p.wait(120) == 0
        self.p.stdout.close()
        self.sock.close()


def rounds(ctx, imp, a, nfd, seed, k0):
    """a's handle sent twice (steps k0, k0+1), fresh values each time: the importer opens
    it through the descriptors that came with it, reads every element, writes new ones,
    checked here; then an open with nothing received is refused as pidfd_getfd is."""
    h = a.ipc_handle()
    for k in (k0, k0 + 1):
        host = ctx.alloc("host", a.dtype, a.shape)
        np.asarray(host)[...] = np.random.default_rng(seed + 2 * k).standard_normal(a.shape)
        a.copy_from(host)
        before = nfds()
        h.send(imp.sock)
        assert nfds() == before  # a send opens and closes nothing here
        seen = imp.ask(f"open {k} {nfd}")
        assert seen == {"received": nfd, "after_open": 0, "after_release": 0, "kind": "device",
                        "shape": list(a.shape), "mismatches": 0}, seen
        n = np.asarray(host)
        n[...] = -7777.0
        host.copy_from(a)
        np.testing.assert_array_equal(
            n, np.random.default_rng(seed + 2 * k + 1).standard_normal(a.shape))
        del n
        host.release()
    seen = imp.ask("refused")
    assert seen["refused"] == "GW_ENOTSUP", seen
    assert "ptrace_scope" in seen["detail"] and "gw_ipc_handle_recv" in seen["detail"], seen
    assert seen["after"] == 0


def test_pool_and_vmm_memory_over_a_socket(ctx, cpu_lib, tmp_path):
    lib = cpu_lib
    seed = int(np.random.default_rng().integers(1, 2**62))
    imp = Importer(tmp_path, seed)
    g = lib.gw_cpu_vmm_granularity()

    # pool memory: one descriptor (the pool's)
    pool, p = ctypes.c_void_p(), ctypes.c_void_p()
    ok(lib.gw_cpu_pool_create(0, 8 * g, POSIX_FD, ctypes.byref(pool)))
    shape = (41, 23)
    ok(lib.gw_cpu_pool_alloc(pool, shape[0] * shape[1] * 8, ctypes.byref(p)))
    a = ctx.wrap(p.value, "float64", shape)
    assert a.kind == "device"
    rounds(ctx, imp, a, 1, seed, 0)
    a.release()
    ok(lib.gw_cpu_pool_free(p))
    ok(lib.gw_cpu_pool_destroy(pool))

    # VMM memory: 2 chunks mapped back to back, an array across the boundary
    r = ctypes.c_void_p()
    ok(lib.gw_cpu_vmm_reserve(2 * g, ctypes.byref(r)))
    for k in range(2):
        chunk = ctypes.c_void_p()
        ok(lib.gw_cpu_vmm_create(0, g, POSIX_FD, ctypes.byref(chunk)))
        ok(lib.gw_cpu_vmm_map(r.value + k * g, g, chunk))
        ok(lib.gw_cpu_vmm_release(chunk))  # the mapping holds it, as after cuMemMap
    a = ctx.wrap(r.value + g // 2, "float64", (g // 64, 8))
    rounds(ctx, imp, a, 2, seed, 4)
    a.release()
    for k in range(2):
        ok(lib.gw_cpu_vmm_unmap(r.value + k * g, g))
    ok(lib.gw_cpu_vmm_free(r, 2 * g))
    imp.finish()


def test_round_trip_in_one_process(ctx):
    """Device memory's handle names no descriptor: the bytes alone travel; the handle that
    arrives is the one sent and opens; a socket or its descriptor number both do."""
    a = ctx.alloc("device", "int32", (5, 7))
    a.fill(3)
    h = a.ipc_handle()
    s, t = socket.socketpair()
    h.send(s)
    got = gpuwrap.IpcHandle.recv(t)
    assert isinstance(got, gpuwrap.IpcHandle) and got == h
    h.send(s.fileno())
    assert gpuwrap.IpcHandle.recv(t.fileno()) == h
    with ctx.ipc_open(got) as b:
        assert b.shape == (5, 7)
    s.close()
    t.close()
    a.release()


def test_errors_raise_gpuwraps(ctx):
    a = ctx.alloc("device", "uint8", 16)
    h = a.ipc_handle()
    s, t = socket.socketpair()
    t.setblocking(False)
    with pytest.raises(gpuwrap.GpuwrapError) as e:  # nothing waiting on a non-blocking socket
        gpuwrap.IpcHandle.recv(t)
    assert (e.value.call, e.value.name) == ("gw_ipc_handle_recv", "GW_EBUSY")
    assert "non-blocking" in e.value.detail
    s.close()
    t.setblocking(True)
    with pytest.raises(gpuwrap.GpuwrapError) as e:  # the peer gone
        gpuwrap.IpcHandle.recv(t)
    assert e.value.name == "GW_EBACKEND" and "peer closed" in e.value.detail
    t.close()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as inet:
        with pytest.raises(gpuwrap.GpuwrapError) as e:
            h.send(inet)
        assert (e.value.call, e.value.name) == ("gw_ipc_handle_send", "GW_EINVAL")
        assert "not a Unix socket" in e.value.detail
    with pytest.raises(ValueError):  # a closed socket object: fileno() is -1
        h.send(t)
    with pytest.raises(TypeError):
        gpuwrap.IpcHandle.recv("a socket")
    a.release()
