/* unwind_cache.c — a fast unwinder for x86-64 that replays, per return
 * address, the one rule libgcc's DWARF interpreter would derive for it:
 * the frame's CFA as rsp or rbp plus an offset, the return address at
 * CFA - 8, and where (if anywhere) the caller's rbp was saved.  A rule is
 * parsed from the address's FDE (.eh_frame, found by libgcc_s's
 * _Unwind_Find_FDE) and used only after a full libgcc unwind went through
 * that address and agreed with it (the same CFA, the same caller's rbp):
 * a rule the parser does not understand (expressions, realigned stacks,
 * signal frames) is never used, and that stack is unwound by libgcc.  A
 * stack whose every address has a checked rule is walked with a load or two
 * per frame instead of the interpreter's ~150 ns per frame, which was three
 * quarters of a sample's cost.
 */
#include "prof_internal.h"

#include <string.h>
#include <unwind.h>


#if defined(__x86_64__)

struct dwarf_eh_bases {
    void *tbase, *dbase, *func;
};
extern const void *(*prof_find_fde)(void *pc, void *bases);   /* libgcc_s's _Unwind_Find_FDE (unwind.c) */

enum { R_EMPTY, R_CANDIDATE, R_VALID, R_BAD };
enum { REG_RBP = 6, REG_RSP = 7, REG_RA = 16 };

typedef struct {
    _Atomic(uintptr_t) pc;
    int32_t cfa_off;
    int16_t rbp_off;       /* caller's rbp at CFA + rbp_off; 0: not saved (unchanged) */
    uint8_t cfa_reg;       /* REG_RSP or REG_RBP */
    _Atomic(uint8_t) state;
    uint8_t outermost;     /* return address undefined: the stack ends here */
} rule_t;

#define RULES 4096         /* distinct return addresses remembered; more go to libgcc */
static rule_t *rules;

void prof_rules_init(void) { rules = prof_meta_alloc(RULES * sizeof *rules); }

static rule_t *rule_slot(uintptr_t pc, bool claim) {
    if (!rules) return NULL;
    size_t j = (size_t)((pc * 0x9e3779b97f4a7c15ULL) >> 52) & (RULES - 1);   /* (Fibonacci hashing: one multiply) */
    for (int probe = 0; probe < 32; probe++, j = (j + 1) & (RULES - 1)) {
        uintptr_t cur = atomic_load_explicit(&rules[j].pc, memory_order_acquire);
        if (cur == pc) return &rules[j];
        if (cur == 0) {
            if (!claim) return NULL;
            if (atomic_compare_exchange_strong(&rules[j].pc, &cur, pc)) return &rules[j];
            if (cur == pc) return &rules[j];
        }
    }
    return NULL;
}

/* ---- .eh_frame reading ------------------------------------------------------- */
typedef struct {
    const uint8_t *p, *end;
    bool bad;
} rd_t;

static uint64_t uleb(rd_t *r) {
    uint64_t v = 0;
    for (int s = 0; r->p < r->end && s < 64; s += 7) {
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) return v;
    }
    r->bad = true;
    return 0;
}

static int64_t sleb(rd_t *r) {
    int64_t v = 0;
    int s = 0;
    uint8_t b = 0x80;
    while (r->p < r->end && (b & 0x80) && s < 64) {
        b = *r->p++;
        v |= (int64_t)(b & 0x7f) << s;
        s += 7;
    }
    if (b & 0x80) r->bad = true;
    else if (s < 64 && (b & 0x40)) v |= -((int64_t)1 << s);
    return v;
}

static uint64_t fixed(rd_t *r, int n) {
    if (r->end - r->p < n) { r->bad = true; return 0; }
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)r->p[i] << (8 * i);
    r->p += n;
    return v;
}

/* Skips a pointer of encoding enc (the value itself is not needed). */
static void skip_encoded(rd_t *r, uint8_t enc) {
    if (enc == 0xff) return;
    switch (enc & 0x0f) {
    case 0x00: case 0x04: case 0x0c: fixed(r, 8); break;
    case 0x02: case 0x0a: fixed(r, 2); break;
    case 0x03: case 0x0b: fixed(r, 4); break;
    case 0x01: uleb(r); break;
    case 0x09: sleb(r); break;
    default: r->bad = true;
    }
    if ((enc & 0x70) == 0x50) r->bad = true;   /* aligned: not produced by GCC for x86-64 */
}

typedef struct {
    int cfa_reg;
    int64_t cfa_off;
    int64_t rbp_off;
    bool ra_undefined;
} cfa_state;

/* Runs CFA instructions up to (not including) code address pc. */
static bool run_cfa(rd_t *r, uintptr_t loc, uintptr_t pc, uint64_t code_align, int64_t data_align,
                    cfa_state *st, const cfa_state *initial) {
    cfa_state saved[8];
    int depth = 0;
    while (r->p < r->end && loc < pc && !r->bad) {
        uint8_t op = *r->p++;
        uint8_t hi = op & 0xc0, lo = op & 0x3f;
        int64_t off;
        uint64_t reg;
        if (hi == 0x40) { loc += lo * code_align; continue; }
        if (hi == 0x80) {
            off = (int64_t)uleb(r) * data_align;
            if (lo == REG_RBP) st->rbp_off = off;
            else if (lo == REG_RA && off != -8) return false;
            continue;
        }
        if (hi == 0xc0) {
            if (lo == REG_RBP) st->rbp_off = initial->rbp_off;
            continue;
        }
        switch (op) {
        case 0x00: break;                                            /* nop */
        case 0x02: loc += fixed(r, 1) * code_align; break;            /* advance_loc1 */
        case 0x03: loc += fixed(r, 2) * code_align; break;
        case 0x04: loc += fixed(r, 4) * code_align; break;
        case 0x05: case 0x11:                                        /* offset_extended(_sf) */
            reg = uleb(r);
            off = (op == 0x05 ? (int64_t)uleb(r) : sleb(r)) * data_align;
            if (reg == REG_RBP) st->rbp_off = off;
            else if (reg == REG_RA && off != -8) return false;
            break;
        case 0x06:                                                   /* restore_extended */
            if (uleb(r) == REG_RBP) st->rbp_off = initial->rbp_off;
            break;
        case 0x07:                                                   /* undefined */
            reg = uleb(r);
            if (reg == REG_RA) st->ra_undefined = true;
            else if (reg == REG_RBP) return false;
            break;
        case 0x08:                                                   /* same_value */
            if (uleb(r) == REG_RBP) st->rbp_off = 0;
            break;
        case 0x09:                                                   /* register */
            reg = uleb(r);
            uleb(r);
            if (reg == REG_RBP || reg == REG_RA) return false;
            break;
        case 0x0a:                                                   /* remember_state */
            if (depth == 8) return false;
            saved[depth++] = *st;
            break;
        case 0x0b:                                                   /* restore_state */
            if (depth == 0) return false;
            {
                cfa_state s = saved[--depth];
                st->rbp_off = s.rbp_off;
                st->ra_undefined = s.ra_undefined;
                st->cfa_reg = s.cfa_reg;   /* (libgcc restores the CFA too) */
                st->cfa_off = s.cfa_off;
            }
            break;
        case 0x0c: st->cfa_reg = (int)uleb(r); st->cfa_off = (int64_t)uleb(r); break;     /* def_cfa */
        case 0x12: st->cfa_reg = (int)uleb(r); st->cfa_off = sleb(r) * data_align; break; /* def_cfa_sf */
        case 0x0d: st->cfa_reg = (int)uleb(r); break;                                    /* def_cfa_register */
        case 0x0e: st->cfa_off = (int64_t)uleb(r); break;                                /* def_cfa_offset */
        case 0x13: st->cfa_off = sleb(r) * data_align; break;                            /* def_cfa_offset_sf */
        case 0x10: case 0x16: {                                      /* (val_)expression */
            reg = uleb(r);
            uint64_t n = uleb(r);
            if (reg == REG_RBP || reg == REG_RA || n > (uint64_t)(r->end - r->p)) return false;
            r->p += n;
            break;
        }
        case 0x2e: uleb(r); break;                                   /* GNU_args_size */
        default: return false;                                       /* def_cfa_expression and the rest */
        }
    }
    return !r->bad && (st->cfa_reg == REG_RSP || st->cfa_reg == REG_RBP) && st->cfa_off >= 8 &&
           st->cfa_off < (1 << 30) && st->rbp_off > -32768 && st->rbp_off < 32768;
}

/* The rule for return address pc, from its FDE; false if there is none the
 * fast walk can follow. */
static bool parse_rule(uintptr_t pc, rule_t *out) {
    struct dwarf_eh_bases bases;
    if (!prof_find_fde) return false;
    const uint8_t *fde = prof_find_fde((void *)(pc - 1), &bases);
    if (!fde) return false;
    uint32_t flen;
    memcpy(&flen, fde, 4);
    if (flen == 0 || flen == 0xffffffffu) return false;
    int32_t cie_ptr;
    memcpy(&cie_ptr, fde + 4, 4);
    const uint8_t *cie = fde + 4 - cie_ptr;
    uint32_t clen;
    memcpy(&clen, cie, 4);
    if (clen == 0 || clen == 0xffffffffu) return false;
    rd_t c = {cie + 8, cie + 4 + clen, false};
    if (c.p >= c.end) return false;
    uint8_t version = *c.p++;
    const char *aug = (const char *)c.p;
    while (c.p < c.end && *c.p) c.p++;
    if (c.p >= c.end) return false;
    c.p++;
    if (aug[0] && aug[0] != 'z') return false;
    uint64_t code_align = uleb(&c);
    int64_t data_align = sleb(&c);
    if (version == 1) fixed(&c, 1);
    else uleb(&c);
    uint8_t fde_enc = 0;
    if (aug[0] == 'z') {
        uint64_t n = uleb(&c);
        rd_t a = {c.p, c.p + n, false};
        if (n > (uint64_t)(c.end - c.p)) return false;
        for (const char *x = aug + 1; *x; x++) {
            if (*x == 'R') fde_enc = (uint8_t)fixed(&a, 1);
            else if (*x == 'L') fixed(&a, 1);
            else if (*x == 'P') { uint8_t e = (uint8_t)fixed(&a, 1); skip_encoded(&a, e & 0x7f); }
            else return false;   /* 'S' (signal frame) and anything unknown */
        }
        if (a.bad) return false;
        c.p += n;
    }
    /* The CIE's initial instructions: all of them, before any code address. */
    cfa_state initial = {REG_RSP, 8, 0, false}, st;
    if (!run_cfa(&c, 0, UINTPTR_MAX, code_align, data_align, &initial, &initial)) return false;
    st = initial;
    rd_t f = {fde + 8, fde + 4 + flen, false};
    skip_encoded(&f, fde_enc);            /* pc_begin: bases.func has it */
    skip_encoded(&f, fde_enc & 0x0f);     /* pc_range */
    if (aug[0] == 'z') {
        uint64_t n = uleb(&f);
        if (n > (uint64_t)(f.end - f.p)) return false;
        f.p += n;
    }
    if (f.bad || !run_cfa(&f, (uintptr_t)bases.func, pc, code_align, data_align, &st, &initial)) return false;
    out->cfa_reg = (uint8_t)st.cfa_reg;
    out->cfa_off = (int32_t)st.cfa_off;
    out->rbp_off = (int16_t)st.rbp_off;
    out->outermost = st.ra_undefined;
    return true;
}

/* ---- Learning from libgcc's walk --------------------------------------------- */
/* libgcc's context at a frame X gives X's return address (IP), the rsp of
 * X's body (its "CFA", which is X's callee's CFA) and X's rbp; the next
 * frame's context gives X's own CFA and its caller's rbp.  A rule is
 * checked against both: the CFA it computes, and the caller's rbp it
 * restores. */
static struct {
    uintptr_t pc, rsp, rbp;
    bool have;
} prev;                                 /* (one learner at a time: prof_rules_learning) */
static _Atomic(bool) learner;

bool prof_rules_learning(bool start) {
    if (start) {
        bool expected = false;
        prev.have = false;
        return rules && atomic_compare_exchange_strong(&learner, &expected, true);
    }
    atomic_store_explicit(&learner, false, memory_order_release);
    return false;
}

/* Frame prev, its CFA now known (cfa), its caller's rbp (caller_rbp;
 * ignored when outermost: the walk ended after it). */
static void rule_check(uintptr_t cfa, uintptr_t caller_rbp, bool last) {
    rule_t *r = rule_slot(prev.pc, true);
    if (!r || atomic_load_explicit(&r->state, memory_order_acquire) != R_EMPTY) return;
    rule_t tmp = {0};
    uint8_t st = R_BAD;
    if (parse_rule(prev.pc, &tmp)) {
        if (tmp.outermost) {
            st = last ? R_VALID : R_BAD;   /* the thread's first frame (_start, clone3) */
        } else if (!last) {
            uintptr_t mine = (tmp.cfa_reg == REG_RSP ? prev.rsp : prev.rbp) + (uintptr_t)(intptr_t)tmp.cfa_off;
            uintptr_t rbp = tmp.rbp_off ? *(const uintptr_t *)(cfa + (uintptr_t)(intptr_t)tmp.rbp_off) : prev.rbp;
            st = mine == cfa && rbp == caller_rbp ? R_VALID : R_BAD;
        } else {
            return;   /* (the walk stopped at its depth: nothing to check against) */
        }
    }
    r->cfa_reg = tmp.cfa_reg;
    r->cfa_off = tmp.cfa_off;
    r->rbp_off = tmp.rbp_off;
    r->outermost = tmp.outermost;
    atomic_store_explicit(&r->state, st, memory_order_release);
}

void prof_rules_learn(uintptr_t pc, uintptr_t ctx_cfa, uintptr_t rbp) {
    if (prev.have) rule_check(ctx_cfa, rbp, false);
    prev.pc = pc;
    prev.rsp = ctx_cfa;
    prev.rbp = rbp;
    prev.have = true;
}

/* After the walk: its last frame, if the stack ended there. */
void prof_rules_learn_last(bool ended) {
    if (prev.have && ended) rule_check(0, 0, true);
    prev.have = false;
}

/* ---- The fast walk --------------------------------------------------------------- */
/* From the frame (pc, rsp, rbp): fills pcs (every frame, the library's
 * included) and returns their count, or -1 when an address has no checked
 * rule (the caller then asks libgcc).  A stack ends at an address with no
 * FDE, which libgcc marks bad too: such stacks always go to libgcc. */
int prof_rules_walk(uintptr_t *pcs, int max, uintptr_t pc, uintptr_t rsp, uintptr_t rbp) {
    int n = 0;
    uintptr_t top = rsp;
    while (n < max) {
        rule_t *r = rule_slot(pc, false);
        if (!r || atomic_load_explicit(&r->state, memory_order_acquire) != R_VALID) return -1;
        pcs[n++] = pc;
        if (r->outermost) break;
        uintptr_t cfa = (r->cfa_reg == REG_RSP ? rsp : rbp) + (uintptr_t)(intptr_t)r->cfa_off;
        if (cfa <= rsp || cfa - top > ((uintptr_t)1 << 26)) return -1;   /* not up the stack: give up */
        uintptr_t npc = *(const uintptr_t *)(cfa - 8);
        if (r->rbp_off) rbp = *(const uintptr_t *)(cfa + (uintptr_t)(intptr_t)r->rbp_off);
        rsp = cfa;
        pc = npc;
        if (!pc) break;
    }
    return n;
}

#else
void prof_rules_init(void) {}
bool prof_rules_learning(bool start) { (void)start; return false; }
void prof_rules_learn(uintptr_t pc, uintptr_t cfa, uintptr_t rsp, uintptr_t rbp, bool first) {
    (void)pc; (void)cfa; (void)rsp; (void)rbp; (void)first;
}
int prof_rules_walk(uintptr_t *pcs, int max, uintptr_t pc, uintptr_t rsp, uintptr_t rbp) {
    (void)pcs; (void)max; (void)pc; (void)rsp; (void)rbp;
    return -1;
}
#endif
