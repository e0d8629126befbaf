/* flame.c — the flame graph: stacks merged into a tree from the outermost
 * frame, each node a box as wide as its value; plain SVG with a <title> per
 * box (the browser's tooltip), no script, no network. */
#include "flame.h"

#include <stdlib.h>
#include <string.h>

typedef struct node_s {
    const char *name;
    double value;
    struct node_s *child, *next;
} node_t;

static node_t *child_of(node_t *n, const char *name) {
    for (node_t *c = n->child; c; c = c->next)
        if (!strcmp(c->name, name)) return c;
    node_t *c = calloc(1, sizeof *c);
    if (!c) exit(1);
    c->name = name;
    c->next = n->child;
    n->child = c;
    return c;
}

static void xml(FILE *out, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", out);
        else if (*s == '>') fputs("&gt;", out);
        else if (*s == '&') fputs("&amp;", out);
        else if (*s == '"') fputs("&quot;", out);
        else fputc(*s, out);
    }
}

#define WIDTH 1200.0
#define ROW 16

static int depth_of(const node_t *n) {
    int d = 0;
    for (const node_t *c = n->child; c; c = c->next) {
        int k = depth_of(c);
        if (k > d) d = k;
    }
    return d + 1;
}

static void draw(FILE *out, const node_t *n, double x, int level, double scale, int height, double total) {
    double w = n->value * scale;
    if (w < 0.3) return;
    unsigned h = 2166136261u;
    for (const char *s = n->name; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    int y = height - (level + 1) * ROW;
    fprintf(out, "<g><title>");
    xml(out, n->name);
    fprintf(out, " (%.0f, %.1f%%)</title><rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"rgb(%u,%u,%u)\" rx=\"2\"/>",
            n->value, 100.0 * n->value / total, x, y, w, ROW - 1, 200 + h % 55, 80 + (h >> 8) % 120, 40 + (h >> 16) % 50);
    int chars = (int)(w / 7);
    if (chars > 3) {
        char label[256];
        snprintf(label, sizeof label, "%s", n->name);
        if ((int)strlen(label) > chars) strcpy(label + chars - 2, "..");
        fprintf(out, "<text x=\"%.1f\" y=\"%d\">", x + 3, y + ROW - 4);
        xml(out, label);
        fputs("</text>", out);
    }
    fputs("</g>\n", out);
    for (const node_t *c = n->child; c; c = c->next) {
        draw(out, c, x, level + 1, scale, height, total);
        x += c->value * scale;
    }
}

static void tree_free(node_t *n) {
    for (node_t *c = n->child, *nx; c; c = nx) {
        nx = c->next;
        tree_free(c);
        free(c);
    }
}

int flame_write(const profile_t *p, int vi, const char *title, FILE *out) {
    node_t root = {.name = "all"};
    for (size_t i = 0; i < p->nsamples; i++) {
        const pf_sample_t *s = &p->samples[i];
        double v = (double)s->values[vi];
        if (v <= 0) continue;
        root.value += v;
        node_t *n = &root;
        for (size_t k = s->nlocs; k-- > 0;) {
            n = child_of(n, profile_location(p, s->locs[k])->name);
            n->value += v;
        }
    }
    if (root.value <= 0) return -1;
    int levels = depth_of(&root);
    int height = levels * ROW + 40;
    fprintf(out, "<?xml version=\"1.0\" standalone=\"no\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
                 "width=\"%d\" height=\"%d\" font-family=\"monospace\" font-size=\"11\">\n", (int)WIDTH + 20, height);
    fprintf(out, "<rect width=\"100%%\" height=\"100%%\" fill=\"#f8f8f0\"/>\n<text x=\"10\" y=\"16\" font-size=\"14\">");
    xml(out, title);
    fprintf(out, "</text>\n<g transform=\"translate(10,0)\">\n");
    draw(out, &root, 0, 0, WIDTH / root.value, height, root.value);
    fputs("</g>\n</svg>\n", out);
    tree_free(&root);
    return 0;
}
