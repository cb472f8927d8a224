/*
 * Memory of another process (docs/IPC.md): Array.ipc_handle() exports an array as a
 * gw_ipc_handle, Context.ipc_open() opens one as an Array. The handle is plain bytes that
 * describe the whole array and carry their own check value, so the Python object is only
 * those bytes: immutable, compared and hashed by them, and pickled as them (a
 * multiprocessing queue or pipe, a file, MPI). The library validates them whole on open;
 * a damaged or foreign handle is its GW_EINVAL, raised here as GpuwrapError.
 * IpcHandle.send(sock) / IpcHandle.recv(sock) carry a handle over a Unix socket with the
 * descriptors of pool and VMM memory (gw_ipc_handle_send / gw_ipc_handle_recv), where the
 * importer may not take them with pidfd_getfd (Yama, containers).
 */
#include "_gpuwrap.h"

typedef struct {
  PyObject_HEAD
  gw_ipc_handle h;
} IpcHandleObject;

/* A bytes-like object of exactly GW_IPC_HANDLE_BYTES into *out. Any other length is the
 * same failure as a truncated handle given to gw_ipc_open: GW_EINVAL naming the lengths. */
static int handle_from_buffer(PyObject *o, const char *call, gw_ipc_handle *out) {
  Py_buffer v;
  if (PyObject_GetBuffer(o, &v, PyBUF_SIMPLE) < 0) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) return -1;
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s: handle must be a gpuwrap.IpcHandle or its %d bytes, not %s",
                 call, GW_IPC_HANDLE_BYTES, Py_TYPE(o)->tp_name);
    return -1;
  }
  Py_ssize_t n = v.len;
  if (n == GW_IPC_HANDLE_BYTES) memcpy(out->bytes, v.buf, GW_IPC_HANDLE_BYTES);
  PyBuffer_Release(&v);
  if (n != GW_IPC_HANDLE_BYTES) {
    raise_detail(
        call, GW_EINVAL,
        PyUnicode_FromFormat("handle: %zd bytes, a gw_ipc_handle is %d (truncated or not a handle)",
                             n, GW_IPC_HANDLE_BYTES));
    return -1;
  }
  return 0;
}

static PyObject *ipc_handle_new(PyTypeObject *type, const gw_ipc_handle *h) {
  IpcHandleObject *o = (IpcHandleObject *)type->tp_alloc(type, 0);
  if (o) o->h = *h;
  return (PyObject *)o;
}

/* IpcHandle(data): from the bytes of another IpcHandle (bytes(h), a pickle's payload).
 * Only the length is checked here; the content is checked by ipc_open, where a damaged
 * handle is reported with its reason. */
static PyObject *IpcHandle_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"data", NULL};
  PyObject *data;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O:IpcHandle", kwlist, &data)) return NULL;
  gw_ipc_handle h;
  if (PyObject_TypeCheck(data, &IpcHandleType))
    h = ((IpcHandleObject *)data)->h;
  else if (handle_from_buffer(data, "IpcHandle", &h) < 0)
    return NULL;
  return ipc_handle_new(type, &h);
}

static PyObject *IpcHandle_bytes(IpcHandleObject *o, PyObject *unused) {
  return PyBytes_FromStringAndSize((const char *)o->h.bytes, GW_IPC_HANDLE_BYTES);
}

/* Pickled as IpcHandle(bytes): what another process needs, and nothing of this one's. */
static PyObject *IpcHandle_reduce(IpcHandleObject *o, PyObject *unused) {
  PyObject *b = IpcHandle_bytes(o, NULL);
  if (!b) return NULL;
  return Py_BuildValue("(O(N))", (PyObject *)Py_TYPE(o), b);
}

static PyObject *IpcHandle_richcompare(PyObject *a, PyObject *b, int op) {
  if (!PyObject_TypeCheck(b, &IpcHandleType) || (op != Py_EQ && op != Py_NE))
    Py_RETURN_NOTIMPLEMENTED;
  int eq = memcmp(((IpcHandleObject *)a)->h.bytes, ((IpcHandleObject *)b)->h.bytes,
                  GW_IPC_HANDLE_BYTES) == 0;
  return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

/* The hash of its bytes (as bytes(h) hashes): equal handles hash alike. */
static Py_hash_t IpcHandle_hash(IpcHandleObject *o) {
  PyObject *b = IpcHandle_bytes(o, NULL);
  if (!b) return -1;
  Py_hash_t r = PyObject_Hash(b);
  Py_DECREF(b);
  return r;
}

static PyObject *IpcHandle_repr(IpcHandleObject *o) {
  return PyUnicode_FromFormat("<gpuwrap.IpcHandle of %d bytes>", GW_IPC_HANDLE_BYTES);
}

/* ---- over a Unix socket (gw_ipc_handle_send / gw_ipc_handle_recv) ---- */

/* A socket.socket (its fileno()) or an int descriptor; the caller keeps the object, so
 * the descriptor stays open for the call (as the socket module's own calls assume). */
static int sock_fd(PyObject *sock) { return PyObject_AsFileDescriptor(sock); }

/* h.send(sock): gw_ipc_handle_send. The GIL is dropped: a full socket blocks until the
 * peer reads (a non-blocking one, or one with a timeout, raises GW_EBUSY instead). */
static PyObject *IpcHandle_send(IpcHandleObject *o, PyObject *sock) {
  int fd = sock_fd(sock);
  if (fd < 0) return NULL;
  gw_ipc_handle h = o->h;
  gw_status s;
  Py_BEGIN_ALLOW_THREADS s = gw_ipc_handle_send(fd, &h);
  Py_END_ALLOW_THREADS if (s != GW_OK) return RAISE("gw_ipc_handle_send", s);
  Py_RETURN_NONE;
}

/* IpcHandle.recv(sock): gw_ipc_handle_recv, the handle as this type. The GIL is dropped
 * while it waits for the message. */
static PyObject *IpcHandle_recv(PyTypeObject *type, PyObject *sock) {
  int fd = sock_fd(sock);
  if (fd < 0) return NULL;
  gw_ipc_handle h;
  gw_status s;
  Py_BEGIN_ALLOW_THREADS s = gw_ipc_handle_recv(fd, &h);
  Py_END_ALLOW_THREADS if (s != GW_OK) return RAISE("gw_ipc_handle_recv", s);
  return ipc_handle_new(type, &h);
}

static PyMethodDef IpcHandle_methods[] = {
    {"__bytes__", (PyCFunction)IpcHandle_bytes, METH_NOARGS, "The C gw_ipc_handle's 256 bytes."},
    {"__reduce__", (PyCFunction)IpcHandle_reduce, METH_NOARGS, NULL},
    {"send", (PyCFunction)IpcHandle_send, METH_O,
     "send(sock): send the handle over a Unix socket (a socket.socket or its descriptor) with "
     "the descriptors of pool or VMM memory it names (SCM_RIGHTS; gw_ipc_handle_send). Only "
     "the exporting process can send those. Blocks while the socket is full; a non-blocking "
     "socket raises GW_EBUSY instead."},
    {"recv", (PyCFunction)IpcHandle_recv, METH_O | METH_CLASS,
     "IpcHandle.recv(sock): receive one handle sent by send() (gw_ipc_handle_recv); the "
     "descriptors that came with it are kept for the next Context.ipc_open() of it in this "
     "process, which then needs no pidfd_getfd. Blocks until a message arrives; a "
     "non-blocking socket with nothing waiting raises GW_EBUSY."},
    {NULL}};

PyTypeObject IpcHandleType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gpuwrap.IpcHandle",
    .tp_basicsize = sizeof(IpcHandleObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "IpcHandle(data): an exported array (Array.ipc_handle()) for Context.ipc_open() in "
              "this or another process of the node. bytes(h) is the C gw_ipc_handle; picklable. "
              "h.send(sock) / IpcHandle.recv(sock) pass it over a Unix socket with the "
              "descriptors of pool or VMM memory.",
    .tp_new = IpcHandle_new,
    .tp_repr = (reprfunc)IpcHandle_repr,
    .tp_hash = (hashfunc)IpcHandle_hash,
    .tp_richcompare = IpcHandle_richcompare,
    .tp_methods = IpcHandle_methods,
};

PyObject *Array_ipc_handle(ArrayObject *a, PyObject *unused) {
  ARR_OR_NULL(a, h);
  gw_ipc_handle out;
  gw_status s;
  gw_retain(h);          /* pinned while the GIL is dropped: a release() elsewhere cannot free it */
  Py_BEGIN_ALLOW_THREADS /* a pointer query and a runtime call */
      s = gw_ipc_export(h, &out);
  Py_END_ALLOW_THREADS gw_release(h);
  if (s != GW_OK) return RAISE("gw_ipc_export", s);
  return ipc_handle_new(&IpcHandleType, &out);
}

PyObject *Context_ipc_open(ContextObject *c, PyObject *handle) {
  gw_ipc_handle h;
  if (PyObject_TypeCheck(handle, &IpcHandleType))
    h = ((IpcHandleObject *)handle)->h;
  else if (handle_from_buffer(handle, "gw_ipc_open", &h) < 0)
    return NULL;
  gw_context *ch = ctx_hold(c);
  if (!ch) return NULL;
  gw_array *out = NULL;
  gw_status s;
  Py_BEGIN_ALLOW_THREADS /* the first open of an allocation maps it: a runtime call */
      s = gw_ipc_open(ch, &h, &out);
  Py_END_ALLOW_THREADS ctx_unhold(c);
  if (s != GW_OK) return RAISE("gw_ipc_open", s);
  return array_new(out);
}
