/* `gpuwrap bench --svg`: bandwidth against size, one panel per group of paths, log-log
 * axes, gpuwrap solid and raw dashed in the path's colour. Hand-written SVG, no deps. */
#include "bench.h"

#include <math.h>
#include <string.h>

enum { PW = 560, PH = 360, ML = 64, MR = 16, MT = 30, MB = 44, MAXP = 8 };

typedef struct {
  const char *title, *sec1, *sec2, *prefix;
} panel;

static const panel panels[] = {
    {"copy from pageable host (raw pageable; gpuwrap wraps = registers)", "copy", NULL, "host->"},
    {"copy from pinned", "copy", NULL, "pinned->"},
    {"copy from device", "copy", NULL, "device->"},
    {"copy from managed", "copy", NULL, "managed->"},
    {"fill (pinned = zero-copy kernel over the link)", "fill", "zerocopy", ""},
    {"register + unregister (bytes registered per second)", "register", NULL, ""},
};

static const char *colors[MAXP] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                   "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};

static int matches(const panel *p, const gw_result *r) {
  if (strcmp(r->section, p->sec1) != 0 && !(p->sec2 && strcmp(r->section, p->sec2) == 0)) return 0;
  return strncmp(r->path, p->prefix, strlen(p->prefix)) == 0 && r->bytes > 0;
}

static void draw_panel(FILE *f, const gw_bench *b, const panel *p, double ox, double oy) {
  const char *paths[MAXP];
  int np = 0;
  double xmin = INFINITY, xmax = 0, ymin = INFINITY, ymax = 0;
  for (int i = 0; i < b->nres; i++) {
    const gw_result *r = &b->res[i];
    if (!matches(p, r)) continue;
    int k = 0;
    while (k < np && strcmp(paths[k], r->path) != 0) k++;
    if (k == np && np < MAXP) paths[np++] = r->path;
    xmin = fmin(xmin, (double)r->bytes);
    xmax = fmax(xmax, (double)r->bytes);
    const gw_stat *ss[2] = {&r->raw, &r->gw};
    for (int s = 0; s < 2; s++) {
      double v = gw_result_gbps(r, ss[s]);
      if (v > 0) {
        ymin = fmin(ymin, v);
        ymax = fmax(ymax, v);
      }
    }
  }
  fprintf(f, "<g transform=\"translate(%.0f,%.0f)\">\n", ox, oy);
  fprintf(f, "<text x=\"%d\" y=\"18\" font-size=\"13\" font-weight=\"bold\">%s</text>\n", ML,
          p->title);
  if (np == 0 || ymax <= 0) {
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"12\" fill=\"#888\">not measured</text>\n</g>\n",
            ML, PH / 2);
    return;
  }
  if (xmax <= xmin) xmax = xmin * 4;
  double ly0 = floor(log10(ymin)), ly1 = ceil(log10(ymax));
  if (ly1 <= ly0) ly1 = ly0 + 1;
  double lx0 = log2(xmin), lx1 = log2(xmax);
  double w = PW - ML - MR, h = PH - MT - MB;
#define SX(x) (ML + (log2(x) - lx0) / (lx1 - lx0) * w)
#define SY(y) (MT + h - (log10(y) - ly0) / (ly1 - ly0) * h)
  fprintf(
      f, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#444\"/>\n",
      ML, MT, w, h);
  for (double e = ly0; e <= ly1 + 1e-9; e++) {
    double y = MT + h - (e - ly0) / (ly1 - ly0) * h;
    fprintf(f, "<line x1=\"%d\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", ML,
            ML + w, y, y);
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%g</text>\n", ML - 4,
            y + 4, pow(10, e));
  }
  for (double x = xmin; x <= xmax * 1.0001; x *= 4) {
    char sz[32];
    double px = SX(x);
    fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%.0f\" stroke=\"#ddd\"/>\n", px, px,
            MT, MT + h);
    fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" font-size=\"10\" text-anchor=\"middle\">%s</text>\n",
            px, MT + h + 14, gw_tool_fmt_size((size_t)x, sz, sizeof sz));
  }
  fprintf(f,
          "<text x=\"%.0f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">size per "
          "operation</text>\n",
          ML + w / 2, PH - 8);
  fprintf(f,
          "<text x=\"14\" y=\"%.0f\" font-size=\"11\" text-anchor=\"middle\" "
          "transform=\"rotate(-90 14 %.0f)\">GB/s</text>\n",
          MT + h / 2, MT + h / 2);
  for (int k = 0; k < np; k++) {
    for (int side = 0; side < 2; side++) {
      fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s points=\"", colors[k],
              side ? "2" : "1.5", side ? "" : " stroke-dasharray=\"5,4\"");
      for (int i = 0; i < b->nres; i++) {
        const gw_result *r = &b->res[i];
        if (!matches(p, r) || strcmp(r->path, paths[k]) != 0) continue;
        double v = gw_result_gbps(r, side ? &r->gw : &r->raw);
        if (v > 0) fprintf(f, "%.1f,%.1f ", SX((double)r->bytes), SY(v));
      }
      fprintf(f, "\"/>\n");
    }
    double ly = MT + 14 + 15.0 * k;
    fprintf(f,
            "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" "
            "stroke-width=\"2\"/>\n",
            ML + 8.0, ML + 30.0, ly - 4, ly - 4, colors[k]);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\">%s</text>\n", ML + 34.0, ly, paths[k]);
  }
  fprintf(f,
          "<text x=\"%.0f\" y=\"%.0f\" font-size=\"10\" fill=\"#555\" text-anchor=\"end\">solid: "
          "gpuwrap, dashed: raw</text>\n",
          ML + w - 6, MT + h - 6);
#undef SX
#undef SY
  fprintf(f, "</g>\n");
}

int gw_bench_write_svg(const gw_bench *b, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  int np = (int)(sizeof panels / sizeof panels[0]), cols = 2, rows = (np + cols - 1) / cols;
  int W = cols * PW, H = rows * PH + 40;
  fprintf(
      f,
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
      "font-family=\"sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
      W, H, W, H);
  fprintf(f,
          "<text x=\"16\" y=\"26\" font-size=\"16\" font-weight=\"bold\">gpuwrap bench: %s "
          "backend, device %d%s - raw: ",
          gw_backend_name(b->backend), b->device, b->quick ? " (quick)" : "");
  for (const char *s = b->raw.name; *s; s++) {
    if (*s == '<')
      fputs("&lt;", f);
    else if (*s == '&')
      fputs("&amp;", f);
    else
      fputc(*s, f);
  }
  fprintf(f, "</text>\n");
  for (int i = 0; i < np; i++) draw_panel(f, b, &panels[i], (i % cols) * PW, 40 + (i / cols) * PH);
  fprintf(f, "</svg>\n");
  return fclose(f) == 0 ? 0 : -1;
}
