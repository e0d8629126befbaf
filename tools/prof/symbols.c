/* symbols.c — names for a profile's addresses, from the symbol tables of
 * the files its mappings name (.symtab, else .dynsym), read here: no
 * addr2line, no debug info needed (function names, not lines; pprof gives
 * lines).  A file that is gone or stripped leaves module+offset. */
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "profile.h"

typedef struct {
    uint64_t addr, size;
    const char *name;
} sym_t;

typedef struct {
    const char *path;
    uint8_t *map;
    size_t len;
    sym_t *syms;
    size_t nsyms;
    const Elf64_Phdr *ph;
    int phnum;
} elf_t;

static int by_addr(const void *a, const void *b) {
    const sym_t *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void elf_load(elf_t *e) {
    int fd = open(e->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(Elf64_Ehdr)) { close(fd); return; }
    e->len = (size_t)st.st_size;
    e->map = mmap(NULL, e->len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (e->map == MAP_FAILED) { e->map = NULL; return; }
    const Elf64_Ehdr *h = (const Elf64_Ehdr *)e->map;
    if (memcmp(h->e_ident, ELFMAG, SELFMAG) || h->e_ident[EI_CLASS] != ELFCLASS64 ||
        h->e_phoff + (uint64_t)h->e_phnum * sizeof(Elf64_Phdr) > e->len ||
        h->e_shoff + (uint64_t)h->e_shnum * sizeof(Elf64_Shdr) > e->len)
        return;
    e->ph = (const Elf64_Phdr *)(e->map + h->e_phoff);
    e->phnum = h->e_phnum;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(e->map + h->e_shoff);
    for (int want = SHT_SYMTAB; want; want = want == SHT_SYMTAB ? SHT_DYNSYM : 0) {
        for (int i = 0; i < h->e_shnum; i++) {
            if (sh[i].sh_type != (uint32_t)want || sh[i].sh_link >= h->e_shnum) continue;
            const Elf64_Shdr *strs = &sh[sh[i].sh_link];
            if (sh[i].sh_offset + sh[i].sh_size > e->len || strs->sh_offset + strs->sh_size > e->len) continue;
            const Elf64_Sym *s = (const Elf64_Sym *)(e->map + sh[i].sh_offset);
            size_t n = sh[i].sh_size / sizeof *s;
            for (size_t k = 0; k < n; k++) {
                if (ELF64_ST_TYPE(s[k].st_info) != STT_FUNC || !s[k].st_value || s[k].st_name >= strs->sh_size) continue;
                sym_t y = {s[k].st_value, s[k].st_size, (const char *)e->map + strs->sh_offset + s[k].st_name};
                if ((e->nsyms & (e->nsyms - 1)) == 0) e->syms = realloc(e->syms, (e->nsyms ? e->nsyms * 2 : 1) * sizeof *e->syms);
                e->syms[e->nsyms++] = y;
            }
        }
        if (e->nsyms) break;
    }
    if (e->nsyms) qsort(e->syms, e->nsyms, sizeof *e->syms, by_addr);
}

/* The symbol holding the file's virtual address va. */
static const sym_t *elf_find(const elf_t *e, uint64_t va) {
    size_t lo = 0, hi = e->nsyms;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (e->syms[mid].addr <= va) lo = mid + 1;
        else hi = mid;
    }
    if (!lo) return NULL;
    const sym_t *s = &e->syms[lo - 1];
    /* (a zero-size symbol: taken if the next one starts after va) */
    return va < s->addr + (s->size ? s->size : 1 << 20) ? s : NULL;
}

/* File offset to virtual address through the program headers. */
static int elf_vaddr(const elf_t *e, uint64_t off, uint64_t *va) {
    for (int i = 0; i < e->phnum; i++) {
        const Elf64_Phdr *p = &e->ph[i];
        if (p->p_type == PT_LOAD && off >= p->p_offset && off < p->p_offset + p->p_filesz) {
            *va = off - p->p_offset + p->p_vaddr;
            return 1;
        }
    }
    return 0;
}

void profile_symbolize(profile_t *p) {
    elf_t *files = calloc(p->nmappings + 1, sizeof *files);
    for (size_t i = 0; i < p->nlocations; i++) {
        pf_location_t *l = &p->locations[i];
        char buf[512];
        if (l->function) {
            for (size_t f = 0; f < p->nfunctions; f++)
                if (p->functions[f].id == (uint64_t)l->function) {
                    l->name = strdup(profile_str(p, p->functions[f].name));
                    break;
                }
            if (l->name) continue;
        }
        size_t m = 0;
        while (m < p->nmappings && p->mappings[m].id != l->mapping) m++;
        if (m == p->nmappings) {
            snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)l->address);
            l->name = strdup(buf);
            continue;
        }
        const pf_mapping_t *mp = &p->mappings[m];
        const char *path = profile_str(p, mp->filename);
        elf_t *e = &files[m];
        if (!e->path) {
            e->path = path;
            if (path[0] == '/') elf_load(e);
        }
        uint64_t off = l->address - mp->start + mp->offset, va;
        const sym_t *s = e->nsyms && elf_vaddr(e, off, &va) ? elf_find(e, va) : NULL;
        const char *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        if (s) snprintf(buf, sizeof buf, "%s", s->name);
        else snprintf(buf, sizeof buf, "%s+0x%llx", *base ? base : "?", (unsigned long long)off);
        l->name = strdup(buf);
    }
    /* The names point into the mapped files: copied above, so unmap. */
    for (size_t m = 0; m < p->nmappings; m++) {
        if (files[m].map) munmap(files[m].map, files[m].len);
        free(files[m].syms);
    }
    free(files);
}
