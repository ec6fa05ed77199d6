/* The warm call of a compiled program, in C: sdfgsparse.runtime._binder.Binder.
 *
 * One Binder per (compiled program, argument signature), made by runtime/plan.py from the
 * plan's description (a dict of plain Python values: see plan.py's _spec). A call
 *
 *     binder(args, out=None)
 *
 * reads each argument's fields (NumPy arrays' and scipy matrices' in C, torch tensors'
 * through their methods), checks them against the signature, defines and matches the size
 * symbols, allocates the results, packs the program's entry record
 * (targets/cpu/entry.py, include/sdfgsparse_entry.h) and calls the entry with the GIL
 * released. Whatever it does not take exactly as the full path would (another dtype or
 * layout, a shape that disagrees, storage that fails its check, overlapping memory, a
 * value outside its slot) returns the plan's MISS object before anything runs: the caller
 * then takes the full path, the one place that diagnoses and raises the typed errors.
 *
 * The uncommon parts of a signature (sparse arguments of formats other than CSR / CSC,
 * capacities of data-dependent results, sparse results, sizes that are not plain integer
 * expressions) are steps that call back into Python with the symbol table as a dict.
 *
 * NumPy arrays are read through the public layout of PyArrayObject (NumPy's
 * PyArrayObject_fields, stable since NumPy 1.7); the module's probe() lets the Python side
 * check it against NumPy's own answers on import before any Binder is made.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    PyObject_HEAD
    char *data;
    int nd;
    Py_ssize_t *dimensions;
    Py_ssize_t *strides;
    PyObject *base;
    PyObject *descr;
    int flags;
} NpArray;

#define NP_C_CONTIGUOUS 0x0001
#define MAXDIM 32
#define STACK 48

#define NAMES(X) X(_COMPILED_SDFG_CALL_HOOKS) X(_format) X(_initialized) X(_lib) X(_libhandle) X(_shape) X(arrays) X(data) X(data_ptr) X(dim) X(do_not_execute) X(dtype) X(format) X(indices) X(indptr) X(is_conj) X(is_contiguous) X(is_cpu) X(is_neg) X(layout) X(on) X(shape) X(value) X(values)
#define NAME_ENUM(n) NAME_##n,
enum { NAMES(NAME_ENUM) NAME_COUNT };
static PyObject *NAME_OBJ[NAME_COUNT]; /* interned attribute names, made on import */
#define NM(n) NAME_OBJ[NAME_##n]

/* ------------------------------------------------------------------ expressions */
/* An integer expression: reverse Polish code of (op, operand) pairs over the symbol table,
 * or a Python callable of the table as a dict (then the binder keeps one). */
enum { E_CONST, E_SYM, E_ADD, E_MUL, E_FLOOR, E_CEIL, E_MOD, E_MIN, E_MAX, E_POW };

typedef struct {
    int64_t *code; /* pairs */
    int n;         /* pairs */
    PyObject *fn;  /* or a callable (new reference) */
} Expr;

static int64_t floordiv(int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
    return q;
}

/* 0 and the value in *out, or -1 (overflow, a division by zero, a bad code: the full path) */
static int eval_code(const Expr *e, const int64_t *syms, int64_t *out) {
    int64_t st[STACK];
    int sp = 0;
    for (int i = 0; i < e->n; i++) {
        int64_t op = e->code[2 * i], arg = e->code[2 * i + 1];
        if (op == E_CONST || op == E_SYM) {
            if (sp >= STACK) return -1;
            st[sp++] = op == E_CONST ? arg : syms[arg];
            continue;
        }
        if (op == E_POW) {
            if (sp < 1) return -1;
            int64_t base = st[sp - 1], r = 1;
            for (int64_t k = 0; k < arg; k++)
                if (__builtin_mul_overflow(r, base, &r)) return -1;
            st[sp - 1] = r;
            continue;
        }
        if (sp < 2) return -1;
        int64_t b = st[--sp], a = st[sp - 1], r;
        switch (op) {
            case E_ADD: if (__builtin_add_overflow(a, b, &r)) return -1; break;
            case E_MUL: if (__builtin_mul_overflow(a, b, &r)) return -1; break;
            case E_FLOOR: if (b == 0 || (a == INT64_MIN && b == -1)) return -1; r = floordiv(a, b); break;
            case E_CEIL: if (b == 0 || (a == INT64_MIN && b == -1)) return -1; r = -floordiv(-a, b); break;
            case E_MOD: if (b == 0 || (a == INT64_MIN && b == -1)) return -1; r = a - floordiv(a, b) * b; break;
            case E_MIN: r = a < b ? a : b; break;
            case E_MAX: r = a > b ? a : b; break;
            default: return -1;
        }
        st[sp - 1] = r;
    }
    if (sp != 1) return -1;
    *out = st[0];
    return 0;
}

/* ------------------------------------------------------------------ steps */
enum { K_SPARSE, K_PYSPARSE, K_NUMPY, K_TORCH, K_SCALAR, K_GIVEN };
enum { SRC_SCIPY, SRC_MATRIX, SRC_TORCH };
enum { F_POS, F_CRD, F_VALS, F_ROWS, F_COLS, F_N1 };
enum { SYM_ROWS, SYM_COLS, SYM_N1 };

typedef struct {
    int sym, key, define;
} SymUse;

typedef struct {
    int dim, sym; /* sym >= 0: defines it */
    Expr expr;    /* else: must equal it (n == 0 and fn NULL: not checked) */
} Dim;

typedef struct {
    int kind, index, words; /* words: slots of the entry record this argument fills */
    int written;
    /* K_SPARSE */
    int source, parent_dim, extent_dim, ordered, unique, bit, nfields;
    int rows_want, cols_want; /* -1: any */
    int64_t imax, in_kernel_from, index_size, vals_size;
    PyObject *fmt;   /* 'csr' / 'csc', the SparseFormat, or the torch layout */
    PyObject *vdt, *idt;
    PyObject *pos_name, *crd_name; /* torch's member methods */
    int fields[8];
    SymUse *syms;
    int nsyms;
    /* K_PYSPARSE: fn(v, syms, origin, keep, in_kernel) -> None or (words, spans) */
    PyObject *fn;
    int *defines; /* symbols it may define, read back from the dict */
    int ndefines;
    /* K_NUMPY, K_TORCH */
    PyObject *dtype, *cls, *strided;
    int ndim;
    int64_t itemsize;
    Dim *dims;
    int ndims;
    /* K_SCALAR */
    PyObject *type;
    int is_float;
    /* K_GIVEN: the value after the arguments at ``position`` defines symbol ``sym`` */
    int position, sym;
} Step;

typedef struct {
    int sparse; /* a Python allocator: alloc(syms) -> (obj, address), result(obj) */
    PyObject *alloc, *result, *dtype;
    Expr *shape;
    int ndim;
} Return;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *csdfg, *lib, *hooks, *validate, *miss, *empty, *ndarray;
    PyObject *plan_outputs, *to_torch, *failures, *capacities;
    PyObject *sym_names; /* tuple of str */
    int (*entry)(const char *);
    int nargs, nsyms, need_dict, nwritten, ngiven;
    long long done, missed; /* calls it finished, calls it handed to the full path */
    int64_t *constants; /* value per symbol, or INT64_MIN */
    Step *steps;
    int nsteps;
    Expr *rules; /* pairs */
    int nrules;
    int *caps; /* symbols the capacities define */
    int ncaps;
    Return *rets;
    int nrets;
    int *order; /* result order */
    int norder;
    int *sources; /* (kind, key) pairs */
    int nsources;
    int *sources_at; /* the record word of each */
    PyObject *call;  /* without an entry: the program's ctypes function */
    char *codes;     /* without an entry: each word as 'Q' (address), 'q' (integer) or 'd' (double) */
    int *written_args;
    int *arg_word; /* first record word of each argument */
    int nwords;
} Binder;

/* ------------------------------------------------------------------ spec parsing */
static PyObject *item(PyObject *d, const char *k) {
    PyObject *v = PyDict_GetItemString(d, k);
    if (v == NULL && !PyErr_Occurred()) PyErr_Format(PyExc_KeyError, "binder spec: missing %s", k);
    return v;
}

static int get_long(PyObject *d, const char *k, int64_t *out) {
    PyObject *v = item(d, k);
    if (v == NULL) return -1;
    *out = PyLong_AsLongLong(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int get_int(PyObject *d, const char *k, int *out) {
    int64_t v;
    if (get_long(d, k, &v)) return -1;
    *out = (int)v;
    return 0;
}

static PyObject *get_obj(PyObject *d, const char *k) { /* new reference */
    PyObject *v = item(d, k);
    Py_XINCREF(v);
    return v;
}

static int parse_ints(PyObject *seq, int **out, int *n) {
    PyObject *f = PySequence_Fast(seq, "binder spec: a sequence of integers");
    if (f == NULL) return -1;
    *n = (int)PySequence_Fast_GET_SIZE(f);
    *out = PyMem_Calloc(*n + 1, sizeof(int));
    for (int i = 0; i < *n; i++) (*out)[i] = (int)PyLong_AsLong(PySequence_Fast_GET_ITEM(f, i));
    Py_DECREF(f);
    return PyErr_Occurred() ? -1 : 0;
}

static int parse_expr(PyObject *v, Expr *e) {
    memset(e, 0, sizeof(*e));
    if (v == Py_None) return 0;
    if (PyCallable_Check(v)) {
        Py_INCREF(v);
        e->fn = v;
        return 0;
    }
    PyObject *f = PySequence_Fast(v, "binder spec: an expression");
    if (f == NULL) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(f);
    e->n = (int)(n / 2);
    e->code = PyMem_Calloc(n + 2, sizeof(int64_t));
    for (Py_ssize_t i = 0; i < n; i++) e->code[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(f, i));
    Py_DECREF(f);
    return PyErr_Occurred() ? -1 : 0;
}

static void free_expr(Expr *e) {
    PyMem_Free(e->code);
    Py_CLEAR(e->fn);
}

static int parse_step(PyObject *d, Step *s) {
    memset(s, 0, sizeof(*s));
    if (get_int(d, "kind", &s->kind) || get_int(d, "index", &s->index) || get_int(d, "words", &s->words) ||
        get_int(d, "written", &s->written))
        return -1;
    if (s->kind == K_SPARSE) {
        PyObject *syms, *fields;
        if (get_int(d, "source", &s->source) || get_int(d, "parent_dim", &s->parent_dim) ||
            get_int(d, "extent_dim", &s->extent_dim) || get_int(d, "ordered", &s->ordered) ||
            get_int(d, "unique", &s->unique) || get_int(d, "bit", &s->bit) ||
            get_int(d, "rows_want", &s->rows_want) || get_int(d, "cols_want", &s->cols_want) ||
            get_long(d, "imax", &s->imax) || get_long(d, "in_kernel_from", &s->in_kernel_from) ||
            get_long(d, "index_size", &s->index_size) || get_long(d, "vals_size", &s->vals_size))
            return -1;
        s->fmt = get_obj(d, "fmt");
        s->vdt = get_obj(d, "vdt");
        s->idt = get_obj(d, "idt");
        s->pos_name = get_obj(d, "pos_name");
        s->crd_name = get_obj(d, "crd_name");
        if (!s->fmt || !s->vdt || !s->idt || !s->pos_name || !s->crd_name) return -1;
        int *f, nf;
        if ((fields = item(d, "fields")) == NULL || parse_ints(fields, &f, &nf)) return -1;
        if (nf > 8) {
            PyMem_Free(f);
            PyErr_SetString(PyExc_ValueError, "binder spec: too many fields");
            return -1;
        }
        memcpy(s->fields, f, nf * sizeof(int));
        s->nfields = nf;
        PyMem_Free(f);
        int *flat, n;
        if ((syms = item(d, "syms")) == NULL || parse_ints(syms, &flat, &n)) return -1;
        s->nsyms = n / 3;
        s->syms = PyMem_Calloc(s->nsyms + 1, sizeof(SymUse));
        for (int i = 0; i < s->nsyms; i++) {
            s->syms[i].sym = flat[3 * i];
            s->syms[i].key = flat[3 * i + 1];
            s->syms[i].define = flat[3 * i + 2];
        }
        PyMem_Free(flat);
    } else if (s->kind == K_PYSPARSE) {
        PyObject *defs;
        if ((s->fn = get_obj(d, "fn")) == NULL) return -1;
        if ((defs = item(d, "defines")) == NULL || parse_ints(defs, &s->defines, &s->ndefines)) return -1;
    } else if (s->kind == K_NUMPY || s->kind == K_TORCH) {
        PyObject *dims;
        if (get_int(d, "ndim", &s->ndim) || get_long(d, "itemsize", &s->itemsize)) return -1;
        if ((s->dtype = get_obj(d, "dtype")) == NULL) return -1;
        if (s->kind == K_TORCH && ((s->cls = get_obj(d, "cls")) == NULL || (s->strided = get_obj(d, "strided")) == NULL))
            return -1;
        if ((dims = item(d, "dims")) == NULL) return -1;
        PyObject *f = PySequence_Fast(dims, "binder spec: dims");
        if (f == NULL) return -1;
        s->ndims = (int)PySequence_Fast_GET_SIZE(f);
        s->dims = PyMem_Calloc(s->ndims + 1, sizeof(Dim));
        for (int i = 0; i < s->ndims; i++) {
            PyObject *t = PySequence_Fast_GET_ITEM(f, i); /* (dim, sym or -1, expr or None) */
            if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3) {
                Py_DECREF(f);
                PyErr_SetString(PyExc_ValueError, "binder spec: a dim is (dim, sym, expr)");
                return -1;
            }
            s->dims[i].dim = (int)PyLong_AsLong(PyTuple_GET_ITEM(t, 0));
            s->dims[i].sym = (int)PyLong_AsLong(PyTuple_GET_ITEM(t, 1));
            if (parse_expr(PyTuple_GET_ITEM(t, 2), &s->dims[i].expr)) {
                Py_DECREF(f);
                return -1;
            }
        }
        Py_DECREF(f);
    } else if (s->kind == K_SCALAR) {
        if ((s->type = get_obj(d, "type")) == NULL || get_int(d, "is_float", &s->is_float)) return -1;
    } else if (s->kind == K_GIVEN) {
        if (get_int(d, "position", &s->position) || get_int(d, "sym", &s->sym)) return -1;
    } else {
        PyErr_SetString(PyExc_ValueError, "binder spec: unknown step kind");
        return -1;
    }
    return PyErr_Occurred() ? -1 : 0;
}

static void free_step(Step *s) {
    Py_CLEAR(s->fmt);
    Py_CLEAR(s->vdt);
    Py_CLEAR(s->idt);
    Py_CLEAR(s->pos_name);
    Py_CLEAR(s->crd_name);
    Py_CLEAR(s->fn);
    Py_CLEAR(s->dtype);
    Py_CLEAR(s->cls);
    Py_CLEAR(s->strided);
    Py_CLEAR(s->type);
    PyMem_Free(s->syms);
    PyMem_Free(s->defines);
    for (int i = 0; i < s->ndims; i++) free_expr(&s->dims[i].expr);
    PyMem_Free(s->dims);
}

/* ------------------------------------------------------------------ a call's state */
typedef struct {
    Binder *b;
    int64_t *syms;
    PyObject *dict;    /* the symbol table as a dict (need_dict), else NULL */
    PyObject **held;   /* objects that must live until the program returned */
    int nheld, capheld;
    PyObject *heldbuf[16];
    PyObject *keep;    /* a list for the Python steps' objects (need_dict), else NULL */
    PyObject *origin;  /* for capacities: name -> argument (a dict), or NULL */
    PyObject *in_kernel; /* a list (Python steps append to it) */
    int kernel_checks;   /* a C step leaves the entries to the kernels */
    uint64_t checks;
    uint64_t *words;
    int64_t (*spans)[2];
    int *span_arg;
    int nspans, capspans;
} Call;

static int keep(Call *c, PyObject *o) { /* steals o */
    if (o == NULL) return -1;
    if (c->nheld == c->capheld) {
        int cap = 2 * c->capheld;
        PyObject **h = PyMem_Malloc(cap * sizeof(PyObject *));
        if (h == NULL) {
            Py_DECREF(o);
            PyErr_NoMemory();
            return -1;
        }
        memcpy(h, c->held, c->nheld * sizeof(PyObject *));
        if (c->held != c->heldbuf) PyMem_Free(c->held);
        c->held = h;
        c->capheld = cap;
    }
    c->held[c->nheld++] = o;
    return 0;
}

static int add_span(Call *c, int arg, int64_t start, int64_t size) {
    if (c->nspans == c->capspans) {
        int cap = c->capspans ? 2 * c->capspans : 16;
        void *s = PyMem_Realloc(c->spans, cap * sizeof(*c->spans));
        if (s == NULL) return -1;
        c->spans = s;
        void *a = PyMem_Realloc(c->span_arg, cap * sizeof(int));
        if (a == NULL) return -1;
        c->span_arg = a;
        c->capspans = cap;
    }
    c->spans[c->nspans][0] = start;
    c->spans[c->nspans][1] = start + size;
    c->span_arg[c->nspans++] = arg;
    return 0;
}

/* define symbol i (mirrored in the dict) or check it: 1 ok, 0 miss, -1 error */
static int put_sym(Call *c, int i, int64_t v, int define) {
    if (!define) return c->syms[i] == v;
    c->syms[i] = v;
    if (c->dict != NULL) {
        PyObject *o = PyLong_FromLongLong(v);
        if (o == NULL || PyDict_SetItem(c->dict, PyTuple_GET_ITEM(c->b->sym_names, i), o)) {
            Py_XDECREF(o);
            return -1;
        }
        Py_DECREF(o);
    }
    return 1;
}

/* 1 ok (value in *out), 0 miss, -1 error */
static int eval(Call *c, const Expr *e, int64_t *out) {
    if (e->fn == NULL) return eval_code(e, c->syms, out) == 0;
    PyObject *r = PyObject_CallOneArg(e->fn, c->dict);
    if (r == NULL) {
        if (PyErr_ExceptionMatches(PyExc_KeyError) || PyErr_ExceptionMatches(PyExc_ArithmeticError)) {
            PyErr_Clear(); /* a symbol without a value, a division by zero: the full path says */
            return 0;
        }
        return -1;
    }
    *out = PyLong_AsLongLong(r);
    Py_DECREF(r);
    if (*out == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

static int same_dtype(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    int r = PyObject_RichCompareBool(a, b, Py_EQ);
    if (r < 0) PyErr_Clear();
    return r > 0;
}

/* A NumPy member array of a sparse argument: exact ndarray, dtype, one dimension, C order */
static int np_vector(Binder *b, PyObject *a, PyObject *dtype) {
    if (a == NULL || Py_TYPE(a) != (PyTypeObject *)b->ndarray) return 0;
    NpArray *x = (NpArray *)a;
    return x->nd == 1 && (x->flags & NP_C_CONTIGUOUS) && same_dtype(x->descr, dtype);
}

/* truth of o.name() (or of the attribute o.name where attr): 1, 0, -1 */
static int truth(PyObject *o, PyObject *name, int attr) {
    PyObject *r = attr ? PyObject_GetAttr(o, name) : PyObject_CallMethodNoArgs(o, name);
    if (r == NULL) return -1;
    int t = PyObject_IsTrue(r);
    Py_DECREF(r);
    return t;
}

static int64_t long_of(PyObject *r) { /* steals; -1 with an error set on failure */
    if (r == NULL) return -1;
    int64_t v = PyLong_AsLongLong(r);
    Py_DECREF(r);
    return v;
}

/* A torch member tensor: dtype, one dimension, contiguous; its data pointer, entries and
 * first and last entries' addresses. 1 ok, 0 miss, -1 error */
static int torch_vector(PyObject *t, PyObject *dtype, int64_t *ptr, int64_t *n) {
    PyObject *dt = PyObject_GetAttr(t, NM(dtype));
    if (dt == NULL) return -1;
    int ok = same_dtype(dt, dtype);
    Py_DECREF(dt);
    if (!ok) return 0;
    int64_t dim = long_of(PyObject_CallMethodNoArgs(t, NM(dim)));
    if (dim == -1 && PyErr_Occurred()) return -1;
    if (dim != 1) return 0;
    int c = truth(t, NM(is_contiguous), 0);
    if (c <= 0) return c;
    PyObject *shape = PyObject_GetAttr(t, NM(shape));
    if (shape == NULL) return -1;
    *n = PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) == 1 ? PyLong_AsLongLong(PyTuple_GET_ITEM(shape, 0)) : -1;
    Py_DECREF(shape);
    if (PyErr_Occurred()) return -1;
    *ptr = long_of(PyObject_CallMethodNoArgs(t, NM(data_ptr)));
    if (*ptr == -1 && PyErr_Occurred()) return -1;
    return 1;
}

static int64_t read_index(int64_t ptr, int64_t i, int64_t size) {
    return size == 4 ? (int64_t)((const int32_t *)(intptr_t)ptr)[i] : ((const int64_t *)(intptr_t)ptr)[i];
}

static int shape2(PyObject *shape, int64_t *r, int64_t *c) {
    if (shape == NULL) return -1;
    PyObject *f = PySequence_Fast(shape, "shape");
    Py_DECREF(shape);
    if (f == NULL) return -1;
    int ok = PySequence_Fast_GET_SIZE(f) == 2;
    if (ok) {
        *r = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(f, 0));
        *c = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(f, 1));
    }
    Py_DECREF(f);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return ok;
}

/* A CSR / CSC argument. 1 ok, 0 miss, -1 error */
static int bind_sparse(Call *c, const Step *s, PyObject *v, uint64_t *w) {
    Binder *b = c->b;
    PyObject *pos = NULL, *crd = NULL, *vals = NULL;
    int64_t rows, cols, p_pos, p_crd, p_vals, n_pos, n_crd, n_vals;
    int r;
    if (s->source == SRC_TORCH) {
        PyObject *layout = PyObject_GetAttr(v, NM(layout));
        if (layout == NULL) goto error_or_miss;
        int same = layout == s->fmt;
        Py_DECREF(layout);
        if (!same) return 0;
        if ((r = truth(v, NM(is_cpu), 1)) <= 0) return r;
        pos = PyObject_CallMethodNoArgs(v, s->pos_name);
        crd = PyObject_CallMethodNoArgs(v, s->crd_name);
        vals = PyObject_CallMethodNoArgs(v, NM(values));
        if (keep(c, pos) || keep(c, crd) || keep(c, vals)) return -1; /* (kept alive by the list) */
        if ((r = shape2(PyObject_GetAttr(v, NM(shape)), &rows, &cols)) <= 0) return r;
    } else {
        if (s->source == SRC_SCIPY) { /* (scipy's format and shape properties return these) */
            PyObject *f = PyObject_GetAttr(v, NM(_format));
            if (f == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
                PyErr_Clear();
                f = PyObject_GetAttr(v, NM(format));
            }
            if (f == NULL) goto error_or_miss;
            int same = PyUnicode_Check(f) && PyUnicode_Compare(f, s->fmt) == 0;
            Py_DECREF(f);
            if (!same) return 0;
            pos = PyObject_GetAttr(v, NM(indptr));
            crd = PyObject_GetAttr(v, NM(indices));
            vals = PyObject_GetAttr(v, NM(data));
        } else {
            PyObject *f = PyObject_GetAttr(v, NM(format));
            if (f == NULL) goto error_or_miss;
            int same = f == s->fmt;
            Py_DECREF(f);
            if (!same) return 0;
            PyObject *arrays = PyObject_GetAttr(v, NM(arrays));
            if (arrays == NULL || !PyDict_Check(arrays)) {
                Py_XDECREF(arrays);
                goto error_or_miss;
            }
            pos = PyDict_GetItemString(arrays, "pos1");
            crd = PyDict_GetItemString(arrays, "crd1");
            vals = PyDict_GetItemString(arrays, "vals");
            Py_XINCREF(pos);
            Py_XINCREF(crd);
            Py_XINCREF(vals);
            Py_DECREF(arrays);
        }
        if (pos == NULL || crd == NULL || vals == NULL) {
            Py_XDECREF(pos);
            Py_XDECREF(crd);
            Py_XDECREF(vals);
            goto error_or_miss;
        }
        if (keep(c, pos) || keep(c, crd) || keep(c, vals)) return -1;
        PyObject *shape = NULL;
        if (s->source == SRC_SCIPY) {
            shape = PyObject_GetAttr(v, NM(_shape));
            if (shape == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) PyErr_Clear();
        }
        if (shape == NULL && !PyErr_Occurred()) shape = PyObject_GetAttr(v, NM(shape));
        if ((r = shape2(shape, &rows, &cols)) <= 0) return r;
    }
    if ((s->rows_want >= 0 && rows != s->rows_want) || (s->cols_want >= 0 && cols != s->cols_want)) return 0;
    if (rows < 0 || cols < 0 || rows > s->imax || cols > s->imax) return 0;
    if (s->source == SRC_TORCH) {
        if ((r = torch_vector(vals, s->vdt, &p_vals, &n_vals)) <= 0) return r;
        if (n_vals > s->imax) return 0;
        if ((r = truth(vals, NM(is_conj), 0)) != 0) return r < 0 ? -1 : 0;
        if ((r = truth(vals, NM(is_neg), 0)) != 0) return r < 0 ? -1 : 0;
        if ((r = torch_vector(crd, s->idt, &p_crd, &n_crd)) <= 0) return r;
        if ((r = torch_vector(pos, s->idt, &p_pos, &n_pos)) <= 0) return r;
    } else {
        if (!np_vector(b, vals, s->vdt) || !np_vector(b, crd, s->idt) || !np_vector(b, pos, s->idt)) return 0;
        NpArray *a;
        a = (NpArray *)vals, p_vals = (int64_t)(intptr_t)a->data, n_vals = a->dimensions[0];
        a = (NpArray *)crd, p_crd = (int64_t)(intptr_t)a->data, n_crd = a->dimensions[0];
        a = (NpArray *)pos, p_pos = (int64_t)(intptr_t)a->data, n_pos = a->dimensions[0];
        if (n_vals > s->imax) return 0;
    }
    int64_t n1 = n_crd, dims[2] = {rows, cols};
    int64_t parent = dims[s->parent_dim], extent = dims[s->extent_dim];
    PyObject *on = PyDict_GetItemWithError(b->validate, NM(on));
    int validate = on != NULL && PyObject_IsTrue(on) > 0;
    if (validate) {
        if (n_vals != n1 || n_pos != parent + 1) return 0;
        if (s->in_kernel_from >= 0 && n1 * s->index_size >= s->in_kernel_from) {
            if (read_index(p_pos, 0, s->index_size) != 0 || read_index(p_pos, parent, s->index_size) != n1) return 0;
            c->kernel_checks = 1;
        } else {
            c->checks |= (uint64_t)1 << s->bit;
        }
    } else {
        parent = 0;
    }
    int64_t values[3] = {rows, cols, n1};
    for (int i = 0; i < s->nsyms; i++) {
        int ok = put_sym(c, s->syms[i].sym, values[s->syms[i].key], s->syms[i].define);
        if (ok <= 0) return ok;
    }
    if (s->written || b->nwritten) {
        if (add_span(c, s->index, p_pos, n_pos * s->index_size) || add_span(c, s->index, p_crd, n_crd * s->index_size) ||
            add_span(c, s->index, p_vals, n_vals * s->vals_size))
            return -1;
    }
    for (int i = 0; i < s->nfields; i++) {
        int64_t f = 0;
        switch (s->fields[i]) {
            case F_POS: f = p_pos; break;
            case F_CRD: f = p_crd; break;
            case F_VALS: f = p_vals; break;
            case F_ROWS: f = rows; break;
            case F_COLS: f = cols; break;
            case F_N1: f = n1; break;
        }
        w[i] = (uint64_t)f;
    }
    w[s->nfields] = (uint64_t)parent;
    w[s->nfields + 1] = (uint64_t)n1;
    w[s->nfields + 2] = (uint64_t)extent;
    return 1;
error_or_miss:
    if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
}

static int bind_dims(Call *c, const Step *s, const int64_t *shape) {
    for (int i = 0; i < s->ndims; i++) {
        const Dim *d = &s->dims[i];
        int64_t want;
        if (d->sym >= 0) {
            if (put_sym(c, d->sym, shape[d->dim], 1) < 0) return -1;
        } else {
            int ok = eval(c, &d->expr, &want);
            if (ok <= 0) return ok;
            if (want != shape[d->dim]) return 0;
        }
    }
    return 1;
}

static int bind_numpy(Call *c, const Step *s, PyObject *v, uint64_t *w) {
    if (Py_TYPE(v) != (PyTypeObject *)c->b->ndarray) return 0;
    NpArray *a = (NpArray *)v;
    if (a->nd != s->ndim || !(a->flags & NP_C_CONTIGUOUS) || !same_dtype(a->descr, s->dtype)) return 0;
    int64_t shape[MAXDIM], size = 1;
    for (int i = 0; i < a->nd && i < MAXDIM; i++) {
        shape[i] = a->dimensions[i];
        size *= shape[i];
    }
    int r = bind_dims(c, s, shape);
    if (r <= 0) return r;
    if (c->b->nwritten && add_span(c, s->index, (int64_t)(intptr_t)a->data, size * s->itemsize)) return -1;
    w[0] = (uint64_t)(uintptr_t)a->data;
    return 1;
}

static int bind_torch(Call *c, const Step *s, PyObject *v, uint64_t *w) {
    if ((PyObject *)Py_TYPE(v) != s->cls) return 0;
    PyObject *dt = PyObject_GetAttr(v, NM(dtype));
    if (dt == NULL) return -1;
    int ok = same_dtype(dt, s->dtype);
    Py_DECREF(dt);
    if (!ok) return 0;
    int64_t dim = long_of(PyObject_CallMethodNoArgs(v, NM(dim)));
    if (dim == -1 && PyErr_Occurred()) return -1;
    if (dim != s->ndim) return 0;
    int r;
    if ((r = truth(v, NM(is_cpu), 1)) <= 0) return r;
    PyObject *layout = PyObject_GetAttr(v, NM(layout));
    if (layout == NULL) return -1;
    ok = layout == s->strided;
    Py_DECREF(layout);
    if (!ok) return 0;
    if ((r = truth(v, NM(is_contiguous), 0)) <= 0) return r;
    PyObject *shp = PyObject_GetAttr(v, NM(shape));
    if (shp == NULL) return -1;
    int64_t shape[MAXDIM], size = 1;
    for (int i = 0; i < s->ndim && i < MAXDIM; i++) {
        shape[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shp, i));
        size *= shape[i];
    }
    Py_DECREF(shp);
    if (PyErr_Occurred()) return -1;
    if ((r = bind_dims(c, s, shape)) <= 0) return r;
    int64_t p = long_of(PyObject_CallMethodNoArgs(v, NM(data_ptr)));
    if (p == -1 && PyErr_Occurred()) return -1;
    if (c->b->nwritten && add_span(c, s->index, p, size * s->itemsize)) return -1;
    w[0] = (uint64_t)p;
    return 1;
}

static int bind_scalar(const Step *s, PyObject *v, uint64_t *w) {
    if ((PyObject *)Py_TYPE(v) != s->type) return 0;
    if (s->is_float) {
        double d = PyFloat_AsDouble(v);
        if (d == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        memcpy(w, &d, 8);
    } else {
        int64_t i = PyLong_AsLongLong(v);
        if (i == -1 && PyErr_Occurred()) {
            PyErr_Clear(); /* outside a 64-bit slot, or not an integer: the full path decides */
            return 0;
        }
        w[0] = (uint64_t)i;
    }
    return 1;
}

/* A step in Python: fn(v, syms, origin, keep, in_kernel) -> None or (words, spans) */
static int bind_python(Call *c, const Step *s, PyObject *v, uint64_t *w) {
    PyObject *argv[5] = {v, c->dict, c->origin ? c->origin : Py_None, c->keep, c->in_kernel};
    PyObject *r = PyObject_Vectorcall(s->fn, argv, 5, NULL);
    if (r == NULL) return -1;
    if (r == Py_None) {
        Py_DECREF(r);
        return 0;
    }
    int ok = PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 2;
    PyObject *words = ok ? PyTuple_GET_ITEM(r, 0) : NULL, *spans = ok ? PyTuple_GET_ITEM(r, 1) : NULL;
    if (!ok || !PyTuple_Check(words) || PyTuple_GET_SIZE(words) != s->words || !PyTuple_Check(spans)) {
        Py_DECREF(r);
        PyErr_SetString(PyExc_SystemError, "binder: a Python step returned something else than (words, spans)");
        return -1;
    }
    for (int i = 0; i < s->words; i++) w[i] = (uint64_t)PyLong_AsUnsignedLongLongMask(PyTuple_GET_ITEM(words, i));
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(spans); i++) {
        PyObject *sp = PyTuple_GET_ITEM(spans, i);
        int64_t a = PyLong_AsLongLong(PyTuple_GET_ITEM(sp, 0)), e = PyLong_AsLongLong(PyTuple_GET_ITEM(sp, 1));
        if (add_span(c, s->index, a, e - a)) {
            Py_DECREF(r);
            return -1;
        }
    }
    Py_DECREF(r);
    if (PyErr_Occurred()) return -1;
    for (int i = 0; i < s->ndefines; i++) { /* what it defined, back into the table */
        PyObject *o = PyDict_GetItem(c->dict, PyTuple_GET_ITEM(c->b->sym_names, s->defines[i]));
        if (o != NULL) {
            c->syms[s->defines[i]] = PyLong_AsLongLong(o);
            if (PyErr_Occurred()) return -1;
        }
    }
    return 1;
}

static int written_crossing(Call *c, const int *written_args, int nwritten) {
    for (int i = 0; i < c->nspans; i++) {
        int wa = c->span_arg[i], is_written = 0;
        for (int k = 0; k < nwritten; k++) is_written |= written_args[k] == wa;
        if (!is_written) continue;
        for (int j = 0; j < c->nspans; j++) {
            if (c->span_arg[j] == wa) continue;
            if (c->spans[i][0] < c->spans[j][1] && c->spans[j][0] < c->spans[i][1]) return 1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ the call */
static PyObject *binder_run(Binder *b, PyObject *args, PyObject *out);

static PyObject *binder_vectorcall(PyObject *self, PyObject *const *argv, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if ((kwnames != NULL && PyTuple_GET_SIZE(kwnames)) || n < 1 || n > 2) {
        PyErr_SetString(PyExc_TypeError, "Binder(args, out=None) takes its arguments by position");
        return NULL;
    }
    return binder_run((Binder *)self, argv[0], n == 2 ? argv[1] : Py_None);
}

static int state_ok(Binder *b) {
    PyObject *lib = PyObject_GetAttr(b->csdfg, NM(_lib));
    if (lib == NULL) return -1;
    PyObject *inner = PyObject_GetAttr(lib, NM(_lib));
    Py_DECREF(lib);
    if (inner == NULL) return -1;
    int ok = inner == b->lib;
    Py_DECREF(inner);
    if (!ok) return 0;
    int t = truth(b->csdfg, NM(_initialized), 1);
    if (t <= 0) return t;
    t = truth(b->csdfg, NM(do_not_execute), 1);
    if (t != 0) return t < 0 ? -1 : 0;
    t = truth(b->hooks, NM(_COMPILED_SDFG_CALL_HOOKS), 1);
    if (t != 0) return t < 0 ? -1 : 0;
    return 1;
}

static PyObject *binder_run(Binder *b, PyObject *args, PyObject *out) {
    if (!PyTuple_Check(args) && !PyList_Check(args)) {
        PyErr_SetString(PyExc_TypeError, "Binder: args must be a tuple or a list");
        return NULL;
    }
    PyObject *argt = PySequence_Fast(args, "args");
    if (argt == NULL) return NULL;
    Py_ssize_t nargs = PySequence_Fast_GET_SIZE(argt);
    PyObject **argv = PySequence_Fast_ITEMS(argt);
    PyObject *result = NULL, *rets[64] = {0};
    int64_t symbuf[64];
    uint64_t wordbuf[128];
    Call c;
    memset(&c, 0, sizeof(c));
    c.b = b;
    c.held = c.heldbuf;
    c.capheld = 16;
    c.syms = b->nsyms <= 64 ? symbuf : PyMem_Malloc(sizeof(int64_t) * b->nsyms);
    c.words = b->nwords <= 124 ? wordbuf : PyMem_Calloc(b->nwords + 4, sizeof(uint64_t));
    int ok;
    if (c.syms == NULL || c.words == NULL || b->nrets > 64) {
        PyErr_NoMemory();
        goto done;
    }
    if (nargs != b->nargs + b->ngiven) goto miss;
    if ((ok = state_ok(b)) <= 0) goto check;
    memcpy(c.syms, b->constants, sizeof(int64_t) * b->nsyms);
    if (b->need_dict) {
        if ((c.keep = PyList_New(0)) == NULL || (c.dict = PyDict_New()) == NULL || (c.in_kernel = PyList_New(0)) == NULL)
            goto done;
        for (int i = 0; i < b->nsyms; i++)
            if (b->constants[i] != INT64_MIN && put_sym(&c, i, b->constants[i], 1) < 0) goto done;
        if (b->capacities != Py_None && (c.origin = PyDict_New()) == NULL) goto done;
    }
    /* each argument's words of the record (the header's four: below) */
    for (int i = 0; i < b->nsteps; i++) {
        const Step *s = &b->steps[i];
        uint64_t *w = c.words + 4 + (s->kind == K_GIVEN ? 0 : b->arg_word[s->index]);
        switch (s->kind) {
            case K_SPARSE: ok = bind_sparse(&c, s, argv[s->index], w); break;
            case K_PYSPARSE: ok = bind_python(&c, s, argv[s->index], w); break;
            case K_NUMPY: ok = bind_numpy(&c, s, argv[s->index], w); break;
            case K_TORCH: ok = bind_torch(&c, s, argv[s->index], w); break;
            case K_SCALAR: ok = bind_scalar(s, argv[s->index], w); break;
            case K_GIVEN: {
                PyObject *v = argv[b->nargs + s->position];
                if (PyBool_Check(v) || !PyLong_Check(v)) goto miss; /* (NumPy integers: the full path) */
                int64_t x = PyLong_AsLongLong(v);
                if (x == -1 && PyErr_Occurred()) {
                    PyErr_Clear();
                    goto miss;
                }
                ok = put_sym(&c, s->sym, x, 1);
                break;
            }
            default: ok = -1; PyErr_SetString(PyExc_SystemError, "binder: bad step");
        }
        if (ok <= 0) goto check;
    }
    if (b->nwritten && written_crossing(&c, b->written_args, b->nwritten)) goto miss;
    for (int i = 0; i < b->nrules; i++) {
        int64_t x, y;
        if ((ok = eval(&c, &b->rules[2 * i], &x)) <= 0 || (ok = eval(&c, &b->rules[2 * i + 1], &y)) <= 0) goto check;
        if (x != y) goto miss;
    }
    if (b->capacities != Py_None) {
        PyObject *r = PyObject_CallFunctionObjArgs(b->capacities, c.dict, c.origin, NULL);
        if (r == NULL) goto done;
        Py_DECREF(r);
        for (int i = 0; i < b->ncaps; i++) {
            PyObject *o = PyDict_GetItem(c.dict, PyTuple_GET_ITEM(b->sym_names, b->caps[i]));
            if (o == NULL) goto miss;
            c.syms[b->caps[i]] = PyLong_AsLongLong(o);
            if (PyErr_Occurred()) goto done;
        }
    }
    /* results: the caller's out= arrays where they fit, else new ones */
    PyObject *outs = NULL;
    PyObject *shapes[64] = {0};
    for (int j = 0; j < b->nrets; j++) {
        Return *r = &b->rets[j];
        if (r->sparse) continue;
        int64_t ext[MAXDIM];
        for (int d = 0; d < r->ndim && d < MAXDIM; d++)
            if ((ok = eval(&c, &r->shape[d], &ext[d])) <= 0 || ext[d] < 0) {
                if (ok >= 0) ok = 0;
                goto free_shapes;
            }
        ok = -1;
        if (r->ndim == 1 && out == Py_None) { /* (np.empty(n): no tuple) */
            if ((shapes[j] = PyLong_FromLongLong(ext[0])) == NULL) goto free_shapes;
            continue;
        }
        if ((shapes[j] = PyTuple_New(r->ndim)) == NULL) goto free_shapes;
        for (int d = 0; d < r->ndim; d++) {
            PyObject *o = PyLong_FromLongLong(ext[d]);
            if (o == NULL) goto free_shapes;
            PyTuple_SET_ITEM(shapes[j], d, o);
        }
    }
    ok = 1;
    if (out != Py_None) {
        for (int j = 0; j < b->nrets; j++)
            if (b->rets[j].sparse) {
                ok = 0;
                goto free_shapes;
            }
        if (b->nrets == 0) {
            ok = 0;
            goto free_shapes;
        }
        PyObject *specs = PyTuple_New(b->norder);
        if (specs == NULL) {
            ok = -1;
            goto free_shapes;
        }
        for (int k = 0; k < b->norder; k++) {
            int j = b->order[k];
            PyObject *t = PyTuple_Pack(2, b->rets[j].dtype, shapes[j]);
            if (t == NULL) {
                Py_DECREF(specs);
                ok = -1;
                goto free_shapes;
            }
            PyTuple_SET_ITEM(specs, k, t);
        }
        outs = PyObject_CallFunctionObjArgs(b->plan_outputs, out, argt, specs, NULL);
        Py_DECREF(specs);
        if (outs == NULL) {
            ok = -1;
            goto free_shapes;
        }
        if (outs == Py_None) {
            Py_DECREF(outs);
            ok = 0;
            goto free_shapes;
        }
        for (int k = 0; k < b->norder; k++) {
            PyObject *o = PyList_GET_ITEM(outs, k);
            if (o != Py_None) {
                Py_INCREF(o);
                rets[b->order[k]] = o;
            }
        }
        Py_DECREF(outs);
    }
    uint64_t retptr[64];
    for (int j = 0; j < b->nrets; j++) {
        Return *r = &b->rets[j];
        if (r->sparse) {
            PyObject *t = PyObject_CallOneArg(r->alloc, c.dict);
            if (t == NULL) {
                ok = -1;
                goto free_shapes;
            }
            rets[j] = PyTuple_GET_ITEM(t, 0);
            Py_INCREF(rets[j]);
            retptr[j] = PyLong_AsUnsignedLongLongMask(PyTuple_GET_ITEM(t, 1));
            Py_DECREF(t);
            continue;
        }
        if (rets[j] == NULL) {
            rets[j] = PyObject_CallFunctionObjArgs(b->empty, shapes[j], r->dtype, NULL);
            if (rets[j] == NULL) {
                ok = -1;
                goto free_shapes;
            }
        }
        retptr[j] = (uint64_t)(uintptr_t)((NpArray *)rets[j])->data;
    }
free_shapes:
    for (int j = 0; j < b->nrets; j++) Py_XDECREF(shapes[j]);
    if (ok <= 0) goto check;
    /* the record: the program's parameters in order */
    PyObject *handle = PyObject_GetAttr(b->csdfg, NM(_libhandle));
    if (handle == NULL) goto done;
    PyObject *hv = PyObject_GetAttr(handle, NM(value));
    Py_DECREF(handle);
    if (hv == NULL) goto done;
    c.words[0] = hv == Py_None ? 0 : (uint64_t)PyLong_AsUnsignedLongLongMask(hv);
    Py_DECREF(hv);
    c.words[1] = c.checks;
    c.words[2] = 0;
    c.words[3] = 0;
    for (int k = 0; k < b->nsources; k++) {
        int kind = b->sources[2 * k], key = b->sources[2 * k + 1], at = b->sources_at[k];
        if (kind == 1) c.words[4 + at] = retptr[key];
        else if (kind == 2) c.words[4 + at] = (uint64_t)c.syms[key];
    }
    int64_t before = 0;
    int kernel = c.kernel_checks || (c.in_kernel != NULL && PyList_GET_SIZE(c.in_kernel) > 0);
    if (kernel && b->failures != Py_None) {
        before = long_of(PyObject_CallNoArgs(b->failures));
        if (before == -1 && PyErr_Occurred()) goto done;
    }
    int status = 0;
    if (b->entry != NULL) {
        Py_BEGIN_ALLOW_THREADS
        status = b->entry((const char *)c.words);
        Py_END_ALLOW_THREADS
    } else { /* the program's own function through ctypes (which releases the GIL) */
        PyObject *h = PyObject_GetAttr(b->csdfg, NM(_libhandle));
        PyObject *t = h == NULL ? NULL : PyTuple_New(b->nwords + 1);
        if (t == NULL) {
            Py_XDECREF(h);
            goto done;
        }
        PyTuple_SET_ITEM(t, 0, h);
        for (int i = 0; i < b->nwords; i++) {
            uint64_t x = c.words[4 + i];
            double d;
            PyObject *o;
            if (b->codes[i] == 'd') {
                memcpy(&d, &x, 8);
                o = PyFloat_FromDouble(d);
            } else {
                o = b->codes[i] == 'Q' ? PyLong_FromUnsignedLongLong(x) : PyLong_FromLongLong((int64_t)x);
            }
            if (o == NULL) {
                Py_DECREF(t);
                goto done;
            }
            PyTuple_SET_ITEM(t, i + 1, o);
        }
        PyObject *r = PyObject_Call(b->call, t, NULL);
        Py_DECREF(t);
        if (r == NULL) goto done;
        Py_DECREF(r);
    }
    if (status != 0) goto miss;
    if (kernel && b->failures != Py_None) {
        int64_t after = long_of(PyObject_CallNoArgs(b->failures));
        if (after == -1 && PyErr_Occurred()) goto done;
        if (after != before) goto miss; /* a kernel found broken storage: the full path raises */
    }
    if (b->norder == 0) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    PyObject *res[64];
    for (int k = 0; k < b->norder; k++) {
        int j = b->order[k];
        if (b->rets[j].sparse) {
            res[k] = PyObject_CallOneArg(b->rets[j].result, rets[j]);
            if (res[k] == NULL) {
                for (int q = 0; q < k; q++) Py_DECREF(res[q]);
                goto done;
            }
        } else {
            res[k] = rets[j];
            Py_INCREF(res[k]);
        }
    }
    if (b->norder == 1) {
        if (PyTuple_CheckExact(out)) { /* out=(y,): the result as a tuple, as NumPy's ufuncs give it */
            result = PyTuple_Pack(1, res[0]);
            Py_DECREF(res[0]);
        } else {
            result = res[0];
        }
    } else {
        result = PyTuple_New(b->norder);
        if (result != NULL)
            for (int k = 0; k < b->norder; k++) PyTuple_SET_ITEM(result, k, res[k]);
    }
    if (result != NULL && b->to_torch != Py_None) {
        PyObject *t = PyObject_CallOneArg(b->to_torch, result);
        Py_DECREF(result);
        result = t;
    }
    goto done;
check:
    if (ok < 0) goto done;
miss:
    result = b->miss;
    Py_INCREF(result);
done:
    if (result == b->miss)
        b->missed++;
    else if (result != NULL)
        b->done++;
    for (int j = 0; j < b->nrets; j++) Py_XDECREF(rets[j]);
    for (int i = 0; i < c.nheld; i++) Py_DECREF(c.held[i]);
    if (c.held != c.heldbuf) PyMem_Free(c.held);
    Py_XDECREF(c.keep);
    Py_XDECREF(c.dict);
    Py_XDECREF(c.origin);
    Py_XDECREF(c.in_kernel);
    PyMem_Free(c.spans);
    PyMem_Free(c.span_arg);
    if (c.syms != symbuf) PyMem_Free(c.syms);
    if (c.words != wordbuf) PyMem_Free(c.words);
    Py_DECREF(argt);
    return result;
}

/* ------------------------------------------------------------------ the type */
static int parse_list(PyObject *spec, const char *k, PyObject **fast) {
    PyObject *v = item(spec, k);
    if (v == NULL) return -1;
    *fast = PySequence_Fast(v, k);
    return *fast == NULL ? -1 : 0;
}

static int binder_init(Binder *b, PyObject *args, PyObject *kwds) {
    PyObject *spec, *f = NULL;
    if (!PyArg_ParseTuple(args, "O!", &PyDict_Type, &spec)) return -1;
    if (b->steps != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Binder: already initialised");
        return -1;
    }
#define OBJ(field, key) if ((b->field = get_obj(spec, key)) == NULL) return -1
    OBJ(csdfg, "csdfg"); OBJ(lib, "lib"); OBJ(hooks, "hooks"); OBJ(validate, "validate"); OBJ(miss, "miss");
    OBJ(empty, "empty"); OBJ(ndarray, "ndarray"); OBJ(plan_outputs, "plan_outputs"); OBJ(to_torch, "to_torch");
    OBJ(failures, "failures"); OBJ(capacities, "capacities"); OBJ(sym_names, "sym_names"); OBJ(call, "call");
#undef OBJ
    if (!PyTuple_Check(b->sym_names) || !PyDict_Check(b->validate)) {
        PyErr_SetString(PyExc_TypeError, "Binder: sym_names is a tuple, validate a dict");
        return -1;
    }
    int64_t entry;
    if (get_int(spec, "nargs", &b->nargs) || get_int(spec, "ngiven", &b->ngiven) ||
        get_int(spec, "need_dict", &b->need_dict) || get_int(spec, "nwords", &b->nwords) || get_long(spec, "entry", &entry))
        return -1;
    b->entry = (int (*)(const char *))(intptr_t)entry;
    if (b->entry == NULL && b->call == Py_None) {
        PyErr_SetString(PyExc_ValueError, "Binder: neither an entry nor a function to call");
        return -1;
    }
    b->nsyms = (int)PyTuple_GET_SIZE(b->sym_names);
    b->constants = PyMem_Malloc(sizeof(int64_t) * (b->nsyms + 1));
    for (int i = 0; i < b->nsyms; i++) b->constants[i] = INT64_MIN;
    PyObject *consts = item(spec, "constants"), *k, *v;
    Py_ssize_t pos = 0;
    if (consts == NULL || !PyDict_Check(consts)) return -1;
    while (PyDict_Next(consts, &pos, &k, &v)) b->constants[PyLong_AsLong(k)] = PyLong_AsLongLong(v);
    if (PyErr_Occurred()) return -1;
    PyObject *codes = item(spec, "codes");
    if (codes == NULL || !PyBytes_Check(codes) || PyBytes_GET_SIZE(codes) != b->nwords) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "Binder: codes is bytes, one per word");
        return -1;
    }
    b->codes = PyMem_Malloc(b->nwords + 1);
    memcpy(b->codes, PyBytes_AS_STRING(codes), b->nwords);
    if (parse_list(spec, "steps", &f)) return -1;
    b->nsteps = (int)PySequence_Fast_GET_SIZE(f);
    b->steps = PyMem_Calloc(b->nsteps + 1, sizeof(Step));
    for (int i = 0; i < b->nsteps; i++)
        if (parse_step(PySequence_Fast_GET_ITEM(f, i), &b->steps[i])) {
            b->nsteps = i + 1;
            Py_DECREF(f);
            return -1;
        }
    Py_DECREF(f);
    if (parse_list(spec, "rules", &f)) return -1;
    b->nrules = (int)PySequence_Fast_GET_SIZE(f);
    b->rules = PyMem_Calloc(2 * b->nrules + 1, sizeof(Expr));
    for (int i = 0; i < b->nrules; i++) {
        PyObject *t = PySequence_Fast_GET_ITEM(f, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 2 || parse_expr(PyTuple_GET_ITEM(t, 0), &b->rules[2 * i]) ||
            parse_expr(PyTuple_GET_ITEM(t, 1), &b->rules[2 * i + 1])) {
            Py_DECREF(f);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "Binder: a rule is (expr, expr)");
            return -1;
        }
    }
    Py_DECREF(f);
    if (parse_list(spec, "returns", &f)) return -1;
    b->nrets = (int)PySequence_Fast_GET_SIZE(f);
    if (b->nrets > 64) {
        Py_DECREF(f);
        PyErr_SetString(PyExc_ValueError, "Binder: more than 64 results");
        return -1;
    }
    b->rets = PyMem_Calloc(b->nrets + 1, sizeof(Return));
    for (int j = 0; j < b->nrets; j++) {
        PyObject *d = PySequence_Fast_GET_ITEM(f, j), *shape;
        Return *r = &b->rets[j];
        if (!PyDict_Check(d) || get_int(d, "sparse", &r->sparse)) {
            Py_DECREF(f);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "Binder: a return is a dict");
            return -1;
        }
        if (r->sparse) {
            if ((r->alloc = get_obj(d, "alloc")) == NULL || (r->result = get_obj(d, "result")) == NULL) {
                Py_DECREF(f);
                return -1;
            }
            continue;
        }
        PyObject *sf;
        if ((r->dtype = get_obj(d, "dtype")) == NULL || (shape = item(d, "shape")) == NULL ||
            (sf = PySequence_Fast(shape, "shape")) == NULL) {
            Py_DECREF(f);
            return -1;
        }
        r->ndim = (int)PySequence_Fast_GET_SIZE(sf);
        r->shape = PyMem_Calloc(r->ndim + 1, sizeof(Expr));
        for (int d2 = 0; d2 < r->ndim; d2++)
            if (parse_expr(PySequence_Fast_GET_ITEM(sf, d2), &r->shape[d2])) {
                Py_DECREF(sf);
                Py_DECREF(f);
                return -1;
            }
        Py_DECREF(sf);
    }
    Py_DECREF(f);
    int n;
    if (parse_ints(item(spec, "order"), &b->order, &b->norder) || parse_ints(item(spec, "caps"), &b->caps, &b->ncaps) ||
        parse_ints(item(spec, "sources"), &b->sources, &n) || parse_ints(item(spec, "sources_at"), &b->sources_at, &b->nsources) ||
        parse_ints(item(spec, "arg_word"), &b->arg_word, &b->nargs) ||
        parse_ints(item(spec, "written_args"), &b->written_args, &b->nwritten))
        return -1;
    if (n != 2 * b->nsources) {
        PyErr_SetString(PyExc_ValueError, "Binder: sources are (kind, key) pairs, one word each");
        return -1;
    }
    return 0;
}

static void binder_dealloc(Binder *b) {
    Py_CLEAR(b->csdfg); Py_CLEAR(b->lib); Py_CLEAR(b->hooks); Py_CLEAR(b->validate); Py_CLEAR(b->miss);
    Py_CLEAR(b->empty); Py_CLEAR(b->ndarray); Py_CLEAR(b->plan_outputs); Py_CLEAR(b->to_torch);
    Py_CLEAR(b->failures); Py_CLEAR(b->capacities); Py_CLEAR(b->sym_names); Py_CLEAR(b->call);
    for (int i = 0; i < b->nsteps; i++) free_step(&b->steps[i]);
    PyMem_Free(b->steps);
    for (int i = 0; i < 2 * b->nrules; i++) free_expr(&b->rules[i]);
    PyMem_Free(b->rules);
    for (int j = 0; j < b->nrets; j++) {
        Return *r = &b->rets[j];
        Py_CLEAR(r->alloc); Py_CLEAR(r->result); Py_CLEAR(r->dtype);
        for (int d = 0; d < r->ndim; d++) free_expr(&r->shape[d]);
        PyMem_Free(r->shape);
    }
    PyMem_Free(b->rets);
    PyMem_Free(b->constants); PyMem_Free(b->order); PyMem_Free(b->caps); PyMem_Free(b->sources);
    PyMem_Free(b->sources_at); PyMem_Free(b->arg_word); PyMem_Free(b->written_args); PyMem_Free(b->codes);
    Py_TYPE(b)->tp_free((PyObject *)b);
}

static PyObject *binder_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    Binder *b = (Binder *)type->tp_alloc(type, 0);
    if (b != NULL) b->vectorcall = binder_vectorcall;
    return (PyObject *)b;
}

static PyMemberDef binder_members[] = {
    {"done", T_LONGLONG, offsetof(Binder, done), READONLY, "calls it finished"},
    {"missed", T_LONGLONG, offsetof(Binder, missed), READONLY, "calls it handed to the full path"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject BinderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sdfgsparse.runtime._binder.Binder",
    .tp_doc = "The warm call of one compiled program for one argument signature: binder(args, out=None) -> "
              "the results, or the plan's MISS object (the caller then takes the full path).",
    .tp_basicsize = sizeof(Binder),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = binder_new,
    .tp_init = (initproc)binder_init,
    .tp_dealloc = (destructor)binder_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Binder, vectorcall),
    .tp_members = binder_members,
};

/* dispatch(table, args, miss): the warm call of a program called with positional arguments
 * only: the binder that ``table`` (a dict) holds for the arguments' types (a tuple of
 * them), called; ``miss`` where it holds none or the binder misses */
static PyObject *dispatch(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
    if (n != 3 || !PyDict_Check(argv[0]) || !PyTuple_Check(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "dispatch(table: dict, args: tuple, miss)");
        return NULL;
    }
    PyObject *args = argv[1];
    Py_ssize_t k = PyTuple_GET_SIZE(args);
    PyObject *types = PyTuple_New(k);
    if (types == NULL) return NULL;
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *t = (PyObject *)Py_TYPE(PyTuple_GET_ITEM(args, i));
        Py_INCREF(t);
        PyTuple_SET_ITEM(types, i, t);
    }
    PyObject *hit = PyDict_GetItemWithError(argv[0], types);
    Py_DECREF(types);
    if (hit == NULL) {
        if (PyErr_Occurred()) return NULL;
        Py_INCREF(argv[2]);
        return argv[2];
    }
    if (Py_TYPE(hit) == &BinderType) return binder_run((Binder *)hit, args, Py_None);
    return PyObject_CallOneArg(hit, args);
}

/* probe(array) -> (data address, ndim, shape, C-contiguous flag, descr): what this module
 * reads of a NumPy array, for the Python side to compare with NumPy's own answers */
static PyObject *probe(PyObject *self, PyObject *a) {
    NpArray *x = (NpArray *)a;
    if (x->nd < 0 || x->nd > MAXDIM) Py_RETURN_NONE;
    PyObject *shape = PyTuple_New(x->nd);
    if (shape == NULL) return NULL;
    for (int i = 0; i < x->nd; i++) PyTuple_SET_ITEM(shape, i, PyLong_FromSsize_t(x->dimensions[i]));
    return Py_BuildValue("(KiNiO)", (unsigned long long)(uintptr_t)x->data, x->nd, shape,
                         (x->flags & NP_C_CONTIGUOUS) != 0, x->descr);
}

/* evaluate(code, syms) -> int or None: an expression as the binder evaluates it (tests) */
static PyObject *evaluate(PyObject *self, PyObject *args) {
    PyObject *code, *syms;
    if (!PyArg_ParseTuple(args, "OO", &code, &syms)) return NULL;
    Expr e;
    if (parse_expr(code, &e)) return NULL;
    PyObject *f = PySequence_Fast(syms, "syms");
    if (f == NULL) {
        free_expr(&e);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(f);
    int64_t *t = PyMem_Calloc(n + 1, sizeof(int64_t));
    for (Py_ssize_t i = 0; i < n; i++) t[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(f, i));
    Py_DECREF(f);
    int64_t out;
    int r = PyErr_Occurred() ? -2 : eval_code(&e, t, &out);
    PyMem_Free(t);
    free_expr(&e);
    if (r == -2) return NULL;
    if (r != 0) Py_RETURN_NONE;
    return PyLong_FromLongLong(out);
}

/* row_length_sum(pos, idx): the sum over the entries k of idx of pos[k + 1] - pos[k] (the
 * products of an SpGEMM A @ B: idx = A's column indices, pos = B's row positions; an int, or
 * None where an array is not a C-contiguous int32 / int64 buffer or an index is outside
 * [0, len(pos) - 1), which the caller's NumPy path then reports). One pass in C: NumPy's
 * gather np.diff(pos)[idx] cost 28 us on 12K entries and 184 us on 92K (4elt). */
static int index_buffer(PyObject *o, Py_buffer *b) {
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        return -1;
    }
    const char *f = b->format ? b->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    if (b->ndim == 1 && (b->itemsize == 4 || b->itemsize == 8) && f[1] == 0 &&
        (*f == 'i' || *f == 'l' || *f == 'q'))
        return 0;
    PyBuffer_Release(b);
    return -1;
}

#define SS_ROW_SUM(TP, TI)                                                         \
    {                                                                              \
        const TP *p = (const TP *)pb.buf;                                          \
        const TI *x = (const TI *)ib.buf;                                          \
        for (Py_ssize_t e = 0; e < ni; e++) {                                      \
            const uint64_t k = (uint64_t)(int64_t)x[e];                            \
            bad |= k >= rows;                                                      \
            const uint64_t kk = k < rows ? k : 0;                                  \
            sum += (int64_t)p[kk + 1] - (int64_t)p[kk];                            \
        }                                                                          \
    }

static PyObject *row_length_sum(PyObject *self, PyObject *args) {
    PyObject *pos, *idx;
    if (!PyArg_ParseTuple(args, "OO", &pos, &idx)) return NULL;
    Py_buffer pb, ib;
    if (index_buffer(pos, &pb)) Py_RETURN_NONE;
    if (index_buffer(idx, &ib)) {
        PyBuffer_Release(&pb);
        Py_RETURN_NONE;
    }
    const Py_ssize_t np_ = pb.len / pb.itemsize, ni = ib.len / ib.itemsize;
    const uint64_t rows = np_ > 0 ? (uint64_t)(np_ - 1) : 0;
    int64_t sum = 0;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    if (pb.itemsize == 4 && ib.itemsize == 4) SS_ROW_SUM(int32_t, int32_t)
    else if (pb.itemsize == 4) SS_ROW_SUM(int32_t, int64_t)
    else if (ib.itemsize == 4) SS_ROW_SUM(int64_t, int32_t)
    else SS_ROW_SUM(int64_t, int64_t)
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&pb);
    PyBuffer_Release(&ib);
    if (bad) Py_RETURN_NONE;
    return PyLong_FromLongLong(sum);
}
#undef SS_ROW_SUM

/* level_ok(pos, crd, extent, ordered, unique): whether one compressed level's storage is valid
 * (pos None: a root level spanning all of crd): pos[0] == 0, pos never decreasing, pos[-1] ==
 * len(crd); every coordinate in [0, extent); with ordered, each segment's coordinates
 * increasing (strictly with unique). True, False (a problem: the caller's NumPy checks then
 * find and name it), or None where an array is not a C-contiguous int32 / int64 buffer. One
 * pass in C: NumPy's checks of a 480K-entry CSF tensor's levels took about 20 ms per call. */
#define SS_LEVEL_OK(TP, TC)                                                                 \
    {                                                                                       \
        const TC *c = (const TC *)cb.buf;                                                   \
        if (has_pos) {                                                                      \
            const TP *p = (const TP *)pb.buf;                                               \
            bad |= np_ < 1 || (int64_t)p[0] != 0 || (int64_t)p[np_ - 1] != (int64_t)nc;     \
            for (Py_ssize_t s = 0; !bad && s + 1 < np_; s++) {                              \
                const int64_t lo = (int64_t)p[s], hi = (int64_t)p[s + 1];                  \
                if (lo > hi || hi > (int64_t)nc) { bad = 1; break; }                        \
                for (int64_t e = lo; e < hi; e++) {                                         \
                    const int64_t v = (int64_t)c[e];                                        \
                    bad |= v < 0 || v >= extent;                                            \
                    if (ordered && e > lo)                                                  \
                        bad |= unique ? v <= (int64_t)c[e - 1] : v < (int64_t)c[e - 1];     \
                }                                                                           \
            }                                                                               \
        } else {                                                                            \
            for (Py_ssize_t e = 0; e < nc; e++) {                                           \
                const int64_t v = (int64_t)c[e];                                            \
                bad |= v < 0 || v >= extent;                                                \
                if (ordered && e > 0) bad |= unique ? v <= (int64_t)c[e - 1] : v < (int64_t)c[e - 1]; \
            }                                                                               \
        }                                                                                   \
    }

static PyObject *level_ok(PyObject *self, PyObject *args) {
    PyObject *pos, *crd;
    long long extent;
    int ordered, unique;
    if (!PyArg_ParseTuple(args, "OOLpp", &pos, &crd, &extent, &ordered, &unique)) return NULL;
    Py_buffer pb, cb;
    const int has_pos = pos != Py_None;
    if (index_buffer(crd, &cb)) Py_RETURN_NONE;
    if (has_pos && index_buffer(pos, &pb)) {
        PyBuffer_Release(&cb);
        Py_RETURN_NONE;
    }
    const Py_ssize_t nc = cb.len / cb.itemsize, np_ = has_pos ? pb.len / pb.itemsize : 0;
    const int pos4 = has_pos && pb.itemsize == 4;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    if (cb.itemsize == 4 && (pos4 || !has_pos)) SS_LEVEL_OK(int32_t, int32_t)
    else if (cb.itemsize == 4) SS_LEVEL_OK(int64_t, int32_t)
    else if (pos4) SS_LEVEL_OK(int32_t, int64_t)
    else SS_LEVEL_OK(int64_t, int64_t)
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&cb);
    if (has_pos) PyBuffer_Release(&pb);
    return PyBool_FromLong(!bad);
}
#undef SS_LEVEL_OK

static PyMethodDef methods[] = {
    {"probe", probe, METH_O, "What the binder reads of a NumPy array (checked against NumPy on import)."},
    {"dispatch", (PyCFunction)(void (*)(void))dispatch, METH_FASTCALL,
     "dispatch(table, args, miss): the binder table holds for the types of args, called; else miss."},
    {"evaluate", evaluate, METH_VARARGS, "An integer expression's value as the binder computes it, or None."},
    {"row_length_sum", row_length_sum, METH_VARARGS,
     "row_length_sum(pos, idx): sum of pos[k + 1] - pos[k] over idx's entries k, or None (see the source)."},
    {"level_ok", level_ok, METH_VARARGS,
     "level_ok(pos, crd, extent, ordered, unique): whether a compressed level's storage is valid (see the source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "sdfgsparse.runtime._binder",
    "The warm call of compiled programs in C (runtime/plan.py makes the binders).", -1, methods,
};

PyMODINIT_FUNC PyInit__binder(void) {
#define NAME_MAKE(n) if ((NM(n) = PyUnicode_InternFromString(#n)) == NULL) return NULL;
    NAMES(NAME_MAKE)
#undef NAME_MAKE
    if (PyType_Ready(&BinderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&BinderType);
    if (PyModule_AddObject(m, "Binder", (PyObject *)&BinderType) < 0) {
        Py_DECREF(&BinderType);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "SPARSE", K_SPARSE);
    PyModule_AddIntConstant(m, "PYTHON", K_PYSPARSE);
    PyModule_AddIntConstant(m, "NUMPY", K_NUMPY);
    PyModule_AddIntConstant(m, "TORCH", K_TORCH);
    PyModule_AddIntConstant(m, "SCALAR", K_SCALAR);
    PyModule_AddIntConstant(m, "GIVEN", K_GIVEN);
    return m;
}
