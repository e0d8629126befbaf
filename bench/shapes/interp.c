/* interp — an interpreter's object churn: a small Lisp, read from text and
 * evaluated by walking its tree, with every value a reference-counted object
 * on the heap.
 *
 * Integers are boxed (a new 24 B object per arithmetic result), lists are
 * 32 B pairs, strings are a header and their characters (any length), closures
 * 40 B, and each call makes an environment frame sized by its parameter count:
 * small objects of mixed sizes, most dying young, freed the moment their last
 * reference goes, as in CPython or a Scheme.  Each round parses the program
 * anew (the syntax tree is objects too) and runs: list building (range, map,
 * filter, append), quicksort on lists, naive Fibonacci, number->string and
 * string-append over a list.
 *
 * Checks each round's results against the same computed in C, that every
 * object of a round is freed by its end (reference counts balance), and a tag
 * in every object when it is freed.
 *
 * usage: bench-interp [-r rounds] [-n list_length] [-f fib_n]
 */
#include "bench.h"

#include <ctype.h>
#include <unistd.h>

enum { T_INT, T_PAIR, T_STR, T_SYM, T_PRIM, T_CLOS, T_ENV, T_NIL, T_BOOL };

typedef struct obj {
    uint32_t check; /* bench tag of the object, first: a corrupted head is noticed */
    uint32_t rc;    /* IMMORTAL: never counted or freed */
    uint32_t type;
    uint32_t size;  /* bytes allocated */
} obj;

#define IMMORTAL UINT32_MAX

typedef struct { obj h; long v; } o_int;
typedef struct { obj h; obj *car, *cdr; } o_pair;
typedef struct { obj h; size_t len; char s[]; } o_str;
typedef struct { obj h; const char *name; } o_sym;
typedef struct { obj h; obj *(*fn)(obj *args); } o_prim;
typedef struct env env;
typedef struct { obj h; obj *params, *body; env *env; } o_clos;
struct env { obj h; env *parent; size_t n, cap; struct { obj *sym, *val; } b[]; };

static obj nil_obj = { 0, IMMORTAL, T_NIL, 0 }, true_obj = { 0, IMMORTAL, T_BOOL, 0 },
           false_obj = { 0, IMMORTAL, T_BOOL, 0 };
#define NIL (&nil_obj)
static long live_objects;

static uint32_t check_of(obj *o) { return (uint32_t)bench_tag_of(o, o->size ^ o->type); }

static void *new_obj(uint32_t type, size_t size)
{
    obj *o = bench_xmalloc(size);
    o->rc = 1;
    o->type = type;
    o->size = (uint32_t)size;
    o->check = check_of(o);
    live_objects++;
    return o;
}

static obj *incref(obj *o)
{
    if (o->rc != IMMORTAL)
        o->rc++;
    return o;
}

static void decref(obj *o);

static void release(obj *o)
{
    if (o->check != check_of(o))
        bench_fail("object %p (type %u) was overwritten", (void *)o, o->type);
    switch (o->type) {
    case T_PAIR:
        decref(((o_pair *)o)->car);
        decref(((o_pair *)o)->cdr);
        break;
    case T_CLOS:
        decref(((o_clos *)o)->params);
        decref(((o_clos *)o)->body);
        decref(&((o_clos *)o)->env->h);
        break;
    case T_ENV: {
        env *e = (env *)o;
        for (size_t i = 0; i < e->n; i++)
            decref(e->b[i].val); /* symbols are immortal */
        if (e->parent)
            decref(&e->parent->h);
        break;
    }
    default:
        break;
    }
    live_objects--;
    free(o);
}

static void decref(obj *o)
{
    if (o->rc != IMMORTAL && --o->rc == 0)
        release(o);
}

static obj *mk_int(long v)
{
    o_int *i = new_obj(T_INT, sizeof(o_int));
    i->v = v;
    return &i->h;
}

/* Takes the references to car and cdr. */
static obj *cons(obj *car, obj *cdr)
{
    o_pair *p = new_obj(T_PAIR, sizeof(o_pair));
    p->car = car;
    p->cdr = cdr;
    return &p->h;
}

static obj *mk_str(const char *s, size_t len)
{
    o_str *o = new_obj(T_STR, sizeof(o_str) + len + 1);
    o->len = len;
    memcpy(o->s, s, len);
    o->s[len] = '\0';
    return &o->h;
}

/* Symbols are interned and immortal, like an interpreter's names. */
static o_sym *symtab[256];
static size_t nsyms;

static obj *intern(const char *s, size_t len)
{
    for (size_t i = 0; i < nsyms; i++)
        if (strlen(symtab[i]->name) == len && memcmp(symtab[i]->name, s, len) == 0)
            return &symtab[i]->h;
    if (nsyms == 256)
        bench_fail("too many symbols");
    o_sym *y = bench_xmalloc(sizeof(o_sym));
    *y = (o_sym){ { 0, IMMORTAL, T_SYM, sizeof(o_sym) }, NULL };
    char *name = bench_xmalloc(len + 1);
    memcpy(name, s, len);
    name[len] = '\0';
    y->name = name;
    symtab[nsyms++] = y;
    return &y->h;
}

#define CAR(o) (((o_pair *)(o))->car)
#define CDR(o) (((o_pair *)(o))->cdr)

/* ---- reader ---- */

static const char *src;

static obj *read_expr(void);

static void skip_space(void)
{
    while (isspace((unsigned char)*src))
        src++;
}

static obj *read_list(void)
{
    skip_space();
    if (*src == ')') {
        src++;
        return NIL;
    }
    if (*src == '\0')
        bench_fail("interp: unbalanced parentheses in the program");
    obj *car = read_expr();
    return cons(car, read_list());
}

static obj *read_expr(void)
{
    skip_space();
    char ch = *src;
    if (ch == '(') {
        src++;
        return read_list();
    }
    if (ch == '\'') {
        src++;
        obj *q = read_expr();
        return cons(intern("quote", 5), cons(q, NIL));
    }
    if (ch == '"') {
        const char *start = ++src;
        while (*src && *src != '"')
            src++;
        obj *s = mk_str(start, (size_t)(src - start));
        if (*src)
            src++;
        return s;
    }
    const char *start = src;
    while (*src && !isspace((unsigned char)*src) && *src != '(' && *src != ')')
        src++;
    if (isdigit((unsigned char)*start) || (*start == '-' && src - start > 1 && isdigit((unsigned char)start[1])))
        return mk_int(strtol(start, NULL, 10));
    return intern(start, (size_t)(src - start));
}

/* ---- environments ---- */

static env *new_env(env *parent, size_t cap)
{
    env *e = new_obj(T_ENV, sizeof(env) + cap * sizeof(e->b[0]));
    e->parent = parent;
    if (parent)
        incref(&parent->h);
    e->n = 0;
    e->cap = cap;
    return e;
}

/* Takes the reference to val. */
static void bind(env *e, obj *sym, obj *val)
{
    for (size_t i = 0; i < e->n; i++) {
        if (e->b[i].sym == sym) {
            decref(e->b[i].val);
            e->b[i].val = val;
            return;
        }
    }
    if (e->n == e->cap)
        bench_fail("interp: frame full binding %s", ((o_sym *)sym)->name);
    e->b[e->n].sym = sym;
    e->b[e->n].val = val;
    e->n++;
}

static obj *lookup(env *e, obj *sym)
{
    for (; e; e = e->parent)
        for (size_t i = 0; i < e->n; i++)
            if (e->b[i].sym == sym)
                return incref(e->b[i].val);
    bench_fail("interp: unbound symbol %s", ((o_sym *)sym)->name);
}

/* ---- primitives (args: an owned list; they return a new reference) ---- */

static long int_arg(obj *o)
{
    if (o->type != T_INT)
        bench_fail("interp: not an integer (type %u)", o->type);
    return ((o_int *)o)->v;
}

static obj *p_add(obj *a) { long s = 0; for (obj *p = a; p != NIL; p = CDR(p)) s += int_arg(CAR(p)); return mk_int(s); }
static obj *p_mul(obj *a) { long s = 1; for (obj *p = a; p != NIL; p = CDR(p)) s *= int_arg(CAR(p)); return mk_int(s); }
static obj *p_sub(obj *a) { return mk_int(int_arg(CAR(a)) - int_arg(CAR(CDR(a)))); }
static obj *p_mod(obj *a) { return mk_int(int_arg(CAR(a)) % int_arg(CAR(CDR(a)))); }
static obj *p_lt(obj *a) { return int_arg(CAR(a)) < int_arg(CAR(CDR(a))) ? &true_obj : &false_obj; }
static obj *p_eq(obj *a) { return int_arg(CAR(a)) == int_arg(CAR(CDR(a))) ? &true_obj : &false_obj; }
static obj *p_not(obj *a) { return CAR(a) == &false_obj ? &true_obj : &false_obj; }
static obj *p_cons(obj *a) { return cons(incref(CAR(a)), incref(CAR(CDR(a)))); }
static obj *p_car(obj *a) { return incref(CAR(CAR(a))); }
static obj *p_cdr(obj *a) { return incref(CDR(CAR(a))); }
static obj *p_nullp(obj *a) { return CAR(a) == NIL ? &true_obj : &false_obj; }

static obj *p_num2str(obj *a)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%ld", int_arg(CAR(a)));
    return mk_str(buf, (size_t)n);
}

static obj *p_strapp(obj *a)
{
    o_str *x = (o_str *)CAR(a), *y = (o_str *)CAR(CDR(a));
    if (x->h.type != T_STR || y->h.type != T_STR)
        bench_fail("interp: string-append wants strings");
    o_str *r = (o_str *)mk_str(x->s, x->len + y->len);
    memcpy(r->s + x->len, y->s, y->len);
    return &r->h;
}

static obj *p_strlen(obj *a)
{
    if (CAR(a)->type != T_STR)
        bench_fail("interp: string-length wants a string");
    return mk_int((long)((o_str *)CAR(a))->len);
}

/* ---- evaluator ---- */

static obj *s_quote, *s_if, *s_define, *s_lambda, *s_let, *s_begin;

static obj *eval(obj *x, env *e);

/* Evaluates a body (a list of expressions) in e; returns the last value. */
static obj *eval_body(obj *body, env *e)
{
    obj *r = NIL;
    for (obj *p = body; p != NIL; p = CDR(p)) {
        decref(r);
        r = eval(CAR(p), e);
    }
    return r;
}

static obj *apply(obj *f, obj *args)
{
    if (f->type == T_PRIM)
        return ((o_prim *)f)->fn(args);
    if (f->type != T_CLOS)
        bench_fail("interp: calling a non-function (type %u)", f->type);
    o_clos *c = (o_clos *)f;
    size_t n = 0;
    for (obj *p = c->params; p != NIL; p = CDR(p))
        n++;
    env *fe = new_env(c->env, n);
    obj *a = args;
    for (obj *p = c->params; p != NIL; p = CDR(p)) {
        if (a == NIL)
            bench_fail("interp: too few arguments");
        bind(fe, CAR(p), incref(CAR(a)));
        a = CDR(a);
    }
    obj *r = eval_body(c->body, fe);
    decref(&fe->h);
    return r;
}

static obj *eval(obj *x, env *e)
{
    switch (x->type) {
    case T_SYM:
        return lookup(e, x);
    case T_PAIR:
        break;
    default:
        return incref(x);
    }
    obj *head = CAR(x), *rest = CDR(x);
    if (head == s_quote)
        return incref(CAR(rest));
    if (head == s_if) {
        obj *t = eval(CAR(rest), e);
        int yes = t != &false_obj;
        decref(t);
        obj *branch = yes ? CDR(rest) : CDR(CDR(rest));
        return branch == NIL ? NIL : eval(CAR(branch), e);
    }
    if (head == s_define) {
        obj *target = CAR(rest);
        if (target->type == T_PAIR) { /* (define (f params...) body...) */
            o_clos *c = new_obj(T_CLOS, sizeof(o_clos));
            c->params = incref(CDR(target));
            c->body = incref(CDR(rest));
            c->env = e;
            incref(&e->h);
            bind(e, CAR(target), &c->h);
        } else {
            bind(e, target, eval(CAR(CDR(rest)), e));
        }
        return NIL;
    }
    if (head == s_lambda) {
        o_clos *c = new_obj(T_CLOS, sizeof(o_clos));
        c->params = incref(CAR(rest));
        c->body = incref(CDR(rest));
        c->env = e;
        incref(&e->h);
        return &c->h;
    }
    if (head == s_let) {
        size_t n = 0;
        for (obj *p = CAR(rest); p != NIL; p = CDR(p))
            n++;
        env *le = new_env(e, n);
        for (obj *p = CAR(rest); p != NIL; p = CDR(p))
            bind(le, CAR(CAR(p)), eval(CAR(CDR(CAR(p))), e));
        obj *r = eval_body(CDR(rest), le);
        decref(&le->h);
        return r;
    }
    if (head == s_begin)
        return eval_body(rest, e);
    /* A call: the function, then the arguments as a fresh list. */
    obj *f = eval(head, e);
    obj *args = NIL, **tail = &args;
    for (obj *p = rest; p != NIL; p = CDR(p)) {
        *tail = cons(eval(CAR(p), e), NIL);
        tail = &CDR(*tail);
    }
    obj *r = apply(f, args);
    decref(args);
    decref(f);
    return r;
}

static const char *PROGRAM =
    "(define (range a b) (if (< a b) (cons a (range (+ a 1) b)) '()))"
    "(define (map f l) (if (null? l) '() (cons (f (car l)) (map f (cdr l)))))"
    "(define (filter p l) (if (null? l) '() (if (p (car l)) (cons (car l) (filter p (cdr l))) (filter p (cdr l)))))"
    "(define (foldl f acc l) (if (null? l) acc (foldl f (f acc (car l)) (cdr l))))"
    "(define (append a b) (if (null? a) b (cons (car a) (append (cdr a) b))))"
    "(define (qsort l) (if (null? l) '()"
    "  (let ((p (car l)) (rest (cdr l)))"
    "    (append (qsort (filter (lambda (x) (< x p)) rest))"
    "            (cons p (qsort (filter (lambda (x) (not (< x p))) rest)))))))"
    "(define (fib n) (if (< n 2) n (+ (fib (- n 1)) (fib (- n 2)))))"
    "(define (scramble l k) (map (lambda (x) (mod (* (+ x k) 7919) 1009)) l))"
    "(define (sorted? l) (if (null? l) #t (if (null? (cdr l)) #t"
    "  (if (< (car (cdr l)) (car l)) #f (sorted? (cdr l))))))"
    "(define (sum l) (foldl (lambda (a x) (+ a x)) 0 l))"
    "(define (join l) (foldl (lambda (a s) (string-append a s)) \"\" l))";

static obj *run(env *g, const char *text)
{
    src = text;
    obj *r = NIL;
    for (;;) {
        skip_space();
        if (*src == '\0')
            return r;
        obj *x = read_expr();
        decref(r);
        r = eval(x, g);
        decref(x);
    }
}

int main(int argc, char **argv)
{
    size_t rounds = 80, len = 400;
    long fib_n = 17;
    int c;
    while ((c = getopt(argc, argv, "r:n:f:")) != -1) {
        switch (c) {
        case 'r': rounds = bench_parse_count(optarg); break;
        case 'n': len = bench_parse_count(optarg); break;
        case 'f': fib_n = (long)bench_parse_count(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-r rounds] [-n list_length] [-f fib_n]\n", argv[0]);
            return 2;
        }
    }
    if (rounds == 0 || len == 0 || len > 5000 || fib_n > 30) {
        fprintf(stderr, "need rounds > 0, 0 < list_length <= 5000, fib_n <= 30\n");
        return 2;
    }
    s_quote = intern("quote", 5);
    s_if = intern("if", 2);
    s_define = intern("define", 6);
    s_lambda = intern("lambda", 6);
    s_let = intern("let", 3);
    s_begin = intern("begin", 5);
    static const struct { const char *name; obj *(*fn)(obj *); } prims[] = {
        { "+", p_add }, { "*", p_mul }, { "-", p_sub }, { "mod", p_mod }, { "<", p_lt }, { "=", p_eq },
        { "not", p_not }, { "cons", p_cons }, { "car", p_car }, { "cdr", p_cdr }, { "null?", p_nullp },
        { "number->string", p_num2str }, { "string-append", p_strapp }, { "string-length", p_strlen },
    };
    size_t nprims = sizeof prims / sizeof prims[0];
    env *g = new_env(NULL, 64);
    g->h.rc = IMMORTAL; /* the global frame and its functions refer to each other */
    bind(g, intern("#t", 2), &true_obj);
    bind(g, intern("#f", 2), &false_obj);
    for (size_t i = 0; i < nprims; i++) {
        o_prim *p = bench_xmalloc(sizeof(o_prim));
        *p = (o_prim){ { 0, IMMORTAL, T_PRIM, sizeof(o_prim) }, prims[i].fn };
        bind(g, intern(prims[i].name, strlen(prims[i].name)), &p->h);
    }
    decref(run(g, PROGRAM));
    long base = live_objects;

    long fib_a = 0, fib_b = 1;
    for (long i = 0; i < fib_n; i++) {
        long t = fib_a + fib_b;
        fib_a = fib_b;
        fib_b = t;
    }
    size_t digits = 0;
    for (size_t i = 0; i < len; i++)
        digits += (size_t)snprintf(NULL, 0, "%zu", i);
    char text[512];
    for (size_t r = 0; r < rounds; r++) {
        long want_sum = 0;
        for (size_t i = 0; i < len; i++)
            want_sum += (long)(((i + r) * 7919) % 1009);
        snprintf(text, sizeof text,
                 "(define s (qsort (scramble (range 0 %zu) %zu)))"
                 "(define ok1 (sorted? s)) (define total (sum s))"
                 "(define f (fib %ld))"
                 "(define n (string-length (join (map (lambda (x) (number->string x)) (range 0 %zu)))))",
                 len, r, fib_n, len);
        decref(run(g, text));
        obj *ok1 = lookup(g, intern("ok1", 3)), *total = lookup(g, intern("total", 5)),
            *f = lookup(g, intern("f", 1)), *n = lookup(g, intern("n", 1));
        if (ok1 != &true_obj)
            bench_fail("round %zu: the sorted list is not sorted", r);
        if (int_arg(total) != want_sum)
            bench_fail("round %zu: sum %ld, want %ld", r, int_arg(total), want_sum);
        if (int_arg(f) != fib_a)
            bench_fail("round %zu: fib(%ld) = %ld, want %ld", r, fib_n, int_arg(f), fib_a);
        if (int_arg(n) != (long)digits)
            bench_fail("round %zu: joined string of %ld characters, want %zu", r, int_arg(n), digits);
        decref(ok1);
        decref(total);
        decref(f);
        decref(n);
        /* The round's results stay bound until the next round replaces them:
         * every round ends with as many objects alive as the first. */
        if (r == 0)
            base = live_objects;
        else if (live_objects != base)
            bench_fail("round %zu: %ld objects alive, want %ld (reference counts do not balance)", r,
                       live_objects, base);
    }
    bench_metric("objects_alive_end", (double)live_objects);
    bench_rusage_metrics();
    bench_check_ok();
    return 0;
}
