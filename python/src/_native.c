/*
 * _native.c - openlake_client._native: the Python face of the OpenLake C
 * client (include/openlake/client.h).
 *
 * Owns: argument conversion (keys as bytes/str, values through the buffer
 * protocol: bytes, bytearray, memoryview, NumPy arrays, torch CPU tensors),
 * errors as OSError, and releasing the GIL around every call into the
 * client (which may block on sockets and copies).
 *
 * Must not: copy values itself: put reads from the caller's buffers and get
 * writes into them; the client copies straight to/from the shared slab.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "openlake/client.h"
#include "kv/proto.h"

#include <errno.h>
#include <string.h>

typedef struct {
    PyObject_HEAD
    ol_client *c;
} ClientObject;

static PyObject *raise_rc(int rc, const char *what)
{
    errno = -rc;
    return PyErr_Format(PyExc_OSError, "%s: %s", what, strerror(-rc));
}

static int Client_init(ClientObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"addr", "token", "namespace", "token_file", "value_size",
                             "timeout_ms", NULL};
    const char *addr, *token = NULL, *ns = "default", *token_file = NULL;
    unsigned long long value_size = 0;
    int timeout_ms = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|zszKi", kwlist, &addr, &token, &ns, &token_file,
                                     &value_size, &timeout_ms))
        return -1;
    if (!token && !token_file) {
        PyErr_SetString(PyExc_ValueError, "give token= or token_file=");
        return -1;
    }
    struct ol_client_opts o = {.addr = addr, .token = token, .token_file = token_file, .ns = ns,
                               .value_size = value_size, .timeout_ms = timeout_ms};
    char err[512];
    int rc;
    ol_client *c = NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = ol_client_open(&o, &c, err, sizeof err);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyErr_Format(rc == -EACCES ? PyExc_PermissionError
                     : rc == -EINVAL ? PyExc_ValueError : PyExc_ConnectionError,
                     "%s", err);
        return -1;
    }
    if (self->c)
        ol_client_close(self->c);
    self->c = c;
    return 0;
}

static void Client_dealloc(ClientObject *self)
{
    if (self->c)
        ol_client_close(self->c);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int check_open(ClientObject *self)
{
    if (!self->c) {
        PyErr_SetString(PyExc_ValueError, "the client is closed");
        return -1;
    }
    return 0;
}

/* Keys from a sequence of bytes/str. Returns a new list of bytes objects
 * (keeping them alive) and fills *keys (PyMem_Malloc'd). */
static PyObject *get_keys(PyObject *seq, struct ol_client_key **keys, Py_ssize_t *n)
{
    PyObject *fast = PySequence_Fast(seq, "keys must be a sequence of bytes or str");
    if (!fast)
        return NULL;
    *n = PySequence_Fast_GET_SIZE(fast);
    PyObject *hold = PyList_New(*n);
    *keys = PyMem_Malloc(sizeof **keys * (size_t)(*n ? *n : 1));
    if (!hold || !*keys)
        goto fail;
    for (Py_ssize_t i = 0; i < *n; i++) {
        PyObject *k = PySequence_Fast_GET_ITEM(fast, i);
        PyObject *b = PyUnicode_Check(k) ? PyUnicode_AsUTF8String(k)
                      : PyBytes_Check(k) ? (Py_INCREF(k), k) : NULL;
        if (!b) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "a key must be bytes or str");
            goto fail;
        }
        PyList_SET_ITEM(hold, i, b);
        Py_ssize_t len = PyBytes_GET_SIZE(b);
        if (len < 1 || len > OL_KV_MAX_KEY) {
            PyErr_Format(PyExc_ValueError, "a key is 1 to %u bytes", OL_KV_MAX_KEY);
            goto fail;
        }
        (*keys)[i].data = PyBytes_AS_STRING(b);
        (*keys)[i].len = (uint16_t)len;
    }
    Py_DECREF(fast);
    return hold;
fail:
    Py_DECREF(fast);
    Py_XDECREF(hold);
    PyMem_Free(*keys);
    *keys = NULL;
    return NULL;
}

static PyObject *status_list(const uint16_t *st, Py_ssize_t n)
{
    PyObject *l = PyList_New(n);
    for (Py_ssize_t i = 0; l && i < n; i++)
        PyList_SET_ITEM(l, i, PyLong_FromLong(st[i]));
    return l;
}

static PyObject *Client_exists(ClientObject *self, PyObject *arg)
{
    if (check_open(self) < 0)
        return NULL;
    struct ol_client_key *keys;
    Py_ssize_t n;
    PyObject *hold = get_keys(arg, &keys, &n);
    if (!hold)
        return NULL;
    uint8_t *present = PyMem_Malloc((size_t)n + 1);
    uint32_t leading = 0;
    int rc = -ENOMEM;
    if (present) {
        Py_BEGIN_ALLOW_THREADS
        rc = ol_client_lookup(self->c, keys, (uint32_t)n, present, &leading);
        Py_END_ALLOW_THREADS
    }
    PyObject *res = NULL;
    if (rc < 0) {
        raise_rc(rc, "exists");
    } else {
        PyObject *l = PyList_New(n);
        for (Py_ssize_t i = 0; l && i < n; i++)
            PyList_SET_ITEM(l, i, PyBool_FromLong(present[i]));
        res = l ? Py_BuildValue("(NI)", l, leading) : NULL;
    }
    PyMem_Free(present);
    PyMem_Free(keys);
    Py_DECREF(hold);
    return res;
}

/* put(keys, values) / get(keys, buffers): buffers through the buffer protocol. */
static PyObject *put_or_get(ClientObject *self, PyObject *args, int is_get)
{
    PyObject *kseq, *vseq;
    if (check_open(self) < 0 || !PyArg_ParseTuple(args, "OO", &kseq, &vseq))
        return NULL;
    struct ol_client_key *keys;
    Py_ssize_t n;
    PyObject *hold = get_keys(kseq, &keys, &n);
    if (!hold)
        return NULL;
    PyObject *res = NULL, *fast = PySequence_Fast(vseq, "values must be a sequence of buffers");
    Py_buffer *views = PyMem_Calloc((size_t)(n ? n : 1), sizeof *views);
    void **ptrs = PyMem_Calloc((size_t)(n ? n : 1), sizeof *ptrs);
    uint64_t *lens = PyMem_Calloc((size_t)(n ? n : 1), sizeof *lens);
    uint64_t *got = PyMem_Calloc((size_t)(n ? n : 1), sizeof *got);
    uint16_t *st = PyMem_Calloc((size_t)(n ? n : 1), sizeof *st);
    Py_ssize_t nviews = 0;
    if (!fast || !views || !ptrs || !lens || !got || !st) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto out;
    }
    if (PySequence_Fast_GET_SIZE(fast) != n) {
        PyErr_SetString(PyExc_ValueError, "as many buffers as keys");
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++, nviews++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(fast, i), &views[i],
                               is_get ? PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS : PyBUF_C_CONTIGUOUS) < 0)
            goto out;
        ptrs[i] = views[i].buf;
        lens[i] = (uint64_t)views[i].len;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = is_get ? ol_client_get(self->c, keys, ptrs, lens, got, (uint32_t)n, st)
                : ol_client_put(self->c, keys, (const void *const *)ptrs, lens, (uint32_t)n, st);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        raise_rc(rc, is_get ? "get" : "put");
        goto out;
    }
    if (is_get) {
        PyObject *l = PyList_New(n);
        for (Py_ssize_t i = 0; l && i < n; i++)
            PyList_SET_ITEM(l, i, st[i] == OL_KV_OK ? PyLong_FromUnsignedLongLong(got[i])
                                                    : PyLong_FromLong(-(long)st[i]));
        res = l;
    } else {
        res = status_list(st, n);
    }
out:
    for (Py_ssize_t i = 0; i < nviews; i++)
        PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(ptrs);
    PyMem_Free(lens);
    PyMem_Free(got);
    PyMem_Free(st);
    Py_XDECREF(fast);
    PyMem_Free(keys);
    Py_DECREF(hold);
    return res;
}

static PyObject *Client_put(ClientObject *self, PyObject *args) { return put_or_get(self, args, 0); }
static PyObject *Client_get(ClientObject *self, PyObject *args) { return put_or_get(self, args, 1); }

static PyObject *Client_delete(ClientObject *self, PyObject *arg)
{
    if (check_open(self) < 0)
        return NULL;
    struct ol_client_key *keys;
    Py_ssize_t n;
    PyObject *hold = get_keys(arg, &keys, &n);
    if (!hold)
        return NULL;
    uint16_t *st = PyMem_Calloc((size_t)(n ? n : 1), sizeof *st);
    int rc = -ENOMEM;
    if (st) {
        Py_BEGIN_ALLOW_THREADS
        rc = ol_client_delete(self->c, keys, (uint32_t)n, st);
        Py_END_ALLOW_THREADS
    }
    PyObject *res = rc < 0 ? raise_rc(rc, "delete") : status_list(st, n);
    PyMem_Free(st);
    PyMem_Free(keys);
    Py_DECREF(hold);
    return res;
}

static PyObject *Client_reset(ClientObject *self, PyObject *unused)
{
    if (check_open(self) < 0)
        return NULL;
    uint64_t removed = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = ol_client_reset(self->c, &removed);
    Py_END_ALLOW_THREADS
    return rc < 0 ? raise_rc(rc, "reset") : PyLong_FromUnsignedLongLong(removed);
}

static PyObject *Client_stats(ClientObject *self, PyObject *unused)
{
    if (check_open(self) < 0)
        return NULL;
    uint64_t v[OL_CLIENT_STATS];
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = ol_client_stats(self->c, v);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        return raise_rc(rc, "stats");
    PyObject *d = PyDict_New();
    for (int i = 0; d && i < OL_CLIENT_STATS; i++) {
        PyObject *x = PyLong_FromUnsignedLongLong(v[i]);
        if (!x || PyDict_SetItemString(d, ol_kv_stat_name(i), x) < 0) {
            Py_XDECREF(x);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(x);
    }
    return d;
}

static PyObject *Client_close(ClientObject *self, PyObject *unused)
{
    if (self->c) {
        ol_client *c = self->c;
        self->c = NULL;
        Py_BEGIN_ALLOW_THREADS
        ol_client_close(c);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

static PyObject *Client_enter(ClientObject *self, PyObject *unused)
{
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *Client_exit(ClientObject *self, PyObject *args) { return Client_close(self, NULL); }

static PyObject *Client_shards(ClientObject *self, void *closure)
{
    return check_open(self) < 0 ? NULL : PyLong_FromUnsignedLong(ol_client_shards(self->c));
}

static PyObject *Client_shared(ClientObject *self, void *closure)
{
    return check_open(self) < 0 ? NULL : PyBool_FromLong(ol_client_has_slab(self->c));
}

static PyMethodDef Client_methods[] = {
    {"exists", (PyCFunction)Client_exists, METH_O,
     "exists(keys) -> (list[bool], int): presence of each key and the length of the leading run of hits."},
    {"put", (PyCFunction)Client_put, METH_VARARGS,
     "put(keys, values) -> list[int]: store each buffer; per key a status (0 OK, 1 EXISTS, 3 NOSPACE...)."},
    {"get", (PyCFunction)Client_get, METH_VARARGS,
     "get(keys, buffers) -> list[int]: read each value into the writable buffer; per key the length read, or -status (-2 NOT_FOUND, -7 TOO_LARGE, -12 CHECKSUM_MISMATCH)."},
    {"delete", (PyCFunction)Client_delete, METH_O,
     "delete(keys) -> list[int]: per key a status (0 OK, 2 NOT_FOUND)."},
    {"reset", (PyCFunction)Client_reset, METH_NOARGS,
     "reset() -> int: delete every entry of this namespace on every shard; returns how many."},
    {"stats", (PyCFunction)Client_stats, METH_NOARGS,
     "stats() -> dict[str, int]: the service's counters summed over the shards."},
    {"close", (PyCFunction)Client_close, METH_NOARGS, "close(): drop the connections."},
    {"__enter__", (PyCFunction)Client_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Client_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Client_getset[] = {
    {"shards", (getter)Client_shards, NULL, "number of server shards (one connection each)", NULL},
    {"shared_memory", (getter)Client_shared, NULL, "True when values move through the shared slab", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ClientType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "openlake_client._native.Client",
    .tp_basicsize = sizeof(ClientObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Client(addr, token=None, namespace='default', token_file=None, value_size=0, timeout_ms=0)\n\n"
              "A connection to an OpenLake KV service: addr is its Unix socket path (values\n"
              "through shared memory) or 'host:port' (values over TCP).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Client_init,
    .tp_dealloc = (destructor)Client_dealloc,
    .tp_methods = Client_methods,
    .tp_getset = Client_getset,
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT, "_native", "The OpenLake C client, for Python.", -1, NULL,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void)
{
    if (PyType_Ready(&ClientType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&native_module);
    if (!m)
        return NULL;
    Py_INCREF(&ClientType);
    if (PyModule_AddObject(m, "Client", (PyObject *)&ClientType) < 0) {
        Py_DECREF(&ClientType);
        Py_DECREF(m);
        return NULL;
    }
    static const struct { const char *name; int v; } consts[] = {
        {"OK", OL_KV_OK}, {"EXISTS", OL_KV_EXISTS}, {"NOT_FOUND", OL_KV_NOT_FOUND},
        {"NOSPACE", OL_KV_NOSPACE}, {"TOO_LARGE", OL_KV_TOO_LARGE_ST},
        {"CHECKSUM_MISMATCH", OL_KV_CHECKSUM_MISMATCH},
    };
    for (size_t i = 0; i < sizeof consts / sizeof consts[0]; i++)
        PyModule_AddIntConstant(m, consts[i].name, consts[i].v);
    return m;
}
