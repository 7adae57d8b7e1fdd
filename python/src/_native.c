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
 *
 * Zero copy (reserve/commit/abort, acquire/release): a Slot exports the
 * slab bytes of one reservation or pin through the buffer protocol
 * (slot.view is a memoryview of them, writable for a reservation, read-only
 * for a pin). Python must never touch those bytes once the server may reuse
 * the slot, so every export is counted and commit, abort, release and
 * Client.close refuse (BufferError) while a slot has one; a slot that holds
 * nothing (finished, or its client closed) exports nothing. The mapping
 * lives as long as the ol_client: a Slot keeps its Client object alive, and
 * close() of a client with calls still running without the GIL is deferred
 * to the end of the last one.
 *
 * Placement: a Placement holds a snapshot of cluster/place.h (the daemon's
 * own code, not a copy) so that a client places keys exactly as the nodes
 * do; Client.members() gives what it is made from.
 *
 * Limited API of CPython 3.11 (setup.py defines Py_LIMITED_API 0x030b0000
 * there): one cp311-abi3 wheel then serves every CPython from 3.11 on, with
 * no build per version. So: heap types from PyType_Spec (the buffer slots
 * Py_bf_getbuffer/Py_bf_releasebuffer are limited API only from 3.11), the
 * function forms of the list/tuple/bytes accessors (a call and a bounds
 * check per item instead of a macro; no allocation), and no reading of type
 * structs. On 3.9 and 3.10 setup.py builds the same source without the
 * limited API, as an ordinary version-specific extension.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "openlake/client.h"
#include "cluster/place.h"
#include "kv/proto.h"

#include <errno.h>
#include <string.h>

typedef struct {
    PyObject_HEAD
    ol_client *c;          /* NULL once closed */
    ol_client *closing;    /* closed, waiting for the calls still running */
    Py_ssize_t calls;      /* calls running without the GIL */
    Py_ssize_t exports;    /* buffers exported by this client's slots */
    uint64_t gen;          /* +1 per (re)initialisation: slots of an earlier one are dead */
} ClientObject;

/* The Slot heap type, for PyObject_New and the type check of commit, abort
 * and release: made by PyInit__native and kept (a strong reference) for the
 * life of the process, as the static type was. */
static PyTypeObject *SlotType;

#if PY_VERSION_HEX < 0x030A0000 /* 3.9 (no limited API) lacks them: its types stay mutable */
#define Py_TPFLAGS_IMMUTABLETYPE 0
#define Py_TPFLAGS_DISALLOW_INSTANTIATION 0
#endif

/* Instances of heap types hold a reference to their type: dropped here,
 * after the memory (tp_free of the object's own type: a Python subclass of
 * Client is GC and frees differently). */
static void free_object(PyObject *o)
{
    PyTypeObject *tp = Py_TYPE(o);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(o);
    Py_DECREF((PyObject *)tp);
}

/* The list or tuple PySequence_Fast gave (its _GET_SIZE/_GET_ITEM macros
 * read the structs: not limited API). fast_item is NULL with IndexError if
 * the caller's list shrank meanwhile (Python code run by a __buffer__). */
static Py_ssize_t fast_size(PyObject *fast)
{
    return PyList_Check(fast) ? PyList_Size(fast) : PyTuple_Size(fast);
}

static PyObject *fast_item(PyObject *fast, Py_ssize_t i)
{
    return PyList_Check(fast) ? PyList_GetItem(fast, i) : PyTuple_GetItem(fast, i);
}

/* OSError(errno, message): Python picks the subclass (TimeoutError for
 * ETIMEDOUT, BlockingIOError for EAGAIN...); e.errno is set. */
static PyObject *raise_rc(int rc, const char *what)
{
    PyObject *e = rc == -EOPNOTSUPP /* the slot calls over TCP */
        ? Py_BuildValue("(iN)", -rc, PyUnicode_FromFormat(
              "%s: needs the server's shared memory: connect through its Unix socket (over TCP "
              "use put/get)", what))
        : Py_BuildValue("(iN)", -rc, PyUnicode_FromFormat("%s: %s", what, strerror(-rc)));
    if (e) {
        PyErr_SetObject(PyExc_OSError, e);
        Py_DECREF(e);
    }
    return NULL;
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
    if (self->exports || self->calls) {
        ol_client_close(c);
        PyErr_SetString(PyExc_BufferError, "the client is in use: slot views or calls are live");
        return -1;
    }
    if (self->c)
        ol_client_close(self->c);
    self->c = c;
    self->gen++;
    return 0;
}

static void Client_dealloc(ClientObject *self)
{
    /* no call is running (each holds a reference) and no slot is alive */
    if (self->c)
        ol_client_close(self->c);
    if (self->closing)
        ol_client_close(self->closing);
    free_object((PyObject *)self);
}

static int check_open(ClientObject *self)
{
    if (!self->c) {
        PyErr_SetString(PyExc_ValueError, "the client is closed");
        return -1;
    }
    return 0;
}

/* Around a call made without the GIL: close() waits for the last one. */
static ol_client *call_enter(ClientObject *self)
{
    self->calls++;
    return self->c;
}

static void call_leave(ClientObject *self)
{
    if (--self->calls == 0 && self->closing) {
        ol_client *c = self->closing;
        self->closing = NULL;
        Py_BEGIN_ALLOW_THREADS
        ol_client_close(c);
        Py_END_ALLOW_THREADS
    }
}

/* Keys from a sequence of bytes/str. Returns a new list of bytes objects
 * (keeping them alive) and fills *keys (PyMem_Malloc'd). */
static PyObject *get_keys(PyObject *seq, struct ol_client_key **keys, Py_ssize_t *n)
{
    PyObject *fast = PySequence_Fast(seq, "keys must be a sequence of bytes or str");
    if (!fast)
        return NULL;
    *n = fast_size(fast);
    PyObject *hold = PyList_New(*n);
    *keys = PyMem_Malloc(sizeof **keys * (size_t)(*n ? *n : 1));
    if (!hold || !*keys)
        goto fail;
    for (Py_ssize_t i = 0; i < *n; i++) {
        PyObject *k = fast_item(fast, i);
        if (!k)
            goto fail;
        PyObject *b = PyUnicode_Check(k) ? PyUnicode_AsUTF8String(k)
                      : PyBytes_Check(k) ? (Py_INCREF(k), k) : NULL;
        if (!b) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "a key must be bytes or str");
            goto fail;
        }
        PyList_SetItem(hold, i, b); /* in range of a new list: cannot fail */
        char *data;
        Py_ssize_t len;
        if (PyBytes_AsStringAndSize(b, &data, &len) < 0)
            goto fail;
        if (len < 1 || len > OL_KV_MAX_KEY) {
            PyErr_Format(PyExc_ValueError, "a key is 1 to %u bytes", OL_KV_MAX_KEY);
            goto fail;
        }
        (*keys)[i].data = data;
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

/* l[i] = v (stolen) in a new list; v NULL (out of memory) drops the list, so
 * that no list with a NULL item gets back to Python. */
static int list_fill(PyObject **l, Py_ssize_t i, PyObject *v)
{
    if (!v) {
        Py_CLEAR(*l);
        return -1;
    }
    return PyList_SetItem(*l, i, v);
}

static PyObject *status_list(const uint16_t *st, Py_ssize_t n)
{
    PyObject *l = PyList_New(n);
    for (Py_ssize_t i = 0; l && i < n; i++)
        list_fill(&l, i, PyLong_FromLong(st[i]));
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
        ol_client *c = call_enter(self);
        Py_BEGIN_ALLOW_THREADS
        rc = ol_client_lookup(c, keys, (uint32_t)n, present, &leading);
        Py_END_ALLOW_THREADS
        call_leave(self);
    }
    PyObject *res = NULL;
    if (rc < 0) {
        raise_rc(rc, "exists");
    } else {
        PyObject *l = PyList_New(n);
        for (Py_ssize_t i = 0; l && i < n; i++)
            list_fill(&l, i, PyBool_FromLong(present[i]));
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
    if (fast_size(fast) != n) {
        PyErr_SetString(PyExc_ValueError, "as many buffers as keys");
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++, nviews++) {
        PyObject *v = fast_item(fast, i);
        if (!v || PyObject_GetBuffer(v, &views[i], is_get ? PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS
                                                          : PyBUF_C_CONTIGUOUS) < 0)
            goto out;
        ptrs[i] = views[i].buf;
        lens[i] = (uint64_t)views[i].len;
    }
    int rc;
    ol_client *c = call_enter(self);
    Py_BEGIN_ALLOW_THREADS
    rc = is_get ? ol_client_get(c, keys, ptrs, lens, got, (uint32_t)n, st)
                : ol_client_put(c, keys, (const void *const *)ptrs, lens, (uint32_t)n, st);
    Py_END_ALLOW_THREADS
    call_leave(self);
    if (rc < 0) {
        raise_rc(rc, is_get ? "get" : "put");
        goto out;
    }
    if (is_get) {
        PyObject *l = PyList_New(n);
        for (Py_ssize_t i = 0; l && i < n; i++)
            list_fill(&l, i, st[i] == OL_KV_OK ? PyLong_FromUnsignedLongLong(got[i])
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
        ol_client *c = call_enter(self);
        Py_BEGIN_ALLOW_THREADS
        rc = ol_client_delete(c, keys, (uint32_t)n, st);
        Py_END_ALLOW_THREADS
        call_leave(self);
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
    ol_client *c = call_enter(self);
    Py_BEGIN_ALLOW_THREADS
    rc = ol_client_reset(c, &removed);
    Py_END_ALLOW_THREADS
    call_leave(self);
    return rc < 0 ? raise_rc(rc, "reset") : PyLong_FromUnsignedLongLong(removed);
}

static PyObject *Client_members(ClientObject *self, PyObject *unused)
{
    if (check_open(self) < 0)
        return NULL;
    struct ol_client_member *m = PyMem_Malloc(sizeof *m * OL_CLIENT_MEMBERS_MAX);
    if (!m)
        return PyErr_NoMemory();
    int64_t rev = 0;
    int rep = 0, rc;
    ol_client *c = call_enter(self);
    Py_BEGIN_ALLOW_THREADS
    rc = ol_client_members(c, &rev, &rep, m, OL_CLIENT_MEMBERS_MAX);
    Py_END_ALLOW_THREADS
    call_leave(self);
    if (rc == -EOPNOTSUPP) { /* a server of protocol 1: no cluster it can tell of */
        PyMem_Free(m);
        return Py_BuildValue("(Li[])", 0LL, 0);
    }
    if (rc < 0) {
        PyMem_Free(m);
        return raise_rc(rc, "members");
    }
    PyObject *l = PyList_New(rc);
    for (int i = 0; l && i < rc; i++) {
        /* An address is UTF-8 text (a node's record is JSON); a server that
         * sends other bytes breaks the protocol: OSError(EPROTO) naming the
         * member and its bytes, never a UnicodeDecodeError from inside. */
        size_t alen = strlen(m[i].addr);
        PyObject *addr = PyUnicode_DecodeUTF8(m[i].addr, (Py_ssize_t)alen, "strict");
        if (!addr && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            PyObject *raw = PyBytes_FromStringAndSize(m[i].addr, (Py_ssize_t)alen);
            PyObject *e = raw ? Py_BuildValue("(iN)", EPROTO, PyUnicode_FromFormat(
                                    "members: the server sent node %lld's kv_addr as %R, "
                                    "which is not UTF-8 (a server that breaks the KV "
                                    "protocol)", (long long)m[i].id, raw))
                              : NULL;
            Py_XDECREF(raw);
            if (e) {
                PyErr_SetObject(PyExc_OSError, e);
                Py_DECREF(e);
            }
        }
        if (!addr) {
            Py_CLEAR(l);
            break;
        }
        list_fill(&l, i, Py_BuildValue("(LKN)", (long long)m[i].id,
                                       (unsigned long long)m[i].weight, addr));
    }
    PyMem_Free(m);
    return l ? Py_BuildValue("(LiN)", (long long)rev, rep, l) : NULL;
}

static PyObject *Client_stats(ClientObject *self, PyObject *unused)
{
    if (check_open(self) < 0)
        return NULL;
    uint64_t v[OL_CLIENT_STATS];
    int rc;
    ol_client *c = call_enter(self);
    Py_BEGIN_ALLOW_THREADS
    rc = ol_client_stats(c, v);
    Py_END_ALLOW_THREADS
    call_leave(self);
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

static PyObject *Client_populate(ClientObject *self, PyObject *args)
{
    unsigned long long max_bytes = 0;
    if (!PyArg_ParseTuple(args, "|K", &max_bytes) || check_open(self) < 0)
        return NULL;
    int rc;
    ol_client *c = call_enter(self);
    Py_BEGIN_ALLOW_THREADS
    rc = ol_client_populate(c, max_bytes);
    Py_END_ALLOW_THREADS
    call_leave(self);
    if (rc < 0)
        return raise_rc(rc, "populate");
    Py_RETURN_NONE;
}

static PyObject *Client_close(ClientObject *self, PyObject *unused)
{
    if (self->exports) {
        PyErr_SetString(PyExc_BufferError,
                        "slot views are still exported (a memoryview of slot.view, or an array "
                        "made from it): release or delete them before close()");
        return NULL;
    }
    if (self->c) {
        ol_client *c = self->c;
        self->c = NULL; /* every Slot of it now holds nothing and exports nothing */
        if (self->calls) {
            self->closing = c; /* the last running call closes it */
            Py_RETURN_NONE;
        }
        Py_BEGIN_ALLOW_THREADS
        ol_client_close(c);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

static PyObject *Client_enter(ClientObject *self, PyObject *unused)
{
    Py_INCREF((PyObject *)self);
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

/* ---- zero-copy slots -------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    ClientObject *client;     /* strong: the slab mapping outlives the Slot */
    uint64_t client_gen;      /* the client's gen when made */
    struct ol_client_slot s;
    PyObject *key;            /* bytes */
    int status;               /* the reserve/acquire status */
    Py_ssize_t exports;       /* buffers exported now */
    int busy;                 /* 1: a commit/abort/release of it runs without the GIL;
                                 2: being checked by one (slots_call) */
} SlotObject;

/* The slot holds a reservation or pin of a client that is still open. */
static int slot_held(const SlotObject *o)
{
    return o->s.state != OL_CLIENT_SLOT_NONE && o->client->c && o->client->gen == o->client_gen;
}

static int Slot_getbuffer(SlotObject *o, Py_buffer *view, int flags)
{
    if (!slot_held(o) || o->busy) {
        PyErr_SetString(PyExc_BufferError,
                        "the slot holds nothing (not granted, committed, aborted or released, "
                        "or its client is closed)");
        view->obj = NULL;
        return -1;
    }
    int readonly = o->s.state == OL_CLIENT_SLOT_PINNED;
    if (PyBuffer_FillInfo(view, (PyObject *)o, o->s.data, (Py_ssize_t)o->s.len, readonly, flags) < 0)
        return -1;
    o->exports++;
    o->client->exports++;
    return 0;
}

static void Slot_releasebuffer(SlotObject *o, Py_buffer *view)
{
    o->exports--;
    o->client->exports--;
}

enum { SLOT_COMMIT, SLOT_ABORT, SLOT_RELEASE };

/* ol_client_commit/abort/release on n handles, without the GIL. */
static int slots_op(ClientObject *self, int op, struct ol_client_slot *sl, const uint64_t *lens,
                    Py_ssize_t n, uint16_t *st)
{
    int rc;
    ol_client *c = call_enter(self);
    Py_BEGIN_ALLOW_THREADS
    rc = op == SLOT_COMMIT  ? ol_client_commit(c, sl, lens, (uint32_t)n, st)
         : op == SLOT_ABORT ? ol_client_abort(c, sl, (uint32_t)n, st)
                            : ol_client_release(c, sl, (uint32_t)n, st);
    Py_END_ALLOW_THREADS
    call_leave(self);
    return rc;
}

/* Ends the reservation or pin of a Slot dropped while holding one (no view
 * can be alive: each holds a reference to the Slot). */
static void Slot_dealloc(SlotObject *o)
{
    ClientObject *cl = o->client;
    if (slot_held(o))
        slots_op(cl, o->s.state == OL_CLIENT_SLOT_PINNED ? SLOT_RELEASE : SLOT_ABORT, &o->s, NULL, 1,
                 NULL);
    Py_XDECREF(o->key);
    Py_XDECREF((PyObject *)cl);
    free_object((PyObject *)o);
}

static PyObject *Slot_view(SlotObject *o, void *closure)
{
    if (!slot_held(o)) {
        PyErr_SetString(PyExc_ValueError,
                        "the slot holds nothing (committed, aborted, released or not granted, "
                        "or its client is closed)");
        return NULL;
    }
    return PyMemoryView_FromObject((PyObject *)o);
}

static PyObject *Slot_key(SlotObject *o, void *closure)
{
    Py_INCREF(o->key);
    return o->key;
}
static PyObject *Slot_len(SlotObject *o, void *closure) { return PyLong_FromUnsignedLongLong(o->s.len); }
static PyObject *Slot_capacity(SlotObject *o, void *closure)
{
    return PyLong_FromUnsignedLongLong(o->s.capacity);
}
static PyObject *Slot_checksum(SlotObject *o, void *closure)
{
    return PyLong_FromUnsignedLongLong(o->s.checksum);
}
static PyObject *Slot_status(SlotObject *o, void *closure) { return PyLong_FromLong(o->status); }
static PyObject *Slot_held(SlotObject *o, void *closure) { return PyBool_FromLong(slot_held(o)); }
static PyObject *Slot_readonly(SlotObject *o, void *closure)
{
    return PyBool_FromLong(o->s.state == OL_CLIENT_SLOT_PINNED);
}

static PyObject *Slot_verify(SlotObject *o, PyObject *unused)
{
    if (!slot_held(o) || o->s.state != OL_CLIENT_SLOT_PINNED) {
        PyErr_SetString(PyExc_ValueError, "verify() needs a slot held by acquire()");
        return NULL;
    }
    if (o->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the slot is in use by another thread");
        return NULL;
    }
    ClientObject *cl = o->client;
    struct ol_client_slot s = o->s;
    o->busy = 1; /* no view, release or commit of it meanwhile */
    ol_client *c = call_enter(cl);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = ol_client_slot_verify(c, &s);
    Py_END_ALLOW_THREADS
    call_leave(cl);
    o->busy = 0;
    return PyBool_FromLong(rc == 0);
}

static PyObject *Slot_repr(SlotObject *o)
{
    static const char *states[] = {"empty", "reserved", "pinned"};
    return PyUnicode_FromFormat("<openlake_client.Slot key=%R status=%d %s len=%llu>", o->key,
                                o->status, slot_held(o) ? states[o->s.state] : "empty",
                                (unsigned long long)o->s.len);
}

static PyMethodDef Slot_methods[] = {
    {"verify", (PyCFunction)Slot_verify, METH_NOARGS,
     "verify() -> bool: for an acquired slot, True when the pin is still held (no reconnect\n"
     "since) and the bytes hash to the checksum their writer committed (xxh3-64)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Slot_getset[] = {
    {"view", (getter)Slot_view, NULL,
     "A new memoryview of the slot's bytes in shared memory (len bytes): writable for a\n"
     "reservation, read-only for an acquired slot. ValueError once the slot holds nothing.\n"
     "commit/abort/release/close refuse (BufferError) while any view is alive: use it\n"
     "in place (slot.view[:n] = data), in a `with slot.view as v:` block, or delete it\n"
     "(and every array made from it) first.", NULL},
    {"key", (getter)Slot_key, NULL, "the key (bytes)", NULL},
    {"len", (getter)Slot_len, NULL,
     "reservation: the size asked for (what commit publishes by default); acquired: the\n"
     "value's length; after commit: the length published", NULL},
    {"capacity", (getter)Slot_capacity, NULL, "bytes the slot can hold", NULL},
    {"checksum", (getter)Slot_checksum, NULL, "xxh3-64 of the value (acquired, or after commit)", NULL},
    {"status", (getter)Slot_status, NULL,
     "the status reserve/acquire gave this key: OK (held), EXISTS, NOT_FOUND, NOSPACE...", NULL},
    {"held", (getter)Slot_held, NULL, "True while the slot holds a reservation or a pin", NULL},
    {"readonly", (getter)Slot_readonly, NULL, "True for an acquired slot", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* Not GC: a Slot holds its Client and its key (bytes), neither of which can
 * reach back to it. Immutable and not instantiable from Python, as the static
 * type was (a Slot is made only by reserve/acquire). */
static PyType_Slot Slot_slots[] = {
    {Py_tp_doc, (void *)"A reservation (from Client.reserve) or a pin (from Client.acquire) of one key's\n"
                        "slot in the server's shared memory; made only by the Client."},
    {Py_tp_dealloc, (void *)Slot_dealloc},
    {Py_tp_repr, (void *)Slot_repr},
    {Py_tp_methods, Slot_methods},
    {Py_tp_getset, Slot_getset},
    {Py_bf_getbuffer, (void *)Slot_getbuffer},
    {Py_bf_releasebuffer, (void *)Slot_releasebuffer},
    {0, NULL},
};

static PyType_Spec Slot_spec = {
    .name = "openlake_client._native.Slot",
    .basicsize = sizeof(SlotObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = Slot_slots,
};

/* reserve(keys, size) / acquire(keys): one Slot per key. */
static PyObject *reserve_or_acquire(ClientObject *self, PyObject *kseq, unsigned long long size,
                                    int acquire)
{
    if (check_open(self) < 0)
        return NULL;
    struct ol_client_key *keys;
    Py_ssize_t n;
    PyObject *hold = get_keys(kseq, &keys, &n);
    if (!hold)
        return NULL;
    PyObject *res = NULL;
    struct ol_client_slot *sl = PyMem_Calloc((size_t)(n ? n : 1), sizeof *sl);
    uint16_t *st = PyMem_Calloc((size_t)(n ? n : 1), sizeof *st);
    int rc = -ENOMEM;
    if (sl && st) {
        ol_client *c = call_enter(self);
        Py_BEGIN_ALLOW_THREADS
        rc = acquire ? ol_client_acquire(c, keys, (uint32_t)n, sl, st)
                     : ol_client_reserve(c, keys, (uint32_t)n, size, sl, st);
        Py_END_ALLOW_THREADS
        call_leave(self);
    }
    if (rc < 0) {
        raise_rc(rc, acquire ? "acquire" : "reserve");
        goto out;
    }
    if (!(res = PyList_New(n)))
        goto undo;
    for (Py_ssize_t i = 0; i < n; i++) {
        SlotObject *o = PyObject_New(SlotObject, SlotType); /* holds a reference to SlotType */
        if (!o)
            goto undo;
        Py_INCREF((PyObject *)self);
        o->client = self;
        o->client_gen = self->gen;
        o->s = sl[i];
        o->key = PyList_GetItem(hold, i);
        Py_INCREF(o->key);
        o->status = st[i];
        o->exports = 0;
        o->busy = 0;
        sl[i].state = OL_CLIENT_SLOT_NONE; /* the Slot owns it now */
        PyList_SetItem(res, i, (PyObject *)o);
    }
    goto out;
undo: /* out of memory: give back what no Slot owns (the list's Slots end theirs) */
    Py_CLEAR(res);
    slots_op(self, acquire ? SLOT_RELEASE : SLOT_ABORT, sl, NULL, n, NULL);
out:
    PyMem_Free(sl);
    PyMem_Free(st);
    PyMem_Free(keys);
    Py_DECREF(hold);
    return res;
}

static PyObject *Client_reserve(ClientObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"keys", "size", NULL};
    PyObject *kseq;
    unsigned long long size = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OK", kwlist, &kseq, &size))
        return NULL;
    return reserve_or_acquire(self, kseq, size, 0);
}

static PyObject *Client_acquire(ClientObject *self, PyObject *kseq)
{
    return reserve_or_acquire(self, kseq, 0, 1);
}

/* commit(slots, lens) / abort(slots) / release(slots): per Slot a status.
 * The Slots are taken (strong references, in objs) before the call: the
 * caller's list may change while the GIL is released, and the busy marks
 * must come off the very objects they were put on. */
static PyObject *slots_call(ClientObject *self, PyObject *sseq, PyObject *lseq, int op)
{
    static const char *names[] = {"commit", "abort", "release"};
    if (check_open(self) < 0)
        return NULL;
    PyObject *fast = PySequence_Fast(sseq, "slots must be a sequence of Slot");
    if (!fast)
        return NULL;
    Py_ssize_t n = fast_size(fast), nobjs = 0;
    PyObject *lfast = NULL, *res = NULL;
    SlotObject **objs = PyMem_Calloc((size_t)(n ? n : 1), sizeof *objs);
    struct ol_client_slot *sl = PyMem_Calloc((size_t)(n ? n : 1), sizeof *sl);
    uint64_t *lens = PyMem_Calloc((size_t)(n ? n : 1), sizeof *lens);
    uint16_t *st = PyMem_Calloc((size_t)(n ? n : 1), sizeof *st);
    if (!objs || !sl || !lens || !st) {
        PyErr_NoMemory();
        goto out;
    }
    if (lseq && lseq != Py_None) {
        if (!(lfast = PySequence_Fast(lseq, "lens must be a sequence of int")))
            goto out;
        if (fast_size(lfast) != n) {
            PyErr_SetString(PyExc_ValueError, "as many lens as slots");
            goto out;
        }
    }
    /* check everything before anything is sent */
    for (Py_ssize_t i = 0; i < n; i++) {
        SlotObject *o = (SlotObject *)fast_item(fast, i);
        if (!o)
            goto out;
        if (!PyObject_TypeCheck((PyObject *)o, SlotType)) {
            PyErr_SetString(PyExc_TypeError, "slots must be Slot objects");
            goto out;
        }
        if (o->client != self) {
            PyErr_SetString(PyExc_ValueError, "a slot of another client");
            goto out;
        }
        if (o->busy == 2) { /* marked by this loop: the one slot twice in the list */
            PyErr_Format(PyExc_ValueError, "%s: slot %R is in the list twice", names[op], o->key);
            goto out;
        }
        if (o->busy) {
            PyErr_SetString(PyExc_RuntimeError, "a slot is being committed or released by another thread");
            goto out;
        }
        if (o->exports) {
            PyErr_Format(PyExc_BufferError,
                         "%s: a view of slot %R is still alive (a memoryview of slot.view, or an "
                         "array made from it): release or delete it first", names[op], o->key);
            goto out;
        }
        sl[i] = slot_held(o) ? o->s : (struct ol_client_slot){0};
        lens[i] = o->s.len;
        if (lfast) {
            PyObject *len = fast_item(lfast, i);
            if (!len)
                goto out;
            lens[i] = PyLong_AsUnsignedLongLong(len);
            if (PyErr_Occurred())
                goto out;
        }
        Py_INCREF((PyObject *)o);
        objs[nobjs++] = o;
        o->busy = 2; /* seen in this call (the GIL is held until every one is checked) */
    }
    for (Py_ssize_t i = 0; i < n; i++)
        objs[i]->busy = 1;
    int rc = slots_op(self, op, sl, lens, n, st);
    for (Py_ssize_t i = 0; i < n; i++) {
        SlotObject *o = objs[i];
        o->busy = 0;
        if (slot_held(o))
            o->s = sl[i];
    }
    res = rc < 0 ? raise_rc(rc, names[op]) : status_list(st, n);
out:
    for (Py_ssize_t i = 0; i < nobjs; i++) {
        objs[i]->busy = 0; /* 0 already when the call ran; 2 when a check failed */
        Py_DECREF((PyObject *)objs[i]);
    }
    PyMem_Free(objs);
    PyMem_Free(sl);
    PyMem_Free(lens);
    PyMem_Free(st);
    Py_XDECREF(lfast);
    Py_DECREF(fast);
    return res;
}

static PyObject *Client_commit(ClientObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"slots", "lens", NULL};
    PyObject *sseq, *lseq = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O", kwlist, &sseq, &lseq))
        return NULL;
    return slots_call(self, sseq, lseq, SLOT_COMMIT);
}

static PyObject *Client_abort(ClientObject *self, PyObject *sseq) { return slots_call(self, sseq, NULL, SLOT_ABORT); }
static PyObject *Client_release(ClientObject *self, PyObject *sseq)
{
    return slots_call(self, sseq, NULL, SLOT_RELEASE);
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
    {"members", (PyCFunction)Client_members, METH_NOARGS,
     "members() -> (revision, replicas, [(id, weight, kv_addr)]): the cluster's KV members as\n"
     "the node places keys (Placement(members).homes gives a key's homes); replicas 0 and\n"
     "no members: the node is in no cluster (or has no view yet, or is of protocol 1).\n"
     "OSError(EPROTO) when the server sends a kv_addr that is not UTF-8 or holds a NUL."},
    {"stats", (PyCFunction)Client_stats, METH_NOARGS,
     "stats() -> dict[str, int]: the service's counters summed over the shards."},
    {"populate", (PyCFunction)Client_populate, METH_VARARGS,
     "populate(max_bytes=0): fill this process's page tables for the first max_bytes of the\n"
     "server's slab (0: all) now, instead of on first use (Unix socket only)."},
    {"reserve", (PyCFunction)(void (*)(void))Client_reserve, METH_VARARGS | METH_KEYWORDS,
     "reserve(keys, size) -> list[Slot]: a writable slot in shared memory per key (Unix socket\n"
     "only). slot.status is OK for a reservation (slot.view: size bytes, or the whole slot for\n"
     "size 0), else EXISTS, NOSPACE, TOO_LARGE... Write, then commit() or abort()."},
    {"commit", (PyCFunction)(void (*)(void))Client_commit, METH_VARARGS | METH_KEYWORDS,
     "commit(slots, lens=None) -> list[int]: publish reserved slots (lens: bytes written per\n"
     "slot; None: each slot's len). Per slot OK, STALE_GENERATION (not a live reservation) or\n"
     "TOO_LARGE (the slot stays reserved). BufferError while a view of a slot is alive."},
    {"abort", (PyCFunction)Client_abort, METH_O,
     "abort(slots) -> list[int]: give reserved slots back unpublished (OK or STALE_GENERATION)."},
    {"acquire", (PyCFunction)Client_acquire, METH_O,
     "acquire(keys) -> list[Slot]: pin each value for reading in place (Unix socket only);\n"
     "slot.status OK (slot.view read-only, len bytes), NOT_FOUND, BUSY or CHECKSUM_MISMATCH.\n"
     "The pinned bytes are never evicted or reused until release()."},
    {"release", (PyCFunction)Client_release, METH_O,
     "release(slots) -> list[int]: unpin acquired slots (OK or STALE_GENERATION).\n"
     "BufferError while a view of a slot is alive."},
    {"close", (PyCFunction)Client_close, METH_NOARGS,
     "close(): drop the connections (their pins and reservations end). BufferError while a\n"
     "view of a slot is alive."},
    {"__enter__", (PyCFunction)Client_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Client_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Client_getset[] = {
    {"shards", (getter)Client_shards, NULL, "number of server shards (one connection each)", NULL},
    {"shared_memory", (getter)Client_shared, NULL, "True when values move through the shared slab", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* Not GC: a Client holds no Python object. Immutable, as the static type
 * was; Python may subclass it. */
static PyType_Slot Client_slots[] = {
    {Py_tp_doc, (void *)"Client(addr, token=None, namespace='default', token_file=None, value_size=0, timeout_ms=0)\n\n"
                        "A connection to an OpenLake KV service: addr is its Unix socket path (values\n"
                        "through shared memory) or 'host:port' (values over TCP)."},
    {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_init, (void *)Client_init},
    {Py_tp_dealloc, (void *)Client_dealloc},
    {Py_tp_methods, Client_methods},
    {Py_tp_getset, Client_getset},
    {0, NULL},
};

static PyType_Spec Client_spec = {
    .name = "openlake_client._native.Client",
    .basicsize = sizeof(ClientObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = Client_slots,
};

/* ---- Placement ------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    struct ol_place *p;
} PlacementObject;

static int Placement_init(PlacementObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"members", "revision", NULL};
    PyObject *seq;
    long long rev = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|L", kwlist, &seq, &rev))
        return -1;
    PyObject *fast = PySequence_Fast(seq, "members must be a sequence of (id, weight, ...)");
    if (!fast)
        return -1;
    Py_ssize_t n = fast_size(fast);
    if (n > OL_PLACE_MAX_MEMBERS) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "at most %d members", OL_PLACE_MAX_MEMBERS);
        return -1;
    }
    struct ol_place_member *m = PyMem_Malloc(sizeof *m * (size_t)(n ? n : 1));
    if (!m) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = fast_item(fast, i);
        PyObject *id = it && PySequence_Check(it) ? PySequence_GetItem(it, 0) : NULL;
        PyObject *w = id ? PySequence_GetItem(it, 1) : NULL;
        m[i].id = w ? PyLong_AsLongLong(id) : -1;
        m[i].weight = w && !PyErr_Occurred() ? PyLong_AsUnsignedLongLong(w) : 0;
        Py_XDECREF(id);
        Py_XDECREF(w);
        if (!w || PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "a member is (id: int, weight: int >= 1, ...)");
            PyMem_Free(m);
            Py_DECREF(fast);
            return -1;
        }
    }
    Py_DECREF(fast);
    struct ol_place *p = NULL;
    int rc = ol_place_create(m, (int)n, rev, &p);
    PyMem_Free(m);
    if (rc < 0) {
        if (rc == -ENOMEM)
            PyErr_NoMemory();
        else
            PyErr_SetString(PyExc_ValueError,
                            "members: an id listed twice, or a weight of 0");
        return -1;
    }
    ol_place_destroy(self->p);
    self->p = p;
    return 0;
}

static void Placement_dealloc(PlacementObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    ol_place_destroy(self->p);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

static PyObject *Placement_homes(PlacementObject *self, PyObject *args)
{
    PyObject *nsobj, *seq;
    int r = 1;
    if (!PyArg_ParseTuple(args, "OO|i", &nsobj, &seq, &r))
        return NULL;
    if (!self->p) {
        PyErr_SetString(PyExc_ValueError, "Placement not initialised");
        return NULL;
    }
    if (r < 1 || r > OL_PLACE_MAX_REPLICAS)
        return PyErr_Format(PyExc_ValueError, "r is 1 to %d", OL_PLACE_MAX_REPLICAS);
    PyObject *nsb = PyUnicode_Check(nsobj) ? PyUnicode_AsUTF8String(nsobj)
                    : PyBytes_Check(nsobj) ? (Py_INCREF(nsobj), nsobj) : NULL;
    if (!nsb) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "namespace must be bytes or str");
        return NULL;
    }
    char *ns;
    Py_ssize_t nslen;
    struct ol_client_key *keys = NULL;
    Py_ssize_t n = 0;
    PyObject *hold = PyBytes_AsStringAndSize(nsb, &ns, &nslen) < 0 ? NULL
                                                                 : get_keys(seq, &keys, &n);
    if (!hold) {
        Py_DECREF(nsb);
        return NULL;
    }
    uint64_t seed = ol_kv_ns_seed(ns, (size_t)nslen);
    PyObject *l = PyList_New(n);
    for (Py_ssize_t i = 0; l && i < n; i++) {
        int64_t out[OL_PLACE_MAX_REPLICAS];
        int k = ol_place_homes(self->p, ol_kv_key_hash(seed, keys[i].data, keys[i].len), r, out);
        PyObject *t = PyTuple_New(k > 0 ? k : 0);
        for (int j = 0; t && j < k; j++) {
            PyObject *x = PyLong_FromLongLong(out[j]);
            if (!x || PyTuple_SetItem(t, j, x) < 0)
                Py_CLEAR(t);
        }
        list_fill(&l, i, t);
    }
    PyMem_Free(keys);
    Py_DECREF(hold);
    Py_DECREF(nsb);
    return l;
}

static PyObject *Placement_len(PlacementObject *self, void *closure)
{
    return PyLong_FromLong(self->p ? ol_place_count(self->p) : 0);
}

static PyObject *Placement_revision(PlacementObject *self, void *closure)
{
    return PyLong_FromLongLong(self->p ? ol_place_revision(self->p) : 0);
}

static PyMethodDef Placement_methods[] = {
    {"homes", (PyCFunction)Placement_homes, METH_VARARGS,
     "homes(namespace, keys, r=1) -> list[tuple[int, ...]]: per key the ids of its r homes,\n"
     "best first (docs/cluster.md \"Placement\"; the nodes' own code)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Placement_getset[] = {
    {"count", (getter)Placement_len, NULL, "members in the snapshot", NULL},
    {"revision", (getter)Placement_revision, NULL, "the etcd revision it was made from", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Placement_slots[] = {
    {Py_tp_doc, (void *)"Placement(members, revision=0)\n\n"
                        "A placement snapshot of KV members (id, weight[, ...]): weighted rendezvous\n"
                        "hashing, exactly as openlaked places keys."},
    {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_init, (void *)Placement_init},
    {Py_tp_dealloc, (void *)Placement_dealloc},
    {Py_tp_methods, Placement_methods},
    {Py_tp_getset, Placement_getset},
    {0, NULL},
};

static PyType_Spec Placement_spec = {
    .name = "openlake_client._native.Placement",
    .basicsize = sizeof(PlacementObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = Placement_slots,
};

static PyObject *native_place_log2_q32(PyObject *mod, PyObject *arg)
{
    unsigned long long x = PyLong_AsUnsignedLongLong(arg);
    if (x == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    return PyLong_FromUnsignedLongLong(ol_place_log2_q32(x));
}

static PyMethodDef native_functions[] = {
    {"place_log2_q32", native_place_log2_q32, METH_O,
     "place_log2_q32(x) -> int: the placement rule's fixed-point log2 (docs/cluster.md)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT, "_native", "The OpenLake C client, for Python.", -1, native_functions,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void)
{
    PyObject *m = PyModule_Create(&native_module);
    if (!m)
        return NULL;
    PyTypeObject *client_type = (PyTypeObject *)PyType_FromSpec(&Client_spec);
    SlotType = (PyTypeObject *)PyType_FromSpec(&Slot_spec);
    PyTypeObject *place_type = (PyTypeObject *)PyType_FromSpec(&Placement_spec);
    int rc = client_type && SlotType && place_type ? PyModule_AddType(m, client_type) : -1;
    if (rc == 0)
        rc = PyModule_AddType(m, SlotType);
    if (rc == 0)
        rc = PyModule_AddType(m, place_type);
    Py_XDECREF((PyObject *)client_type); /* the module holds it */
    Py_XDECREF((PyObject *)place_type);
    if (rc < 0) {
        Py_CLEAR(SlotType);
        Py_DECREF(m);
        return NULL;
    }
#if PY_VERSION_HEX < 0x030A0000
    /* 3.9 has no Py_TPFLAGS_DISALLOW_INSTANTIATION: Slot() fails as it does
     * for a static type with no tp_new (3.9 is built without the limited API) */
    SlotType->tp_new = NULL;
#endif
    static const struct { const char *name; int v; } consts[] = {
        {"OK", OL_KV_OK}, {"EXISTS", OL_KV_EXISTS}, {"NOT_FOUND", OL_KV_NOT_FOUND},
        {"NOSPACE", OL_KV_NOSPACE}, {"TOO_LARGE", OL_KV_TOO_LARGE_ST},
        {"CHECKSUM_MISMATCH", OL_KV_CHECKSUM_MISMATCH}, {"BUSY", OL_KV_BUSY},
        {"PINNED", OL_KV_PINNED}, {"STALE_GENERATION", OL_KV_STALE_GENERATION},
        {"QUOTA", OL_KV_QUOTA},
    };
    for (size_t i = 0; i < sizeof consts / sizeof consts[0]; i++)
        PyModule_AddIntConstant(m, consts[i].name, consts[i].v);
    /* The Makefile's VERSION, passed by setup.py as the Makefile passes it to
     * openlaked and openlake. */
    if (PyModule_AddStringConstant(m, "__version__", OL_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
